// Model answers as sanitized Markdown with highlighted code and KaTeX math.

import { Marked } from "marked";
import hljs from "highlight.js";
import { copyText } from "@app/clipboard.js";
import { mathExtensions } from "@app/math.js";
import { sanitize } from "@app/sanitize.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (ch) => ESCAPES[ch]);
}

const marked = new Marked({
  gfm: true,
  renderer: {
    // The model writes Markdown, not markup: HTML it emits is shown as the text it is.
    html({ text }) {
      return escapeHtml(text);
    },
    // The app works offline, so a remote image from model output is offered as a link
    // rather than fetched behind the user's back.
    image({ href, text }) {
      return `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`;
    },
    code({ text, lang }) {
      const language = (lang || "").trim().split(/\s+/)[0].toLowerCase();
      const known = language !== "" && hljs.getLanguage(language) !== undefined;
      const body = known ? hljs.highlight(text, { language, ignoreIllegals: true }).value : escapeHtml(text);
      const label = escapeHtml(language || "text");
      return (
        `<div class="code-block"><div class="code-head"><span class="code-lang">${label}</span>` +
        `<button type="button" class="code-copy" aria-label="Copy code">Copy</button></div>` +
        `<pre><code class="hljs">${body}</code></pre></div>`
      );
    },
  },
}, { extensions: mathExtensions });

/**
 * One message's rendered Markdown. While text streams in, only the blocks from the first
 * changed one onwards are rebuilt, so a frame costs the last paragraph or code block, not
 * the whole answer.
 */
export class MarkdownView {
  constructor(element) {
    this.element = element;
    this.blocks = []; // [{raw, nodes}] per top-level token, in order
  }

  /** Incremental render of a streaming source that only grows at the end. */
  update(source) {
    const tokens = marked.lexer(source);
    let same = 0;
    while (same < this.blocks.length && same < tokens.length && this.blocks[same].raw === tokens[same].raw) {
      same += 1;
    }
    // The last block may look the same while its meaning still depends on what follows.
    same = Math.max(0, Math.min(same, tokens.length - 1));
    for (const block of this.blocks.splice(same)) {
      for (const node of block.nodes) node.remove();
    }
    for (const token of tokens.slice(same)) {
      const fragment = sanitize(marked.parser([token]));
      this.blocks.push({ raw: token.raw, nodes: [...fragment.childNodes] });
      this.element.append(fragment);
    }
  }

  /**
   * Full render. The final one matters: a link definition that arrives late changes
   * blocks that an incremental update kept.
   */
  render(source) {
    this.blocks = [];
    this.element.replaceChildren(sanitize(marked.parse(source)));
  }
}

/**
 * Copy buttons on code blocks, handled once for the whole log: answers are
 * re-rendered while they stream, so per-button listeners would be recreated every frame.
 */
export function handleCodeCopy(root) {
  root.addEventListener("click", (event) => {
    const button = event.target.closest(".code-copy");
    if (!button) return;
    const code = button.closest(".code-block").querySelector("code");
    copyText(button, code.textContent, code);
  });
}
