// A race: one prompt run with the drafter off and on, lane after lane (runs interleaved), shown side by
// side: each pair's second lane streams live beside a recording of its first, played at the pace it arrived,
// so both grow together. Then the summary, a replay of both lanes' median runs, and the receipt.

import { ContestCard } from "@app/contest-card.js";
import { element } from "@app/dom.js";
import { RaceLane } from "@app/race-lane.js";
import { renderRaceActions } from "@app/race-actions.js";
import { Recording, runClock } from "@app/race-replay.js";
import { renderRaceSummary } from "@app/race-summary.js";

const LANES = ["off", "on"];
const LANE_NAMES = { off: "drafter off", on: "drafter on" };
const OTHER = { off: "on", on: "off" };
const COMPLETE = new Set(["stop", "length"]);

/** Which pair a run is: "run 2 of 3", or with runs "auto" (pairs added until they settle it) "run 2". */
function runLabel(run, runs) {
  if (runs === "auto") return `run ${run + 1}`;
  return runs > 1 ? `run ${run + 1} of ${runs}` : "";
}

export class RaceView extends ContestCard {
  /**
   * @param {string} id the race id
   * @param {string} prompt
   * @param {number|"auto"} runs pairs asked for ("auto": the server adds pairs until they settle it)
   * @param {{context: () => object, onFinished?: (raceDone: object) => void}} hooks `context` gives
   *   the engine and settings the receipt card falls back on.
   */
  constructor(id, prompt, runs, { context, onFinished }) {
    super(id, { className: "race", label: "Race: drafter off vs on", title: "Race · drafter off vs on", noun: "race",
      live: true });
    this.prompt = prompt;
    this.runs = runs;
    this.context = context;
    this.onFinished = onFinished;
    this.lanes = { off: new RaceLane("off"), on: new RaceLane("on") };
    this.lanesEl = element("div", "race-lanes");
    this.lanesEl.append(this.lanes.off.el, this.lanes.on.el);
    this.summaryEl = element("div", "race-summary");
    this.summaryEl.hidden = true;
    this.body(this.lanesEl, this.summaryEl);

    this.record = { off: [], on: [] }; // per lane, per run: a RecordedRun (see race-replay.js)
    this.shown = { off: null, on: null }; // the recorded run each lane shows, if any
    this.currentLane = null;
    this.recording = null; // the pair's first run, played beside the live lane
    this.recordingClock = null; // the live run whose clock the recording follows
    this.result = null;
    this.replay = null;
    this.ticking = false;
    this.lanes.off.idle("waits for its turn");
    this.lanes.on.idle("waits for its turn");
  }

  /** Whether the race may still receive frames: not once `race_done` came, even while its recording plays out. */
  get active() {
    return this.result === null && ["waiting", "racing", "stopping"].includes(this.el.dataset.state);
  }

  runOf(frame) {
    const lane = this.record[frame.lane];
    if (!lane) return null;
    return lane.find((run) => run.run === frame.run) ?? null;
  }

  /** Any frame with this race's id. */
  frame(frame) {
    switch (frame.type) {
      case "start":
        return this.laneStart(frame);
      case "thinking":
      case "answer":
        return this.laneDelta(frame.type, frame);
      case "stats":
        return this.laneStats(frame);
      case "done":
        return this.laneDone(frame);
      case "race_done":
        return this.finish(frame);
    }
  }

  /** The connection is back and the server carries on with this race. */
  resume() {
    this.el.dataset.state = "racing";
    this.addNote("resumed", "Reconnected: the race went on meanwhile.");
  }

  /** `start` of one lane's run. */
  laneStart(frame) {
    const lane = this.lanes[frame.lane];
    if (!lane || !this.active) return;
    if (this.el.dataset.state === "waiting") this.el.dataset.state = "racing";
    const run = { run: frame.run ?? 0, events: [], stats: [], final: null, end: 0, startedAt: performance.now(),
                  heard: null, clock: 0 };
    this.record[frame.lane] = this.record[frame.lane].filter((r) => r.run !== run.run).concat(run);
    this.currentLane = { name: frame.lane, run };
    const beside = this.pairUp(frame.lane, run);
    const label = runLabel(run.run, this.runs);
    lane.begin(run.run, this.runs, label, "live");
    this.shown[frame.lane] = run;
    if (this.el.dataset.state !== "stopping") {
      const pair = label ? `${label[0].toUpperCase()}${label.slice(1)}: ` : "";
      const against = beside ? `, live beside ${LANE_NAMES[OTHER[frame.lane]]}'s recording` : "";
      this.setStatus(`${pair}${LANE_NAMES[frame.lane]}${against}…`);
    }
    this.tickClock();
  }

  /**
   * The other lane as a lane's run starts: the recording of the same pair's run when that ran first (it
   * plays from its start, beside this one), else empty while it waits; true for a recording.
   */
  pairUp(name, live) {
    this.endRecording();
    const index = live.run;
    const other = OTHER[name];
    const first = this.record[other].find((r) => r.run === index && r.final);
    if (first) {
      this.recording = new Recording(this.lanes[other], first, runLabel(index, this.runs), "recording");
      this.recording.begin();
      this.recordingClock = live;
      this.shown[other] = first;
    } else if (this.shown[other]) {
      this.lanes[other].clear();
      this.lanes[other].idle("waits for its turn");
      this.shown[other] = null;
    }
    return Boolean(first);
  }

  /** The recording beside the live lane shows the rest of its run at once, ended. */
  endRecording() {
    this.recording?.complete();
    this.recording = null;
  }

  /** A `thinking` or `answer` delta of a lane. */
  laneDelta(kind, frame) {
    const run = this.runOf(frame);
    if (!run || run.final || !this.active) return;
    const t = typeof frame.t_ms === "number" ? frame.t_ms : performance.now() - run.startedAt;
    const event = { t, kind, text: frame.text ?? "", rounds: frame.rounds, spans: frame.draft_spans };
    run.events.push(event);
    run.end = Math.max(run.end, t);
    if (typeof frame.t_ms === "number") run.heard = { t, at: performance.now() };
    if (this.replay) return; // the replay owns the lanes; the recording still grows
    const lane = this.lanes[frame.lane];
    if (kind === "thinking") lane.addThinking(event.text, event.rounds);
    else lane.addAnswer(event.text, event.rounds, event.spans);
  }

  laneStats(frame) {
    const run = this.runOf(frame);
    if (!run || run.final || !this.active) return;
    run.stats.push({ t: run.end, stats: frame.stats });
    if (!this.replay) this.lanes[frame.lane].setStats(frame.stats, true);
  }

  /** `done` of one lane's run: not the race's end, which `race_done` brings. */
  laneDone(frame) {
    const run = this.runOf(frame);
    if (!run || run.final) return;
    run.final = { stats: frame.stats ?? null, finish: frame.finish_reason };
    if (!this.replay) this.lanes[frame.lane].end(frame.stats, frame.finish_reason, run.end);
    // The recording beside it plays on: it ends with the next pair's start, or at its own pace after the last.
    if (this.currentLane?.run === run) this.currentLane = null;
  }

  /**
   * Keep the running lane's clock moving, one update per frame, and the recording beside it on that clock;
   * once the race is over, the recording alone until it has played out, then the race settles.
   */
  tickClock() {
    if (this.ticking) return;
    this.ticking = true;
    const tick = () => {
      const current = this.active ? this.currentLane : null;
      const playingOut = this.result !== null && this.recording !== null;
      if (!current && !playingOut) {
        this.ticking = false;
        return;
      }
      const elapsed = runClock(current ? current.run : this.recordingClock);
      if (current) this.lanes[current.name].setClock(elapsed);
      if (this.recording?.advance(elapsed) && playingOut) {
        this.recording = null;
        this.settle();
      }
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  }

  /**
   * `race_done`: the one frame that ends a race. After a race run to its end, a recording still behind the
   * lane that finished first plays to its end before the race settles, so the room sees the faster lane
   * finish first.
   */
  finish(frame) {
    if (!this.active) return;
    this.result = frame;
    this.currentLane = null;
    if ((frame.finish_reason ?? "stop") === "stop" && this.recording && !this.recording.done) {
      const behind = this.recording.lane.lane;
      this.setStatus(`${LANE_NAMES[OTHER[behind]]} finished first; ${LANE_NAMES[behind]}'s recording plays to its end…`);
      this.tickClock();
      return;
    }
    this.settle();
  }

  /** The race is over and shown whole: its lanes' summary numbers, notes, summary and actions. */
  settle() {
    const frame = this.result;
    this.endRecording();
    const reason = frame.finish_reason ?? "stop";
    this.el.dataset.state = "done";
    this.el.dataset.finish = reason;
    for (const name of LANES) {
      const lane = this.lanes[name];
      const last = this.record[name].findLast((run) => run.final);
      if (lane.el.dataset.state === "streaming") lane.end(lane.stats, reason, null);
      else if (!this.shown[name] && last) this.show(name, last);
      else if (!this.record[name].length) lane.idle(reason === "cancelled" ? "did not run" : "no run");
      this.summarizeLane(name);
    }
    if (reason === "error") {
      this.addNote("error", `Error: ${frame.error?.message ?? "The race failed."}`);
    } else if (reason === "cancelled") {
      this.addNote("cancelled", "Stopped: the numbers above cover the runs that finished.");
    }
    if (frame.off || frame.on || frame.speedup) renderRaceSummary(this.summaryEl, frame, this.context().engine);
    const pairs = frame.runs ?? this.runs;
    this.setStatus(reason === "cancelled" ? "Stopped" : `Done · ${pairs} ${pairs === 1 ? "run" : "runs"} each way`);
    this.renderActions();
    this.onFinished?.(frame);
  }

  /** A lane shows a recorded run whole, e.g. one emptied while the other lane began the next pair. */
  show(name, run) {
    const whole = new Recording(this.lanes[name], run, runLabel(run.run, this.runs));
    whole.begin();
    whole.complete();
    this.shown[name] = run;
  }

  /**
   * Once the race is over a lane's big numbers are the summary's, over its complete runs (tok/s and TTFT
   * their median, acceptance over all of them), labelled unless they are the shown run's own.
   */
  summarizeLane(name) {
    const numbers = this.result?.[name];
    const complete = this.record[name].filter((run) => run.final && COMPLETE.has(run.final.finish));
    if (!numbers?.tok_s || !complete.length) return;
    const headline = { tok_s: numbers.tok_s.median };
    if (numbers.ttft_ms) headline.ttft_ms = numbers.ttft_ms.median;
    if (numbers.acceptance != null) headline.acceptance = numbers.acceptance;
    let basis = "";
    if (complete.length > 1) basis = `median of ${complete.length} runs`;
    else if (complete[0] !== this.shown[name]) basis = `from run ${complete[0].run + 1}`;
    this.lanes[name].summarize(headline, basis);
  }

  /** An `error` frame for this race; before any lane started it means the race was refused. */
  fail(code, message) {
    if (this.el.dataset.state === "waiting") {
      this.el.dataset.finish = "error";
      this.lanes.off.idle("");
      this.lanes.on.idle("");
    }
    super.fail(code, message);
  }

  /** The connection dropped mid-race. */
  interrupt() {
    this.currentLane = null;
    this.endRecording();
    super.interrupt();
  }

  /** Replay and the receipt, once the race is over (race-actions.js). */
  renderActions() {
    renderRaceActions(this);
  }

  flush() {
    this.flushCard();
  }

  dispose() {
    this.replay?.cancel();
    this.recording = null;
    this.currentLane = null;
    for (const name of LANES) this.lanes[name].dispose();
  }
}
