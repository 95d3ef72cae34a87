// One message of the user's: its text, and copy, edit & resend, race again and branch arrows.

import { branchNav } from "@app/branch-nav.js";
import { copyText } from "@app/clipboard.js";

function button(text, label, onClick) {
  const el = document.createElement("button");
  el.type = "button";
  el.className = "link-button";
  el.textContent = text;
  el.setAttribute("aria-label", label);
  el.addEventListener("click", onClick);
  return el;
}

export class UserMessage {
  /**
   * @param {string|null} id the chat request that sent it (null for a stored one)
   * @param {string} text
   * @param {{onEdit: (message: UserMessage, text: string) => boolean, onRace: (message: UserMessage) => void,
   *          onSelect: (id: string) => void}} hooks `onEdit` sends the edit as a new branch; false when
   *   it could not go out (the editor stays open). `onRace` races this message again.
   */
  constructor(id, text, hooks) {
    this.id = id;
    this.text = text;
    this.hooks = hooks;
    this.message = null; // the stored message's id, once known
    this.parent = undefined; // its parent (null for a first message), once known
    this.el = document.createElement("article");
    this.el.className = "msg user";
    if (id) this.el.dataset.id = id;
    this.el.setAttribute("aria-label", "Your message");
    this.bubble = document.createElement("div");
    this.bubble.className = "bubble";
    this.bubble.textContent = text;
    this.actionsEl = document.createElement("div");
    this.actionsEl.className = "msg-actions";
    this.el.append(this.bubble, this.actionsEl);
    this.siblings = [];
    this.locked = false;
    this.renderActions();
  }

  /** The stored message this is, and its parent. */
  bind(message, parent) {
    this.message = message;
    this.parent = parent;
    this.el.dataset.message = message;
    this.renderActions();
  }

  /** Refresh what depends on the tree (the arrows) and whether actions may start something now. */
  update(tree, locked) {
    this.siblings = this.message ? tree.siblings(this.message) : [];
    this.locked = locked;
    this.renderActions();
  }

  renderActions() {
    if (this.editor) return;
    const items = [];
    const nav = this.message && branchNav(this.message, this.siblings, "message", this.hooks.onSelect, this.locked);
    if (nav) items.push(nav);
    const copy = button("Copy", "Copy message", () => copyText(copy, this.text, this.bubble));
    items.push(copy);
    if (this.message && this.parent !== undefined) {
      const edit = button("Edit", "Edit message", () => this.edit());
      edit.disabled = this.locked;
      items.push(edit);
    }
    const race = button("Race", "Re-race this prompt", () => this.hooks.onRace(this));
    race.classList.add("race-again");
    race.title = "Run this prompt with the drafter off and on, side by side";
    race.disabled = this.locked;
    items.push(race);
    this.actionsEl.replaceChildren(...items);
  }

  /** Swap the bubble for an editor; sending the edit starts a new branch beside this message. */
  edit() {
    const form = document.createElement("form");
    form.className = "edit-form";
    const field = document.createElement("textarea");
    field.className = "edit-text";
    field.value = this.text;
    field.rows = Math.min(12, this.text.split("\n").length + 1);
    field.setAttribute("aria-label", "Edited message");
    const send = document.createElement("button");
    send.type = "submit";
    send.className = "button primary small";
    send.textContent = "Send edit";
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.className = "button small";
    cancel.textContent = "Cancel";
    const error = document.createElement("p");
    error.className = "edit-error";
    error.setAttribute("role", "alert");
    error.hidden = true;
    const row = document.createElement("div");
    row.className = "edit-actions";
    row.append(cancel, send);
    form.append(field, error, row);
    const close = () => {
      form.replaceWith(this.bubble);
      this.editor = null;
      this.renderActions();
    };
    cancel.addEventListener("click", close);
    field.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault(); // not also a Stop
        close();
      } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = field.value;
      if (text.trim() === "") return;
      if (!this.hooks.onEdit(this, text)) {
        error.textContent = "The edit could not be sent now: wait for the reply to finish, or for the connection.";
        error.hidden = false;
      }
    });
    this.editor = form;
    this.actionsEl.replaceChildren();
    this.bubble.replaceWith(form);
    field.focus();
    field.setSelectionRange(field.value.length, field.value.length);
  }

  dispose() {}
}
