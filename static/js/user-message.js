// One message of the user's: its images and text, and copy, edit & resend, race again and branch arrows.

import { attachmentUrl } from "@app/attachments.js";
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

/** One of a message's images, served by the server, named by its place among them. */
function image(id, index, count) {
  const img = document.createElement("img");
  img.src = attachmentUrl(id);
  img.alt = count > 1 ? `Attached image ${index + 1} of ${count}` : "Attached image";
  return img;
}

/** An image of a message as a thumbnail, a button that shows it large (lightbox.js). */
function thumbnail(id, index, count) {
  const open = document.createElement("button");
  open.type = "button";
  open.className = "msg-image";
  const img = image(id, index, count);
  open.setAttribute("aria-label", `Show ${img.alt.toLowerCase()} large`);
  open.append(img);
  return open;
}

/** A message's images (attachment ids) as thumbnails, or null when it has none. */
function imageStrip(ids) {
  if (!ids.length) return null;
  const strip = document.createElement("div");
  strip.className = "msg-images";
  strip.append(...ids.map((id, i) => thumbnail(id, i, ids.length)));
  return strip;
}

export class UserMessage {
  /**
   * @param {string|null} id the chat request that sent it (null for a stored one)
   * @param {string} text
   * @param {string[]} images the ids of its attached images, in order
   * @param {{onEdit: (message: UserMessage, text: string, images: string[]) => boolean,
   *          onRace: (message: UserMessage) => void, onSelect: (id: string) => void}} hooks `onEdit` sends
   *   the edit (its text and the images kept) as a new branch; false when it could not go out (the editor
   *   stays open). `onRace` races this message again.
   */
  constructor(id, text, images, hooks) {
    this.id = id;
    this.text = text;
    this.images = images;
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
    this.bubble.hidden = text === ""; // a message of images only
    this.imagesEl = imageStrip(images);
    this.actionsEl = document.createElement("div");
    this.actionsEl.className = "msg-actions";
    if (this.imagesEl) this.el.append(this.imagesEl);
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
    if (this.text) {
      const copy = button("Copy", "Copy message", () => copyText(copy, this.text, this.bubble));
      items.push(copy);
    }
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

  /**
   * The images an edit sends, each with a button that leaves it out; `kept` is changed in place.
   * Null when the message has none.
   */
  editImages(kept) {
    if (!kept.length) return null;
    const list = document.createElement("ul");
    list.className = "attach-tray edit-images";
    list.setAttribute("aria-label", "Images sent with the edit");
    const count = kept.length;
    for (const [i, id] of kept.entries()) {
      const li = document.createElement("li");
      li.className = "attach-item";
      const img = image(id, i, count);
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "attach-remove";
      remove.textContent = "×";
      remove.title = "Leave this image out of the edit";
      remove.setAttribute("aria-label", `Leave ${img.alt.toLowerCase()} out of the edit`);
      remove.addEventListener("click", () => {
        kept.splice(kept.indexOf(id), 1);
        const next = li.nextElementSibling ?? li.previousElementSibling;
        li.remove();
        (next?.querySelector("button") ?? list.closest("form").querySelector("textarea")).focus();
        if (!kept.length) list.remove();
      });
      li.append(img, remove);
      list.append(li);
    }
    return list;
  }

  /** Swap the bubble for an editor; sending the edit starts a new branch beside this message. */
  edit() {
    const kept = [...this.images];
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
    const images = this.editImages(kept);
    if (images) form.append(images);
    form.append(field, error, row);
    const close = () => {
      if (this.imagesEl) this.imagesEl.hidden = false;
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
      if (text.trim() === "" && !kept.length) return;
      if (!this.hooks.onEdit(this, text, [...kept])) {
        error.textContent = "The edit could not be sent now: wait for the reply to finish, or for the connection.";
        error.hidden = false;
      }
    });
    this.editor = form;
    this.actionsEl.replaceChildren();
    if (this.imagesEl) this.imagesEl.hidden = true; // the editor shows them, each with its remove button
    this.bubble.replaceWith(form);
    field.focus();
    field.setSelectionRange(field.value.length, field.value.length);
  }

  dispose() {}
}
