// The message log: user messages, assistant turns, and following the newest text.

import { handleCodeCopy } from "@app/markdown.js";
import { afterEachFlush } from "@app/render.js";
import { AssistantTurn } from "@app/turn.js";

// How close to the bottom (px) still counts as "reading the newest text".
const STICK_PX = 48;

export class Conversation {
  /**
   * @param {HTMLElement} log the scrolling container
   * @param {(text: string) => void} onResend
   */
  constructor(log, onResend) {
    this.log = log;
    this.list = log.querySelector(".messages");
    this.emptyState = log.querySelector(".empty-state");
    this.onResend = onResend;
    this.turns = new Map();
    // Updated only by scrolling, so growing content never unsticks a reader at the bottom,
    // and scrolling up by even a little lets them read in peace.
    this.stick = true;
    log.addEventListener("scroll", () => {
      this.stick = log.scrollHeight - log.scrollTop - log.clientHeight <= STICK_PX;
    }, { passive: true });
    afterEachFlush(() => this.follow());
    handleCodeCopy(this.list);
  }

  addUser(id, text) {
    this.emptyState.hidden = true;
    const msg = document.createElement("article");
    msg.className = "msg user";
    msg.dataset.id = id;
    msg.setAttribute("aria-label", "Your message");
    const bubble = document.createElement("div");
    bubble.className = "bubble";
    bubble.textContent = text;
    msg.append(bubble);
    this.list.append(msg);
  }

  /** Start the reply to chat `id`; sending always scrolls to it. */
  startTurn(id, prompt) {
    const turn = new AssistantTurn(id, prompt, this.onResend);
    this.turns.set(id, turn);
    this.list.append(turn.el);
    this.stick = true;
    this.follow();
    return turn;
  }

  turn(id) {
    return this.turns.get(id);
  }

  /** A resumed conversation replays a reply from its start: a fresh turn takes the old one's place. */
  restartTurn(id) {
    const old = this.turns.get(id);
    const turn = new AssistantTurn(id, old.prompt, this.onResend);
    old.el.replaceWith(turn.el);
    this.turns.set(id, turn);
    return turn;
  }

  get empty() {
    return this.turns.size === 0;
  }

  /** A line about the session itself (e.g. a reconnect), between messages. */
  note(text) {
    const note = document.createElement("p");
    note.className = "log-note";
    note.setAttribute("role", "status");
    note.textContent = text;
    this.list.append(note);
    this.follow();
  }

  clear() {
    this.turns.clear();
    this.list.replaceChildren(this.emptyState);
    this.emptyState.hidden = false;
    this.stick = true;
  }

  follow() {
    if (this.stick) this.log.scrollTop = this.log.scrollHeight;
  }
}
