// The settings pane: rendered from the values the server sends, edits sent back as partial frames.

const TYPING_DEBOUNCE_MS = 600;

// How the known keys are presented. Keys the server sends that are not listed here are
// still shown, with an input chosen from the value's type.
const FIELDS = {
  reasoning_budget: {
    group: "Reasoning", label: "Thinking budget", kind: "int", min: 0, unit: "tokens",
    hint: "Most tokens the model may think for. 0 turns thinking off.",
  },
  temperature: { group: "Sampling", label: "Temperature", kind: "float", min: 0, max: 2, step: 0.05 },
  top_p: { group: "Sampling", label: "Top-p", kind: "float", min: 0.01, max: 1, step: 0.01 },
  max_tokens: { group: "Sampling", label: "Max tokens", kind: "int", min: 1, unit: "tokens" },
  speculative: {
    group: "Speculative decoding", label: "Use the drafter", kind: "bool",
    hint: "The drafter proposes tokens and the model checks them in one pass.",
  },
  draft_block_size: {
    group: "Speculative decoding", label: "Draft block size", kind: "int", min: 2, max: 16, unit: "tokens",
    hint: "Tokens per draft round, the verified anchor included: 2 drafts one token.",
  },
  decode_loop: {
    group: "Speculative decoding", label: "Decode loop", kind: "choice", choices: ["specchat", "mlx-vlm"],
    hint: "specchat's own compiled draft/verify loop, or mlx-vlm's, to compare them (MLX engine).",
  },
  prefix_cache: {
    group: "Prompt processing", label: "Prefix cache", kind: "bool",
    hint: "Reuse the work done on a prompt's shared beginning.",
  },
  prefix_cache_entries: { group: "Prompt processing", label: "Prefix cache entries", kind: "int", min: 1 },
  prefill_step_size: {
    group: "Prompt processing", label: "Prefill step size", kind: "int", min: 0, step: 256, unit: "tokens",
    hint: "Prompt tokens per prefill chunk. 0 sends the whole prompt at once.",
  },
  system_prompt: { group: "Conversation", label: "System prompt", kind: "text", hint: "Sent before the conversation." },
};

function kindOf(key, value) {
  if (FIELDS[key]) return FIELDS[key].kind;
  if (typeof value === "boolean") return "bool";
  // JSON cannot tell 1.0 from 1, so an unlisted number accepts any; the server judges it.
  if (typeof value === "number") return "float";
  return "text";
}

function humanize(key) {
  const words = key.replaceAll("_", " ");
  return words[0].toUpperCase() + words.slice(1);
}

export class SettingsPane {
  /**
   * @param {{form: HTMLFormElement, error: HTMLElement, status: HTMLElement,
   *          send: (values: object) => boolean}} parts
   */
  constructor({ form, error, status, send }) {
    this.form = form;
    this.errorEl = error;
    this.statusEl = status;
    this.send = send;
    this.values = null; // the last values the server confirmed
    this.keys = "";
    this.timers = new Map(); // key -> pending typing debounce
    this.awaitingEcho = false;
    this.statusTimer = 0;
    form.addEventListener("submit", (event) => event.preventDefault());
    form.addEventListener("change", (event) => this.commit(event.target));
    // Typing pauses commit too, so a value applies without leaving the field; a half-typed
    // number ("0.") waits quietly for the next keystroke or for the field's change event.
    form.addEventListener("input", (event) => {
      if (event.target.dataset.kind !== "bool") this.debounce(event.target);
    });
  }

  /** Enable or disable editing, e.g. while the socket is down. */
  setEnabled(enabled) {
    const fieldset = this.form.querySelector("fieldset");
    if (fieldset) fieldset.disabled = !enabled;
  }

  /** Full values from `hello` or a `settings` frame (ours or another tab's). */
  update(values) {
    this.values = { ...values };
    const keys = Object.keys(values).join();
    if (keys !== this.keys) {
      this.keys = keys;
      this.build(values);
    } else {
      this.fill(values, true);
    }
    if (this.awaitingEcho) {
      this.awaitingEcho = false;
      this.showError(null);
      this.showStatus("Saved · applies from the next message");
    }
  }

  /** The server refused a change: say why and put the last good values back. */
  rejected(message) {
    this.awaitingEcho = false;
    this.showStatus("");
    this.showError(message);
    if (this.values) this.fill(this.values, false);
  }

  showStatus(text) {
    clearTimeout(this.statusTimer);
    this.statusEl.textContent = text;
    if (text) this.statusTimer = setTimeout(() => (this.statusEl.textContent = ""), 4000);
  }

  showError(message) {
    this.errorEl.hidden = message === null;
    this.errorEl.textContent = message ?? "";
  }

  build(values) {
    const fieldset = document.createElement("fieldset");
    fieldset.disabled = this.form.querySelector("fieldset")?.disabled ?? false;
    const groups = new Map();
    const ordered = [...Object.keys(FIELDS).filter((key) => key in values),
      ...Object.keys(values).filter((key) => !(key in FIELDS))];
    for (const key of ordered) {
      const groupName = FIELDS[key]?.group ?? "Other";
      if (!groups.has(groupName)) {
        const group = document.createElement("div");
        group.className = "settings-group";
        const heading = document.createElement("h3");
        heading.textContent = groupName;
        group.append(heading);
        groups.set(groupName, group);
        fieldset.append(group);
      }
      groups.get(groupName).append(this.field(key, values[key]));
    }
    this.form.replaceChildren(fieldset);
    this.fill(values, false);
  }

  field(key, value) {
    const spec = FIELDS[key] ?? {};
    const kind = kindOf(key, value);
    const id = `setting-${key}`;
    const row = document.createElement("div");
    row.className = `field field-${kind}`;
    const label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = spec.label ?? humanize(key);

    let input;
    if (kind === "text" && key === "system_prompt") {
      input = document.createElement("textarea");
      input.rows = 4;
    } else if (kind === "choice") {
      input = document.createElement("select");
      for (const choice of spec.choices) input.append(new Option(choice, choice));
    } else {
      input = document.createElement("input");
      input.type = kind === "bool" ? "checkbox" : kind === "text" ? "text" : "number";
    }
    input.id = id;
    input.name = key;
    input.dataset.kind = kind;
    if (kind === "int" || kind === "float") {
      input.inputMode = kind === "int" ? "numeric" : "decimal";
      if (spec.min !== undefined) input.min = spec.min;
      if (spec.max !== undefined) input.max = spec.max;
      // Spinner steps follow the spec, but typed values are left to the server to judge.
      input.step = spec.step ?? (kind === "int" ? 1 : "any");
    }

    if (kind === "bool") {
      row.append(input, label);
    } else if (spec.unit) {
      const wrap = document.createElement("div");
      wrap.className = "with-unit";
      const unit = document.createElement("span");
      unit.className = "unit";
      unit.textContent = spec.unit;
      wrap.append(input, unit);
      row.append(label, wrap);
    } else {
      row.append(label, input);
    }
    if (spec.hint) {
      const hint = document.createElement("small");
      hint.className = "hint";
      hint.id = `${id}-hint`;
      hint.textContent = spec.hint;
      input.setAttribute("aria-describedby", hint.id);
      row.append(hint);
    }
    return row;
  }

  /**
   * Put `values` into the inputs. Text still waiting to be sent is never overwritten, and with
   * `spareFocused` neither is the field being typed in, so another tab's change cannot eat an edit.
   */
  fill(values, spareFocused) {
    for (const [key, value] of Object.entries(values)) {
      const input = this.form.elements.namedItem(key);
      if (!input || this.timers.has(key)) continue;
      if (spareFocused && input === document.activeElement && input.dataset.kind !== "bool") continue;
      this.setInput(input, value);
    }
  }

  setInput(input, value) {
    if (input.type === "checkbox") input.checked = Boolean(value);
    else input.value = value ?? "";
  }

  debounce(input) {
    clearTimeout(this.timers.get(input.name));
    this.timers.set(input.name, setTimeout(() => this.commit(input, true), TYPING_DEBOUNCE_MS));
  }

  /** Send the input's value if it changed; `typing` defers judging an unreadable number. */
  commit(input, typing = false) {
    const key = input.name;
    if (!key || !this.values) return;
    clearTimeout(this.timers.get(key));
    this.timers.delete(key);
    const value = this.read(input);
    if (value === undefined && typing) return;
    if (value === undefined) {
      this.showError(`${input.labels[0].textContent}: enter a ${input.dataset.kind === "int" ? "whole " : ""}number.`);
      this.setInput(input, this.values[key]);
      return;
    }
    if (value === this.values[key]) return;
    this.showError(null);
    if (this.send({ [key]: value })) {
      this.awaitingEcho = true;
      this.showStatus("Saving…");
    } else {
      this.rejected("Not connected; the change was not saved.");
    }
  }

  /** The input's value as the setting's type; undefined when it is not a number where one is needed. */
  read(input) {
    switch (input.dataset.kind) {
      case "bool":
        return input.checked;
      case "int":
      case "float": {
        const text = input.value.trim();
        const number = Number(text);
        if (text === "" || !Number.isFinite(number)) return undefined;
        if (input.dataset.kind === "int" && !Number.isInteger(number)) return undefined;
        return number;
      }
      default:
        return input.value;
    }
  }
}
