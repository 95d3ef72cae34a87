// The open conversation as the server stores it: drawn whole when a tab opens it, fetched again after each
// reply for what only the store knows (new branches, what produced each reply).

import { conversationPath, request } from "@app/api.js";

/**
 * `app` is what the page knows and has in flight (main.js); `page` the views, `locked` and `refresh` from
 * main.js, and `handle`, which hands a frame to its handler.
 */
export function storedConversation(app, { conversation, history, tree, locked, refresh, handle }) {
  /** Draw the stored conversation `id`, holding the socket's frames (a reply in flight) until it is drawn. */
  async function drawStored(id) {
    const token = ++app.drawToken;
    app.held ??= [];
    let data = null;
    let failure = null;
    try {
      data = await request(conversationPath(id));
    } catch (error) {
      // 404: not stored yet (no message sent), or deleted meanwhile: an empty conversation.
      if (error.status !== 404) failure = error;
    }
    if (token !== app.drawToken) return;
    const frames = app.held;
    app.held = null;
    if (data) {
      tree.load(data);
      app.leaf = data.current;
      conversation.showBranch(tree);
    }
    if (failure) conversation.note(`This conversation could not be loaded: ${failure.message}`);
    for (const frame of frames) handle(frame);
    history.render();
    refresh();
  }

  /** Fetch the open conversation's tree again (new branches, what produced each reply) and the list. */
  async function syncTree() {
    const id = app.conversationId;
    let data = null;
    try {
      data = await request(conversationPath(id));
    } catch (error) {
      // 404: not stored (a reply refused before it started), nothing to update; anything else is said here.
      if (error.status !== 404) conversation.note(`This conversation could not be refreshed: ${error.message}`);
    }
    if (data && id === app.conversationId) {
      tree.load(data);
      conversation.update(tree, locked());
    }
    history.refresh();
  }

  return { drawStored, syncTree };
}
