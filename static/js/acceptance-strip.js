// The acceptance strip under a reply: one bar per verify round, as tall as the drafts it accepted.
// Rounds arrive with the deltas (`rounds`); the strip is one canvas redrawn at most once per frame.

import { formatCount, formatMean } from "@app/format.js";
import { schedule } from "@app/render.js";
import { acceptanceLevel } from "@app/stats.js";

// A bar's colour is the level of the share of its round's drafts it kept, as acceptance is coloured elsewhere.
const COLOURS = { good: ["--ok", "#1a7f37"], fair: ["--warn", "#9a6700"], low: ["--danger", "#c62828"] };

const HEIGHT = 28; // CSS px
const BAR = 4; // bar width while every round fits, CSS px
const GAP = 2;

export class AcceptanceStrip {
  constructor() {
    this.el = document.createElement("div");
    this.el.className = "accept-strip";
    this.el.hidden = true;
    this.canvas = document.createElement("canvas");
    this.canvas.setAttribute("role", "img");
    this.caption = document.createElement("span");
    this.caption.className = "accept-caption";
    this.el.append(this.canvas, this.caption);
    this.reset();
  }

  /** Forget every round, e.g. when a race lane starts its next run. */
  reset() {
    this.rounds = [];
    this.accepted = 0;
    this.depth = 1; // the most drafts a round can accept (block − 1), as far as is known
    this.dirty = true;
    schedule(this);
  }

  /** Drafts accepted in each verify round that ended within one delta. */
  add(rounds) {
    if (!Array.isArray(rounds) || rounds.length === 0) return;
    for (const accepted of rounds) {
      const n = Number(accepted) || 0;
      this.rounds.push(n);
      this.accepted += n;
      if (n > this.depth) this.depth = n;
    }
    this.dirty = true;
    schedule(this);
  }

  /** Stats tell the block size through `accepted_hist` (one slot per possible count). */
  setStats(stats) {
    const hist = stats?.accepted_hist;
    if (Array.isArray(hist) && hist.length - 1 > this.depth) {
      this.depth = hist.length - 1;
      this.dirty = true;
      schedule(this);
    }
  }

  flush() {
    if (!this.dirty) return;
    this.dirty = false;
    const n = this.rounds.length;
    this.el.hidden = n === 0;
    this.el.dataset.rounds = String(n);
    this.el.dataset.accepted = String(this.accepted);
    if (n === 0) return;
    const mean = this.accepted / n;
    const label = `${formatCount(n)} verify ${n === 1 ? "round" : "rounds"}, ${formatMean(mean)} drafts accepted per round`;
    this.canvas.setAttribute("aria-label", `Acceptance strip: ${label}`);
    this.caption.textContent = `${formatCount(n)} ${n === 1 ? "round" : "rounds"} · ${formatMean(mean)}/round`;
    this.draw();
  }

  draw() {
    const width = Math.max(1, this.canvas.clientWidth);
    const ratio = devicePixelRatio || 1;
    if (this.canvas.width !== Math.round(width * ratio)) this.canvas.width = Math.round(width * ratio);
    if (this.canvas.height !== Math.round(HEIGHT * ratio)) this.canvas.height = Math.round(HEIGHT * ratio);
    const ctx = this.canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, HEIGHT);
    const style = getComputedStyle(this.el);
    const colour = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
    const none = colour("--faint", "#8a929c");
    const n = this.rounds.length;
    // Every round keeps its own bar: once they no longer fit, bars narrow (down to hairlines).
    const step = Math.min(BAR + GAP, width / n);
    const bar = step > 2 ? step - GAP : Math.max(step, 0.5);
    const usable = HEIGHT - 2;
    for (const [level, [name, fallback]] of Object.entries(COLOURS)) {
      ctx.fillStyle = colour(name, fallback);
      ctx.beginPath();
      for (let i = 0; i < n; i++) {
        const accepted = this.rounds[i];
        if (accepted > 0 && acceptanceLevel(accepted / this.depth) === level) {
          const h = Math.max(2, (accepted / this.depth) * usable);
          ctx.rect(i * step, HEIGHT - h, bar, h);
        }
      }
      ctx.fill();
    }
    // A round that kept no draft still happened: a stub on the baseline shows it.
    ctx.fillStyle = none;
    ctx.beginPath();
    for (let i = 0; i < n; i++) {
      if (this.rounds[i] === 0) ctx.rect(i * step, HEIGHT - 2, bar, 2);
    }
    ctx.fill();
  }
}
