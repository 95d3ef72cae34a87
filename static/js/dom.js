// Element building shared by the cards and turns.

/** A new element with an optional class and text. */
export function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text != null && text !== "") el.textContent = text;
  return el;
}
