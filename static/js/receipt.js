// A race's or block sweep's receipt: the server's record (JSON or Markdown), and for a race the facts its PNG
// card shows (drawn by receipt-card.js).

import { busyText } from "@app/busy.js";
import { nearTieText, pairsText } from "@app/race-summary.js";

export { drawReceiptCard } from "@app/receipt-card.js";

/** The receipt's address; `base` is the one `race_done` (or `sweep_done`) names, when it does. */
export function receiptUrl(raceId, format, base) {
  return `${base ?? `/api/receipts/${encodeURIComponent(raceId)}`}?format=${format}`;
}

/** Save the server's Markdown receipt of race or sweep `id` as `filename`; an Error says why it could not. */
export async function saveMarkdownReceipt(id, base, filename) {
  let response;
  try {
    response = await fetch(receiptUrl(id, "markdown", base), { headers: { Accept: "text/markdown" } });
  } catch {
    throw new Error("The server could not be reached for the receipt.");
  }
  if (!response.ok) {
    let reason = `HTTP ${response.status}`;
    try {
      reason = (await response.json()).error?.message ?? reason;
    } catch {
      // Not JSON: the status says enough.
    }
    throw new Error(`The server gave no receipt: ${reason}`);
  }
  downloadBlob(new Blob([await response.text()], { type: "text/markdown" }), filename);
}

/** The server's receipt for `raceId`, or an Error whose message can be shown as is. */
export async function fetchReceipt(raceId) {
  let response;
  try {
    response = await fetch(receiptUrl(raceId, "json"), { headers: { Accept: "application/json" } });
  } catch {
    throw new Error("The server could not be reached for the receipt.");
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    // Not JSON: the status says enough.
  }
  if (!response.ok || !body?.receipt) {
    const reason = body?.error?.message ?? `HTTP ${response.status}`;
    throw new Error(`The server gave no receipt: ${reason}`);
  }
  return body.receipt;
}

/** Save `blob` as a download named `filename`. */
export function downloadBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  // The download has its own copy once started; give it a moment before freeing ours.
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export function canvasToPng(canvas) {
  return new Promise((resolve, reject) => {
    canvas.toBlob((blob) => (blob ? resolve(blob) : reject(new Error("The card could not be drawn."))), "image/png");
  });
}

function text(value) {
  if (value == null || value === "") return null;
  if (typeof value === "object") {
    return Object.values(value).filter((v) => v != null && v !== "" && typeof v !== "object").join(" · ") || null;
  }
  return String(value);
}

/** "AMD EPYC, 2 cores, Linux 6.1 · no accelerator · BLAS openblas". */
function machineText(machine) {
  if (!machine || typeof machine !== "object") return text(machine);
  const parts = [
    [machine.cpu, machine.cores != null ? `${machine.cores} cores` : null, machine.os].filter(Boolean).join(", "),
    machine.accelerator ? `accelerator ${machine.accelerator}` : "no accelerator",
    machine.blas ? `BLAS ${machine.blas}` : null,
  ];
  return parts.filter(Boolean).join(" · ");
}

function samplingText(sampling) {
  if (!sampling || typeof sampling !== "object") return text(sampling);
  const { temperature, top_p: topP } = sampling;
  if (temperature === 0) return "greedy";
  return [temperature != null ? `temperature ${temperature}` : null, topP != null ? `top-p ${topP}` : null]
    .filter(Boolean).join(", ");
}

/** Whether both lanes wrote the same answer, and where they did not whether it was a near-tie. */
function outputText(identical, divergence) {
  if (identical == null) return "–";
  return identical ? "identical ✓" : nearTieText(divergence?.margin) ?? "differs";
}

/**
 * Which decode loop the lanes ran on, as the MLX engine's stats say ("specchat's loop"), and why where it was
 * mlx-vlm's; null where no lane said (a daemon engine).
 */
function loopText(lanes, reason) {
  const said = lanes.map(([name, lane]) => [name, lane.decode_loop ?? lane.stats?.decode_loop])
    .filter(([, loop]) => loop);
  if (!said.length) return null;
  const words = said.every(([, loop]) => loop === said[0][1])
    ? `${said[0][1]}'s loop`
    : said.map(([name, loop]) => `${name} ${loop}'s loop`).join(", ");
  const why = said.some(([, loop]) => loop !== "specchat") && reason ? ` (${reason})` : "";
  return words + why;
}

/**
 * What the card shows, from the server's receipt where it has it and from the race as this page
 * saw it otherwise (`receipt` may be null when the server could not give one).
 */
export function cardFacts(receipt, raceDone, context = {}) {
  const r = receipt ?? {};
  const pick = (...values) => values.find((v) => v != null && v !== "");
  const lane = (name) => ({ ...(raceDone?.[name] ?? {}), ...(r[name] ?? {}) });
  const on = lane("on");
  const off = lane("off");
  const versions = r.versions && typeof r.versions === "object"
    ? Object.entries(r.versions).filter(([, v]) => v).map(([k, v]) => `${k} ${v}`).join(" · ")
    : text(r.versions);
  const judged = (key) => pick(r[key], raceDone?.[key]);
  return {
    speedup: pick(r.speedup, raceDone?.speedup),
    runs: pick(r.runs?.measured, raceDone?.runs),
    verdict: judged("verdict"),
    pairs: pairsText({ ratios: judged("ratios"), wins: judged("wins"), confidence: judged("confidence"),
      verdict: judged("verdict") }),
    busy: busyText(judged("busy")),
    off,
    on,
    acceptance: pick(r.acceptance, on.acceptance, on.stats?.acceptance),
    byDepth: pick(r.acceptance_by_depth, on.acceptance_by_depth, on.stats?.acceptance_by_depth),
    meanAccepted: pick(r.mean_accepted, on.mean_accepted, on.stats?.mean_accepted),
    output: outputText(pick(r.identical, raceDone?.identical),
      pick(r.first_divergence, raceDone?.first_divergence)),
    loop: loopText([["off", off], ["on", on]],
      pick(r.decode_loop_reason, on.decode_loop_reason, on.stats?.decode_loop_reason)),
    engine: text(pick(r.engine, context.engine?.name)),
    model: text(pick(r.model, context.engine?.model)),
    drafter: text(pick(r.drafter, context.engine?.drafter)),
    // On "auto", with the block it ran most: "auto (4)".
    block: pick(r.chose, raceDone?.chose, r.block_size, context.settings?.draft_block_size),
    sampling: samplingText(r.sampling ?? (context.settings && { temperature: 0 })),
    budget: pick(r.reasoning_budget, context.settings?.reasoning_budget),
    machine: machineText(r.machine),
    versions,
    prompt: pick(r.prompt, context.prompt) ?? "",
    bench: text(pick(r.command, r.bench_command)),
    date: (pick(r.at) ?? new Date().toISOString()).slice(0, 16).replace("T", " "),
  };
}
