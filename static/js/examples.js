// The empty screen's example prompts: the ones the engine's model answers correctly (its `examples`).

export class Examples {
  /**
   * @param {HTMLElement} root the container inside the empty state (hidden with it once a message is shown)
   * @param {{onPick: (text: string) => boolean}} hooks `onPick` sends an example's text
   */
  constructor(root, { onPick }) {
    this.root = root;
    this.onPick = onPick;
    this.items = [];
    this.budget = null;
    this.enabled = false;
  }

  /** The engine's examples: `[{text, thinking}]`, `thinking` true when it is only right with thinking on. */
  show(examples) {
    const items = Array.isArray(examples) ? examples.filter((e) => e && typeof e.text === "string" && e.text) : [];
    const same = items.length === this.items.length && items.every((e, i) => e.text === this.items[i].text && e.thinking === this.items[i].thinking);
    if (same && this.root.childElementCount) return;
    this.items = items;
    this.render();
  }

  /** The reasoning budget in the settings (0: thinking is off). */
  setBudget(budget) {
    this.budget = budget;
    this.renderNote();
  }

  setEnabled(enabled) {
    this.enabled = enabled;
    for (const button of this.root.querySelectorAll("button")) button.disabled = !enabled;
  }

  render() {
    this.root.replaceChildren();
    this.root.hidden = this.items.length === 0;
    if (!this.items.length) return;
    const list = document.createElement("div");
    list.className = "examples-list";
    for (const example of this.items) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "example";
      button.textContent = example.text;
      button.disabled = !this.enabled;
      if (example.thinking) {
        button.dataset.thinking = "true";
        button.title = "Answered right with thinking on (a thinking budget above 0)";
      }
      button.addEventListener("click", () => this.onPick(example.text));
      list.append(button);
    }
    const note = document.createElement("p");
    note.className = "examples-note";
    note.hidden = true;
    this.root.append(list, note);
    this.renderNote();
  }

  renderNote() {
    const note = this.root.querySelector(".examples-note");
    if (!note) return;
    const needThinking = this.items.filter((e) => e.thinking).length;
    note.hidden = !(this.budget === 0 && needThinking);
    note.textContent = note.hidden
      ? ""
      : `Thinking is off (thinking budget 0): the ${needThinking === 1 ? "example" : "examples"} marked “thinks” ` +
        "need a thinking budget above 0 in the settings to come out right.";
  }
}
