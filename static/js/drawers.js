// The conversation list and the settings pane sit beside the chat on wide screens and are drawers over it
// on narrow ones, where they start closed and close with Escape or a tap outside.

export class Drawers {
  /**
   * @param {HTMLElement} scrim the shade over the chat while a drawer is open
   * @param {Object<string, {toggle: HTMLElement, el: HTMLElement, narrow: MediaQueryList}>} panes by name;
   *   `narrow` matches where the pane is a drawer
   */
  constructor(scrim, panes) {
    this.scrim = scrim;
    this.panes = panes;
    for (const [name, pane] of Object.entries(panes)) {
      pane.toggle.addEventListener("click", () => this.show(name, !this.isOpen(name)));
      pane.narrow.addEventListener("change", () => this.show(name, !pane.narrow.matches));
      this.show(name, !pane.narrow.matches);
    }
    scrim.addEventListener("click", () => this.closeOverlays());
    for (const button of document.querySelectorAll(".drawer-close")) {
      button.addEventListener("click", () => {
        this.show(button.dataset.pane, false);
        panes[button.dataset.pane].toggle.focus();
      });
    }
  }

  isOpen(name) {
    return document.body.dataset[name] === "open";
  }

  show(name, open) {
    const pane = this.panes[name];
    document.body.dataset[name] = open ? "open" : "closed";
    pane.toggle.setAttribute("aria-expanded", String(open));
    if (open && pane.narrow.matches) {
      // One drawer at a time; focus goes into it, and back to its button when it closes.
      for (const other of Object.keys(this.panes)) {
        if (other !== name && this.isOpen(other) && this.panes[other].narrow.matches) this.show(other, false);
      }
      pane.el.querySelector("input, select, textarea, button:not([disabled]), a[href]")?.focus();
    }
    this.scrim.hidden = !Object.keys(this.panes).some((key) => this.isOpen(key) && this.panes[key].narrow.matches);
  }

  /** Close the drawers open over the chat; true when there was one. */
  closeOverlays() {
    let closed = false;
    for (const [name, pane] of Object.entries(this.panes)) {
      if (this.isOpen(name) && pane.narrow.matches) {
        const focusInside = pane.el.contains(document.activeElement);
        this.show(name, false);
        if (focusInside) pane.toggle.focus();
        closed = true;
      }
    }
    return closed;
  }
}
