// Measuring this model's drafter-off speed: from the button, or after its first drafter-on reply here when
// no speed is known yet.

export class Calibration {
  /**
   * @param {{baseline: import("@app/baseline.js").Baseline, button: HTMLButtonElement, status: HTMLElement,
   *          error: HTMLElement, onChange: () => void}} parts `onChange` runs when a measurement starts or
   *   ends, so what depends on `running` is enabled again.
   */
  constructor({ baseline, button, status, error, onChange }) {
    this.baseline = baseline;
    this.status = status;
    this.error = error;
    this.onChange = onChange;
    this.running = false;
    button.addEventListener("click", () => this.measure());
  }

  /** Say what is known of the drafter-off speed. */
  describe() {
    this.status.textContent = this.baseline.describe();
  }

  /**
   * Measure it (`auto`: after a reply, not asked for). A message sent meanwhile goes first and ends the
   * measurement: the button's says so, an automatic one is taken again after a later reply.
   * Returns whether it worked.
   */
  async measure(auto = false) {
    this.running = true;
    this.error.hidden = true;
    this.status.textContent = "Measuring the drafter-off speed…";
    this.onChange();
    try {
      await this.baseline.calibrate();
      return true;
    } catch (error) {
      if (!(auto && error.gaveWay)) {
        this.error.textContent = error.message;
        this.error.hidden = false;
      }
      return false;
    } finally {
      this.running = false;
      this.describe();
      this.onChange();
    }
  }
}
