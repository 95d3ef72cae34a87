// The settings pane: rendered from the values the server sends, edits sent back as partial frames.
// Each field shows its range (the system prompt a character counter) and its own errors, in its own words;
// a value arriving from the server never replaces one the user is typing or has not got accepted yet.

import { buildField, number, orderedKeys, problemWith, readField, specFor } from "@app/settings-field.js";

const TYPING_DEBOUNCE_MS = 600;

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
    // The settings' JSON schema (labels, types, limits): undefined while it loads, null when it could not.
    this.schema = undefined;
    this.keys = "";
    this.timers = new Map(); // key -> pending typing debounce
    this.held = new Set(); // keys whose field holds a value not accepted (yet): kept as typed
    this.sent = []; // keys of the change awaiting its echo
    this.awaitingEcho = false;
    this.statusTimer = 0;
    this.notes = new Map(); // setting key -> the engine's note shown under its field
    this.autoBlock = null; // the block "auto" ran at last, from the replies' stats
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
    this.setNote("speculative", note);
  }

  /**
   * Why this model does not run on specchat's own loop (the engine's `decode_loop_reason`), shown under
   * "Decode loop"; null hides it, as does an engine that does not say.
   */
  setLoopNote(note) {
    this.setNote("decode_loop", note);
  }

  /**
   * The block "auto" runs at now (a reply's `auto_block`, 1 while it has drafting off), shown under the draft
   * block size while that is "auto"; null leaves the last one shown.
   */
  setAutoBlock(block) {
    if (block == null) return;
    this.autoBlock = block;
    this.showAutoBlock();
  }

  showAutoBlock() {
    const auto = this.values?.draft_block_size === "auto" && this.autoBlock != null;
    this.setNote("draft_block_size", !auto ? null : this.autoBlock === 1
      ? "auto has drafting off now: it would not pay here; it tries again now and then."
      : `auto runs block ${this.autoBlock} now.`);
  }

  setNote(key, note) {
    this.notes.set(key, note ?? null);
    this.showNote(key);
  }

  showNote(key) {
    const input = this.input(key);
    if (!input) return;
    const text = this.notes.get(key) ?? null;
    let note = document.getElementById(`setting-${key}-note`);
    if (!note) {
      note = document.createElement("p");
      note.id = `setting-${key}-note`;
      note.className = "hint setting-note"; // laid out as the field's hint is
      input.closest(".field").append(note);
      input.setAttribute("aria-describedby", `${input.getAttribute("aria-describedby")} ${note.id}`);
    }
    note.textContent = text ?? "";
    note.hidden = !text;
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
      for (const key of this.sent) if (this.values[key] === readField(this.input(key))) this.held.delete(key);
      this.awaitingEcho = false;
      this.sent = [];
    }
    const keys = Object.keys(values).join();
    // Until the schema says what each field accepts there are no fields: setSchema builds them.
    if (this.schema !== undefined && keys !== this.keys) {
      this.keys = keys;
      this.build(values);
    } else if (this.schema !== undefined) {
      this.fill(values);
    }
    this.showAutoBlock();
    if (echo) {
      this.showError(null);
      this.showStatus("Saved · applies from the next message");
    }
  }

  /**
   * The settings' JSON schema from the server (`GET /api/settings/schema`), or the Error that kept it away:
   * then the fields are built from the values' types alone, the server still checks each change, and the
   * pane says why its limits are missing.
   */
  setSchema(schema) {
    this.schema = schema instanceof Error ? null : schema;
    if (schema instanceof Error) this.showError(`The settings' limits could not be loaded: ${schema.message}`);
    if (!this.values) return;
    this.keys = Object.keys(this.values).join();
    this.build(this.values);
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
    return this.spec(input.name).label;
  }

  spec(key) {
    return specFor(key, this.values?.[key], this.schema?.properties?.[key]);
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
    for (const key of orderedKeys(values)) {
      const spec = specFor(key, values[key], this.schema?.properties?.[key]);
      if (!groups.has(spec.group)) {
        const group = document.createElement("div");
        group.className = "settings-group";
        const heading = document.createElement("h3");
        heading.textContent = spec.group;
        group.append(heading);
        groups.set(spec.group, group);
        fieldset.append(group);
      }
      groups.get(spec.group).append(buildField(key, spec));
    }
    this.form.replaceChildren(fieldset);
    this.held.clear();
    this.fill(values);
    for (const key of this.notes.keys()) this.showNote(key);
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
    const value = readField(input);
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
    return problemWith(this.spec(input.name), value);
  }
}
