// The message box: Enter sends, Shift+Enter adds a line, Stop (or Escape) replaces Send while a reply streams.

const HINT = "Enter to send · Shift+Enter for a new line";

export class Composer {
  /**
   * @param {{form: HTMLFormElement, prompt: HTMLTextAreaElement, send: HTMLButtonElement,
   *          stop: HTMLButtonElement, hint: HTMLElement,
   *          onSend: (text: string) => boolean, onStop: () => void}} parts
   * `onSend` returns whether the text went out; if not, it stays in the box.
   */
  constructor({ form, prompt, send, stop, hint, onSend, onStop }) {
    this.prompt = prompt;
    this.sendButton = send;
    this.stopButton = stop;
    this.hint = hint;
    this.onSend = onSend;
    this.blocked = null;
    this.streaming = false;

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    prompt.addEventListener("keydown", (event) => {
      // isComposing: Enter that confirms an IME candidate must not send half a sentence.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.submit();
      } else if (event.key === "Escape" && this.streaming) {
        onStop();
      }
    });
    prompt.addEventListener("input", () => {
      this.autosize();
      this.render();
    });
    stop.addEventListener("click", () => onStop());
  }

  /**
   * @param {{streaming: boolean, blocked: string|null}} state `blocked` says why nothing can be
   * sent right now (disconnected, model loading); null when sending is possible.
   */
  set({ streaming, blocked }) {
    this.streaming = streaming;
    this.blocked = blocked;
    this.render();
  }

  /** Show Stop as pressed until the reply's `done` arrives. */
  stopping() {
    this.stopButton.disabled = true;
    this.stopButton.textContent = "Stopping…";
  }

  submit() {
    const text = this.prompt.value;
    if (this.streaming || this.blocked || text.trim() === "") return;
    if (this.onSend(text)) {
      this.prompt.value = "";
      this.autosize();
      this.render();
      // Send may have been clicked, and it is about to be hidden behind Stop.
      this.prompt.focus();
    }
  }

  /** Put text back for editing without losing a draft that is already there. */
  insert(text) {
    const draft = this.prompt.value.trimEnd();
    this.prompt.value = draft ? `${draft}\n\n${text}` : text;
    this.autosize();
    this.render();
    this.prompt.focus();
  }

  render() {
    this.sendButton.hidden = this.streaming;
    this.stopButton.hidden = !this.streaming;
    if (!this.streaming) {
      this.stopButton.disabled = false;
      this.stopButton.textContent = "Stop";
    }
    this.sendButton.disabled = this.streaming || Boolean(this.blocked) || this.prompt.value.trim() === "";
    this.hint.textContent = this.blocked ?? (this.streaming ? "Escape stops the reply" : HINT);
    this.hint.dataset.blocked = String(Boolean(this.blocked));
  }

  autosize() {
    this.prompt.style.height = "auto";
    this.prompt.style.height = `${this.prompt.scrollHeight}px`;
  }
}
