// The message box: Enter sends, Shift+Enter adds a line, Stop replaces Send while a reply streams (Escape
// anywhere on the page stops it too: see main.js).
// Beside Send: Race (drafter off vs on, with a runs selector) and "Find the best block size". Images attached
// (attachments.js) go with whichever is pressed; a message sent while one still uploads waits for it.

import { loadPref, savePref } from "@app/prefs.js";

const HINT = "Enter to send · Shift+Enter for a new line";

export class Composer {
  /**
   * @param {{form: HTMLFormElement, prompt: HTMLTextAreaElement, send: HTMLButtonElement,
   *          stop: HTMLButtonElement, race: HTMLButtonElement, runs: HTMLSelectElement,
   *          sweep: HTMLButtonElement, hint: HTMLElement, attachments: import("./attachments.js").AttachmentTray,
   *          onSend: (text: string, images: string[]) => boolean,
   *          onRace: (text: string, runs: number|"auto", images: string[]) => boolean,
   *          onSweep: (text: string, images: string[]) => boolean, onStop: () => void}} parts
   * `onSend`, `onRace` and `onSweep` return whether the text and images went out; if not, they stay.
   */
  constructor({ form, prompt, send, stop, race, runs, sweep, hint, attachments, onSend, onRace, onSweep, onStop }) {
    this.prompt = prompt;
    this.attachments = attachments;
    this.sendButton = send;
    this.stopButton = stop;
    this.raceButton = race;
    this.runsSelect = runs;
    this.sweepButton = sweep;
    this.hint = hint;
    this.actions = {
      send: onSend,
      race: (text, images) => onRace(text, this.runs, images),
      sweep: onSweep,
    };
    this.held = null; // "send", "race" or "sweep": pressed while an image uploads, done once it is uploaded
    this.blocked = null;
    this.streaming = false;
    this.noDrafter = null;
    this.raceTitle = race.title;
    this.sweepTitle = sweep.title;

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    prompt.addEventListener("keydown", (event) => {
      // isComposing: Enter that confirms an IME candidate must not send half a sentence.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.submit();
      }
    });
    prompt.addEventListener("input", () => {
      this.autosize();
      this.render();
    });
    stop.addEventListener("click", () => onStop());
    race.addEventListener("click", () => this.submit("race"));
    sweep.addEventListener("click", () => this.submit("sweep"));
    for (let n = 1; n <= 9; n++) runs.append(new Option(String(n), String(n)));
    runs.append(new Option("auto", "auto")); // 5 to 9 pairs, until they settle the speed-up
    // "auto" by default: three pairs can never settle the sign test's 90% interval, so a first race of 3 ran
    // would always end "unclear".
    const saved = loadPref("raceRuns", "auto");
    runs.value = saved === "auto" ? "auto" : String(Math.min(9, Math.max(1, Number(saved) || 3)));
    runs.addEventListener("change", () => savePref("raceRuns", this.runs));
  }

  /** Pairs of runs a race makes (1-9), or "auto": the server adds pairs until they settle the speed-up. */
  get runs() {
    return this.runsSelect.value === "auto" ? "auto" : Number(this.runsSelect.value);
  }

  /**
   * @param {{streaming: boolean, blocked: string|null, noDrafter?: string|null}} state `blocked` says why
   * nothing can be sent right now (disconnected, model loading); null when sending is possible. `noDrafter`:
   * why there is no drafter to race or sweep with (the engine's `drafter_note`), or null.
   */
  set({ streaming, blocked, noDrafter = null }) {
    this.streaming = streaming;
    this.blocked = blocked;
    this.noDrafter = noDrafter;
    this.render();
  }

  /** Show Stop as pressed until the reply's `done` arrives. */
  stopping() {
    this.stopButton.disabled = true;
    this.stopButton.textContent = "Stopping…";
  }

  /** Whether there is anything to send: text, or images (a message may be images only). */
  get empty() {
    return this.prompt.value.trim() === "" && this.attachments.count === 0;
  }

  /** Send the box's text and images as a chat message, a race or a block-size sweep. */
  submit(kind = "send") {
    const text = this.prompt.value;
    if (this.streaming || this.blocked || this.empty) return;
    if (kind !== "send" && this.noDrafter) return;
    if (this.attachments.pending) {
      this.held = kind;
      this.render();
      return;
    }
    this.held = null;
    if (this.actions[kind](text, this.attachments.ids)) {
      this.prompt.value = "";
      this.attachments.clear();
      this.autosize();
      this.render();
      // Send may have been clicked, and it is about to be hidden behind Stop.
      this.prompt.focus();
    }
  }

  /**
   * The attached images changed: a message held for their upload goes once they are all uploaded, and not at
   * all when one failed (its error shows beside the composer).
   */
  attachmentsChanged({ failed = false } = {}) {
    if (failed) this.held = null;
    if (this.held && !this.attachments.pending) this.submit(this.held);
    else this.render();
  }

  /** Put text and images back for editing without losing a draft that is already there. */
  insert(text, images = []) {
    this.attachments.adopt(images);
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
    this.sendButton.disabled = this.streaming || Boolean(this.blocked) || this.empty;
    this.raceButton.hidden = this.streaming;
    this.raceButton.disabled = this.sendButton.disabled || Boolean(this.noDrafter);
    this.sweepButton.disabled = this.raceButton.disabled;
    this.raceButton.title = this.noDrafter ? `No drafter to race: ${this.noDrafter}` : this.raceTitle;
    this.sweepButton.title = this.noDrafter ? `No drafter to draft with: ${this.noDrafter}` : this.sweepTitle;
    if (this.noDrafter) this.raceButton.setAttribute("aria-description", this.raceButton.title);
    else this.raceButton.removeAttribute("aria-description");
    const waiting = this.held && "Sends once the images are uploaded…";
    this.hint.textContent = this.blocked ?? (this.streaming ? "Escape stops the reply" : waiting || HINT);
    this.hint.dataset.blocked = String(Boolean(this.blocked));
  }

  autosize() {
    this.prompt.style.height = "auto";
    this.prompt.style.height = `${this.prompt.scrollHeight}px`;
  }
}
