// The collapsible thinking block of one assistant turn.

import { formatSeconds, formatTokens } from "@app/format.js";
import { MathText } from "@app/math.js";

const STICK_PX = 24;

export class ThinkingBlock {
  /** Created on the first thinking delta, so a reply without thinking never gets a block. */
  constructor() {
    this.el = document.createElement("details");
    this.el.className = "thinking";
    this.el.dataset.state = "live";
    this.el.open = true;
    const summary = document.createElement("summary");
    this.label = document.createElement("span");
    this.label.className = "thinking-label";
    this.label.textContent = "Thinking…";
    summary.append(this.label);
    this.body = document.createElement("div");
    this.body.className = "thinking-body";
    // Thinking is shown as plain text with its formulas: it is a draft, and Markdown there would only flicker.
    this.text = new MathText(this.body);
    this.el.append(summary, this.body);

    this.source = "";
    this.pending = "";
    this.tokens = null;
    this.startedAt = performance.now();
    this.ms = null;
    this.timed = true; // false when the reply's thinking came in several blocks and only its total time is known
    this.collapse = false;
    // Keyboard activation of a summary also fires click, so this catches every user toggle
    // and nothing the code itself does.
    this.userToggled = false;
    summary.addEventListener("click", () => (this.userToggled = true));
  }

  append(text) {
    // Models open their thinking with blank lines, which pre-wrap would show as a gap.
    this.pending += this.source || this.pending ? text : text.trimStart();
  }

  setTokens(count) {
    this.tokens = count;
  }

  /** The answer began: fold the block away unless the user took charge of it. */
  answerStarted() {
    this.stopClock();
    this.collapse = !this.userToggled;
  }

  /** The reply ended: the server's numbers replace the ones measured here. */
  finish(stats) {
    this.stopClock();
    if (stats && stats.thinking_ms != null) this.ms = stats.thinking_ms;
    if (stats && stats.thinking_tokens != null) this.tokens = stats.thinking_tokens;
  }

  /** A stored reply's thinking in several blocks (tool calls between them): no block's own time is known. */
  finishUntimed() {
    this.stopClock();
    this.timed = false;
  }

  /** Whether the block is still being written (its clock runs). */
  get live() {
    return this.ms === null;
  }

  /** A continued reply thinks on: the clock runs again from the time it already had. */
  resume() {
    if (this.ms !== null) this.startedAt = performance.now() - this.ms;
    this.ms = null;
    this.el.dataset.state = "live";
  }

  stopClock() {
    if (this.ms === null) this.ms = performance.now() - this.startedAt;
  }

  flush() {
    if (this.pending || !this.live) {
      const body = this.body;
      const atBottom = body.scrollHeight - body.scrollTop - body.clientHeight <= STICK_PX;
      this.source += this.pending;
      this.pending = "";
      this.text.update(this.source, this.live);
      if (atBottom) body.scrollTop = body.scrollHeight;
    }
    const tokens = this.tokens != null ? formatTokens(this.tokens) : null;
    if (this.ms === null) {
      this.label.textContent = tokens ? `Thinking… ${tokens}` : "Thinking…";
    } else {
      this.el.dataset.state = "done";
      const label = this.timed ? `Thought for ${formatSeconds(this.ms)}` : "Thought";
      this.label.textContent = label + (tokens ? ` · ${tokens}` : "");
    }
    if (this.collapse) {
      this.el.open = false;
      this.collapse = false;
    }
  }
}
