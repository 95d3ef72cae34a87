// A stored conversation's tree of messages (GET /api/conversations/<id>): its branches and siblings.

export class Tree {
  constructor() {
    this.clear();
  }

  clear() {
    this.id = null;
    this.current = null;
    this.messages = new Map(); // id → stored message, parents first
    this.children = new Map(); // parent id (null for first messages) → child ids, oldest first
  }

  /** Replace the whole tree with a conversation as the REST route returns it. */
  load(conversation) {
    this.clear();
    this.id = conversation.id;
    this.current = conversation.current;
    for (const message of conversation.messages) {
      this.messages.set(message.id, message);
      const siblings = this.children.get(message.parent) ?? [];
      siblings.push(message.id);
      this.children.set(message.parent, siblings);
    }
  }

  get(id) {
    return this.messages.get(id);
  }

  /** The messages from the first one down to `leaf` (default: the current leaf). */
  branch(leaf = this.current) {
    const path = [];
    for (let m = this.messages.get(leaf); m; m = this.messages.get(m.parent)) path.push(m);
    return path.reverse();
  }

  /** The ids of `id`'s message and its siblings (same parent), oldest first. */
  siblings(id) {
    const message = this.messages.get(id);
    return message ? this.children.get(message.parent) ?? [id] : [];
  }
}
