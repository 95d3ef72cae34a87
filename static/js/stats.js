// The stats line under an answer: live while it streams, final after `done`.

import { formatCount, formatMean, formatMs, formatPercent, formatRate } from "@app/format.js";

// Rates over the first few tokens swing wildly (two tokens in, "33% accepted" looks like a failure),
// so speed and acceptance are shown from this many decoded tokens on.
export const MEASURE_TOKENS = 16;
const MEASURING = "measuring…";

/** One stat: `parts` alternate label and value text, e.g. ["", "42.1", " tok/s"]. */
function chip(key, title, ...parts) {
  const el = document.createElement("span");
  el.className = "stat";
  el.dataset.stat = key;
  el.title = title;
  for (const [i, text] of parts.entries()) {
    if (!text) continue;
    const part = document.createElement("span");
    part.className = i % 2 === 0 ? "stat-label" : "stat-value";
    part.textContent = text;
    el.append(part);
  }
  return el;
}

/**
 * Render `stats` (keys of the protocol's stats object; any may still be null) into `el`, after
 * `produced` ({text, title}: what produced the reply) where known.
 */
export function renderStats(el, stats, live, produced = null) {
  const chips = [];
  // A finished reply shorter than that has no honest rate either: it says so instead.
  const early = stats.tokens != null && stats.tokens < MEASURE_TOKENS;
  const tooFew = live ? MEASURING : "too few tokens";
  const earlyTitle = `Shown from ${MEASURE_TOKENS} decoded tokens on`;
  if (stats.ttft_ms != null) {
    chips.push(chip("ttft", "Time to first token", "TTFT ", formatMs(stats.ttft_ms)));
  }
  if (early && (live || stats.tok_s != null)) {
    chips.push(chip("tok_s", earlyTitle, "tok/s ", tooFew));
  } else if (stats.tok_s != null) {
    chips.push(chip("tok_s", live ? "Decode speed so far" : "Decode speed", "", formatRate(stats.tok_s), " tok/s"));
  }
  if (stats.tokens != null) {
    const parts = [];
    if (stats.thinking_tokens != null) parts.push(`${formatCount(stats.thinking_tokens)} thinking`);
    if (stats.answer_tokens != null) parts.push(`${formatCount(stats.answer_tokens)} answer`);
    chips.push(chip("tokens", parts.join(" · ") || "Generated tokens", "", formatCount(stats.tokens), stats.tokens === 1 ? " token" : " tokens"));
  }
  // Drafting stats only mean something when a drafter ran; null says it did not.
  if (stats.drafted != null && early) {
    chips.push(chip("acceptance", earlyTitle, "accepted ", tooFew));
  } else if (stats.drafted != null) {
    chips.push(
      chip(
        "acceptance",
        `${formatCount(stats.accepted ?? 0)} of ${formatCount(stats.drafted)} drafted tokens accepted`,
        "",
        stats.acceptance != null ? formatPercent(stats.acceptance) : "–",
        " accepted",
      ),
    );
  }
  if (stats.mean_accepted != null && !early) {
    const title = `Drafted tokens accepted per verify round, over ${formatCount(stats.rounds ?? 0)} rounds`;
    chips.push(chip("mean_accepted", title, "", formatMean(stats.mean_accepted), " per round"));
  }
  // Per-depth acceptance (MTPLX): how often the 1st, 2nd, … drafted token of a round was kept.
  if (!early && Array.isArray(stats.acceptance_by_depth) && stats.acceptance_by_depth.length) {
    const depths = stats.acceptance_by_depth.map((a) => (a == null ? "–" : formatPercent(a))).join(" · ");
    chips.push(chip("acceptance_by_depth", "Acceptance at draft depth 1, 2, …", "by depth ", depths));
  }
  // Which bound held thinking at the reasoning budget (daemon engines): the server's own, or specchat's cut.
  if (stats.budget_bound === "server") {
    chips.push(chip("budget_bound", "The server closed thinking at the reasoning budget", "budget ", "closed by server"));
  } else if (stats.budget_bound === "cut") {
    const title = "The server thought past the reasoning budget: specchat cut its thinking there and asked for the answer";
    chips.push(chip("budget_bound", title, "budget ", "cut by specchat"));
  }
  if (stats.prompt_tokens != null) {
    const title = "Prompt tokens, and how many came from the prefix cache";
    const cached = stats.cached_tokens ? [" prompt · ", formatCount(stats.cached_tokens), " cached"] : [" prompt"];
    chips.push(chip("prompt", title, "", formatCount(stats.prompt_tokens), ...cached));
  }
  if (produced) chips.unshift(chip("produced", produced.title, produced.text));
  el.dataset.live = String(live);
  el.replaceChildren(...chips);
  el.hidden = chips.length === 0;
}
