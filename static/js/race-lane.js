// One lane of a race (drafter off or on): its streamed text, live numbers, clock and acceptance strip.
// The same lane shows a recording, fed from recorded deltas instead of the socket, and says which it is.

import { AcceptanceStrip } from "@app/acceptance-strip.js";
import { element } from "@app/dom.js";
import { DraftTint } from "@app/drafted-tint.js";
import { formatCount, formatMs, formatRate, formatSeconds } from "@app/format.js";
import { MarkdownView } from "@app/markdown.js";
import { schedule } from "@app/render.js";
import { acceptanceValue, MEASURE_TOKENS, ttftSplit } from "@app/stats.js";

const STICK_PX = 24;
const NAMES = { off: "Drafter off", on: "Drafter on" };
// What a lane shows while the race runs: the run streaming now, or the pair's first run played beside it.
const SOURCES = {
  live: { badge: "live", name: "live" },
  recording: { badge: "recording", name: "a recording of its run, played at its recorded pace" },
};

export class RaceLane {
  /** @param {"off"|"on"} lane */
  constructor(lane) {
    this.lane = lane;
    this.el = element("section", "race-lane");
    this.el.dataset.lane = lane;
    this.el.dataset.state = "waiting";
    this.el.setAttribute("aria-label", NAMES[lane]);

    const head = element("header", "lane-head");
    this.runEl = element("span", "lane-run");
    this.clockEl = element("span", "lane-clock");
    head.append(element("span", "lane-name", NAMES[lane]), this.runEl, this.clockEl);

    this.rateEl = element("div", "lane-rate");
    this.rateValue = element("span", "lane-rate-value", "–");
    this.basisEl = element("span", "lane-basis");
    this.rateEl.append(this.rateValue, element("span", "lane-rate-unit", " tok/s"), this.basisEl);
    this.numbersEl = element("div", "lane-numbers");

    this.body = element("div", "lane-body");
    this.thinkingEl = element("div", "lane-thinking");
    this.answerEl = element("div", "lane-answer markdown");
    this.body.append(this.thinkingEl, this.answerEl);
    this.tint = new DraftTint(this.answerEl, () => this.answer);
    this.strip = new AcceptanceStrip();

    this.el.append(head, this.rateEl, this.numbersEl, this.body, this.strip.el);
    this.clear();
  }

  clear() {
    this.thinking = "";
    this.thinkingShown = 0;
    this.answer = "";
    this.answerDirty = false;
    // A fresh view: the last run's final render is not one the incremental update knows to remove.
    this.answerEl.replaceChildren();
    this.answerView = new MarkdownView(this.answerEl);
    this.stats = null;
    this.headline = null;
    this.live = true;
    this.clockMs = null;
    this.clockEl.textContent = ""; // with the text it times, not a frame later
    this.finished = false;
    this.tint.clear();
    this.strip.reset();
    this.thinkingEl.textContent = "";
    this.label("", null);
    schedule(this);
  }

  /** The badge beside the rate, and what the lane is called for screen readers. */
  label(text, kind) {
    this.basisEl.textContent = text;
    this.basisEl.dataset.kind = kind ?? "";
    this.el.dataset.source = kind === "live" || kind === "recording" ? kind : "";
    this.basisEl.title =
      kind === "median" ? "As in the summary: tok/s and TTFT the median over the runs, acceptance over every run" : "";
    const source = SOURCES[kind];
    this.el.setAttribute("aria-label", source ? `${NAMES[this.lane]}, ${source.name}` : NAMES[this.lane]);
  }

  /**
   * A run of this lane begins (live or replayed): its text replaces the last run's.
   * @param {"live"|"recording"|null} source in a race, whether the run streams now or is a recording
   */
  begin(run, runs, label, source = null) {
    this.clear();
    this.el.dataset.state = "streaming";
    this.runEl.textContent = label ?? (runs > 1 ? `run ${run + 1} of ${runs}` : "");
    if (source) this.label(SOURCES[source].badge, source);
  }

  /**
   * The race's own numbers for this lane, as its summary gives them, in place of the shown run's:
   * `{tok_s, ttft_ms, acceptance}` (those known), with `basis` saying what they are ("" for the run shown).
   */
  summarize(headline, basis) {
    this.headline = headline;
    this.label(basis, basis ? "median" : null);
    schedule(this);
  }

  addThinking(text, rounds) {
    this.thinking += text;
    this.strip.add(rounds);
    schedule(this);
  }

  addAnswer(text, rounds, spans) {
    this.strip.add(rounds);
    if (spans) this.tint.add(this.answer.length, spans);
    this.answer += text;
    this.answerDirty = true;
    schedule(this);
  }

  setStats(stats, live) {
    if (!stats) return;
    this.stats = stats;
    this.live = live;
    this.strip.setStats(stats);
    schedule(this);
  }

  setClock(ms) {
    this.clockMs = ms;
    schedule(this);
  }

  /** The run ended; `finishMs` is when its last text arrived, from the lane's start. */
  end(stats, finishReason, finishMs) {
    this.setStats(stats, false);
    this.finished = true;
    this.answerDirty = true;
    this.el.dataset.state = finishReason === "stop" || finishReason === "length" ? "done" : finishReason;
    if (finishMs != null) this.clockMs = finishMs;
    schedule(this);
  }

  /** Waiting for its turn (the other lane runs), e.g. the lane not yet started in run 1. */
  idle(text) {
    this.el.dataset.state = "waiting";
    this.runEl.textContent = text;
    schedule(this);
  }

  flush() {
    const body = this.body;
    const atBottom = body.scrollHeight - body.scrollTop - body.clientHeight <= STICK_PX;
    if (this.thinking.length > this.thinkingShown) {
      // Thinking is plain text, as in a reply's thinking block.
      this.thinkingEl.append(this.thinking.slice(this.thinkingShown));
      this.thinkingShown = this.thinking.length;
    }
    const rendered = this.answerDirty;
    if (this.answerDirty) {
      if (this.finished) this.answerView.render(this.answer);
      else this.answerView.update(this.answer);
      this.answerDirty = false;
    }
    this.tint.apply(rendered);
    if (atBottom) body.scrollTop = body.scrollHeight;
    this.renderNumbers();
    this.clockEl.textContent =
      this.clockMs == null ? "" : this.finished ? `done in ${formatSeconds(this.clockMs)}` : formatSeconds(this.clockMs);
  }

  renderNumbers() {
    const stats = this.headline ? { ...this.stats, ...this.headline } : this.stats;
    const early = !this.headline && (!stats || stats.tokens == null || stats.tokens < MEASURE_TOKENS);
    if (stats && stats.tok_s != null && !early) this.rateValue.textContent = formatRate(stats.tok_s);
    else this.rateValue.textContent = stats && this.live ? "measuring…" : "–";
    this.rateEl.dataset.measuring = String(early && Boolean(stats) && this.live);
    const parts = [];
    if (stats?.ttft_ms != null) parts.push(`TTFT ${formatMs(stats.ttft_ms)}`);
    if (stats?.tokens != null) parts.push(`${formatCount(stats.tokens)} ${stats.tokens === 1 ? "token" : "tokens"}`);
    if (stats?.drafted != null) {
      parts.push(early ? "accepted measuring…" : [acceptanceValue(stats.acceptance), " accepted"]);
    }
    this.numbersEl.replaceChildren(...parts.flatMap((part, i) => [i ? " · " : "", part].flat()));
    const split = ttftSplit(stats);
    this.numbersEl.title = split ? `Time to first token: ${split}` : "";
  }

  dispose() {
    this.tint.dispose();
  }
}
