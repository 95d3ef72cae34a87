// Copy buttons for code blocks and whole answers.

/** Copy `text`, and say so on `button`; select `source` instead where the clipboard is unavailable. */
export async function copyText(button, text, source) {
  // Remembered on the button so a second click during the feedback does not keep "Copied".
  const label = (button.dataset.label ??= button.textContent);
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    // The clipboard API needs a secure context (localhost or https); elsewhere select the
    // text so the user can copy it by hand.
    getSelection().selectAllChildren(source);
    button.textContent = "Selected";
  }
  setTimeout(() => (button.textContent = label), 1500);
}
