// The message log: user messages, assistant turns, races and sweeps, and following the newest text.

import { clearTints } from "@app/drafted-tint.js";
import { handleCodeCopy } from "@app/markdown.js";
import { afterEachFlush } from "@app/render.js";
import { AssistantTurn } from "@app/turn.js";
import { UserMessage } from "@app/user-message.js";

// How close to the bottom (px) still counts as "reading the newest text".
const STICK_PX = 48;

export class Conversation {
  /**
   * @param {HTMLElement} log the scrolling container
   * @param {HTMLButtonElement} jump "Jump to latest", shown while the reader is scrolled up during a reply
   * @param {{onResend: (text: string, images: string[]) => void, onRace: (message: UserMessage) => void,
   *          judge: (stats: object) => object|null,
   *          onEdit: (message: UserMessage, text: string, images: string[]) => boolean,
   *          onRegenerate: (turn: AssistantTurn) => void, onContinue: (turn: AssistantTurn) => void,
   *          onSelect: (id: string) => void, onApprove: (call: string, decision: string) => boolean,
   *          streaming: () => boolean}} hooks `onRace` races a past
   *   message again; `judge` is handed to each reply (see AssistantTurn); `onEdit`, `onRegenerate`
   *   and `onSelect` make and switch branches; `onContinue` goes on with an unfinished reply; `onApprove` sends
   *   the user's decision on a tool call.
   */
  constructor(log, jump,
    { onResend, onRace, judge, onEdit, onRegenerate, onContinue, onSelect, onApprove, streaming }) {
    this.log = log;
    this.jump = jump;
    this.list = log.querySelector(".messages");
    this.emptyState = log.querySelector(".empty-state");
    this.turnHooks = { onResend, judge, onRegenerate, onContinue, onSelect, onApprove };
    this.userHooks = { onEdit, onRace, onSelect };
    this.streaming = streaming;
    this.turns = new Map(); // assistant turns by chat request id
    this.users = new Map(); // user messages by chat request id
    this.byMessage = new Map(); // user messages and turns by stored message id
    this.items = new Map(); // races and sweeps by id
    this.locked = false;
    // Updated only by scrolling, so growing content never unsticks a reader at the bottom,
    // and scrolling up by even a little lets them read in peace.
    this.stick = true;
    log.addEventListener("scroll", () => {
      this.stick = log.scrollHeight - log.scrollTop - log.clientHeight <= STICK_PX;
      this.showJump();
    }, { passive: true });
    jump.addEventListener("click", () => {
      this.stick = true;
      this.follow();
      this.showJump();
    });
    afterEachFlush(() => {
      this.follow();
      this.showJump();
    });
    handleCodeCopy(this.list);
  }

  /**
   * The user's message, its text and its images' attachment ids; `id` is the chat request that sends it (null
   * for a stored one).
   */
  addUser(id, text, images, stored = null) {
    this.emptyState.hidden = true;
    const message = new UserMessage(id, text, images, this.userHooks);
    if (id) this.users.set(id, message);
    if (stored) this.bind(message, stored.id, stored.parent);
    message.locked = this.locked;
    this.list.append(message.el);
    return message;
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

  /** A race or sweep drawn again in place of `message`, the stored reply it writes to (a reloaded page). */
  adoptItem(view, message) {
    const stored = message ? this.byMessage.get(message) : undefined;
    if (!stored) return this.addItem(view);
    stored.el.replaceWith(view.el);
    this.forget(stored.el);
    this.items.set(view.id, view);
    this.follow();
    return view;
  }

  item(id) {
    return this.items.get(id);
  }

  /** Start the reply to chat `id` (its text and images); sending always scrolls to it. */
  startTurn(id, prompt, images = []) {
    this.emptyState.hidden = true;
    const turn = new AssistantTurn(id, prompt, this.turnHooks, images);
    this.turns.set(id, turn);
    this.list.append(turn.el);
    this.stick = true;
    this.follow();
    return turn;
  }

  /** Stream `continue` request `id` into `turn`, the reply it goes on with; it is followed like a new one. */
  continueTurn(turn, id) {
    turn.resume(id);
    this.turns.set(id, turn);
    this.stick = true;
    this.follow();
    return turn;
  }

  /** The reply a frame belongs to: by its stored message, else by the request that started it. */
  turnFor(frame) {
    const found = frame.message ? this.byMessage.get(frame.message) : undefined;
    if (found instanceof AssistantTurn) return found;
    return frame.id == null ? undefined : this.turns.get(frame.id);
  }

  turn(id) {
    return this.turns.get(id);
  }

  /** A reply's `start`: the stored ids of the reply and of the user message it answers. */
  started(turn, frame) {
    if (turn && frame.message) this.bind(turn, frame.message);
    const user = frame.id == null ? undefined : this.users.get(frame.id);
    if (user && frame.parent && !user.message) this.bind(user, frame.parent, user.parent);
  }

  bind(view, message, parent) {
    view.bind(message, parent);
    this.byMessage.set(message, view);
  }

  /** Set the parent a user message was sent after (known when sending, before its id is). */
  sentAfter(id, parent) {
    const user = this.users.get(id);
    if (user) user.parent = parent;
  }

  /** A resumed conversation replays a reply from its start: a fresh turn takes the old one's place. */
  restartTurn(old, id) {
    const turn = new AssistantTurn(id ?? old.id, old.prompt, this.turnHooks, old.images);
    old.dispose();
    old.el.replaceWith(turn.el);
    if (turn.id) this.turns.set(turn.id, turn);
    if (old.message) this.bind(turn, old.message);
    return turn;
  }

  /** Draw a stored conversation's current branch in place of what is shown. */
  showBranch(tree) {
    const top = this.log.scrollTop;
    const keep = !this.empty && !this.stick;
    this.clear();
    let prompt = "";
    let images = [];
    for (const message of tree.branch()) {
      this.emptyState.hidden = true;
      if (message.role === "user") {
        prompt = message.content;
        images = message.images ?? [];
        this.addUser(null, message.content, images, message);
      } else {
        const turn = AssistantTurn.stored(message, prompt, this.turnHooks, images);
        this.byMessage.set(message.id, turn);
        this.list.append(turn.el);
      }
    }
    this.update(tree, this.locked);
    if (keep) {
      this.stick = false;
      this.log.scrollTop = top;
    } else {
      this.follow();
    }
  }

  /** Remove `view` and everything after it (an edit or regenerate replaces that part of the branch). */
  truncateFrom(view) {
    let el = view.el;
    while (el) {
      const next = el.nextElementSibling;
      this.forget(el);
      el.remove();
      el = next;
    }
  }

  forget(el) {
    for (const map of [this.turns, this.users, this.byMessage, this.items]) {
      for (const [key, view] of map) {
        if (view.el === el) {
          view.dispose();
          map.delete(key);
        }
      }
    }
  }

  /** The tree changed or a reply started or ended: refresh arrows, what produced each reply, and locks. */
  update(tree, locked) {
    this.locked = locked;
    const views = new Set([...this.byMessage.values(), ...this.users.values(), ...this.turns.values()]);
    for (const view of views) view.update(tree, locked);
  }

  get empty() {
    return this.turns.size === 0 && this.items.size === 0 && this.byMessage.size === 0 && this.users.size === 0;
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
    const views = new Set([...this.turns.values(), ...this.items.values(), ...this.byMessage.values()]);
    for (const view of views) view.dispose();
    clearTints();
    this.turns.clear();
    this.users.clear();
    this.byMessage.clear();
    this.items.clear();
    this.list.replaceChildren(this.emptyState);
    this.emptyState.hidden = false;
    this.stick = true;
    this.showJump();
  }

  follow() {
    if (this.stick) this.log.scrollTop = this.log.scrollHeight;
  }

  showJump() {
    this.jump.hidden = this.stick || !this.streaming();
  }
}
