// Decode tok/s against draft block size, as an inline SVG bar chart (block 1 = drafter off).

import { formatPercent, formatRate } from "@app/format.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 560;
const H = 240;
const PAD = { top: 26, right: 12, bottom: 46, left: 62 };

function node(tag, attrs, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  if (text != null) el.textContent = text;
  return el;
}

/** A row's rate: a number, or `{median}` when the block ran several times. */
export function rowRate(row) {
  const rate = row?.tok_s;
  if (typeof rate === "number") return rate;
  return typeof rate?.median === "number" ? rate.median : null;
}

/** A "nice" axis top at or above `max`: 1, 2 or 5 times a power of ten. */
function niceTop(max) {
  if (!(max > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 5, 10]) if (step * power >= max) return step * power;
  return 10 * power;
}

/**
 * The chart for `rows` ({block, tok_s, acceptance, mean_accepted}) over `blocks`; a block with no
 * row yet gets an empty slot. `best` is highlighted.
 */
export function renderSweepChart(rows, blocks, best) {
  const byBlock = new Map(rows.map((row) => [row.block, row]));
  const rates = rows.map(rowRate).filter((r) => r != null);
  const top = niceTop(Math.max(...rates, 0) * 1.08);
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const slot = plotW / blocks.length;
  const y = (rate) => PAD.top + plotH - (rate / top) * plotH;

  const svg = node("svg", { viewBox: `0 0 ${W} ${H}`, class: "sweep-chart", role: "img" });
  const described = rows
    .filter((row) => rowRate(row) != null)
    .map((row) => `block ${row.block}: ${formatRate(rowRate(row))} tok/s`)
    .join(", ");
  svg.setAttribute("aria-label", `Decode speed by draft block size${described ? `: ${described}` : ""}`);

  for (const fraction of [0, 0.25, 0.5, 0.75, 1]) {
    const value = top * fraction;
    svg.append(
      node("line", { x1: PAD.left, x2: W - PAD.right, y1: y(value), y2: y(value), class: "grid" }),
      node("text", { x: PAD.left - 8, y: y(value) + 4, class: "axis", "text-anchor": "end" }, formatRate(value).replace(/\.0$/, "")),
    );
  }
  svg.append(node("text", { x: 4, y: 14, class: "axis" }, "tok/s"));

  blocks.forEach((block, i) => {
    const row = byBlock.get(block);
    const rate = rowRate(row);
    const cx = PAD.left + slot * i + slot / 2;
    const barW = Math.min(56, slot * 0.62);
    const group = node("g", { class: `bar${block === best ? " best" : ""}`, "data-block": block });
    if (rate != null) {
      group.append(
        node("rect", { x: cx - barW / 2, y: y(rate), width: barW, height: Math.max(1, y(0) - y(rate)), rx: 3 }),
        node("text", { x: cx, y: y(rate) - 6, class: "value", "text-anchor": "middle" }, formatRate(rate)),
      );
    } else {
      group.append(node("rect", { x: cx - barW / 2, y: y(0) - 2, width: barW, height: 2, class: "pending" }));
    }
    group.append(node("text", { x: cx, y: H - PAD.bottom + 18, class: "label", "text-anchor": "middle" },
      block === 1 ? "1 (off)" : row?.chose ?? String(block)));
    if (row?.acceptance != null) {
      group.append(node("text", { x: cx, y: H - PAD.bottom + 34, class: "axis", "text-anchor": "middle" },
        formatPercent(row.acceptance)));
    }
    svg.append(group);
  });
  svg.append(
    node("text", { x: PAD.left - 8, y: H - PAD.bottom + 18, class: "axis", "text-anchor": "end" }, "block"),
    node("text", { x: PAD.left - 8, y: H - PAD.bottom + 34, class: "axis", "text-anchor": "end" }, "accepted"),
  );
  return svg;
}
