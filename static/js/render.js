// Per-frame rendering. Deltas can arrive much faster than the screen refreshes,
// and re-parsing Markdown per delta is wasted work, so views only mark themselves
// dirty here and each dirty view renders at most once per animation frame.

const dirty = new Set();
const afterFlush = [];
let frame = 0;

/** Ask for `view.flush()` to run on the next animation frame (once, however often asked). */
export function schedule(view) {
  dirty.add(view);
  if (!frame) frame = requestAnimationFrame(flush);
}

/** Run `fn` after every frame's flushes, e.g. to keep the log scrolled once per frame. */
export function afterEachFlush(fn) {
  afterFlush.push(fn);
}

function flush() {
  frame = 0;
  const views = [...dirty];
  dirty.clear();
  for (const view of views) view.flush();
  for (const fn of afterFlush) fn();
}
