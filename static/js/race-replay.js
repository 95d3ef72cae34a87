// Replays a race: both lanes at once, each delta shown at its recorded arrival time (`t_ms`), so the
// faster lane visibly pulls ahead. Lanes render through the usual per-frame flush.

/**
 * A recorded lane run: `events` ({t, kind, text, rounds, spans}) and live `stats` ({t, stats}) in
 * arrival order, the `done` frame's stats and finish reason, and `end`, the time of its last text.
 * @typedef {{run: number, events: object[], stats: object[], final: {stats: object, finish: string}|null,
 *            end: number}} RecordedRun
 */

export class RaceReplay {
  /**
   * @param {{lane: import("@app/race-lane.js").RaceLane, run: RecordedRun, label: string}[]} tracks
   * @param {(completed: boolean) => void} onEnd
   */
  constructor(tracks, onEnd) {
    this.tracks = tracks.map((track) => ({ ...track, next: 0, nextStats: 0, done: false }));
    this.onEnd = onEnd;
    this.frame = 0;
    this.tick = this.tick.bind(this);
  }

  get playing() {
    return this.frame !== 0;
  }

  start() {
    for (const track of this.tracks) track.lane.begin(track.run.run, 0, track.label);
    this.startedAt = performance.now();
    this.frame = requestAnimationFrame(this.tick);
  }

  tick(now) {
    const elapsed = Math.max(0, now - this.startedAt);
    let running = false;
    for (const track of this.tracks) {
      if (track.done) continue;
      const { lane, run } = track;
      while (track.next < run.events.length && run.events[track.next].t <= elapsed) {
        const event = run.events[track.next++];
        if (event.kind === "thinking") lane.addThinking(event.text, event.rounds);
        else lane.addAnswer(event.text, event.rounds, event.spans);
      }
      while (track.nextStats < run.stats.length && run.stats[track.nextStats].t <= elapsed) {
        lane.setStats(run.stats[track.nextStats++].stats, true);
      }
      if (track.next >= run.events.length) {
        track.done = true;
        lane.end(run.final?.stats, run.final?.finish ?? "stop", run.end);
      } else {
        lane.setClock(elapsed);
        running = true;
      }
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
