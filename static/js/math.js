// LaTeX in model text: `$…$` and `\(…\)` inline, `$$…$$` and `\[…\]` displayed, rendered with KaTeX.
//
// A formula is only recognised once it is closed, so one still streaming stays text. A single `$` follows
// the usual rule that keeps prices out: no whitespace just inside either `$`, no `$` in between, and the
// closing `$` is not followed by a digit ("$5 and $10" is text).

import katex from "katex";
import { MATH_STYLE, sanitize } from "@app/sanitize.js";

// Tried in this order at a position; group 1 is the TeX.
const DELIMITERS = [
  { re: /\$\$([\s\S]+?)\$\$/y, display: true },
  { re: /\\\[([\s\S]+?)\\\]/y, display: true },
  { re: /\\\(([\s\S]+?)\\\)/y, display: false },
  { re: /\$(?![\s$])([^$]*?[^\s\\$])\$(?!\d)/y, display: false },
];
// Where a formula may start: an unescaped `$`, `\(` or `\[`.
const OPENER = /(?<!\\)\$|\\[([]/g;

/** The formula that starts exactly at `pos` in `text`: {start, end, tex, display}, or null. */
export function mathAt(text, pos) {
  for (const { re, display } of DELIMITERS) {
    re.lastIndex = pos;
    const found = re.exec(text);
    // Inline math stays within a paragraph; display math needs something in it.
    if (!found || !found[1].trim() || (!display && /\n\s*\n/.test(found[1]))) continue;
    return { start: pos, end: re.lastIndex, tex: found[1], display };
  }
  return null;
}

/** The first closed formula at or after `from`, or null. */
export function nextMath(text, from = 0) {
  OPENER.lastIndex = from;
  for (let opener = OPENER.exec(text); opener; opener = OPENER.exec(text)) {
    const math = mathAt(text, opener.index);
    if (math) return math;
    OPENER.lastIndex = opener.index + 1;
  }
  return null;
}

/** KaTeX's HTML (with MathML for screen readers) for `tex`; bad or untrusted TeX shows its source in red. */
export function mathHtml(tex, display) {
  const html = katex.renderToString(tex, {
    displayMode: display, throwOnError: false, output: "htmlAndMathml", trust: false, strict: "ignore",
    maxExpand: 1000, maxSize: 50,
    // The theme's own error colour (KaTeX's default red is too faint on a dark background).
    errorColor: "var(--danger)",
  });
  // KaTeX escapes every attribute value and text, so ` style="` only ever opens one of its style attributes.
  return html.replaceAll(' style="', ` ${MATH_STYLE}="`);
}

/** marked extensions: display blocks on their own lines, and formulas inside text. */
export const mathExtensions = [
  {
    name: "mathBlock",
    level: "block",
    start: (src) => src.match(/^ {0,3}(?:\$\$|\\\[)/m)?.index,
    tokenizer(src) {
      const found = /^ {0,3}(?:\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\])[ \t]*(?:\n+|$)/.exec(src);
      const tex = found && (found[1] ?? found[2]);
      if (!tex?.trim()) return undefined;
      return { type: "mathBlock", raw: found[0], tex };
    },
    renderer: ({ tex }) => `<div class="math-block">${mathHtml(tex, true)}</div>`,
  },
  {
    name: "math",
    level: "inline",
    start: (src) => src.search(/(?<!\\)\$|\\[([]/),
    tokenizer(src) {
      const math = mathAt(src, 0);
      if (!math) return undefined;
      return { type: "math", raw: src.slice(0, math.end), tex: math.tex, display: math.display };
    },
    renderer: ({ tex, display }) => mathHtml(tex, display),
  },
];

/**
 * Plain text with its formulas rendered, appended to `element` as it grows: the text before the last
 * rendered formula is final, the rest is one text node that each `update` rewrites.
 */
export class MathText {
  constructor(element) {
    this.element = element;
    this.source = "";
    this.settled = 0; // source offset up to which nodes are final
    this.tail = document.createTextNode("");
    element.append(this.tail);
  }

  /**
   * Show `source` (which only grows). While `more` is true a formula that ends the text waits: the
   * character after a closing `$` decides whether it closed anything.
   */
  update(source, more) {
    this.source = source;
    for (let math = nextMath(source, this.settled); math; math = nextMath(source, this.settled)) {
      if (more && math.end >= source.length) break;
      this.tail.data = source.slice(this.settled, math.start);
      const formula = sanitize(mathHtml(math.tex, math.display));
      this.tail = document.createTextNode("");
      this.element.append(formula, this.tail);
      this.settled = math.end;
    }
    const rest = source.slice(this.settled);
    if (this.tail.data !== rest) this.tail.data = rest;
  }
}
