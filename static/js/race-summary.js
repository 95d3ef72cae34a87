// A finished race in numbers: the speed-up, each lane's rate and TTFT (median, min-max), acceptance,
// and whether both lanes wrote the same answer.

import { formatFactor, formatMean, formatRate, formatSpread, formatSpreadMs } from "@app/format.js";
import { acceptanceByDepth, acceptanceValue } from "@app/stats.js";

function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text != null) el.textContent = text;
  return el;
}

/** A short quote of where two texts part, made visible (a space or newline would read as nothing). */
function quote(text) {
  if (text == null || text === "") return "(nothing)";
  const shown = text.length > 40 ? `${text.slice(0, 40)}…` : text;
  return `“${shown.replaceAll("\n", "⏎")}”`;
}

/** Render `raceDone` (the `race_done` frame) into `el`. */
export function renderRaceSummary(el, raceDone) {
  const { off = {}, on = {}, speedup, runs } = raceDone;
  const children = [];

  const verdict = element("p", "race-verdict");
  if (speedup && speedup.median != null) {
    const faster = speedup.median >= 1;
    verdict.dataset.faster = String(faster);
    verdict.append(
      element("span", "race-factor", formatFactor(speedup.median)),
      faster ? " faster with the drafter" : " with the drafter: slower",
    );
    const spread = runs > 1 && speedup.min != null ? `${formatFactor(speedup.min)}–${formatFactor(speedup.max)}, ` : "";
    verdict.append(element("span", "race-spread", ` (${spread}median of ${runs} ${runs === 1 ? "run" : "runs"})`));
  } else {
    verdict.textContent = "No speed-up to report: the race did not finish a pair of runs.";
  }
  children.push(verdict);
  if (speedup && speedup.median != null && speedup.median < 1) {
    children.push(element("p", "note note-slow-draft", "Drafting is not paying off here. Try a smaller draft block."));
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
  row("Decode tok/s", "tok_s", formatSpread(off.tok_s, formatRate), formatSpread(on.tok_s, formatRate));
  row("Time to first token", "ttft", formatSpreadMs(off.ttft_ms), formatSpreadMs(on.ttft_ms));
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
    const { index, off: offText, on: onText } = raceDone.first_divergence;
    same.dataset.identical = "false";
    same.textContent = `Outputs differ from character ${index}: off ${quote(offText)}, on ${quote(onText)}`;
  } else if (raceDone.identical === false) {
    same.dataset.identical = "false";
    same.textContent = "The lanes' outputs differ.";
  }
  if (same.textContent) children.push(same);
  el.replaceChildren(...children);
  el.hidden = false;
}
