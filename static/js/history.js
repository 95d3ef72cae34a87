// The sidebar of stored conversations: grouped by day, searchable, renamed and deleted (with undo) in place,
// plus export of the open one and import of an export.

import { conversationPath, request } from "@app/api.js";

const UNDO_MS = 6000;
const SEARCH_DELAY_MS = 200;
const LIST_LIMIT = 200;
const DAY_MS = 24 * 60 * 60 * 1000;

/** "Today", "Yesterday", "Previous 7 days" or "Older", by the reader's own calendar. */
export function groupOf(updatedAt, now = new Date()) {
  const midnight = new Date(now.getFullYear(), now.getMonth(), now.getDate()).getTime();
  const t = new Date(updatedAt).getTime();
  if (t >= midnight) return "Today";
  if (t >= midnight - DAY_MS) return "Yesterday";
  if (t >= midnight - 7 * DAY_MS) return "Previous 7 days";
  return "Older";
}

const GROUPS = ["Today", "Yesterday", "Previous 7 days", "Older"];

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text != null) node.textContent = text;
  return node;
}

export class History {
  /**
   * @param {{root: HTMLElement, onOpen: (id: string) => void, onLeave: (id: string) => void,
   *          current: () => string|null}} options `onOpen` opens a conversation in this tab;
   *   `onLeave` is called when the open conversation is being deleted (the tab moves to a new one).
   */
  constructor({ root, onOpen, onLeave, current }) {
    this.root = root;
    this.list = root.querySelector("#history-list");
    this.search = root.querySelector("#history-search");
    this.error = root.querySelector("#history-error");
    this.undoBar = root.querySelector("#history-undo");
    this.exportJson = root.querySelector("#export-json");
    this.exportMarkdown = root.querySelector("#export-markdown");
    this.importButton = root.querySelector("#import");
    this.importFile = root.querySelector("#import-file");
    this.onOpen = onOpen;
    this.onLeave = onLeave;
    this.current = current;
    this.items = [];
    this.pending = null; // {item, timer, wasOpen}: a delete waiting out its undo
    this.searchTimer = 0;
    this.generation = 0;

    this.search.addEventListener("input", () => {
      clearTimeout(this.searchTimer);
      this.searchTimer = setTimeout(() => this.refresh(), SEARCH_DELAY_MS);
    });
    this.search.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.search.value) {
        event.preventDefault();
        this.search.value = "";
        this.refresh();
      }
    });
    this.undoBar.querySelector("button").addEventListener("click", () => this.undo());
    this.importButton.addEventListener("click", () => this.importFile.click());
    this.importFile.addEventListener("change", () => this.importChosen());
    // A delete still waiting for its undo is carried out when the page goes away.
    addEventListener("pagehide", () => this.commit(true));
  }

  showError(text) {
    this.error.textContent = text ?? "";
    this.error.hidden = !text;
  }

  /** Fetch the list again (with the search box's words) and draw it. */
  async refresh() {
    const generation = ++this.generation;
    const q = this.search.value.trim();
    const query = new URLSearchParams({ limit: String(LIST_LIMIT) });
    if (q) query.set("q", q);
    try {
      const data = await request(`/api/conversations?${query}`);
      if (generation !== this.generation) return;
      this.items = data.conversations;
      this.showError(null);
      this.render();
    } catch (error) {
      if (generation === this.generation) this.showError(`The conversation list could not be loaded: ${error.message}`);
    }
  }

  render() {
    const open = this.current();
    const shown = this.items.filter((item) => item.id !== this.pending?.item.id);
    this.list.setAttribute("aria-busy", "false");
    if (shown.length === 0) {
      const empty = el("p", "history-empty", this.search.value.trim() ? "No conversation matches." : "No conversations yet.");
      this.list.replaceChildren(empty);
    } else {
      const now = new Date();
      const sections = [];
      for (const group of GROUPS) {
        const members = shown.filter((item) => groupOf(item.updated_at, now) === group);
        if (members.length === 0) continue;
        const section = el("section", "history-group");
        section.dataset.group = group;
        const heading = el("h3", "history-heading", group);
        heading.id = `history-${group.toLowerCase().replace(/\W+/g, "-")}`;
        section.setAttribute("aria-labelledby", heading.id);
        const ul = el("ul", "history-items");
        for (const item of members) ul.append(this.renderItem(item, item.id === open));
        section.append(heading, ul);
        sections.push(section);
      }
      this.list.replaceChildren(...sections);
    }
    this.renderExports();
  }

  renderItem(item, isOpen) {
    const li = el("li", "history-item");
    li.dataset.id = item.id;
    const title = item.title || "Untitled";
    const link = el("a", "history-link", title);
    link.href = `/?c=${encodeURIComponent(item.id)}`;
    link.title = title;
    if (isOpen) link.setAttribute("aria-current", "page");
    link.addEventListener("click", (event) => {
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      event.preventDefault();
      this.onOpen(item.id);
    });
    const rename = el("button", "link-button history-action", "Rename");
    rename.type = "button";
    rename.setAttribute("aria-label", `Rename “${title}”`);
    rename.addEventListener("click", () => this.rename(li, item));
    const remove = el("button", "link-button history-action", "Delete");
    remove.type = "button";
    remove.setAttribute("aria-label", `Delete “${title}”`);
    remove.addEventListener("click", () => this.remove(item));
    const actions = el("span", "history-actions");
    actions.append(rename, remove);
    li.append(link, actions);
    return li;
  }

  /** Edit the title in place: Enter saves, Escape puts the old one back. */
  rename(li, item) {
    const input = el("input", "history-rename");
    input.type = "text";
    input.value = item.title;
    input.maxLength = 200;
    input.setAttribute("aria-label", `New title for “${item.title}”`);
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      if (save && title && title !== item.title) {
        try {
          await request(conversationPath(item.id), { method: "PATCH", body: { title } });
          this.showError(null);
        } catch (error) {
          this.showError(`Could not rename “${item.title}”: ${error.message}`);
        }
      }
      await this.refresh();
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        finish(true);
      } else if (event.key === "Escape") {
        event.preventDefault(); // not also a Stop or a drawer closing
        finish(false);
      }
    });
    input.addEventListener("blur", () => finish(true));
    li.replaceChildren(input);
    input.focus();
    input.select();
  }

  /** Hide the conversation now and delete it once the undo has run out. */
  remove(item) {
    this.commit();
    const wasOpen = item.id === this.current();
    if (wasOpen) this.onLeave(item.id);
    this.pending = { item, wasOpen, timer: setTimeout(() => this.commit(), UNDO_MS) };
    this.undoBar.querySelector(".history-undo-text").textContent = `Deleted “${item.title || "Untitled"}”.`;
    this.undoBar.hidden = false;
    this.render();
    this.undoBar.querySelector("button").focus();
  }

  undo() {
    const pending = this.pending;
    if (!pending) return;
    clearTimeout(pending.timer);
    this.pending = null;
    this.undoBar.hidden = true;
    this.render();
    if (pending.wasOpen) this.onOpen(pending.item.id);
  }

  /** Carry out a delete waiting for its undo (`leaving`: the page is going away). */
  async commit(leaving = false) {
    const pending = this.pending;
    if (!pending) return;
    clearTimeout(pending.timer);
    this.pending = null;
    this.undoBar.hidden = true;
    try {
      await request(conversationPath(pending.item.id), { method: "DELETE", keepalive: leaving });
    } catch (error) {
      if (!leaving) this.showError(`Could not delete “${pending.item.title}”: ${error.message}`);
    }
    if (!leaving) this.refresh();
  }

  /** Export links for the open conversation, shown once it is stored (it has a message). */
  renderExports() {
    const id = this.current();
    const stored = id !== null && this.items.some((item) => item.id === id);
    for (const [link, format] of [[this.exportJson, "json"], [this.exportMarkdown, "markdown"]]) {
      link.hidden = !stored;
      if (stored) link.href = `${conversationPath(id)}/export?format=${format}`;
    }
    this.root.querySelector("#export-none").hidden = stored;
  }

  async importChosen() {
    const file = this.importFile.files[0];
    this.importFile.value = "";
    if (!file) return;
    let body;
    try {
      body = JSON.parse(await file.text());
    } catch {
      this.showError(`Could not import ${file.name}: it is not JSON. Choose a file made by “Export JSON”.`);
      return;
    }
    try {
      const { id } = await request("/api/conversations/import", { method: "POST", body });
      this.showError(null);
      this.search.value = "";
      await this.refresh();
      this.onOpen(id);
    } catch (error) {
      this.showError(`Could not import ${file.name}: ${error.message}`);
    }
  }
}
