// The engine line in the header: name, model, drafter, state, and loading progress.

/** What names a model or drafter given by path or id: its last part ("…/models/tiny-qwen3_5" → "tiny-qwen3_5"). */
function folderName(path) {
  return path.split(/[\\/]+/).filter(Boolean).at(-1) ?? path;
}

export class EnginePanel {
  constructor(root) {
    this.root = root;
    this.state = root.querySelector(".engine-state");
    this.name = root.querySelector(".engine-name");
    this.model = root.querySelector(".engine-model");
    this.drafter = root.querySelector(".engine-drafter");
    this.loading = root.querySelector(".engine-loading");
    this.progress = root.querySelector(".engine-progress");
    this.message = root.querySelector(".engine-message");
  }

  /** `engine` as in `hello` and `engine` frames. */
  update(engine) {
    this.root.dataset.state = engine.state;
    this.state.textContent = engine.state;
    this.name.textContent = engine.name ?? "";
    // The folder name fits the header; the whole path is on hover.
    this.model.textContent = engine.model ? folderName(engine.model) : "";
    this.model.title = engine.model ?? "";
    this.drafter.textContent = engine.drafter ? `drafter ${folderName(engine.drafter)}` : "no drafter";
    this.drafter.title = engine.drafter ?? "";
    const busy = engine.state === "loading" || engine.state === "starting";
    this.loading.hidden = !busy;
    // No value makes the bar indeterminate, which is right when the server cannot say how far it is.
    if (engine.progress == null) this.progress.removeAttribute("value");
    else this.progress.value = engine.progress;
    const percent = busy && engine.progress != null ? ` ${Math.round(engine.progress * 100)}%` : "";
    // Ready without a drafter it could have had: what the presenter can do about it.
    this.message.textContent = engine.state === "ready" ? engine.drafter_note ?? ""
      : `${engine.message ?? ""}${percent}`.trim();
  }

  /** Before `hello` and while reconnecting the engine's state is unknown. */
  unknown(text) {
    this.root.dataset.state = "unknown";
    this.state.textContent = text;
    this.loading.hidden = true;
    this.message.textContent = "";
  }
}
