// One assistant reply: its thinking block, streamed answer, stats line and how it ended.

import { AcceptanceStrip } from "@app/acceptance-strip.js";
import { element } from "@app/dom.js";
import { DraftTint } from "@app/drafted-tint.js";
import { MarkdownView } from "@app/markdown.js";
import { producedLine, producedTitle } from "@app/produced.js";
import { schedule } from "@app/render.js";
import { renderStats } from "@app/stats.js";
import { ThinkingBlock } from "@app/thinking.js";
import { addEndNote, CONTINUABLE, droppedNote, noteElement, renderTurnActions } from "@app/turn-actions.js";

export class AssistantTurn {
  /**
   * @param {string} id the chat id this reply answers
   * @param {string} prompt the user's text, offered back for resending when the reply fails
   * @param {{onResend: (text: string, images: string[]) => void,
   *          judge?: (stats: object) => ({text: string, action?: {label: string, run: () => void}}|null),
   *          onRegenerate?: (turn: AssistantTurn) => void, onContinue?: (turn: AssistantTurn) => void,
   *          onSelect?: (id: string) => void}} hooks
   * `judge` looks at a finished reply's stats and may return a notice (drafting not paying off);
   * `onContinue` asks for more of an unfinished reply, streamed into this same turn.
   * @param {string[]} images the attachment ids of the user's images, offered back with the text
   */
  constructor(id, prompt, { onResend, judge, onRegenerate, onContinue, onSelect }, images = []) {
    this.id = id;
    this.prompt = prompt;
    this.images = images;
    this.el = element("article", "msg assistant");
    if (id) this.el.dataset.id = id;
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
    this.onRegenerate = onRegenerate;
    this.onContinue = onContinue;
    this.onSelect = onSelect;
    this.message = null; // the stored reply's id, from its start frame
    this.settings = null; // what produced it, from the stored message
    this.siblings = [];
    this.locked = false; // true while something streams: no regenerate or branch switch
    this.isLeaf = false; // the stored reply is the current branch's last message
    this.continuing = false; // a `continue` was sent and its `start` has not arrived yet
    this.previousFinish = null; // how the reply had ended before a `continue`, restored if it is refused
    this.continueRefused = false; // the engine cannot continue replies: no Continue action
    this.rebuildAnswer = false; // the answer was rendered whole; the next streaming render starts afresh
    this.actionsDirty = false;

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

  /** A stored reply, drawn finished (or as far as it got). */
  static stored(message, prompt, hooks, images) {
    const turn = new AssistantTurn(null, prompt, hooks, images);
    turn.bind(message.id);
    turn.hasStarted = true;
    turn.settings = message.settings;
    turn.el.dataset.state = "done";
    turn.el.dataset.finish = message.finish_reason ?? "";
    turn.el.setAttribute("aria-busy", "false");
    if (message.thinking) {
      turn.thinking = new ThinkingBlock();
      turn.el.prepend(turn.thinking.el);
      turn.thinking.append(message.thinking);
      turn.thinking.finish(message.stats ?? { thinking_ms: 0 });
      turn.thinking.collapse = true;
    }
    turn.answer = message.content;
    turn.answerDirty = message.content !== "";
    turn.stats = message.stats;
    turn.statsDirty = true;
    if (message.stats?.dropped_turns) turn.addNote("context", droppedNote(message.stats.dropped_turns));
    addEndNote(turn, message.finish_reason, message.stats?.error);
    turn.actionsDirty = true;
    schedule(turn);
    return turn;
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
    this.rebuildAnswer = true;
  }

  /** A thinking delta; `rounds` are the verify rounds that ended within it. */
  addThinking(text, rounds) {
    if (!this.active) return;
    this.strip.add(rounds);
    this.started();
    if (!this.thinking) {
      this.thinking = new ThinkingBlock();
      this.el.prepend(this.thinking.el);
    } else if (!this.thinking.live) {
      this.thinking.resume(); // a continued reply thinks on in the same block
    }
    this.thinking.append(text);
    schedule(this);
  }

  /** An answer delta; `spans` are its character ranges that came from accepted drafts. */
  addAnswer(text, rounds, spans) {
    if (!this.active) return;
    this.started();
    if (this.thinking?.live) this.thinking.answerStarted();
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
    if (this.thinking) this.thinking.finish(frame.stats);
    this.answerDirty = this.answer !== "";
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
      if (this.thinking) this.thinking.finish(this.stats);
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
    if (this.thinking) this.thinking.finish(null);
    this.answerDirty = this.answer !== "";
    this.addNote("interrupted", "Interrupted: the connection dropped before the reply finished.");
    this.statsDirty = true;
    this.actionsDirty = true;
  }

  addNote(kind, text, code, action) {
    this.notes.push({ kind, text, code, action });
    schedule(this);
  }

  flush() {
    if (this.thinking) this.thinking.flush();
    const rendered = this.answerDirty;
    if (this.answerDirty) {
      if (this.active && this.rebuildAnswer) {
        // A continued reply was rendered whole: streaming renders rebuild it once, then go on by block.
        this.answerEl.replaceChildren();
        this.answerView = new MarkdownView(this.answerEl);
        this.rebuildAnswer = false;
      }
      if (this.active) this.answerView.update(this.answer);
      else this.answerView.render(this.answer);
      this.answerDirty = false;
    }
    this.tint.apply(rendered);
    const produced = this.active ? null : producedLine(this.settings);
    if (this.statsDirty && (this.stats || produced)) {
      const line = produced && { text: produced, title: producedTitle(this.settings) };
      renderStats(this.statsEl, this.stats ?? {}, this.active, line);
    }
    this.statsDirty = false;
    while (this.notes.length) this.notesEl.append(noteElement(this.notes.shift()));
    this.el.setAttribute("aria-busy", String(this.active));
    if (!this.active && this.actionsDirty) renderTurnActions(this);
    this.actionsDirty = false;
  }

  /** The reply's element is leaving the page. */
  dispose() {
    this.tint.dispose();
  }
}
