// A finished race in numbers: the speed-up, the pairs won and how sure the speed-up is, each lane's rate
// and TTFT (median, min-max), acceptance, whether both lanes wrote the same answer, and whether the
// machine was busy meanwhile.

import { adviceText, adviseBlock, costText, mostDrafted } from "@app/baseline.js";
import { busyText } from "@app/busy.js";
import { element } from "@app/dom.js";
import { formatFactor, formatMean, formatRate, formatSpread, formatSpreadMs, spreadInSeconds } from "@app/format.js";
import { acceptanceByDepth, acceptanceValue } from "@app/stats.js";

/** A short quote of where two texts part, made visible (a space or newline would read as nothing). */
function quote(text) {
  if (text == null || text === "") return "(nothing)";
  const shown = text.length > 40 ? `${text.slice(0, 40)}…` : text;
  return `“${shown.replaceAll("\n", "⏎")}”`;
}

/**
 * "Faster in 5 of 5 pairs: the median speed-up is 2.22×–2.42× (94% confidence)", or why it is unclear;
 * null for a race from before the server judged its pairs.
 */
export function pairsText(raceDone) {
  const { wins, confidence, verdict } = raceDone;
  const pairs = (raceDone.ratios ?? []).filter((r) => r != null).length;
  if (!confidence || !pairs || wins == null) return null;
  const interval = `${formatFactor(confidence.low)}–${formatFactor(confidence.high)} ` +
    `(${Math.round(confidence.coverage * 100)}% confidence)`;
  if (verdict === "faster") return `Faster in ${wins} of ${pairs} pairs: the median speed-up is ${interval}.`;
  if (verdict === "slower") return `Slower in ${pairs - wins} of ${pairs} pairs: the median speed-up is ${interval}.`;
  const why = pairs < 5
    ? `${pairs} ${pairs === 1 ? "pair" : "pairs"} cannot settle it; 5 or more can (runs "auto" adds them)`
    : `the median speed-up is ${interval}, either side of 1×`;
  return `Unclear: faster in ${wins} of ${pairs} pairs; ${why}.`;
}

/** Whether the race showed drafting slower: its verdict, or for an older race every pair lost. */
function slower(raceDone) {
  if (raceDone.verdict) return raceDone.verdict === "slower";
  return raceDone.speedup?.max != null && raceDone.speedup.max < 1;
}

// A logit margin below this is within what two roundings of a bfloat16 step can move (as in receipts.py).
const NEAR_TIE = 0.5;

/** "near-tie (margin 0.09)" where greedy lanes parted at a near-tie (`first_divergence.margin`), else null. */
export function nearTieText(margin) {
  return margin != null && margin < NEAR_TIE ? `near-tie (margin ${Number(margin.toPrecision(2))})` : null;
}

/** How near a tie the target's choice was where greedy lanes parted. */
function marginWords(margin) {
  const nearTie = nearTieText(margin);
  if (nearTie) return `A ${nearTie} rounded differently; both continuations are greedy.`;
  return `The target's top two logits there are ${margin.toFixed(2)} apart.`;
}

/** Render `raceDone` (the `race_done` frame) into `el`. */
export function renderRaceSummary(el, raceDone, engine = null) {
  const { off = {}, on = {}, speedup, runs } = raceDone;
  const children = [];

  const verdict = element("p", "race-verdict");
  if (speedup && speedup.median != null) {
    const faster = speedup.median >= 1;
    verdict.dataset.faster = String(faster);
    if (raceDone.verdict) verdict.dataset.verdict = raceDone.verdict;
    const unsettled = raceDone.verdict === "unclear" ? ", not settled" : "";
    verdict.append(
      element("span", "race-factor", formatFactor(speedup.median)),
      `${faster ? " faster with the drafter" : " with the drafter: slower"}${unsettled}`,
    );
    const spread = runs > 1 && speedup.min != null ? `${formatFactor(speedup.min)}–${formatFactor(speedup.max)}, ` : "";
    verdict.append(element("span", "race-spread", ` (${spread}median of ${runs} ${runs === 1 ? "run" : "runs"})`));
  } else {
    verdict.textContent = "No speed-up to report: the race did not finish a pair of runs.";
  }
  children.push(verdict);
  const pairs = pairsText(raceDone);
  if (pairs) children.push(element("p", "race-pairs", pairs));
  const busy = busyText(raceDone.busy);
  if (busy) {
    const warning = element("p", "note note-busy race-busy", busy);
    warning.setAttribute("role", "status");
    children.push(warning);
  }
  if (slower(raceDone)) {
    // On "auto", the block it drafted at most is the one to advise from.
    const fixed = typeof raceDone.block_size === "number" ? raceDone.block_size : null;
    const block = fixed ?? mostDrafted(on.block_history) ?? (on.acceptance_by_depth?.length ?? 0) + 1;
    const named = fixed ?? raceDone.chose ?? block;
    const advice = adviseBlock({ block, on: on.tok_s?.median, off: off.tok_s?.median,
      byDepth: on.acceptance_by_depth ?? on.stats?.acceptance_by_depth });
    children.push(element("p", "note note-slow-draft",
      [`Drafting is not paying off here at block ${named}.`, adviceText(advice, block), costText(engine)]
        .filter(Boolean).join(" ")));
  }

  const table = element("table", "race-table");
  const head = element("tr");
  head.append(element("th", null, ""), element("th", null, "Drafter off"), element("th", null, "Drafter on"));
  table.append(element("thead"));
  table.tHead.append(head);
  const body = element("tbody");
  const row = (label, key, offText, onText) => {
    const tr = element("tr");
    tr.dataset.row = key;
    tr.append(element("th", null, label), element("td", null, offText), element("td"));
    tr.lastChild.append(onText); // text, or an element (acceptance coloured by its level)
    body.append(tr);
  };
  // The block the drafter ran at; on "auto", the one it ran most: "auto (4)".
  if (raceDone.block_size != null) row("Draft block", "block", "–", raceDone.chose ?? String(raceDone.block_size));
  row("Decode tok/s", "tok_s", formatSpread(off.tok_s, formatRate), formatSpread(on.tok_s, formatRate));
  const ttftSeconds = spreadInSeconds(off.ttft_ms, on.ttft_ms);
  row("Time to first token", "ttft", formatSpreadMs(off.ttft_ms, ttftSeconds), formatSpreadMs(on.ttft_ms, ttftSeconds));
  // Over every drafter-on run, as the rates are (a race stored before these were sent has its last run's).
  const pooled = (key) => on[key] ?? on.stats?.[key];
  const acceptance = pooled("acceptance");
  const meanAccepted = pooled("mean_accepted");
  const byDepth = pooled("acceptance_by_depth");
  if (acceptance != null) row("Drafts accepted", "acceptance", "–", acceptanceValue(acceptance));
  if (meanAccepted != null) row("Accepted per round", "mean_accepted", "–", formatMean(meanAccepted));
  if (Array.isArray(byDepth) && byDepth.length) {
    row("By draft depth", "by_depth", "–", acceptanceByDepth(byDepth));
  }
  table.append(body);
  children.push(table);

  const same = element("p", "race-identical");
  if (raceDone.identical) {
    same.dataset.identical = "true";
    same.textContent = "✓ Identical output in both lanes";
  } else if (raceDone.first_divergence) {
    const { index, off: offText, on: onText, margin } = raceDone.first_divergence;
    same.dataset.identical = "false";
    same.textContent = `Outputs differ from character ${index}: off ${quote(offText)}, on ${quote(onText)}`;
    if (margin != null) same.textContent += `. ${marginWords(margin)}`;
  } else if (raceDone.identical === false) {
    same.dataset.identical = "false";
    same.textContent = "The lanes' outputs differ.";
  }
  if (same.textContent) children.push(same);
  el.replaceChildren(...children);
  el.hidden = false;
}
