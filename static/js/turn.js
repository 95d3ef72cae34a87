// One assistant reply: its thinking block, streamed answer, stats line and how it ended.

import { AcceptanceStrip } from "@app/acceptance-strip.js";
import { copyText } from "@app/clipboard.js";
import { DraftTint } from "@app/drafted-tint.js";
import { MarkdownView } from "@app/markdown.js";
import { schedule } from "@app/render.js";
import { renderStats } from "@app/stats.js";
import { ThinkingBlock } from "@app/thinking.js";

const FINISH_NOTES = { cancelled: "stopped", length: "cut at max tokens" };

function element(tag, className) {
  const el = document.createElement(tag);
  el.className = className;
  return el;
}

export class AssistantTurn {
  /**
   * @param {string} id the chat id this reply answers
   * @param {string} prompt the user's text, offered back for resending when the reply fails
   * @param {{onResend: (text: string) => void,
   *          judge?: (stats: object) => ({text: string, action?: {label: string, run: () => void}}|null)}} hooks
   * `judge` looks at a finished reply's stats and may return a notice (drafting not paying off).
   */
  constructor(id, prompt, { onResend, judge }) {
    this.id = id;
    this.prompt = prompt;
    this.el = element("article", "msg assistant");
    this.el.dataset.id = id;
    this.el.dataset.state = "waiting";
    this.el.setAttribute("aria-label", "Assistant reply");
    this.answerEl = element("div", "answer markdown");
    this.answerView = new MarkdownView(this.answerEl);
    this.tint = new DraftTint(this.answerEl, () => this.answer);
    this.strip = new AcceptanceStrip();
    this.statsEl = element("div", "stats");
    this.statsEl.hidden = true;
    this.notesEl = element("div", "notes");
    this.actionsEl = element("div", "msg-actions");
    this.actionsEl.hidden = true;
    this.el.append(this.answerEl, this.strip.el, this.statsEl, this.notesEl, this.actionsEl);
    this.onResend = onResend;
    this.judge = judge;

    this.hasStarted = false;
    this.thinking = null;
    this.answer = "";
    this.answerDirty = false;
    this.stats = null;
    this.statsDirty = false;
    this.notes = [];
  }

  /** Whether the reply may still receive frames. */
  get active() {
    return ["waiting", "streaming", "stopping"].includes(this.el.dataset.state);
  }

  started() {
    this.hasStarted = true;
    if (this.el.dataset.state === "waiting") this.el.dataset.state = "streaming";
  }

  /** A thinking delta; `rounds` are the verify rounds that ended within it. */
  addThinking(text, rounds) {
    if (!this.active) return;
    this.strip.add(rounds);
    this.started();
    if (!this.thinking) {
      this.thinking = new ThinkingBlock();
      this.el.prepend(this.thinking.el);
    }
    this.thinking.append(text);
    schedule(this);
  }

  /** An answer delta; `spans` are its character ranges that came from accepted drafts. */
  addAnswer(text, rounds, spans) {
    if (!this.active) return;
    this.started();
    if (this.answer === "" && this.thinking) this.thinking.answerStarted();
    this.strip.add(rounds);
    if (spans) this.tint.add(this.answer.length, spans);
    this.answer += text;
    this.answerDirty = true;
    schedule(this);
  }

  updateStats(stats) {
    this.stats = stats;
    this.statsDirty = true;
    this.strip.setStats(stats);
    if (this.thinking && stats.thinking_tokens != null) this.thinking.setTokens(stats.thinking_tokens);
    schedule(this);
  }

  stopping() {
    this.el.dataset.state = "stopping";
  }

  /** The `done` frame: final stats, and a note unless the reply ended normally. */
  done(frame) {
    if (!this.active) return;
    const reason = frame.finish_reason;
    this.el.dataset.state = "done";
    this.el.dataset.finish = reason;
    if (frame.stats) {
      this.stats = frame.stats;
      this.strip.setStats(frame.stats);
    }
    if (this.thinking) this.thinking.finish(frame.stats);
    this.answerDirty = this.answer !== "";
    if (reason === "error") {
      const error = frame.error || {};
      this.addNote("error", error.message || "The reply failed.", error.code);
    } else if (FINISH_NOTES[reason]) {
      this.addNote(reason, FINISH_NOTES[reason]);
    }
    const notice = reason === "stop" || reason === "length" ? this.judge?.(this.stats) : null;
    if (notice) this.notes.push({ kind: "slow-draft", ...notice });
    this.statsDirty = true;
    schedule(this);
  }

  /**
   * An `error` frame for this reply. Before `start` it means the request was refused, so
   * no `done` follows and the reply ends here; later, `done` still closes the reply.
   */
  fail(code, message) {
    if (!this.hasStarted && this.active) {
      this.el.dataset.state = "failed";
      this.el.dataset.finish = "error";
    }
    this.addNote("error", message, code);
  }

  /** The connection dropped while the reply was in flight; what arrived so far stays. */
  interrupt() {
    this.el.dataset.state = "interrupted";
    if (this.thinking) this.thinking.finish(null);
    this.answerDirty = this.answer !== "";
    this.addNote("interrupted", "Interrupted: the connection dropped before the reply finished.");
    this.statsDirty = true;
  }

  addNote(kind, text, code) {
    this.notes.push({ kind, text, code });
    schedule(this);
  }

  flush() {
    if (this.thinking) this.thinking.flush();
    const rendered = this.answerDirty;
    if (this.answerDirty) {
      if (this.active) this.answerView.update(this.answer);
      else this.answerView.render(this.answer);
      this.answerDirty = false;
    }
    this.tint.apply(rendered);
    if (this.statsDirty && this.stats) {
      renderStats(this.statsEl, this.stats, this.active);
    }
    this.statsDirty = false;
    while (this.notes.length) this.notesEl.append(this.renderNote(this.notes.shift()));
    if (!this.active && this.actionsEl.hidden) this.renderActions();
  }

  renderNote({ kind, text, code, action }) {
    const note = element("p", `note note-${kind}`);
    note.dataset.kind = kind;
    note.setAttribute("role", kind === "error" ? "alert" : "status");
    note.textContent = kind === "error" ? `Error: ${text}` : text;
    if (code) note.title = code;
    if (action) {
      const button = element("button", "link-button note-action");
      button.type = "button";
      button.textContent = action.label;
      button.addEventListener("click", () => {
        action.run();
        button.disabled = true;
      }, { once: true });
      note.append(" ", button);
    }
    return note;
  }

  /** The reply's element is leaving the page. */
  dispose() {
    this.tint.dispose();
  }

  /** Copy for a finished answer; "Edit & resend" when the reply failed or was cut off by the network. */
  renderActions() {
    const buttons = [];
    if (this.answer) {
      const copy = element("button", "link-button");
      copy.type = "button";
      copy.textContent = "Copy";
      copy.addEventListener("click", () => copyText(copy, this.answer, this.answerEl));
      buttons.push(copy);
    }
    if (["failed", "interrupted"].includes(this.el.dataset.state) || this.el.dataset.finish === "error") {
      const resend = element("button", "link-button");
      resend.type = "button";
      resend.textContent = "Edit & resend";
      resend.addEventListener("click", () => this.onResend(this.prompt));
      buttons.push(resend);
    }
    this.actionsEl.replaceChildren(...buttons);
    this.actionsEl.hidden = buttons.length === 0;
  }
}
