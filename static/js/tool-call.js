// One tool call of a reply: a collapsible block with the tool and its server, the arguments, the call's state
// (waiting for approval, running with the time so far, done, failed, denied) and its result. A call that waits
// is approved or denied in the block, by mouse or keyboard. Arguments and results are shown as text, never markup.

import { element } from "@app/dom.js";
import { formatMs, formatSeconds } from "@app/format.js";
import { schedule } from "@app/render.js";

const TICK_MS = 100; // how often a running call's clock is redrawn (it shows tenths of a second)
// Each choice: what it sends, its label and its button's look.
const DECISIONS = [
  ["once", "Allow once", "primary"],
  ["always", "Always allow this tool", ""],
  ["deny", "Deny", "danger"],
];
const FINAL = ["done", "failed", "denied"];
const IMAGE_TYPE = /^image\/[\w.+-]+$/;

/** Whether the user is typing somewhere: a text field with focus that holds text, or an editable element. */
function typing() {
  const el = document.activeElement;
  if (el.isContentEditable) return true;
  const field = el instanceof HTMLTextAreaElement ||
    (el instanceof HTMLInputElement && !["button", "checkbox", "radio", "range", "submit", "reset"].includes(el.type));
  return field && el.value !== "";
}

/**
 * `text` with its JSON laid out on indented lines where it is a JSON object or array, else as it is. The text is
 * re-indented rather than parsed and printed again, so numbers keep every digit (an exact calculator's results).
 */
export function prettyJson(text) {
  const trimmed = text.trim();
  if (!/^[[{]/.test(trimmed)) return text;
  try {
    JSON.parse(trimmed);
  } catch {
    return text;
  }
  let out = "";
  let depth = 0;
  const newline = () => "\n" + "  ".repeat(depth);
  for (let i = 0; i < trimmed.length; i++) {
    const ch = trimmed[i];
    if (ch === '"') {
      let end = i + 1;
      while (trimmed[end] !== '"') end += trimmed[end] === "\\" ? 2 : 1;
      out += trimmed.slice(i, end + 1);
      i = end;
    } else if (ch === "{" || ch === "[") {
      const close = trimmed.slice(i + 1).trimStart()[0];
      if (close === "}" || close === "]") {
        out += ch + close;
        i = trimmed.indexOf(close, i + 1);
      } else {
        depth += 1;
        out += ch + newline();
      }
    } else if (ch === "}" || ch === "]") {
      depth -= 1;
      out += newline() + ch;
    } else if (ch === ",") {
      out += "," + newline();
    } else if (ch === ":") {
      out += ": ";
    } else if (!/\s/.test(ch)) {
      out += ch;
    }
  }
  return out;
}

export class ToolCallBlock {
  /**
   * @param {string} call the call's id, unique in the conversation
   * @param {(decision: "once"|"always"|"deny") => boolean} onDecide sends the user's decision; false when it
   *   could not be sent
   */
  constructor(call, onDecide) {
    this.onDecide = onDecide;
    this.el = element("details", "tool-call");
    this.el.dataset.call = call;
    this.el.open = true;
    const summary = element("summary");
    this.nameEl = element("span", "tool-call-name");
    this.serverEl = element("span", "tool-call-server");
    this.stateEl = element("span", "tool-call-state");
    summary.append(this.nameEl, this.serverEl, this.stateEl);

    this.approvalEl = element("div", "tool-call-approval");
    this.approvalEl.setAttribute("role", "group");
    this.approvalEl.hidden = true;
    this.askEl = element("p", "tool-call-ask");
    this.buttons = DECISIONS.map(([decision, label, kind]) => {
      const button = element("button", `button small ${kind}`.trim(), label);
      button.type = "button";
      button.addEventListener("click", () => this.decide(decision));
      return button;
    });
    const row = element("div", "tool-call-buttons");
    row.append(...this.buttons);
    this.sendError = element("p", "tool-call-send-error");
    this.sendError.setAttribute("role", "alert");
    this.sendError.hidden = true;
    this.approvalEl.append(this.askEl, row, this.sendError);
    // The page stops the reply on Escape wherever focus is: here it only gives focus back to where it was.
    this.approvalEl.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || event.isComposing) return;
      event.preventDefault();
      if (this.focusedFrom?.isConnected) this.focusedFrom.focus({ preventScroll: true });
      this.focusedFrom = null;
    });

    const args = element("div", "tool-call-section");
    args.append(element("div", "tool-call-heading", "Arguments"));
    this.argsEl = element("pre", "tool-call-args");
    args.append(this.argsEl);
    this.resultEl = element("div", "tool-call-section tool-call-result");
    this.resultEl.hidden = true;
    const body = element("div", "tool-call-body");
    body.append(args, this.approvalEl, this.resultEl);
    this.el.append(summary, body);

    this.name = "";
    this.server = "";
    this.state = null; // until the first frame
    this.ms = null;
    this.error = null;
    this.decided = null; // the decision sent, until the server's next frame says what became of it
    this.ended = false; // the reply ended before the call did
    this.startedAt = null;
    this.ticker = 0;
    this.wantsFocus = false;
    this.focusedFrom = null;
    this.resultDirty = false;
    this.result = null;
    this.userToggled = false;
    summary.addEventListener("click", () => (this.userToggled = true));
  }

  /** Waiting for the user's decision, with nothing sent yet. */
  get waiting() {
    return this.state === "waiting" && this.decided === null && !this.ended;
  }

  /** A `tool_call` frame (or a stored call): the call as it stands now. */
  update({ name, server, arguments: args, state, ms, error }) {
    const entering = state !== this.state;
    this.name = name;
    this.server = server;
    this.argsEl.textContent = JSON.stringify(args, null, 2);
    this.state = state;
    this.ms = ms ?? null;
    this.error = error ?? null;
    if (entering) this.decided = null;
    if (state === "waiting" && entering) {
      this.wantsFocus = true;
      this.el.open = true; // the choices are inside
    }
    if (state === "running" && this.startedAt === null) {
      this.startedAt = performance.now();
      this.ticker = setInterval(() => schedule(this), TICK_MS);
    }
    if (state !== "running") this.stopTicking();
    // Finished, the block folds away unless the user took charge of it; the summary says how it went.
    if (FINAL.includes(state) && entering && !this.userToggled) this.el.open = false;
    schedule(this);
  }

  /** A `tool_result` frame (or a stored call's result): `content` is a list of text and image parts. */
  showResult({ ok, content, ms }) {
    this.result = { ok, content };
    if (ms != null) this.ms = ms;
    this.resultDirty = true;
    schedule(this);
  }

  /** The reply ended with the call still waiting or running: it will not go on. */
  end() {
    if (FINAL.includes(this.state)) return;
    this.ended = true;
    this.stopTicking();
    schedule(this);
  }

  decide(decision) {
    if (!this.waiting) return;
    if (!this.onDecide(decision)) {
      this.sendError.textContent = "Not connected: your choice was not sent. Choose again once the connection is back.";
      this.sendError.hidden = false;
      return;
    }
    this.decided = decision;
    this.sendError.hidden = true;
    this.focusedFrom = null;
    schedule(this);
  }

  stopTicking() {
    clearInterval(this.ticker);
    this.ticker = 0;
  }

  /** The block's element is leaving the page. */
  dispose() {
    this.stopTicking();
  }

  stateText() {
    if (this.ended) return this.state === "running" ? "stopped with the reply" : "not run: the reply ended";
    if (this.decided) return this.decided === "deny" ? "denying…" : "allowed, starting…";
    switch (this.state) {
      case "waiting":
        return "waiting for your approval";
      case "running":
        return `running… ${formatSeconds(performance.now() - this.startedAt)}`;
      case "done":
        return this.ms == null ? "done" : `done in ${formatMs(this.ms)}`;
      case "failed":
        return this.error ? `failed: ${this.error}` : "failed";
      default:
        return "denied";
    }
  }

  flush() {
    this.nameEl.textContent = this.name;
    this.serverEl.textContent = this.server;
    this.stateEl.textContent = this.stateText();
    this.el.dataset.state = this.ended ? "ended" : this.state;
    const waiting = this.waiting;
    if (waiting) {
      this.askEl.textContent =
        `Run ${this.name} from ${this.server} with these arguments? The reply goes on once you choose.`;
      this.approvalEl.setAttribute("aria-label", `Approve the call to ${this.name}`);
    }
    const focused = this.approvalEl.contains(document.activeElement);
    this.approvalEl.hidden = !waiting;
    if (focused && !waiting) this.el.querySelector("summary").focus({ preventScroll: true });
    // Focus goes to the first choice when the call starts waiting, unless the user is typing or already on
    // another call's choices.
    if (waiting && this.wantsFocus && !typing() && !document.activeElement.closest(".tool-call-approval")) {
      this.focusedFrom = document.activeElement;
      this.buttons[0].focus({ preventScroll: true });
    }
    if (!waiting || this.buttons[0] === document.activeElement) this.wantsFocus = false;
    if (this.resultDirty) this.renderResult();
  }

  renderResult() {
    this.resultDirty = false;
    const { ok, content } = this.result;
    this.resultEl.dataset.ok = String(ok);
    const parts = [element("div", "tool-call-heading", ok ? "Result" : "Error, as the model was told")];
    for (const part of content) {
      if (part.type === "text") {
        parts.push(element("pre", "tool-call-text", prettyJson(part.text)));
      } else if (IMAGE_TYPE.test(part.mime_type)) {
        const img = element("img", "tool-call-image");
        img.alt = `Image from ${this.name}`;
        img.src = `data:${part.mime_type};base64,${part.data}`;
        parts.push(img);
      } else {
        parts.push(element("p", "tool-call-note", `An image of a type this page does not show (${part.mime_type}).`));
      }
    }
    this.resultEl.replaceChildren(...parts);
    this.resultEl.hidden = false;
  }
}
