// The settings pane: rendered from the values the server sends, edits sent back as partial frames.
// Each field shows its range (the system prompt a character counter) and its own errors, in its own words;
// a value arriving from the server never replaces one the user is typing or has not got accepted yet.

const TYPING_DEBOUNCE_MS = 600;

// How the known keys are presented; the limits are the server's (engines/options.py), shown up front and
// checked before sending. Keys the server sends that are not listed here are still shown, with an input
// chosen from the value's type.
const FIELDS = {
  reasoning_budget: {
    group: "Reasoning", label: "Thinking budget", kind: "int", min: 0, max: 65536, unit: "tokens",
    hint: "Most tokens the model may think for. 0 turns thinking off.",
  },
  temperature: { group: "Sampling", label: "Temperature", kind: "float", min: 0, max: 2, step: 0.05 },
  top_p: { group: "Sampling", label: "Top-p", kind: "float", above: 0, max: 1, step: 0.01 },
  max_tokens: { group: "Sampling", label: "Max tokens", kind: "int", min: 1, max: 65536, unit: "tokens" },
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
  prefix_cache_entries: { group: "Prompt processing", label: "Prefix cache entries", kind: "int", min: 1, max: 64 },
  prefill_step_size: {
    group: "Prompt processing", label: "Prefill step size", kind: "int", min: 0, max: 65536, step: 256, unit: "tokens",
    hint: "Prompt tokens per prefill chunk. 0 sends the whole prompt at once.",
  },
  system_prompt: {
    group: "Conversation", label: "System prompt", kind: "text", maxLength: 32768, hint: "Sent before the conversation.",
  },
};

const number = new Intl.NumberFormat("en-US", { maximumFractionDigits: 4 });

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

/** "2 to 16 tokens", "above 0, up to 1": what a numeric field accepts, shown beside its label. */
function rangeText(spec) {
  const unit = spec.unit ? ` ${spec.unit}` : "";
  if (spec.above !== undefined) return `above ${number.format(spec.above)}, up to ${number.format(spec.max)}${unit}`;
  if (spec.min !== undefined && spec.max !== undefined) {
    return `${number.format(spec.min)} to ${number.format(spec.max)}${unit}`;
  }
  return "";
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
    this.held = new Set(); // keys whose field holds a value not accepted (yet): kept as typed
    this.sent = []; // keys of the change awaiting its echo
    this.awaitingEcho = false;
    this.statusTimer = 0;
    this.drafterNote = null;
    form.addEventListener("submit", (event) => event.preventDefault());
    form.addEventListener("change", (event) => this.commit(event.target));
    // Typing pauses commit too, so a value applies without leaving the field; a half-typed
    // number ("0.") waits quietly for the next keystroke or for the field's change event.
    form.addEventListener("input", (event) => {
      const input = event.target;
      if (input.dataset.kind === "bool") return;
      this.held.add(input.name);
      this.count(input);
      this.debounce(input);
    });
  }

  /**
   * The engine's `drafter_note` (why it has no drafter, and how to get one), shown under "Use the drafter";
   * null hides it.
   */
  setDrafterNote(note) {
    this.drafterNote = note ?? null;
    this.showDrafterNote();
  }

  showDrafterNote() {
    const input = this.input("speculative");
    if (!input) return;
    let note = document.getElementById("setting-speculative-note");
    if (!note) {
      note = document.createElement("p");
      note.id = "setting-speculative-note";
      note.className = "hint drafter-note"; // laid out as the field's hint is
      input.closest(".field").append(note);
      input.setAttribute("aria-describedby", `${input.getAttribute("aria-describedby")} ${note.id}`);
    }
    note.textContent = this.drafterNote ?? "";
    note.hidden = !this.drafterNote;
  }

  /** Enable or disable editing, e.g. while the socket is down. */
  setEnabled(enabled) {
    const fieldset = this.form.querySelector("fieldset");
    if (fieldset) fieldset.disabled = !enabled;
  }

  /** Full values from `hello` or a `settings` frame (ours or another tab's). */
  update(values) {
    this.values = { ...values };
    const echo = this.awaitingEcho;
    if (echo) {
      // A sent value the server now holds is no longer the user's own: later changes may show in its field.
      for (const key of this.sent) if (this.values[key] === this.read(this.input(key))) this.held.delete(key);
      this.awaitingEcho = false;
      this.sent = [];
    }
    const keys = Object.keys(values).join();
    if (keys !== this.keys) {
      this.keys = keys;
      this.build(values);
    } else {
      this.fill(values);
    }
    if (echo) {
      this.showError(null);
      this.showStatus("Saved · applies from the next message");
    }
  }

  /** Send `values` (from the quick bar) through the same flow as an edit here. */
  change(values) {
    if (!this.values) return false;
    return this.transmit(values);
  }

  /** The server refused a change: say why next to the field it names, keeping what was typed there. */
  rejected(message) {
    this.awaitingEcho = false;
    this.showStatus("");
    const placed = this.placeOnFields(message);
    this.showError(placed ? null : message);
    this.sent = [];
    if (this.values) this.fill(this.values);
  }

  /**
   * The server names the fields it refused (``Settings not changed: key: problem; …``): each problem goes
   * next to its field under the field's label. False when the message names no field here.
   */
  placeOnFields(message) {
    const parts = message.replace(/^Settings not changed:\s*/, "").replace(/\.$/, "").split("; ");
    let placed = false;
    for (const part of parts) {
      const found = /^([a-z_]+): (.+)$/.exec(part);
      const input = found && this.input(found[1]);
      if (!input) continue;
      this.fieldError(input, `${this.label(input)}: ${found[2]}.`);
      this.held.add(found[1]);
      placed = true;
    }
    return placed;
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

  input(key) {
    const input = this.form.elements.namedItem(key);
    return input instanceof HTMLElement ? input : null;
  }

  label(input) {
    return FIELDS[input.name]?.label ?? humanize(input.name);
  }

  /** Show `message` next to `input` (null clears it). */
  fieldError(input, message) {
    const error = document.getElementById(`${input.id}-error`);
    error.textContent = message ?? "";
    error.hidden = message === null;
    if (message === null) input.removeAttribute("aria-invalid");
    else input.setAttribute("aria-invalid", "true");
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
    this.held.clear();
    this.fill(values);
    this.showDrafterNote();
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
      if (spec.above !== undefined) input.dataset.above = spec.above;
      if (spec.max !== undefined) input.max = spec.max;
      // Spinner steps follow the spec, but typed values are checked against the range, not the step.
      input.step = spec.step ?? (kind === "int" ? 1 : "any");
    }
    // The counter, not the browser, stops an over-long text: a paste is kept whole and the error says so.
    if (spec.maxLength !== undefined) input.dataset.maxLength = spec.maxLength;

    const described = [];
    const head = document.createElement("div");
    head.className = "field-head";
    head.append(label);
    const limit = spec.maxLength !== undefined ? "counter" : rangeText(spec) ? "range" : null;
    if (limit) {
      const small = document.createElement("small");
      small.className = `field-limit field-${limit}`;
      small.id = `${id}-${limit}`;
      small.textContent = limit === "range" ? rangeText(spec) : "";
      head.append(small);
      described.push(small.id);
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
      row.append(head, wrap);
    } else {
      row.append(head, input);
    }
    const error = document.createElement("p");
    error.className = "field-error";
    error.id = `${id}-error`;
    error.setAttribute("role", "alert");
    error.hidden = true;
    row.append(error);
    described.push(error.id);
    if (spec.hint) {
      const hint = document.createElement("small");
      hint.className = "hint";
      hint.id = `${id}-hint`;
      hint.textContent = spec.hint;
      row.append(hint);
      described.push(hint.id);
    }
    input.setAttribute("aria-describedby", described.join(" "));
    return row;
  }

  /**
   * Put `values` into the inputs, sparing the field being typed in, text still waiting to be sent and
   * values not accepted yet, so another tab's change (or this one's echo) cannot eat an edit.
   */
  fill(values) {
    for (const [key, value] of Object.entries(values)) {
      const input = this.input(key);
      if (!input || this.timers.has(key) || this.held.has(key)) continue;
      if (input === document.activeElement && input.dataset.kind !== "bool") continue;
      this.setInput(input, value);
    }
  }

  setInput(input, value) {
    if (input.type === "checkbox") input.checked = Boolean(value);
    else input.value = value ?? "";
    this.count(input);
  }

  /** The system prompt's counter: characters used of the limit. */
  count(input) {
    const counter = document.getElementById(`${input.id}-counter`);
    if (!counter) return;
    const max = Number(input.dataset.maxLength);
    counter.textContent = `${number.format(input.value.length)} / ${number.format(max)} characters`;
    counter.dataset.over = String(input.value.length > max);
  }

  debounce(input) {
    clearTimeout(this.timers.get(input.name));
    this.timers.set(input.name, setTimeout(() => this.commit(input, true), TYPING_DEBOUNCE_MS));
  }

  /** Send the input's value if it changed; `typing` waits quietly on a number still being typed ("-"). */
  commit(input, typing = false) {
    const key = input.name;
    if (!key || !this.values) return;
    clearTimeout(this.timers.get(key));
    this.timers.delete(key);
    const value = this.read(input);
    if (value === undefined && typing) return;
    const problem = this.problem(input, value);
    this.fieldError(input, problem);
    if (problem) {
      this.held.add(key);
      return;
    }
    if (value === this.values[key]) {
      this.held.delete(key);
      return;
    }
    this.held.add(key);
    this.transmit({ [key]: value });
  }

  transmit(values) {
    this.showError(null);
    if (this.send(values)) {
      this.sent = Object.keys(values);
      this.awaitingEcho = true;
      this.showStatus("Saving…");
      return true;
    }
    this.rejected("Not connected; the change was not saved.");
    return false;
  }

  /** What is wrong with `value` for `input`, in the field's own words; null when nothing is. */
  problem(input, value) {
    const label = this.label(input);
    const spec = FIELDS[input.name] ?? {};
    const kind = input.dataset.kind;
    if (value === undefined) return `${label} must be a ${kind === "int" ? "whole " : ""}number.`;
    if (kind === "int" || kind === "float") {
      const low = spec.above !== undefined ? value <= spec.above : spec.min !== undefined && value < spec.min;
      const high = spec.max !== undefined && value > spec.max;
      if (low || high) {
        const range = rangeText(spec);
        return spec.above !== undefined ? `${label} must be ${range.replace(", up to", " and at most")}.`
          : `${label} must be from ${range}.`;
      }
    }
    if (spec.maxLength !== undefined && value.length > spec.maxLength) {
      return `${label} must be at most ${number.format(spec.maxLength)} characters; it has ` +
        `${number.format(value.length)}.`;
    }
    return null;
  }

  /** The input's value as the setting's type; undefined when it is not a number where one is needed. */
  read(input) {
    if (!input) return undefined;
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
