// What a race card and a sweep card share: the article with its title and status line, its notes and its
// actions row, how it stops, fails and is interrupted, and its receipt's Markdown and JSON links.

import { element } from "@app/dom.js";
import { receiptUrl } from "@app/receipt.js";
import { schedule } from "@app/render.js";

export class ContestCard {
  /**
   * @param {string} id the race's or sweep's id
   * @param {{className: string, label: string, title: string, noun: string, live?: boolean}} kind the card's
   *   class and accessible name, the title in its head, what it is called in its notes ("race"), and whether
   *   its status line is announced as it changes
   */
  constructor(id, { className, label, title, noun, live = false }) {
    this.id = id;
    this.noun = noun;
    this.el = element("article", `msg ${className}`);
    this.el.dataset.id = id;
    this.el.dataset.state = "waiting";
    this.el.setAttribute("aria-label", label);
    const head = element("header", "race-head");
    this.statusEl = element("span", "race-status", "Waiting for the model…");
    if (live) this.statusEl.setAttribute("aria-live", "polite");
    head.append(element("span", "race-title", title), this.statusEl);
    this.notesEl = element("div", "notes");
    this.actionsEl = element("div", "msg-actions race-actions");
    this.actionsEl.hidden = true;
    this.el.append(head, this.notesEl, this.actionsEl);
    this.statusText = this.statusEl.textContent;
    this.notes = [];
  }

  /** Put the card's own parts between its head and its notes. */
  body(...parts) {
    this.notesEl.before(...parts);
  }

  stopping() {
    this.el.dataset.state = "stopping";
    this.setStatus("Stopping…");
  }

  setStatus(text) {
    this.statusText = text;
    schedule(this);
  }

  addNote(kind, text, code) {
    this.notes.push({ kind, text, code });
    schedule(this);
  }

  /** An `error` frame for it; before anything ran it means it was refused. */
  fail(code, message) {
    if (this.el.dataset.state === "waiting") {
      this.el.dataset.state = "failed";
      this.setStatus("Not run");
    }
    this.addNote("error", `Error: ${message}`, code);
  }

  /** The connection dropped before it finished. */
  interrupt() {
    this.el.dataset.state = "interrupted";
    this.addNote("interrupted", `Interrupted: the connection dropped before the ${this.noun} finished.`);
    this.setStatus("Interrupted");
  }

  /**
   * The receipt (`base`: the `receipt` path the server gave) opened as Markdown and downloaded as JSON;
   * `name` is how the links call it ("receipt", "sweep receipt"), `file` the download's name without extension.
   */
  receiptLinks(base, name, file) {
    const markdown = element("a", "link-button", "Markdown");
    markdown.href = receiptUrl(this.id, "markdown", base);
    markdown.target = "_blank";
    markdown.rel = "noopener";
    markdown.setAttribute("aria-label", `Open ${name} as Markdown`);
    const json = element("a", "link-button", "JSON");
    json.href = receiptUrl(this.id, "json", base);
    json.download = `${file}.json`;
    json.setAttribute("aria-label", `Download ${name} as JSON`);
    return [markdown, json];
  }

  /** The status line and the notes added since the last paint. */
  flushCard() {
    this.statusEl.textContent = this.statusText;
    while (this.notes.length) {
      const { kind, text, code } = this.notes.shift();
      const note = element("p", `note note-${kind}`, text);
      note.dataset.kind = kind;
      note.setAttribute("role", kind === "error" ? "alert" : "status");
      if (code) note.title = code;
      this.notesEl.append(note);
    }
  }
}
