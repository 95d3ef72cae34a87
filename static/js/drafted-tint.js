// Opt-in tint of answer text whose tokens came from accepted drafts (deltas' `draft_spans`).
//
// The answer's DOM stays exactly what sanitized Markdown rendering made: the tint is a CSS Custom
// Highlight over ranges of its text nodes, so no markup is ever built from model text. The spans are
// offsets into the Markdown source; rendered text is mapped back to the source by walking both in order
// (rendered text is the source minus Markdown syntax), which is exact for everything the tint needs.

import { loadPref, savePref } from "@app/prefs.js";
import { schedule } from "@app/render.js";

const NAME = "drafted";
// How far ahead in the source a rendered character is looked for (syntax such as a link's URL is skipped).
const WINDOW = 512;

const supported = typeof CSS !== "undefined" && "highlights" in CSS && typeof Highlight === "function";
const highlight = supported ? new Highlight() : null;
const tints = new Set();
let enabled = false;

export const tintSupported = supported;

/** Turn the tint on or off for every answer on the page. */
export function setTintEnabled(on) {
  enabled = supported && on;
  if (!supported) return;
  if (enabled) {
    CSS.highlights.set(NAME, highlight);
    for (const tint of tints) {
      tint.stale = true;
      schedule(tint);
    }
  } else {
    CSS.highlights.delete(NAME);
    highlight.clear();
    for (const tint of tints) tint.ranges = [];
  }
}

/** Whether the tint is showing (tests and the settings checkbox read it). */
export function tintEnabled() {
  return enabled;
}

/**
 * Wire the settings checkbox: this browser's choice, kept in localStorage, off by default.
 * Where the browser cannot highlight text ranges the box is disabled and `hint` says why.
 */
export function bindTintToggle(checkbox, hint) {
  checkbox.checked = supported && Boolean(loadPref("tintDrafted", false));
  checkbox.disabled = !supported;
  if (!supported && hint) hint.textContent = "This browser cannot tint text ranges.";
  setTintEnabled(checkbox.checked);
  checkbox.addEventListener("change", () => {
    savePref("tintDrafted", checkbox.checked);
    setTintEnabled(checkbox.checked);
  });
}

/** Forget every answer's ranges, e.g. when the log is cleared. */
export function clearTints() {
  if (highlight) highlight.clear();
  tints.clear();
}

/** The drafted ranges of one answer. */
export class DraftTint {
  /**
   * @param {HTMLElement} element the answer's rendered Markdown
   * @param {() => string} source the Markdown it was rendered from
   */
  constructor(element, source) {
    this.element = element;
    this.source = source;
    this.spans = []; // [start, end) in the answer's source, merged, in order
    this.ranges = [];
    this.stale = false;
    tints.add(this);
  }

  /** `spans` of a delta whose text starts at `offset` in the answer's source. */
  add(offset, spans) {
    if (!Array.isArray(spans)) return;
    for (const span of spans) {
      if (!Array.isArray(span) || span.length !== 2) continue;
      const start = offset + span[0];
      const end = offset + span[1];
      if (!(end > start)) continue;
      const last = this.spans[this.spans.length - 1];
      if (last && start <= last[1]) last[1] = Math.max(last[1], end);
      else this.spans.push([start, end]);
    }
    this.stale = true;
  }

  /** The tint was switched on: tint what is already on the page. */
  flush() {
    this.apply(false);
  }

  /** Stop tinting this answer for good (its element left the page). */
  dispose() {
    this.clear();
    tints.delete(this);
  }

  clear() {
    this.spans = [];
    this.drop();
    this.stale = false;
  }

  drop() {
    if (highlight) for (const range of this.ranges) highlight.delete(range);
    this.ranges = [];
  }

  /** Call after the answer was (re)rendered, in the same frame. */
  apply(rerendered) {
    if (!enabled || (!this.stale && !rerendered)) return;
    this.stale = false;
    this.drop();
    if (this.spans.length === 0) return;
    this.ranges = draftedRanges(this.element, this.source(), this.spans);
    for (const range of this.ranges) highlight.add(range);
  }
}

/** Ranges of `root`'s text whose characters map into `spans` of `source`. */
function draftedRanges(root, source, spans) {
  const ranges = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    // A code block's language label and Copy button are not part of the source.
    acceptNode: (node) => (node.parentElement?.closest(".code-head") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  let at = 0; // next unmatched source index
  let span = 0;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.data;
    let open = -1;
    for (let i = 0; i < text.length; i++) {
      const found = source.indexOf(text[i], at);
      let drafted = false;
      if (found !== -1 && found - at <= WINDOW) {
        at = found + 1;
        while (span < spans.length && spans[span][1] <= found) span += 1;
        drafted = span < spans.length && spans[span][0] <= found;
      }
      if (drafted && open === -1) open = i;
      else if (!drafted && open !== -1) {
        ranges.push(rangeOf(node, open, i));
        open = -1;
      }
    }
    if (open !== -1) ranges.push(rangeOf(node, open, text.length));
  }
  return ranges;
}

function rangeOf(node, start, end) {
  // Static ranges cost nothing as the DOM changes; a re-render recomputes them anyway.
  return new StaticRange({ startContainer: node, startOffset: start, endContainer: node, endOffset: end });
}
