// Plays recorded lane runs back, each delta at its recorded arrival time (`t_ms`), so the faster lane
// visibly pulls ahead. After a race, a replay plays both lanes at once on its own clock; during a race, the
// lane that ran first in a pair plays beside the live one on that one's clock (see race.js). Lanes render
// through the usual per-frame flush.

/**
 * A recorded lane run: `events` ({t, kind, text, rounds, spans}) and live `stats` ({t, stats}) in
 * arrival order, the `done` frame's stats and finish reason, and `end`, the time of its last text.
 * @typedef {{run: number, events: object[], stats: object[], final: {stats: object, finish: string}|null,
 *            end: number}} RecordedRun
 */

/** One recorded run played into a lane, as far as a clock has got. */
/**
 * How far into live run `run` it is on the server's clock, never going back: its latest delta's `t_ms` and
 * the time since, so frames sent again in a burst (after a reload) move the recording beside it on at once.
 */
export function runClock(run) {
  const now = performance.now();
  const heard = run.heard ? run.heard.t + (now - run.heard.at) : 0;
  run.clock = Math.max(run.clock, now - run.startedAt, heard);
  return run.clock;
}

export class Recording {
  /**
   * @param {import("@app/race-lane.js").RaceLane} lane
   * @param {RecordedRun} run
   * @param {string} label what the lane's header says the run is
   * @param {string|null} source `"recording"` when it plays beside a live lane (see RaceLane.begin)
   */
  constructor(lane, run, label, source = null) {
    this.lane = lane;
    this.run = run;
    this.label = label;
    this.source = source;
    this.next = 0;
    this.nextStats = 0;
    this.done = false;
  }

  /** The lane starts over, empty, for this run. */
  begin() {
    this.lane.begin(this.run.run, 0, this.label, this.source);
  }

  /** Show what arrived up to `elapsed` ms into the run; true once all of it is shown and the lane ended. */
  advance(elapsed) {
    if (this.done) return true;
    const { lane, run } = this;
    while (this.next < run.events.length && run.events[this.next].t <= elapsed) {
      const event = run.events[this.next++];
      if (event.kind === "thinking") lane.addThinking(event.text, event.rounds);
      else lane.addAnswer(event.text, event.rounds, event.spans);
    }
    while (this.nextStats < run.stats.length && run.stats[this.nextStats].t <= elapsed) {
      lane.setStats(run.stats[this.nextStats++].stats, true);
    }
    if (this.next < run.events.length) {
      lane.setClock(elapsed);
      return false;
    }
    this.done = true;
    lane.end(run.final?.stats, run.final?.finish ?? "stop", run.end);
    return true;
  }

  /** Show the whole run at once, ended. */
  complete() {
    return this.advance(Infinity);
  }
}

export class RaceReplay {
  /**
   * @param {Recording[]} tracks
   * @param {(completed: boolean) => void} onEnd
   */
  constructor(tracks, onEnd) {
    this.tracks = tracks;
    this.onEnd = onEnd;
    this.frame = 0;
    this.tick = this.tick.bind(this);
  }

  start() {
    for (const track of this.tracks) track.begin();
    this.startedAt = performance.now();
    this.frame = requestAnimationFrame(this.tick);
  }

  tick(now) {
    const elapsed = Math.max(0, now - this.startedAt);
    let running = false;
    for (const track of this.tracks) {
      if (!track.advance(elapsed)) running = true;
    }
    if (running) {
      this.frame = requestAnimationFrame(this.tick);
    } else {
      this.frame = 0;
      this.onEnd(true);
    }
  }

  /** Stop where it is; the lanes keep what they show. */
  cancel() {
    if (!this.frame) return;
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.onEnd(false);
  }
}
