// Number and duration formatting shared by the stats line, the thinking label and the cache status.
// The UI's words are English, so its numbers are too ("3.2 s", "1,204").

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const oneDecimal = new Intl.NumberFormat("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });

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
