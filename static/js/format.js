// Number and duration formatting shared by the stats line, the thinking label and the cache status.
// The UI's words are English, so its numbers are too ("3.2 s", "1,204").

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const oneDecimal = new Intl.NumberFormat("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });
const twoDecimals = new Intl.NumberFormat("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });

export function formatCount(n) {
  return integer.format(n);
}

/** "1 token", "412 tokens". */
export function formatTokens(n) {
  return `${integer.format(n)} ${n === 1 ? "token" : "tokens"}`;
}

/** "840 ms" below a second, "3.2 s" below a minute, then "2 min 5 s". */
export function formatMs(ms) {
  if (ms < 1000) return `${integer.format(ms)} ms`;
  return formatSeconds(ms);
}

/** "3.2 s", or "2 min 5 s" from a minute on. */
export function formatSeconds(ms) {
  const seconds = ms / 1000;
  if (seconds < 60) return `${oneDecimal.format(seconds)} s`;
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)} min ${whole % 60} s`;
}

export function formatRate(perSecond) {
  return oneDecimal.format(perSecond);
}

export function formatPercent(fraction) {
  return `${integer.format(fraction * 100)}%`;
}

export function formatBytes(bytes) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${integer.format(value)} B` : `${oneDecimal.format(value)} ${units[unit]}`;
}

/** "1.63×". */
export function formatFactor(ratio) {
  return `${twoDecimals.format(ratio)}×`;
}

/**
 * A median with its spread, e.g. "111.8 (104.2–118.0)"; the spread is left out when there is
 * none (one run). `summary` is `{median, min, max}`, any of which may be null.
 */
export function formatSpread(summary, format) {
  if (!summary || summary.median == null) return "–";
  const { median, min, max } = summary;
  if (min == null || max == null || min === max) return format(median);
  return `${format(median)} (${format(min)}–${format(max)})`;
}

/** A spread of durations with the unit once: "120 (110–130) ms", or "1.2 (1.1–1.4) s". */
export function formatSpreadMs(summary, seconds = spreadInSeconds(summary)) {
  if (!summary || summary.median == null) return "–";
  const format = seconds ? (ms) => oneDecimal.format(ms / 1000) : (ms) => integer.format(ms);
  return `${formatSpread(summary, format)} ${seconds ? "s" : "ms"}`;
}

/** Whether spreads of milliseconds read better in seconds: any of them reaches a second. Cells side by side
 * take one answer for all, so a row never mixes "263 ms" with "0.3 s". */
export function spreadInSeconds(...summaries) {
  return summaries.some((s) => s?.median != null && Math.max(s.median, s.max ?? 0) >= 1000);
}

/** Two decimals, e.g. a mean "2.31". */
export function formatMean(n) {
  return twoDecimals.format(n);
}
