// Branch arrows "‹ 2/3 ›" on a message that has siblings: other versions of the same answer or edit.

/**
 * The arrows for `id` among `siblings` (oldest first), or null where it has none.
 * @param {string} noun what the versions are of, for the buttons' names ("answer", "message")
 * @param {(id: string) => void} onSelect shows the branch through the chosen sibling
 */
export function branchNav(id, siblings, noun, onSelect, disabled = false) {
  if (siblings.length < 2) return null;
  const index = siblings.indexOf(id);
  const nav = document.createElement("span");
  nav.className = "branch-nav";
  nav.setAttribute("role", "group");
  nav.setAttribute("aria-label", `Versions of this ${noun}`);
  const button = (label, text, target) => {
    const el = document.createElement("button");
    el.type = "button";
    el.className = "link-button branch-step";
    el.textContent = text;
    el.setAttribute("aria-label", label);
    el.disabled = disabled || target === undefined;
    el.addEventListener("click", () => onSelect(target));
    return el;
  };
  const count = document.createElement("span");
  count.className = "branch-count";
  count.textContent = `${index + 1}/${siblings.length}`;
  count.setAttribute("aria-label", `${noun} ${index + 1} of ${siblings.length}`);
  nav.append(
    button(`Previous ${noun}`, "‹", siblings[index - 1]),
    count,
    button(`Next ${noun}`, "›", siblings[index + 1]),
  );
  return nav;
}
