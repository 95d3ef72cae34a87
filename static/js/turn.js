// One assistant reply: its steps in order (thinking, answer, and the tool calls between them), its stats line and
// how it ended.

import { AcceptanceStrip } from "@app/acceptance-strip.js";
import { element } from "@app/dom.js";
import { DraftTint } from "@app/drafted-tint.js";
import { MarkdownView } from "@app/markdown.js";
import { producedLine, producedTitle } from "@app/produced.js";
import { schedule } from "@app/render.js";
import { renderStats } from "@app/stats.js";
import { ThinkingBlock } from "@app/thinking.js";
import { ToolCallBlock } from "@app/tool-call.js";
import { addEndNote, CONTINUABLE, droppedNote, noteElement, renderTurnActions } from "@app/turn-actions.js";

/**
 * A stretch of a reply between tool calls: its thinking block (from its first thinking on) and its answer. A tool
 * call ends the stretch; what the reply says after the call goes into the next one.
 */
class ReplyPart {
  constructor() {
    this.answerEl = element("div", "answer markdown");
    this.view = new MarkdownView(this.answerEl);
    this.tint = new DraftTint(this.answerEl, () => this.answer);
    this.thinking = null;
    this.answer = "";
    this.dirty = false;
    this.rebuild = false; // the answer was rendered whole; the next streaming render starts afresh
    this.ended = false; // a tool call followed: nothing more is written here
  }

  /** The part's thinking block, made on its first thinking, before its answer. */
  think() {
    if (!this.thinking) {
      this.thinking = new ThinkingBlock();
      this.answerEl.before(this.thinking.el);
    }
    return this.thinking;
  }
}

export class AssistantTurn {
  /**
   * @param {string} id the chat id this reply answers
   * @param {string} prompt the user's text, offered back for resending when the reply fails
   * @param {{onResend: (text: string, images: string[]) => void,
   *          judge?: (stats: object) => ({text: string, action?: {label: string, run: () => void}}|null),
   *          onRegenerate?: (turn: AssistantTurn) => void, onContinue?: (turn: AssistantTurn) => void,
   *          onSelect?: (id: string) => void, onApprove?: (call: string, decision: string) => boolean}} hooks
   * `judge` looks at a finished reply's stats and may return a notice (drafting not paying off);
   * `onContinue` asks for more of an unfinished reply, streamed into this same turn; `onApprove` sends the
   * user's decision on a tool call that waits for one (false when it could not be sent).
   * @param {string[]} images the attachment ids of the user's images, offered back with the text
   */
  constructor(id, prompt, { onResend, judge, onRegenerate, onContinue, onSelect, onApprove }, images = []) {
    this.id = id;
    this.prompt = prompt;
    this.images = images;
    this.el = element("article", "msg assistant");
    if (id) this.el.dataset.id = id;
    this.el.dataset.state = "waiting";
    this.el.setAttribute("aria-label", "Assistant reply");
    this.parts = [new ReplyPart()];
    this.calls = new Map(); // the tool calls' blocks, by call id, in order
    this.strip = new AcceptanceStrip();
    this.statsEl = element("div", "stats");
    this.statsEl.hidden = true;
    this.notesEl = element("div", "notes");
    this.actionsEl = element("div", "msg-actions");
    this.actionsEl.hidden = true;
    this.el.append(this.parts[0].answerEl, this.strip.el, this.statsEl, this.notesEl, this.actionsEl);
    this.onResend = onResend;
    this.judge = judge;
    this.onRegenerate = onRegenerate;
    this.onContinue = onContinue;
    this.onSelect = onSelect;
    this.onApprove = onApprove;
    this.message = null; // the stored reply's id, from its start frame
    this.settings = null; // what produced it, from the stored message
    this.siblings = [];
    this.locked = false; // true while something streams: no regenerate or branch switch
    this.isLeaf = false; // the stored reply is the current branch's last message
    this.continuing = false; // a `continue` was sent and its `start` has not arrived yet
    this.previousFinish = null; // how the reply had ended before a `continue`, restored if it is refused
    this.continueRefused = false; // the engine cannot continue replies: no Continue action
    this.actionsDirty = false;

    this.hasStarted = false;
    this.stats = null;
    this.statsDirty = false;
    this.notes = [];
  }

  /** Whether the reply may still receive frames. */
  get active() {
    return ["waiting", "streaming", "stopping"].includes(this.el.dataset.state);
  }

  /** The whole answer: every part's, in order. */
  get answer() {
    return this.parts.map((part) => part.answer).join("");
  }

  /** The element with the answer's last words, which Copy selects where the clipboard is unavailable. */
  get answerEl() {
    return this.parts.findLast((part) => part.answer).answerEl;
  }

  /** The part the reply writes to now: the last one, or a new one after a tool call. */
  textPart() {
    const last = this.parts[this.parts.length - 1];
    if (!last.ended) return last;
    const part = new ReplyPart();
    this.strip.el.before(part.answerEl);
    this.parts.push(part);
    return part;
  }

  /** The thinking blocks, in order. */
  get thinkingBlocks() {
    return this.parts.filter((part) => part.thinking).map((part) => part.thinking);
  }

  /** A stored reply, drawn finished (or as far as it got). */
  static stored(message, prompt, hooks, images) {
    const turn = new AssistantTurn(null, prompt, hooks, images);
    turn.bind(message.id);
    turn.hasStarted = true;
    turn.settings = message.settings;
    turn.el.dataset.state = "done";
    turn.el.dataset.finish = message.finish_reason ?? "";
    turn.el.setAttribute("aria-busy", "false");
    // The thinking and the answer are cut where each tool call was made, into the steps the reply streamed.
    let at = { thinking: 0, content: 0 };
    for (const call of message.tool_calls ?? []) {
      turn.storedPart(message.thinking.slice(at.thinking, call.at.thinking),
        message.content.slice(at.content, call.at.content));
      const block = turn.addCall(call.call);
      block.update(call);
      if (call.ok != null) block.showResult(call); // null: no result yet
      block.end();
      at = call.at;
    }
    turn.storedPart(message.thinking.slice(at.thinking), message.content.slice(at.content));
    const blocks = turn.thinkingBlocks;
    for (const block of blocks) {
      if (blocks.length === 1) block.finish(message.stats ?? { thinking_ms: 0 });
      else block.finishUntimed();
      block.collapse = true;
      schedule(block);
    }
    turn.stats = message.stats;
    turn.statsDirty = true;
    if (message.stats?.dropped_turns) turn.addNote("context", droppedNote(message.stats.dropped_turns));
    addEndNote(turn, message.finish_reason, message.stats?.error);
    turn.actionsDirty = true;
    schedule(turn);
    return turn;
  }

  /** One stretch of a stored reply: its thinking and its answer (none after a call the reply ended with). */
  storedPart(thinking, answer) {
    if (!thinking && !answer) return;
    const part = this.textPart();
    if (thinking) part.think().append(thinking);
    part.answer = answer;
    part.dirty = answer !== "";
  }

  /** The block of tool call `call`, new after what the reply said so far, which ends the current part. */
  addCall(call) {
    this.endPart();
    const block = new ToolCallBlock(call, (decision) => this.decide(call, decision));
    this.calls.set(call, block);
    this.strip.el.before(block.el);
    return block;
  }

  /**
   * A tool call follows what the reply said so far: its thinking stops and folds as when an answer starts, and
   * its answer is rendered whole (an empty one leaves the page). A thinking block's token count is the reply's,
   * which only holds while it is the only block, so its count goes.
   */
  endPart() {
    const part = this.parts[this.parts.length - 1];
    if (part.ended) return;
    part.ended = true;
    if (part.thinking) {
      part.thinking.answerStarted();
      part.thinking.setTokens(null);
      schedule(part.thinking);
    }
    if (part.answer === "") {
      part.answerEl.remove();
      part.tint.dispose();
    }
    part.dirty = part.answer !== "";
  }

  /** The user's decision on a waiting call; the other waiting calls may then take the focus. */
  decide(call, decision) {
    if (!this.onApprove(call, decision)) return false;
    for (const block of this.calls.values()) if (block.waiting) schedule(block);
    this.statsDirty = true;
    schedule(this);
    return true;
  }

  /** The stored reply this turn writes to. */
  bind(message) {
    this.message = message;
    this.el.dataset.message = message;
  }

  /** Refresh what depends on the stored tree: the arrows and what produced the reply. */
  update(tree, locked) {
    const stored = this.message ? tree.get(this.message) : null;
    if (stored) {
      this.siblings = tree.siblings(this.message);
      if (stored.settings) this.settings = stored.settings;
    }
    this.isLeaf = this.message !== null && tree.current === this.message;
    this.locked = locked;
    this.statsDirty = true;
    this.actionsDirty = true;
    schedule(this);
  }

  /**
   * The reply is under way; its `start` frame (when given) says whether old turns were left out, and for a
   * continuation what the reply said before it, which a page that did not see it start shows first.
   */
  started(frame) {
    const replayedContinuation = frame?.continued_from && !this.hasStarted && !this.continuing;
    this.hasStarted = true;
    if (this.continuing) {
      // The continuation is under way: how the reply ended before no longer holds.
      this.continuing = false;
      this.notesEl.replaceChildren();
    }
    if (frame?.dropped_turns) this.addNote("context", droppedNote(frame.dropped_turns));
    if (this.el.dataset.state === "waiting") this.el.dataset.state = "streaming";
    if (replayedContinuation) {
      const { content, thinking } = frame.continued_from;
      if (thinking) this.addThinking(thinking);
      if (content) this.addAnswer(content);
    }
  }

  /** Whether this reply may go on (`continue`): it is the branch's last message and ended unfinished. */
  get continuable() {
    return Boolean(this.message && this.onContinue && this.isLeaf && !this.continueRefused && !this.active &&
      CONTINUABLE.includes(this.el.dataset.finish));
  }

  /** `continue` request `id` was sent: its frames stream into this turn, after what it already says. */
  resume(id) {
    this.id = id;
    this.el.dataset.id = id;
    this.continuing = true;
    this.previousFinish = this.el.dataset.finish;
    this.el.dataset.state = "waiting";
    this.el.setAttribute("aria-busy", "true");
    this.actionsEl.hidden = true;
    this.parts[this.parts.length - 1].rebuild = true;
  }

  /** A thinking delta; `rounds` are the verify rounds that ended within it. */
  addThinking(text, rounds) {
    if (!this.active) return;
    this.strip.add(rounds);
    this.started();
    const part = this.textPart();
    const resumed = part.thinking && !part.thinking.live;
    const thinking = part.think();
    if (resumed) thinking.resume(); // a continued reply thinks on in the same block
    thinking.append(text);
    schedule(thinking);
  }

  /** An answer delta; `spans` are its character ranges that came from accepted drafts. */
  addAnswer(text, rounds, spans) {
    if (!this.active) return;
    this.started();
    const part = this.textPart();
    if (part.thinking?.live) {
      part.thinking.answerStarted();
      schedule(part.thinking);
    }
    this.strip.add(rounds);
    if (spans) part.tint.add(part.answer.length, spans);
    part.answer += text;
    part.dirty = true;
    schedule(this);
  }

  updateStats(stats) {
    this.stats = stats;
    this.statsDirty = true;
    this.strip.setStats(stats);
    const [thinking, ...more] = this.thinkingBlocks;
    if (thinking && !more.length && !this.calls.size && stats.thinking_tokens != null) {
      thinking.setTokens(stats.thinking_tokens);
      schedule(thinking);
    }
    schedule(this);
  }

  /** A `tool_call` frame: the call is made (its block follows what the reply said so far), or its state changed. */
  toolCall(frame) {
    if (!this.active) return;
    this.started();
    const block = this.calls.get(frame.call) ?? this.addCall(frame.call);
    block.update(frame);
    this.statsDirty = true; // a call that waits is said in the stats line
    schedule(this);
  }

  /** A `tool_result` frame: the call's result, shown in its block. */
  toolResult(frame) {
    if (!this.active) return;
    this.calls.get(frame.call).showResult(frame);
  }

  /** The names of the tools whose calls wait for the user's decision. */
  get waitingFor() {
    return [...this.calls.values()].filter((block) => block.waiting).map((block) => block.name);
  }

  /**
   * The reply ended: with one thinking block the server's numbers (`stats`, when given) are its own; with several,
   * each keeps the time measured here. Calls still waiting or running will not go on.
   */
  settleSteps(stats) {
    const blocks = this.thinkingBlocks;
    for (const block of blocks) {
      block.finish(blocks.length === 1 ? stats : null);
      schedule(block);
    }
    for (const block of this.calls.values()) block.end();
    for (const part of this.parts) part.dirty = part.answer !== "";
  }

  stopping() {
    this.el.dataset.state = "stopping";
  }

  set state(value) {
    this.el.dataset.state = value;
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
    this.settleSteps(frame.stats);
    addEndNote(this, reason, frame.error);
    this.judgeSpeed();
    this.statsDirty = true;
    this.actionsDirty = true;
    schedule(this);
  }

  /**
   * A finished reply's notice when drafting did not pay (see `judge`); once per reply. Also called
   * again once a drafter-off rate is known that was not when the reply ended.
   */
  judgeSpeed() {
    if (!["stop", "length"].includes(this.el.dataset.finish)) return;
    if (this.notes.some((n) => n.kind === "slow-draft") || this.notesEl.querySelector(".note-slow-draft")) return;
    const notice = this.judge?.(this.stats);
    if (notice) this.addNote("slow-draft", notice.text, undefined, notice.action);
  }

  /**
   * An `error` frame for this reply. Before `start` it means the request was refused, so
   * no `done` follows and the reply ends here; later, `done` still closes the reply.
   */
  fail(code, message) {
    if (this.continuing && this.active) {
      // A refused `continue`: the reply stays as it was, with the reason under it.
      this.continuing = false;
      this.el.dataset.state = "done";
      this.el.dataset.finish = this.previousFinish ?? "";
      this.settleSteps(this.stats);
      if (code === "continue_unsupported") this.continueRefused = true;
      this.actionsDirty = true;
    } else if (!this.hasStarted && this.active) {
      this.el.dataset.state = "failed";
      this.el.dataset.finish = "error";
      this.actionsDirty = true;
    }
    this.addNote("error", message, code);
  }

  /** The connection dropped while the reply was in flight; what arrived so far stays. */
  interrupt() {
    this.el.dataset.state = "interrupted";
    this.settleSteps(null);
    this.addNote("interrupted", "Interrupted: the connection dropped before the reply finished.");
    this.statsDirty = true;
    this.actionsDirty = true;
  }

  addNote(kind, text, code, action) {
    this.notes.push({ kind, text, code, action });
    schedule(this);
  }

  flush() {
    for (const part of this.parts) {
      const rendered = part.dirty;
      if (part.dirty) {
        // Only the part being written streams by block; an ended part, or any once the reply ended, renders whole.
        const streaming = this.active && !part.ended;
        if (streaming && part.rebuild) {
          // A continued reply was rendered whole: streaming renders rebuild it once, then go on by block.
          part.answerEl.replaceChildren();
          part.view = new MarkdownView(part.answerEl);
          part.rebuild = false;
        }
        if (streaming) part.view.update(part.answer);
        else part.view.render(part.answer);
        part.dirty = false;
      }
      part.tint.apply(rendered);
    }
    const produced = this.active ? null : producedLine(this.settings, this.stats);
    const waiting = this.active ? this.waitingFor : [];
    if (this.statsDirty && (this.stats || produced || waiting.length)) {
      const line = produced && { text: produced, title: producedTitle(this.settings) };
      renderStats(this.statsEl, this.stats ?? {}, this.active, line, waiting);
    }
    this.statsDirty = false;
    while (this.notes.length) this.notesEl.append(noteElement(this.notes.shift()));
    this.el.setAttribute("aria-busy", String(this.active));
    if (!this.active && this.actionsDirty) renderTurnActions(this);
    this.actionsDirty = false;
  }

  /** The reply's element is leaving the page. */
  dispose() {
    for (const part of this.parts) part.tint.dispose();
    for (const block of this.calls.values()) block.dispose();
  }
}
