// A message's image seen large: a modal dialog over the page. Escape, its close button or a click beside the image
// closes it, and focus goes back to the thumbnail that opened it.

export class Lightbox {
  /**
   * @param {HTMLDialogElement} dialog holding an `img` and a close button
   * @param {HTMLElement} root where the thumbnails are: any `.msg-image` button in it opens its image here
   */
  constructor(dialog, root) {
    this.dialog = dialog;
    this.image = dialog.querySelector("img");
    this.opener = null;
    dialog.querySelector(".lightbox-close").addEventListener("click", () => this.close());
    dialog.addEventListener("click", (event) => {
      if (event.target === dialog) this.close(); // the backdrop, around the image
    });
    dialog.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      event.preventDefault(); // closes the image only: not also a Stop (main.js)
      this.close();
    });
    dialog.addEventListener("close", () => {
      this.image.removeAttribute("src");
      this.opener?.focus();
      this.opener = null;
    });
    root.addEventListener("click", (event) => {
      const thumb = event.target.closest(".msg-image");
      if (thumb) this.open(thumb.querySelector("img"), thumb);
    });
  }

  get isOpen() {
    return this.dialog.open;
  }

  /** Show `img` (a thumbnail) large; `opener` gets focus back when it closes. */
  open(img, opener) {
    this.opener = opener;
    this.image.src = img.src;
    this.image.alt = img.alt;
    this.dialog.setAttribute("aria-label", img.alt);
    this.dialog.showModal();
  }

  close() {
    if (this.dialog.open) this.dialog.close();
  }
}
