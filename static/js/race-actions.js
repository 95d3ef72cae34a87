// A finished race's actions: a replay of both lanes' median runs side by side at their recorded pace, and
// the receipt (a PNG card, or the Markdown and JSON the server keeps).

import { element } from "@app/dom.js";
import { RaceReplay, Recording } from "@app/race-replay.js";
import { canvasToPng, cardFacts, downloadBlob, drawReceiptCard, fetchReceipt } from "@app/receipt.js";

const LANES = ["off", "on"];

function button(label, name, onClick) {
  const el = element("button", "button small", label);
  el.type = "button";
  if (name) el.setAttribute("aria-label", name);
  el.addEventListener("click", onClick);
  return el;
}

/** The run of `runs` whose decode rate is the median (the lower middle one for an even count). */
function medianRun(runs) {
  const finished = runs.filter((run) => run.final && run.final.stats?.tok_s != null && run.events.length);
  const pool = finished.length ? finished : runs.filter((run) => run.events.length);
  if (!pool.length) return null;
  const sorted = [...pool].sort((a, b) => a.final.stats.tok_s - b.final.stats.tok_s);
  return finished.length ? sorted[Math.floor((sorted.length - 1) / 2)] : pool[pool.length - 1];
}

/** Replay and the receipt, in `race`'s actions row (shown only when there is one). */
export function renderRaceActions(race) {
  const buttons = [];
  const tracks = replayTracks(race);
  if (tracks.length === 2) {
    race.replayButton = button("Replay", "Replay race", () => toggleReplay(race));
    buttons.push(race.replayButton);
  }
  if (race.result && race.el.dataset.finish !== "error" && race.result.speedup) {
    race.receiptButton = button("Receipt", "Save receipt", () => saveReceipt(race));
    race.receiptButton.title = "Save this race's receipt as a PNG card";
    const links = race.receiptLinks(race.result.receipt, "receipt", `specchat-race-${race.id}`);
    buttons.push(race.receiptButton, ...links);
  }
  race.receiptStatus = element("span", "race-receipt-status");
  race.receiptStatus.setAttribute("role", "status");
  race.actionsEl.replaceChildren(...buttons, race.receiptStatus);
  race.actionsEl.hidden = buttons.length === 0;
}

function replayTracks(race) {
  const tracks = [];
  for (const name of LANES) {
    const run = medianRun(race.record[name]);
    if (!run) continue;
    const count = race.record[name].length;
    const label = count > 1 ? `replay · run ${run.run + 1}, the median` : "replay";
    tracks.push(new Recording(race.lanes[name], run, label));
  }
  return tracks;
}

function toggleReplay(race) {
  if (race.replay) {
    race.replay.cancel();
    return;
  }
  const tracks = replayTracks(race);
  race.replay = new RaceReplay(tracks, (completed) => {
    race.replay = null;
    for (const track of tracks) {
      race.shown[track.lane.lane] = track.run;
      race.summarizeLane(track.lane.lane);
    }
    race.el.dataset.replaying = "false";
    race.replayButton.textContent = "Replay";
    race.replayButton.setAttribute("aria-label", "Replay race");
    race.setStatus(completed ? "Replay finished" : "Replay stopped");
  });
  race.el.dataset.replaying = "true";
  race.replayButton.textContent = "Stop replay";
  race.replayButton.setAttribute("aria-label", "Stop replay");
  race.setStatus("Replaying both lanes at their recorded pace…");
  race.replay.start();
  // Replay is pressed below the summary, where the lanes are out of sight: bring them to the room.
  race.lanesEl.scrollIntoView({ block: "nearest" });
}

async function saveReceipt(race) {
  const status = race.receiptStatus;
  race.receiptButton.disabled = true;
  status.textContent = "Drawing…";
  status.dataset.kind = "";
  let receipt = null;
  let warning = "";
  try {
    receipt = await fetchReceipt(race.id);
  } catch (error) {
    warning = `${error.message} The card shows the numbers this page saw.`;
  }
  try {
    const facts = cardFacts(receipt, race.result, { ...race.context(), prompt: race.prompt });
    const blob = await canvasToPng(drawReceiptCard(facts));
    downloadBlob(blob, `specchat-race-${race.id}.png`);
    status.textContent = warning || "Saved the receipt card.";
    status.dataset.kind = warning ? "warn" : "ok";
  } catch (error) {
    status.textContent = `Error: ${error.message}`;
    status.dataset.kind = "error";
  } finally {
    race.receiptButton.disabled = false;
  }
}

