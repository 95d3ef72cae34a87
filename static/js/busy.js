// The warning a measurement taken on a busy machine carries (the server's `busy`: how much of the CPU
// went to other work meanwhile, and whether that is over its threshold).

/** The warning, or null when the machine was not busy (or the server could not tell). */
export function busyText(busy) {
  if (!busy || !busy.flagged || typeof busy.percent !== "number") return null;
  return `The machine was busy: ${Math.round(busy.percent)}% of the CPU went to other work, so these numbers ` +
    "are not representative.";
}
