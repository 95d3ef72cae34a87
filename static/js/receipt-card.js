// A race's receipt as a PNG card, drawn here on a canvas from the facts receipt.js gathers.

import {
  formatFactor, formatMean, formatPercent, formatRate, formatSpread, formatSpreadMs, spreadInSeconds,
} from "@app/format.js";

const WIDTH = 1200;
const HEIGHT = 675;
const SCALE = 2; // pixels per CSS pixel, so the card stays sharp when shown large

function palette() {
  const style = getComputedStyle(document.documentElement);
  const v = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
  return {
    bg: v("--surface", "#ffffff"),
    panel: v("--surface-2", "#f0f2f5"),
    border: v("--border", "#e1e4e8"),
    text: v("--text", "#1b1f24"),
    muted: v("--muted", "#5d6672"),
    faint: v("--faint", "#8a929c"),
    accent: v("--accent", "#4f46e5"),
    ok: v("--ok", "#1a7f37"),
    warn: v("--warn", "#9a6700"),
    font: v("--font", "system-ui, sans-serif"),
    mono: v("--mono", "monospace"),
  };
}

/** `value` cut with an ellipsis to fit `width` in the context's current font. */
function fit(ctx, value, width) {
  if (ctx.measureText(value).width <= width) return value;
  let lo = 0;
  let hi = value.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (ctx.measureText(`${value.slice(0, mid)}…`).width <= width) lo = mid;
    else hi = mid - 1;
  }
  return `${value.slice(0, lo)}…`;
}

/** Draw the receipt card; returns the canvas (WIDTH × HEIGHT CSS px at SCALE). */
export function drawReceiptCard(facts) {
  const canvas = document.createElement("canvas");
  canvas.width = WIDTH * SCALE;
  canvas.height = HEIGHT * SCALE;
  const ctx = canvas.getContext("2d");
  ctx.scale(SCALE, SCALE);
  const c = palette();
  const font = (size, weight = 400, family = c.font) => `${weight} ${size}px ${family}`;
  const pad = 48;

  ctx.fillStyle = c.bg;
  ctx.fillRect(0, 0, WIDTH, HEIGHT);
  ctx.fillStyle = c.accent;
  ctx.fillRect(0, 0, WIDTH, 6);

  ctx.textBaseline = "alphabetic";
  ctx.fillStyle = c.muted;
  ctx.font = font(18, 600);
  ctx.fillText("specchat · speculative decoding receipt", pad, 52);
  ctx.textAlign = "right";
  ctx.font = font(16);
  ctx.fillText(String(facts.date), WIDTH - pad, 52);
  ctx.textAlign = "left";

  // The headline: the median speed-up, with its spread, run count and what the pairs settle.
  const speedup = facts.speedup;
  const slower = speedup?.median != null && speedup.median < 1;
  ctx.fillStyle = slower || facts.busy ? c.warn : c.accent;
  ctx.font = font(96, 750);
  const headline = speedup?.median != null ? formatFactor(speedup.median) : "–";
  ctx.fillText(headline, pad - 4, 158);
  const headWidth = ctx.measureText(headline).width;
  const besideHead = WIDTH - pad - (pad + headWidth + 20);
  ctx.fillStyle = c.text;
  ctx.font = font(26, 600);
  const unsettled = facts.verdict === "unclear" ? ", not settled" : "";
  ctx.fillText(`${slower ? "slower" : "faster"} with the drafter${unsettled}`, pad + headWidth + 20, 106);
  ctx.fillStyle = c.muted;
  ctx.font = font(18);
  const runs = facts.runs ?? 1;
  const spread = speedup?.min != null && runs > 1 ? `${formatFactor(speedup.min)}–${formatFactor(speedup.max)} · ` : "";
  ctx.fillText(`${spread}median of ${runs} ${runs === 1 ? "run" : "runs"} each way`, pad + headWidth + 20, 134);
  if (facts.pairs) ctx.fillText(fit(ctx, facts.pairs, besideHead), pad + headWidth + 20, 160);

  // Rate bars: drafter off against on, with each lane's min-max as a whisker.
  const barLeft = pad + 150;
  const barRight = WIDTH - pad - 290;
  const top = Math.max(facts.off.tok_s?.max ?? 0, facts.on.tok_s?.max ?? 0, 1);
  const x = (rate) => barLeft + (rate / top) * (barRight - barLeft);
  [["off", "Drafter off", c.faint], ["on", "Drafter on", c.accent]].forEach(([key, label, color], i) => {
    const y = 196 + i * 54;
    const rate = facts[key].tok_s;
    ctx.fillStyle = c.text;
    ctx.font = font(18, 600);
    ctx.fillText(label, pad, y + 24);
    ctx.fillStyle = c.panel;
    ctx.fillRect(barLeft, y, barRight - barLeft, 34);
    if (rate?.median != null) {
      ctx.fillStyle = color;
      ctx.fillRect(barLeft, y, x(rate.median) - barLeft, 34);
      if (rate.min != null && rate.max != null && rate.max > rate.min) {
        ctx.strokeStyle = c.text;
        ctx.lineWidth = 2;
        ctx.beginPath();
        ctx.moveTo(x(rate.min), y + 17);
        ctx.lineTo(x(rate.max), y + 17);
        ctx.moveTo(x(rate.min), y + 9);
        ctx.lineTo(x(rate.min), y + 25);
        ctx.moveTo(x(rate.max), y + 9);
        ctx.lineTo(x(rate.max), y + 25);
        ctx.stroke();
      }
    }
    ctx.fillStyle = c.text;
    ctx.font = font(18, 600);
    ctx.fillText(fit(ctx, `${formatSpread(rate, formatRate)} tok/s`, WIDTH - pad - barRight - 14), barRight + 14, y + 24);
  });

  // Figures, two rows of four.
  const depth = Array.isArray(facts.byDepth) && facts.byDepth.length
    ? facts.byDepth.map((a) => (a == null ? "–" : formatPercent(a))).join(" · ")
    : "–";
  const ttftSeconds = spreadInSeconds(facts.off.ttft_ms, facts.on.ttft_ms);
  const cells = [
    ["TTFT off", formatSpreadMs(facts.off.ttft_ms, ttftSeconds)],
    ["TTFT on", formatSpreadMs(facts.on.ttft_ms, ttftSeconds)],
    ["Drafts accepted", facts.acceptance != null ? formatPercent(facts.acceptance) : "–"],
    ["Accepted per round", facts.meanAccepted != null ? formatMean(facts.meanAccepted) : "–"],
    ["By draft depth", depth],
    ["Output", facts.output],
    ["Draft block", facts.block != null ? String(facts.block) : "–"],
    ["Thinking budget", facts.budget != null ? String(facts.budget) : "–"],
  ];
  const cellWidth = (WIDTH - 2 * pad) / 4;
  cells.forEach(([label, value], i) => {
    const cx = pad + (i % 4) * cellWidth;
    const cy = 330 + Math.floor(i / 4) * 66;
    ctx.fillStyle = c.muted;
    ctx.font = font(14, 600);
    ctx.fillText(label.toUpperCase(), cx, cy);
    ctx.fillStyle = c.text;
    // a smaller size before an ellipsis, so "near-tie (margin 0.091)" is read whole
    const size = [22, 19, 16].find((px) => {
      ctx.font = font(px, 600);
      return ctx.measureText(value).width <= cellWidth - 16;
    }) ?? 16;
    ctx.font = font(size, 600);
    ctx.fillText(fit(ctx, value, cellWidth - 16), cx, cy + 30);
  });

  // The setup, the prompt and the command that reproduces it.
  ctx.fillStyle = c.border;
  ctx.fillRect(pad, 462, WIDTH - 2 * pad, 1);
  const lines = [
    // the loop last, so that a long reason for mlx-vlm's is what the ellipsis cuts
    [`${facts.engine ?? "engine ?"} · ${facts.model ?? "model ?"} · drafter ${facts.drafter ?? "none"}`
      + (facts.sampling ? ` · ${facts.sampling}` : "") + (facts.loop ? ` · ${facts.loop}` : ""),
    c.text, font(17, 600)],
    [facts.machine ?? "machine not reported", c.muted, font(16)],
    [facts.versions ?? "", c.muted, font(16)],
    [`Prompt: ${facts.prompt.replace(/\s+/g, " ").trim()}`, c.muted, font(16)],
  ];
  lines.forEach(([value, color, f], i) => {
    ctx.fillStyle = color;
    ctx.font = f;
    ctx.fillText(fit(ctx, value, WIDTH - 2 * pad), pad, 490 + i * 27);
  });
  if (facts.bench) {
    ctx.fillStyle = c.panel;
    ctx.fillRect(pad, 597, WIDTH - 2 * pad, 42);
    ctx.fillStyle = c.text;
    ctx.font = font(15, 500, c.mono);
    ctx.fillText(fit(ctx, `$ ${facts.bench}`, WIDTH - 2 * pad - 28), pad + 14, 624);
  }
  if (facts.busy) {
    ctx.fillStyle = c.warn;
    ctx.fillRect(0, HEIGHT - 30, WIDTH, 30);
    ctx.fillStyle = c.bg;
    ctx.font = font(16, 650);
    ctx.fillText(fit(ctx, facts.busy, WIDTH - 2 * pad), pad, HEIGHT - 10);
  }
  return canvas;
}
