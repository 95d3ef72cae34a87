// What produced a stored reply, from its `settings`: "drafter on · block 4 · budget 512".

import { autoLabel } from "@app/quick-bar.js";
import { mostRun } from "@app/baseline.js";

/**
 * The short line, or null for a reply that carries no settings (a live one, or an import without them); on
 * block "auto" it names the block the reply's `stats` say ran most, "block auto (4)".
 */
export function producedLine(settings, stats = null) {
  if (!settings) return null;
  const block = settings.draft_block_size === "auto" ? autoLabel(mostRun(stats?.block_history))
    : settings.draft_block_size;
  const drafter = settings.speculative && settings.drafter !== null
    ? `drafter on · block ${block}`
    : "drafter off";
  const budget = settings.reasoning_budget === 0 ? "thinking off" : `budget ${settings.reasoning_budget}`;
  return `${drafter} · ${budget}`;
}

/** The long form, for a tooltip: engine, model, drafter and sampling. */
export function producedTitle(settings) {
  if (!settings) return "";
  const parts = [
    `Engine: ${settings.engine ?? "?"}`,
    `model: ${settings.model ?? "?"}`,
    `drafter: ${settings.speculative && settings.drafter ? settings.drafter : "off"}`,
    `temperature ${settings.temperature}`,
    `top-p ${settings.top_p}`,
    `max tokens ${settings.max_tokens}`,
  ];
  return `Produced by ${parts.join(", ")}`;
}
