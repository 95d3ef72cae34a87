// This model's drafter-off decode rate on this machine, the bar a drafter-on reply has to clear.
// It comes from the server (its calibration) or from the last race here, per engine and model, with
// what judging a reply by it needs: its runs' spread and the context it was measured at.

import { busyText } from "@app/busy.js";
import { formatRate } from "@app/format.js";
import { loadPref, savePref } from "@app/prefs.js";
import { MEASURE_TOKENS } from "@app/stats.js";

// One reply's decode rate against another's of the same settings can differ by this share (9 runs of one
// setting on a shared 2-core machine spread ±16% around their median); a drafter-on reply is "not paying
// off" only when it is slower than the drafter-off rate by more.
export const NOISE = 0.2;
// Decode rates are compared only at a similar context: within this many tokens, or a factor of 2.
export const CONTEXT_SLACK = 512;

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

/** Whether two prompts are a similar context to compare decode rates at. */
export function similarContext(a, b) {
  if (typeof a !== "number" || typeof b !== "number") return false;
  return Math.abs(a - b) <= Math.max(CONTEXT_SLACK, Math.max(a, b) / 2);
}

/**
 * The noise of a comparison with the drafter-off rate `known` ({tok_s, spread}): `NOISE`, plus half the
 * spread of its runs where it had several.
 */
export function noiseOf(known) {
  const spread = known?.spread;
  if (!spread || typeof spread.min !== "number" || typeof spread.max !== "number" || !known.tok_s) return NOISE;
  return Math.round((NOISE + Math.max(0, spread.max - spread.min) / (2 * known.tok_s)) * 1000) / 1000;
}

/** The block that ran the most rounds in a `block_history` (1: plain steps; a tie goes to the larger); null
 * without one. */
export function mostRun(history) {
  const ran = Object.entries(history ?? {});
  if (!ran.length) return null;
  return Number(ran.reduce((a, b) => (b[1] > a[1] || (b[1] === a[1] && Number(b[0]) > Number(a[0])) ? b : a))[0]);
}

/** The drafting block that ran the most rounds in a `block_history` ({"1": 30, "4": 20} gives 4); null without one. */
export function mostDrafted(history) {
  return mostRun(Object.fromEntries(Object.entries(history ?? {}).filter(([block]) => block !== "1")));
}

/**
 * The block to use instead of `block`, which decoded at `on` tok/s against `off` without the drafter:
 * `{block, basis}`, block 1 meaning the drafter off. Never `block` or larger. From the last sweep's
 * rows where there are ones (the fastest smaller block it measured faster than block 1: by its verdict, or
 * by more than `NOISE` where its pairs left it unclear), else from the
 * acceptance by depth: a verify round of block j is taken to cost one plain step plus a share of it per
 * draft that `block`'s measured round fixes, and yields 1 + the kept shares of its j−1 depths; the
 * smaller block so predicted fastest, if it beats the drafter off by more than `NOISE`.
 */
export function adviseBlock({ block, on, off, byDepth, sweep }) {
  // Fixed blocks only: a sweep's "auto" row picks its own block, so it cannot be advised as one below `block`.
  const smaller = (sweep ?? []).filter((row) => Number.isInteger(row.block) && row.block > 1 && row.block < block
    && row.tok_s != null);
  if (sweep?.length) {
    const base = sweep.find((row) => row.block === 1)?.tok_s;
    // Faster by its pairs' verdict, or where they could not settle it (one run) by more than the noise.
    const faster = smaller.filter((row) => row.verdict === "faster"
      || (row.verdict !== "slower" && base != null && row.tok_s > base * (1 + NOISE)));
    const best = faster.reduce((a, b) => (b.tok_s > a.tok_s ? b : a), faster[0]);
    return best ? { block: best.block, basis: "sweep" } : { block: 1, basis: "sweep" };
  }
  const shares = Array.isArray(byDepth) ? byDepth.slice(0, block - 1) : [];
  if (!(on > 0 && off > 0) || block < 3 || shares.length < block - 1 || shares.some((s) => s == null)) {
    return { block: 1, basis: "rates" };
  }
  const yields = (j) => 1 + shares.slice(0, j - 1).reduce((a, s) => a + s, 0);
  const perDraft = (yields(block) * (off / on) - 1) / (block - 1); // a draft's cost, in plain steps
  let best = { block: 1, rate: off * (1 + NOISE) };
  for (let j = 2; j < block; j += 1) {
    const rate = (yields(j) * off) / (1 + Math.max(0, perDraft) * (j - 1));
    if (rate > best.rate) best = { block: j, rate };
  }
  return { block: best.block, basis: best.block === 1 ? "rates" : "depth" };
}

/** What `adviseBlock`'s advice rests on, in words, for the block that lost. */
export function adviceText(advice, block) {
  if (advice.basis === "sweep") {
    return advice.block > 1
      ? `The last block sweep measured block ${advice.block} faster than the drafter off.`
      : `The last block sweep found no block below ${block} faster than the drafter off.`;
  }
  if (advice.block > 1) return `By how many drafts were kept at each depth, block ${advice.block} should be faster.`;
  return block > 2
    ? `By how many drafts were kept at each depth, no block below ${block} should beat the drafter off.`
    : "Block 2 is the smallest there is.";
}

const oneDecimal = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });

/**
 * Why drafting loses on this machine, where the engine measured it at load (`quantized_verify_ratio`: a
 * 4-row quantized product's time over a one-row product's, on a CPU): verifying costs several steps, so
 * the drafts kept must pay for it. "" where the engine does not say (older engines, GPUs, full precision).
 */
export function costText(engine) {
  const ratio = engine?.quantized_verify_ratio;
  if (typeof ratio !== "number" || !Number.isFinite(ratio)) return "";
  return `Quantized products are slow on a CPU: verifying 4 tokens costs ${oneDecimal.format(ratio)}× one step here.`;
}

/**
 * A finished reply's not-paying-off notice: {text, block} when `baseline` judges its drafter-on rate below
 * the drafter-off one beyond the noise (`block`: the size the advice names, 1 for the drafter off), else null.
 * `blockSize` is the block the reply ran at, `engine` the engine's info (what verifying costs, where known).
 */
export function slowReplyNotice(baseline, stats, blockSize, engine) {
  const verdict = baseline.judge(stats);
  if (!verdict) return null;
  const source = verdict.source === "race" ? "measured by the last race" : "measured on this machine";
  const advice = adviseBlock({ block: blockSize, on: verdict.on, off: verdict.off, byDepth: stats.acceptance_by_depth,
    sweep: baseline.sweep });
  const text =
    `Drafting is not paying off: ${formatRate(verdict.on)} tok/s with the drafter, ` +
    `${formatRate(verdict.off)} tok/s without it (${source}): slower by more than the ` +
    `${Math.round(verdict.noise * 100)}% two measurements of one speed can differ by. ` +
    adviceText(advice, blockSize) +
    (costText(engine) ? ` ${costText(engine)}` : "") + (verdict.busy ? ` ${busyText(verdict.busy)}` : "");
  return { text, block: advice.block };
}

export class Baseline {
  constructor() {
    this.key = null;
    this.rates = loadPref("baselines", {});
    this.sweeps = loadPref("sweeps", {}); // the last block sweep's rows, per engine and model
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
    return `Drafter-off speed: ${formatRate(known.tok_s)} tok/s (${from}). Drafter-on replies slower than this ` +
      `by more than ${Math.round(noiseOf(known) * 100)}% get a notice.`;
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
    if (rate > 0) {
      this.remember(rate, value?.source === "race" ? "race" : "calibration", value.spread, value.prompt_tokens);
    }
  }

  /** A finished race's drafter-off lane. */
  fromRace(raceDone) {
    const rate = raceDone?.off?.tok_s?.median;
    if (typeof rate === "number" && rate > 0) {
      this.remember(rate, "race", raceDone.off.tok_s, raceDone.off.stats?.prompt_tokens);
    }
  }

  /** A finished block sweep: its rows advise a block when drafting does not pay. */
  fromSweep(sweepDone) {
    if (!this.key || !Array.isArray(sweepDone?.rows)) return;
    const rows = sweepDone.rows.map((row) => ({
      block: row.block, tok_s: row.tok_s?.median ?? null, verdict: row.verdict ?? null,
    }));
    this.sweeps = { ...this.sweeps, [this.key]: rows };
    savePref("sweeps", this.sweeps);
  }

  get sweep() {
    return (this.key && this.sweeps[this.key]) || null;
  }

  remember(rate, source, spread = null, promptTokens = null) {
    if (!this.key) return;
    this.rates = { ...this.rates, [this.key]: { tok_s: rate, source, spread, prompt_tokens: promptTokens } };
    savePref("baselines", this.rates);
  }

  /**
   * The notice for a finished reply, or null: a drafter ran, long enough for its rate to mean
   * something, at a context similar to the drafter-off rate's, and decoded slower than that rate by
   * more than the noise of the two (`noiseOf`). `{on, off, source, noise, busy}`: `busy` the reply's
   * `stats.busy` when other work took the machine meanwhile, else null.
   */
  judge(stats) {
    const off = this.rate;
    if (!off || !stats || stats.drafted == null || stats.tok_s == null) return null;
    if (stats.tokens == null || stats.tokens < MEASURE_TOKENS) return null;
    const known = this.rates[this.key];
    const noise = noiseOf(known);
    if (!similarContext(known.prompt_tokens, stats.prompt_tokens) || stats.tok_s >= off * (1 - noise)) return null;
    return { on: stats.tok_s, off, source: known.source, noise, busy: stats.busy?.flagged ? stats.busy : null };
  }
}
