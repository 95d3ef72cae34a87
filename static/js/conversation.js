// The message log: user messages, assistant turns, races and sweeps, and following the newest text.

import { clearTints } from "@app/drafted-tint.js";
import { handleCodeCopy } from "@app/markdown.js";
import { afterEachFlush } from "@app/render.js";
import { AssistantTurn } from "@app/turn.js";

// How close to the bottom (px) still counts as "reading the newest text".
const STICK_PX = 48;

export class Conversation {
  /**
   * @param {HTMLElement} log the scrolling container
   * @param {{onResend: (text: string) => void, onRace: (text: string) => void,
   *          judge: (stats: object) => object|null}} hooks `onRace` races a past message's text again;
   *   `judge` is handed to each reply (see AssistantTurn).
   */
  constructor(log, { onResend, onRace, judge }) {
    this.log = log;
    this.list = log.querySelector(".messages");
    this.emptyState = log.querySelector(".empty-state");
    this.turnHooks = { onResend, judge };
    this.onRace = onRace;
    this.turns = new Map();
    this.items = new Map(); // races and sweeps by id
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
    const race = document.createElement("button");
    race.type = "button";
    race.className = "link-button race-again";
    race.textContent = "Race";
    race.title = "Run this prompt with the drafter off and on, side by side";
    race.setAttribute("aria-label", "Re-race this prompt");
    race.addEventListener("click", () => this.onRace(text));
    const actions = document.createElement("div");
    actions.className = "msg-actions";
    actions.append(race);
    msg.append(bubble, actions);
    this.list.append(msg);
  }

  /** Add a race or sweep view (anything with `id`, `el` and `dispose()`); it is followed like a reply. */
  addItem(view) {
    this.emptyState.hidden = true;
    this.items.set(view.id, view);
    this.list.append(view.el);
    this.stick = true;
    this.follow();
    return view;
  }

  item(id) {
    return this.items.get(id);
  }

  /** Start the reply to chat `id`; sending always scrolls to it. */
  startTurn(id, prompt) {
    const turn = new AssistantTurn(id, prompt, this.turnHooks);
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
    const turn = new AssistantTurn(id, old.prompt, this.turnHooks);
    old.dispose();
    old.el.replaceWith(turn.el);
    this.turns.set(id, turn);
    return turn;
  }

  get empty() {
    return this.turns.size === 0 && this.items.size === 0;
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
    for (const view of [...this.turns.values(), ...this.items.values()]) view.dispose();
    clearTints();
    this.turns.clear();
    this.items.clear();
    this.list.replaceChildren(this.emptyState);
    this.emptyState.hidden = false;
    this.stick = true;
  }

  follow() {
    if (this.stick) this.log.scrollTop = this.log.scrollHeight;
  }
}
