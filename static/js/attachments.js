// Images attached to the next message: picked with the attach button, pasted into the message box or dropped on
// the composer; each is uploaded (POST /api/attachments) as soon as it is attached and shown as a thumbnail with
// its upload's progress and a remove button until the message goes out with the uploaded ids.

const MAX_IMAGES = 8;

/** The URL an uploaded image is served from. */
export function attachmentUrl(id) {
  return `/api/attachments/${encodeURIComponent(id)}`;
}

/** Upload `file` as a raw body with its own type; resolves to the attachment, rejects with the server's message. */
function upload(file, onProgress) {
  return new Promise((resolve, reject) => {
    // XMLHttpRequest, not fetch: only it reports an upload's progress.
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/api/attachments");
    xhr.setRequestHeader("Content-Type", file.type);
    xhr.responseType = "json";
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    });
    xhr.addEventListener("load", () => {
      const body = xhr.response;
      if (xhr.status >= 200 && xhr.status < 300 && body?.attachment?.id) resolve(body.attachment);
      else reject(new Error(body?.error?.message ?? `The server answered ${xhr.status}.`));
    });
    xhr.addEventListener("error", () => reject(new Error("The server could not be reached.")));
    xhr.send(file);
  });
}

/** The files a paste or drop carries; null when it carries none (text). */
function filesOf(dataTransfer) {
  const files = [...(dataTransfer?.files ?? [])];
  return files.length ? files : null;
}

export class AttachmentTray {
  /**
   * @param {{zone: HTMLElement, prompt: HTMLTextAreaElement, button: HTMLButtonElement, input: HTMLInputElement,
   *          tray: HTMLElement, error: HTMLElement, onChange: (change: {failed?: boolean}) => void}} parts `zone`
   *   takes dropped files, `prompt` pasted ones; `onChange` is called whenever what would be sent, or whether
   *   it is ready, changes (`failed`: an upload failed).
   */
  constructor({ zone, prompt, button, input, tray, error, onChange }) {
    this.zone = zone;
    this.prompt = prompt;
    this.button = button;
    this.input = input;
    this.tray = tray;
    this.error = error;
    this.errorText = error.querySelector(".attach-error-text");
    this.onChange = onChange;
    // {file, url (a blob: URL for a new image, the server's for an adopted one), state, id, el, progress, remove}
    this.items = [];
    this.vision = false;
    this.note = "Connecting to the server…";
    this.title = button.title;

    // Left focusable when the model cannot see (aria-disabled), so a press says why rather than nothing.
    button.addEventListener("click", () => (this.vision ? input.click() : this.showError(this.refusal)));
    input.addEventListener("change", () => {
      this.add([...input.files]);
      input.value = "";
    });
    prompt.addEventListener("paste", (event) => {
      const files = filesOf(event.clipboardData);
      if (!files) return; // text pastes as text
      event.preventDefault();
      this.add(files);
    });
    zone.addEventListener("dragover", (event) => {
      if (!event.dataTransfer?.types.includes("Files")) return;
      event.preventDefault(); // else the browser opens the dropped file in place of the page
      event.dataTransfer.dropEffect = this.vision ? "copy" : "none";
      zone.dataset.drag = "true";
    });
    zone.addEventListener("dragleave", (event) => {
      if (!zone.contains(event.relatedTarget)) delete zone.dataset.drag;
    });
    zone.addEventListener("drop", (event) => {
      delete zone.dataset.drag;
      const files = filesOf(event.dataTransfer);
      if (!files) return;
      event.preventDefault();
      this.add(files);
    });
    // A file dropped beside the composer is not taken, and does not replace the page either.
    document.addEventListener("dragover", (event) => {
      if (event.defaultPrevented || !event.dataTransfer?.types.includes("Files")) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = "none";
    });
    document.addEventListener("drop", (event) => {
      if (event.dataTransfer?.types.includes("Files")) event.preventDefault();
    });
    error.querySelector("button").addEventListener("click", () => this.showError(null));
  }

  /** Whether the model can take images (the engine's `vision`), and if not, why (`vision_note`). */
  setVision(vision, note) {
    this.vision = vision;
    this.note = vision ? null : note || "This model cannot see images.";
    this.button.setAttribute("aria-disabled", String(!vision));
    this.button.title = vision ? this.title : `Cannot attach images: ${this.note}`;
    if (vision) this.button.removeAttribute("aria-description");
    else this.button.setAttribute("aria-description", this.button.title);
  }

  get refusal() {
    return `Images cannot be attached: ${this.note}`;
  }

  /** Attach `files`: each image uploads at once; what cannot be attached is said next to the composer. */
  add(files) {
    if (!this.vision) {
      this.showError(this.refusal);
      return;
    }
    const refused = [];
    for (const file of files) {
      // Any image goes to the server, which says why one it cannot read is refused (an SVG, a damaged file).
      if (!file.type.startsWith("image/")) {
        refused.push(`“${file.name}” is not an image specchat can read: attach a PNG, JPEG, WebP, GIF or BMP file.`);
      } else if (this.items.length >= MAX_IMAGES) {
        refused.push(`At most ${MAX_IMAGES} images go with one message: “${file.name}” was not attached.`);
      } else {
        this.start(file);
      }
    }
    this.showError(refused.length ? refused.join(" ") : null);
    this.render();
  }

  /** Images already uploaded (a message's, put back for sending again), by id. */
  adopt(ids) {
    for (const id of ids) {
      if (this.items.length >= MAX_IMAGES || this.items.some((item) => item.id === id)) continue;
      this.items.push(this.itemView({ file: null, url: attachmentUrl(id), state: "ready", id }));
    }
    this.render();
  }

  start(file) {
    const item = this.itemView({ file, url: URL.createObjectURL(file), state: "uploading", id: null });
    this.items.push(item);
    upload(file, (fraction) => (item.progress.value = fraction)).then(
      (attachment) => {
        item.id = attachment.id;
        item.state = "ready";
        this.render();
      },
      (error) => {
        if (!this.items.includes(item)) return; // removed while it uploaded
        this.drop(item);
        this.showError(`“${file.name}” could not be attached: ${error.message}`);
        this.render({ failed: true });
      },
    );
  }

  itemView(item) {
    const name = item.file ? `the image ${item.file.name}` : "the image sent before";
    const li = document.createElement("li");
    li.className = "attach-item";
    const img = document.createElement("img");
    img.src = item.url;
    img.alt = item.file?.name ?? "Image sent before";
    const progress = document.createElement("progress");
    progress.className = "attach-progress";
    progress.max = 1;
    progress.setAttribute("aria-label", `Uploading ${name}`);
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "attach-remove";
    remove.textContent = "×";
    remove.setAttribute("aria-label", `Remove ${name}`);
    remove.title = "Remove this image";
    remove.addEventListener("click", () => {
      const next = this.items[this.items.indexOf(item) + 1];
      this.drop(item);
      this.render();
      // Keyboard users stay in the tray: on the next image's remove button, else the message box.
      (next?.remove ?? this.prompt).focus();
    });
    li.append(img, progress, remove);
    return Object.assign(item, { el: li, progress, remove });
  }

  /** Take `item` out of the tray and let go of its preview. */
  drop(item) {
    this.items = this.items.filter((other) => other !== item);
    if (item.url.startsWith("blob:")) URL.revokeObjectURL(item.url);
    item.el.remove();
  }

  /** Whether any image is still uploading: a message waits for it. */
  get pending() {
    return this.items.some((item) => item.state === "uploading");
  }

  /** The uploaded images' ids, in the order they were attached. */
  get ids() {
    return this.items.filter((item) => item.state === "ready").map((item) => item.id);
  }

  get count() {
    return this.items.length;
  }

  /** The message went out: empty the tray. */
  clear() {
    for (const item of [...this.items]) this.drop(item);
    this.showError(null);
    this.render();
  }

  showError(text) {
    this.errorText.textContent = text ?? "";
    this.error.hidden = !text;
  }

  render(change = {}) {
    for (const item of this.items) {
      item.el.dataset.state = item.state;
      item.progress.hidden = item.state !== "uploading";
      if (item.el.parentElement !== this.tray) this.tray.append(item.el);
    }
    this.tray.hidden = this.items.length === 0;
    this.tray.setAttribute("aria-busy", String(this.pending));
    this.onChange(change);
  }
}
