// Model output to DOM: rendered HTML goes through DOMPurify, and only KaTeX's layout keeps inline styles.

import DOMPurify from "dompurify";

// KaTeX lays formulas out with style attributes, which the page's CSP refuses in markup. math.js renames
// them to this attribute; here they become CSSOM styles (which the CSP allows), inside formulas only.
export const MATH_STYLE = "data-math-style";

// Links leave the app in a new tab and without an opener or referrer.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

const CONFIG = {
  FORBID_TAGS: ["style", "form"],
  FORBID_ATTR: ["style"],
  // A formula's TeX source also sits in a MathML annotation, which DOMPurify does not allow: drop it
  // whole rather than leave its text behind.
  ADD_FORBID_CONTENTS: ["annotation"],
  RETURN_DOM_FRAGMENT: true,
};

/** Sanitized `html` as a fragment ready to insert. */
export function sanitize(html) {
  // Imported into this document first, so the styles are set on its own elements through the CSSOM.
  const fragment = document.importNode(DOMPurify.sanitize(html, CONFIG), true);
  for (const element of fragment.querySelectorAll(`[${MATH_STYLE}]`)) {
    if (element.closest(".katex, .katex-error")) element.style.cssText = element.getAttribute(MATH_STYLE);
    element.removeAttribute(MATH_STYLE);
  }
  return fragment;
}
