// The engine section of the settings pane: which engine runs, switched live with Apply.

const LABELS = { mlx: "MLX (in this process)", mtplx: "MTPLX daemon", openai: "OpenAI-compatible server" };
// Which fields each engine reads; the rest are hidden so the form asks only what matters.
const FIELDS = {
  mlx: ["model", "drafter"],
  mtplx: ["model", "base_url", "api_key"],
  openai: ["model", "base_url", "api_key"],
};
const PLACEHOLDERS = {
  mlx: { model: "bundled demo model", drafter: "bundled MTP head, or none" },
  mtplx: { model: "what the daemon serves", base_url: "http://127.0.0.1:8766" },
  openai: { model: "the server's first model", base_url: "http://127.0.0.1:8080/v1" },
};

export class EnginePicker {
  /** @param {{form: HTMLFormElement, error: HTMLElement, send: (spec: object) => boolean}} parts */
  constructor({ form, error, send }) {
    this.form = form;
    this.errorEl = error;
    this.send = send;
    this.select = form.elements.namedItem("name");
    this.select.addEventListener("change", () => this.showFields());
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.apply();
    });
  }

  /** `spec` and `choices` as in `hello` and `engine` frames. */
  update(spec, choices) {
    if (!spec) return;
    this.select.replaceChildren(
      ...(choices ?? [spec.name]).map((name) => new Option(LABELS[name] ?? name, name, false, name === spec.name)),
    );
    for (const key of ["model", "drafter", "base_url"]) this.form.elements.namedItem(key).value = spec[key] ?? "";
    const key = this.form.elements.namedItem("api_key");
    key.value = "";
    key.placeholder = spec.api_key_set ? "set (leave empty to keep none)" : "none";
    this.form.querySelector("fieldset").disabled = (choices ?? []).length < 2;
    this.showFields();
  }

  showFields() {
    const wanted = FIELDS[this.select.value] ?? [];
    for (const label of this.form.querySelectorAll("[data-field]")) {
      const field = label.dataset.field;
      label.hidden = !wanted.includes(field);
      if (field !== "api_key") {
        label.querySelector("input").placeholder = PLACEHOLDERS[this.select.value]?.[field] ?? "";
      }
    }
  }

  apply() {
    const spec = { name: this.select.value };
    for (const field of FIELDS[spec.name] ?? []) {
      const value = this.form.elements.namedItem(field).value.trim();
      if (value) spec[field] = value;
    }
    this.errorEl.hidden = true;
    this.send(spec);
  }

  rejected(message) {
    this.errorEl.textContent = message;
    this.errorEl.hidden = false;
  }
}
