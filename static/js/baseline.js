// This model's drafter-off decode rate on this machine, the bar a drafter-on reply has to clear.
// It comes from the server (its calibration) or from the last race here, per engine and model.

import { formatRate } from "@app/format.js";
import { loadPref, savePref } from "@app/prefs.js";
import { MEASURE_TOKENS } from "@app/stats.js";

/** A rate from the server's `baseline` value: a number, `{tok_s}`, or `{tok_s: {median}}`. */
function rateOf(value) {
  if (typeof value === "number") return value;
  if (value && typeof value === "object") {
    const rate = value.tok_s ?? value.rate;
    if (typeof rate === "number") return rate;
    if (rate && typeof rate.median === "number") return rate.median;
  }
  return null;
}

export class Baseline {
  constructor() {
    this.key = null;
    this.rates = loadPref("baselines", {});
    this.tried = new Set(); // engines and models measured (or tried) in this tab
  }

  /** `engine` as in `hello` and `engine` frames; a different model has a different baseline. */
  setEngine(engine) {
    this.key = engine && engine.model ? `${engine.name}|${engine.model}` : null;
  }

  get rate() {
    return (this.key && this.rates[this.key]?.tok_s) || null;
  }

  /** One line for the settings pane. */
  describe() {
    const known = this.key && this.rates[this.key];
    if (!known) return "Drafter-off speed: not measured yet. A race or a measurement sets it.";
    const from = known.source === "race" ? "from the last race" : "measured";
    return `Drafter-off speed: ${formatRate(known.tok_s)} tok/s (${from}). Drafter-on replies slower than this get a notice.`;
  }

  /**
   * Whether a finished reply should start this model's first measurement here: a drafter ran, long
   * enough to judge, and no drafter-off rate is known to judge it against.
   */
  needsCalibration(stats) {
    if (this.rate || !this.key || this.tried.has(this.key)) return false;
    return Boolean(stats) && stats.drafted != null && (stats.tokens ?? 0) >= MEASURE_TOKENS;
  }

  /**
   * POST /api/calibrate: the server measures the drafter-off rate and it is returned. Throws an Error to
   * show as is; with `gaveWay` when a message went first and ended the measurement (to take again later).
   */
  async calibrate() {
    if (this.key) this.tried.add(this.key);
    let response;
    let body = null;
    try {
      response = await fetch("/api/calibrate", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
      body = await response.json();
    } catch {
      throw new Error("The server could not be reached.");
    }
    if (response.ok && body?.gave_way) {
      this.tried.delete(this.key);
      throw Object.assign(new Error(body.message), { gaveWay: true });
    }
    if (!response.ok || !body?.baseline) throw new Error(body?.error?.message ?? `HTTP ${response.status}`);
    this.fromServer(body.baseline);
    return body.baseline;
  }

  /** The server's measurement (`baseline` in `hello`/`engine`, or GET /api/baseline). */
  fromServer(value) {
    const rate = rateOf(value);
    if (rate > 0) this.remember(rate, value?.source === "race" ? "race" : "calibration");
  }

  /** A finished race's drafter-off lane. */
  fromRace(raceDone) {
    const rate = raceDone?.off?.tok_s?.median;
    if (typeof rate === "number" && rate > 0) this.remember(rate, "race");
  }

  remember(rate, source) {
    if (!this.key) return;
    this.rates = { ...this.rates, [this.key]: { tok_s: rate, source } };
    savePref("baselines", this.rates);
  }

  /**
   * The notice for a finished reply, or null: a drafter ran and decoded slower than the
   * drafter-off rate. Needs enough tokens for the reply's own rate to mean something.
   */
  judge(stats) {
    const off = this.rate;
    if (!off || !stats || stats.drafted == null || stats.tok_s == null) return null;
    if (stats.tokens == null || stats.tokens < MEASURE_TOKENS || stats.tok_s >= off) return null;
    return { on: stats.tok_s, off, source: this.rates[this.key].source };
  }
}
