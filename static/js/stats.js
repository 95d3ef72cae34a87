// The stats line under an answer: live while it streams, final after `done`.

import { formatCount, formatMean, formatMs, formatPercent, formatRate } from "@app/format.js";

// Rates over the first few tokens swing wildly (two tokens in, "33% accepted" looks like a failure),
// so speed and acceptance are shown from this many decoded tokens on.
export const MEASURE_TOKENS = 16;
const MEASURING = "measuring…";

// Where an acceptance rate turns from poor to fair to good: below 40% drafting rarely pays for its rounds,
// from 70% on it usually does.
const FAIR = 0.4;
const GOOD = 0.7;

/** "low", "fair" or "good": the colour of an acceptance rate (0 to 1) wherever one is shown. */
export function acceptanceLevel(fraction) {
  return fraction >= GOOD ? "good" : fraction >= FAIR ? "fair" : "low";
}

/** An acceptance rate as text coloured by its level ("–" when unknown). */
export function acceptanceValue(fraction, className = "") {
  const el = document.createElement("span");
  el.className = `${className} acceptance-value`.trim();
  el.textContent = fraction == null ? "–" : formatPercent(fraction);
  if (fraction != null) el.dataset.level = acceptanceLevel(fraction);
  return el;
}

/** Acceptance at draft depth 1, 2, …: "92% · 71% · –", each rate coloured by its level. */
export function acceptanceByDepth(fractions, className = "") {
  const el = document.createElement("span");
  if (className) el.className = className;
  for (const [i, fraction] of fractions.entries()) {
    if (i) el.append(" · ");
    el.append(acceptanceValue(fraction));
  }
  return el;
}

/** One stat: `parts` alternate label and value, each text or an element, e.g. ["", "42.1", " tok/s"]. */
function chip(key, title, ...parts) {
  const el = document.createElement("span");
  el.className = "stat";
  el.dataset.stat = key;
  el.title = title;
  for (const [i, content] of parts.entries()) {
    if (!content) continue;
    if (content instanceof Node) {
      el.append(content);
      continue;
    }
    const part = document.createElement("span");
    part.className = i % 2 === 0 ? "stat-label" : "stat-value";
    part.textContent = content;
    el.append(part);
  }
  return el;
}

/**
 * The time to first token in its parts, "vision 120 ms · prefill 80 ms · first token 20 ms": the vision tower's
 * time, the prefill's and the first token's (the rest), those the engine reports; null where it reports neither.
 */
export function ttftSplit(stats) {
  const { ttft_ms: ttft, vision_ms: vision, prefill_ms: prefill } = stats ?? {};
  if (ttft == null || (vision == null && prefill == null)) return null;
  const parts = [];
  if (vision != null) parts.push(["vision", vision]);
  if (prefill != null) parts.push(["prefill", prefill]);
  parts.push(["first token", Math.max(0, ttft - (vision ?? 0) - (prefill ?? 0))]);
  return parts.map(([name, ms]) => `${name} ${formatMs(ms)}`).join(" · ");
}

/**
 * Render `stats` (keys of the protocol's stats object; any may still be null) into `el`, after
 * `produced` ({text, title}: what produced the reply) where known; `waiting` names the tools whose calls wait
 * for the user's approval, which the line says first.
 */
export function renderStats(el, stats, live, produced = null, waiting = []) {
  const chips = [];
  // A finished reply shorter than that has no honest rate either: it says so instead.
  const early = stats.tokens != null && stats.tokens < MEASURE_TOKENS;
  const tooFew = live ? MEASURING : "too few tokens";
  const earlyTitle = `Shown from ${MEASURE_TOKENS} decoded tokens on`;
  if (stats.ttft_ms != null) {
    const split = ttftSplit(stats);
    const parts = split ? [` (${split})`] : [];
    chips.push(chip("ttft", split ? `Time to first token: ${split}` : "Time to first token", "TTFT ",
      formatMs(stats.ttft_ms), ...parts));
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
  if (stats.tool_calls > 0) {
    const calls = stats.tool_calls === 1 ? " tool call, " : " tool calls, ";
    const title = "Tool calls the reply made, and the time they took";
    chips.push(chip("tool_calls", title, "", formatCount(stats.tool_calls), calls, formatMs(stats.tool_ms)));
    if (stats.tool_acceptance != null) {
      chips.push(chip("tool_acceptance", "Drafted tokens accepted inside the tool calls' text", "",
        acceptanceValue(stats.tool_acceptance, "stat-value"), " accepted in tool calls"));
    }
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
        acceptanceValue(stats.acceptance, "stat-value"),
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
    const depths = acceptanceByDepth(stats.acceptance_by_depth, "stat-value");
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
  if (stats.image_tokens) {
    const title = "Prompt tokens the attached images took";
    chips.push(chip("image_tokens", title, "", formatCount(stats.image_tokens), " image tokens"));
  }
  if (produced) chips.unshift(chip("produced", produced.title, produced.text));
  if (waiting.length) {
    const title = "The reply is paused, not frozen: it goes on once you allow or deny the call above";
    chips.unshift(chip("approval", title, "", `Waiting for your approval to run ${waiting.join(", ")}`,
      ": the reply goes on once you choose"));
  }
  el.dataset.live = String(live);
  el.replaceChildren(...chips);
  el.hidden = chips.length === 0;
}
