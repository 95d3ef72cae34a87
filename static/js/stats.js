// The stats line under an answer: live while it streams, final after `done`.

import { formatCount, formatMs, formatPercent, formatRate } from "@app/format.js";

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

/** Render `stats` (keys of the protocol's stats object; any may still be null) into `el`. */
export function renderStats(el, stats, live) {
  const chips = [];
  if (stats.ttft_ms != null) {
    chips.push(chip("ttft", "Time to first token", "TTFT ", formatMs(stats.ttft_ms)));
  }
  if (stats.tok_s != null) {
    chips.push(chip("tok_s", live ? "Decode speed so far" : "Decode speed", "", formatRate(stats.tok_s), " tok/s"));
  }
  if (stats.tokens != null) {
    const parts = [];
    if (stats.thinking_tokens != null) parts.push(`${formatCount(stats.thinking_tokens)} thinking`);
    if (stats.answer_tokens != null) parts.push(`${formatCount(stats.answer_tokens)} answer`);
    chips.push(chip("tokens", parts.join(" · ") || "Generated tokens", "", formatCount(stats.tokens), stats.tokens === 1 ? " token" : " tokens"));
  }
  // Drafting stats only mean something when a drafter ran; null says it did not.
  if (stats.drafted != null) {
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
  // Per-depth acceptance (MTPLX): how often the 1st, 2nd, … drafted token of a round was kept.
  if (Array.isArray(stats.acceptance_by_depth) && stats.acceptance_by_depth.length) {
    const depths = stats.acceptance_by_depth.map((a) => (a == null ? "–" : formatPercent(a))).join(" · ");
    chips.push(chip("acceptance_by_depth", "Acceptance at draft depth 1, 2, …", "by depth ", depths));
  }
  if (stats.prompt_tokens != null) {
    const title = "Prompt tokens, and how many came from the prefix cache";
    const cached = stats.cached_tokens ? [" prompt · ", formatCount(stats.cached_tokens), " cached"] : [" prompt"];
    chips.push(chip("prompt", title, "", formatCount(stats.prompt_tokens), ...cached));
  }
  el.dataset.live = String(live);
  el.replaceChildren(...chips);
  el.hidden = chips.length === 0;
}
