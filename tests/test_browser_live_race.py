"""In Chromium on the fake engine: a live race. Every pair runs the drafter off first; while its drafter-on lane
streams, the off lane is played beside it from its start at its recorded arrival times, labelled as a recording,
so both lanes grow together; once the race ends each lane's big numbers are the summary's, labelled."""

import os
import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from tests.support.browser import OVERFLOWING, race, wait_race_done


pytestmark = pytest.mark.browser

# Thirty short paragraphs, a word per token: every few tokens add a line to the lane, so its box grows.
LONG_ANSWER = "\n\n".join(f"Step {i} is done." for i in range(1, 31))
LIVE_LAG_MS = 300  # a live lane shows what arrived this long ago (the socket to the screen, on a busy machine)
CLOCK_SLACK_MS = 100  # a lane's clock is shown to a tenth of a second

# Before the page's own scripts: note every lane delta as it arrives, and sample both lanes every frame.
SAMPLER = """
(() => {
  window.received = [];
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (event) => {
        const frame = JSON.parse(event.data);
        if (frame.type === "answer" && frame.lane) {
          window.received.push({ at: performance.now(), t: frame.t_ms, lane: frame.lane, run: frame.run,
                                 text: frame.text });
        }
      });
    }
  };
  window.samples = [];
  const lane = (el) => {
    const parts = [...el.querySelectorAll(".lane-thinking, .lane-answer")];
    return {
      source: el.dataset.source, state: el.dataset.state, name: el.getAttribute("aria-label"),
      run: el.querySelector(".lane-run").textContent, badge: el.querySelector(".lane-basis").textContent,
      height: parts.reduce((sum, part) => sum + part.getBoundingClientRect().height, 0),
      text: el.querySelector(".lane-answer").textContent, clock: el.querySelector(".lane-clock").textContent,
    };
  };
  const sample = () => {
    const race = document.querySelector(".msg.race");
    if (race && ["racing", "stopping"].includes(race.dataset.state)) {
      const lanes = Object.fromEntries(
        [...race.querySelectorAll(".race-lane")].map((el) => [el.dataset.lane, lane(el)]));
      const status = race.querySelector(".race-status").textContent;
      const stop = !document.querySelector("#stop").hidden;
      window.samples.push({ t: performance.now(), status, stop, ...lanes }); // a frame's own time can precede its messages
    }
    requestAnimationFrame(sample);
  };
  requestAnimationFrame(sample);
})();
"""


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def screenshot(page, label: str) -> None:
    """With SPECCHAT_SCREENSHOT=/tmp/chat.png, save /tmp/chat-<label>.png to look at."""
    if os.environ.get("SPECCHAT_SCREENSHOT"):
        path = Path(os.environ["SPECCHAT_SCREENSHOT"])
        page.screenshot(path=str(path.with_name(f"{path.stem}-{label}.png")))


def slow_long_race(tab) -> None:
    engine = tab.server.engine
    engine.delay_s = 0.06
    engine.answer = LONG_ANSWER
    tab.server.host.update_settings({"reasoning_budget": 0})
    tab.page.add_init_script(SAMPLER)
    tab.open()


def text_until(frames: list[dict], key: str, limit: float) -> str:
    """The text of the frames whose ``key`` (``at``, when the page got it; ``t``, its recorded time) is ``limit``
    or earlier."""
    return "".join(f["text"] for f in frames if f[key] <= limit)


def paragraphs(text: str) -> int:
    return sum(1 for part in text.split("\n\n") if part.strip())


def clock_ms(lane: dict) -> float:
    return float(lane["clock"].split()[0]) * 1000 if lane["clock"] else 0.0


def spread_over(samples: list[dict], count: int) -> list[dict]:
    """`count` samples evenly spaced in time from the first to the last."""
    t0, t1 = samples[0]["t"], samples[-1]["t"]
    return [min(samples, key=lambda s: abs(s["t"] - (t0 + k * (t1 - t0) / (count - 1)))) for k in range(count)]


def test_each_pairs_drafter_on_lane_streams_live_beside_a_recording_of_its_off_lane(tab):
    slow_long_race(tab)
    view = race(tab, "Count the steps", 2)
    tab.page.wait_for_selector('.msg.race .race-lane[data-lane=off][data-source=recording]', timeout=30_000)
    tab.page.wait_for_timeout(400)
    screenshot(tab.page, "live-race")
    done = wait_race_done(tab)
    assert done["finish_reason"] == "stop" and done["runs"] == 2
    samples = tab.page.evaluate("window.samples")
    received = tab.page.evaluate("window.received")

    # The server runs off, then on, in every pair: the drafter-on lane is live, the off lane its recording.
    for index, (live, recorded) in enumerate((("on", "off"), ("on", "off"))):
        label = f"run {index + 1} of 2"
        pair = [s for s in samples if s[live]["source"] == "live" and s[live]["run"] == label]
        assert pair, f"no live {live} lane in {label}"
        assert all(s[recorded]["source"] == "recording" and s[recorded]["run"] == label for s in pair)
        assert pair[0][recorded]["name"] == f"Drafter {recorded}, a recording of its run, played at its recorded pace"
        assert pair[0][recorded]["badge"] == "recording" and pair[0][live]["badge"] == "live"
        assert pair[0][live]["name"] == f"Drafter {live}, live"

        # Both lanes grow side by side while both still stream: at evenly spaced samples, each box is taller
        # than at the sample before whenever its source had a new paragraph for it by then: the socket for the
        # live lane, the recorded times up to its clock for the recording (a busy machine can hold either back).
        both = [s for s in pair if s[live]["state"] == "streaming" and s[recorded]["state"] == "streaming"]
        assert both[-1]["t"] - both[0]["t"] > 800, "the lanes streamed together too briefly to watch"
        came = [f for f in received if f["lane"] == live and f["run"] == index]
        recording = [f for f in received if f["lane"] == recorded and f["run"] == index]
        picks = spread_over(both, 5)
        grew = {live: 0, recorded: 0}
        for a, b in zip(picks, picks[1:]):
            due = {
                live: paragraphs(text_until(came, "at", b["t"] - LIVE_LAG_MS))
                > paragraphs(text_until(came, "at", a["t"])),
                recorded: paragraphs(text_until(recording, "t", clock_ms(b[recorded]) - CLOCK_SLACK_MS))
                > paragraphs(text_until(recording, "t", clock_ms(a[recorded]) + CLOCK_SLACK_MS)),
            }
            for lane in (live, recorded):
                taller = b[lane]["height"] > a[lane]["height"]
                assert taller or not due[lane], (lane, [s[lane]["height"] for s in picks])
                grew[lane] += taller
        assert grew[live] and grew[recorded], grew
        # The recording's clock keeps the page's pace, give or take a tenth and two frames.
        frame_gap = max(b["t"] - a["t"] for a, b in zip(both, both[1:]))
        ran = clock_ms(both[-1][recorded]) - clock_ms(both[0][recorded])
        assert ran >= both[-1]["t"] - both[0]["t"] - 2 * frame_gap - CLOCK_SLACK_MS, ran

        # The live lane shows what the socket brought, as it came; the recording, all of it here before the
        # live lane started, is shown as far as its recorded times have come by its clock.
        whole = squeeze("".join(f["text"] for f in recording))
        for s in both:
            now = squeeze(text_until(came, "at", s["t"]))
            before = squeeze(text_until(came, "at", s["t"] - LIVE_LAG_MS))
            shown = squeeze(s[live]["text"])
            assert now.startswith(shown) and len(shown) >= len(before)
            played = squeeze(s[recorded]["text"])
            due = squeeze(text_until(recording, "t", clock_ms(s[recorded]) - CLOCK_SLACK_MS))
            assert whole.startswith(played) and len(due) <= len(played) < len(whole)

    # The last pair's live lane (the drafter on, faster) ends before its recording, which plays on to its end
    # before the race shows done.
    last = [s for s in samples if s["on"]["source"] == "live" and s["on"]["run"] == "run 2 of 2"]
    ended = [s for s in last if s["on"]["state"] == "done" and s["off"]["state"] == "streaming"]
    assert ended and squeeze(ended[-1]["on"]["text"]) == squeeze(LONG_ANSWER)  # drawn by its last frame
    assert len(squeeze(ended[-1]["off"]["text"])) > len(squeeze(ended[0]["off"]["text"]))  # still playing
    assert squeeze(view.locator(".race-lane[data-lane=off] .lane-answer").inner_text()) == squeeze(LONG_ANSWER)

    # Once it is over, each lane's big numbers are the summary's medians, and say so.
    screenshot(tab.page, "live-race-done")
    table = view.locator("tr[data-row=tok_s] td")
    for column, lane in enumerate(("off", "on")):
        box = view.locator(f".race-lane[data-lane={lane}]")
        rate = box.locator(".lane-rate-value").inner_text()
        assert rate == f"{done[lane]['tok_s']['median']:.1f}"
        assert table.nth(column).inner_text().startswith(rate)
        assert box.locator(".lane-basis").inner_text().lower() == "median of 2 runs"
        assert box.get_attribute("data-source") == "" and box.get_attribute("aria-label") == f"Drafter {lane}"
        assert box.get_attribute("data-state") == "done"
        assert squeeze(box.locator(".lane-answer").inner_text()) == squeeze(LONG_ANSWER)
    on_numbers = view.locator(".race-lane[data-lane=on] .lane-numbers").inner_text()
    percent = Decimal(repr(done["on"]["acceptance"] * 100)).quantize(Decimal("1"), ROUND_HALF_UP)
    assert f"{percent}% accepted" in on_numbers


def test_stop_shows_the_recording_whole_and_a_new_race_starts_clean(tab):
    slow_long_race(tab)
    race(tab, "Count the steps", 1)
    page = tab.page
    page.wait_for_function("() => document.querySelector('.race-lane[data-lane=on][data-source=live] .lane-answer')"
                           "?.textContent.length > 20", timeout=30_000)
    page.click("#stop")
    done = wait_race_done(tab)
    assert done["finish_reason"] == "cancelled"
    old = page.locator(".msg.race").first
    off = old.locator(".race-lane[data-lane=off]")
    # Stopped while the drafter-on lane ran: the drafter-off run had finished, so it shows whole, ended.
    assert off.get_attribute("data-state") == "done"
    assert squeeze(off.locator(".lane-answer").inner_text()) == squeeze(LONG_ANSWER)
    assert "done in" in off.locator(".lane-clock").inner_text()
    assert old.locator(".race-lane[data-lane=on]").get_attribute("data-state") == "cancelled"
    # One run is what the summary's numbers are, so they carry no label.
    assert off.locator(".lane-rate-value").inner_text() == f"{done['off']['tok_s']['median']:.1f}"
    assert off.locator(".lane-basis").inner_text() == ""
    shown = {lane: old.locator(f".race-lane[data-lane={lane}] .lane-answer").inner_text() for lane in ("off", "on")}
    # The note sits under the summary's numbers, and points up at them.
    note, summary = old.locator(".note-cancelled"), old.locator(".race-summary").bounding_box()
    assert note.bounding_box()["y"] >= summary["y"] + summary["height"] - 1
    assert note.inner_text() == "Stopped: the numbers above cover the runs that finished."

    page.wait_for_selector("#send:visible")
    race(tab, "Count the steps", 1)
    new = page.locator(".msg.race").last
    new.locator(".race-lane[data-lane=off][data-source=live]").wait_for()
    assert new.locator(".race-lane[data-lane=on]").get_attribute("data-state") == "waiting"
    assert new.locator(".race-lane[data-lane=on] .lane-answer").inner_text() == ""
    page.wait_for_timeout(500)
    # Nothing the stopped race played goes on in its lanes.
    for lane in ("off", "on"):
        assert old.locator(f".race-lane[data-lane={lane}] .lane-answer").inner_text() == shown[lane]
    page.click("#stop")
    wait_race_done(tab, 2)


def test_a_page_reloaded_during_the_live_lane_plays_the_recording_from_where_the_race_is(tab):
    slow_long_race(tab)
    tab.server.engine.delay_s = 0.1  # the drafter-on lane lasts seconds: long enough to reload in
    race(tab, "Count the steps", 1)
    page = tab.page
    live = ".race-lane[data-lane=on][data-source=live] .lane-answer"
    recording = ".race-lane[data-lane=off][data-source=recording] .lane-answer"
    page.wait_for_function(f"() => document.querySelector('{recording}')?.textContent.length > 30", timeout=30_000)
    shown = page.evaluate("""() => [...document.querySelectorAll('.race-lane .lane-answer')]
                                   .map((el) => el.textContent)""")
    before = {"off": squeeze(shown[0]), "on": squeeze(shown[1])}
    assert len(before["on"]) > len(before["off"]) > 0

    tab.frames.clear()
    page.reload()
    page.wait_for_selector("#engine[data-state=ready]")
    page.wait_for_function(f"() => document.querySelector('{live}')?.textContent.replace(/\\s+/g, '').length"
                           f" >= {len(before['on'])}", timeout=10_000)
    # Two frames sampled past the one where the live lane caught up.
    page.wait_for_function("(n) => { const i = window.samples.findIndex((s) => s.on.text.replace(/\\s+/g, '').length"
                           " >= n); return i >= 0 && i + 2 < window.samples.length; }",
                           arg=len(before["on"]), timeout=10_000)
    samples = page.evaluate("window.samples")
    # Once the live lane has caught up with the frames sent again, the recording is as far on as the race,
    # not back at its start.
    caught = next(i for i, s in enumerate(samples) if len(squeeze(s["on"]["text"])) >= len(before["on"]))
    after = samples[min(caught + 2, len(samples) - 1)]
    assert after["off"]["source"] == "recording" and after["on"]["source"] == "live"
    assert squeeze(after["off"]["text"]).startswith(before["off"])
    page.click("#stop")
    wait_race_done(tab)


# Both lanes' boxes, and whether each sits wholly in the part of the messages' scroller on screen.
LANE_BOXES = """() => Object.fromEntries([...document.querySelectorAll('.msg.race .race-lane')].map((el) => {
  const box = el.getBoundingClientRect(), log = document.querySelector('#log').getBoundingClientRect();
  const seen = box.left >= log.left - 1 && box.right <= log.right + 1 && box.top >= log.top - 1
    && box.bottom <= log.bottom + 1;
  return [el.dataset.lane, { left: box.left, right: box.right, top: box.top, seen }];
}))"""


def test_on_a_phone_the_room_sees_both_lanes_side_by_side_during_the_live_lane(tab):
    tab.page.set_viewport_size({"width": 390, "height": 844})
    slow_long_race(tab)
    race(tab, "Count the steps", 1)
    page = tab.page
    page.wait_for_function("() => document.querySelector('.race-lane[data-lane=off][data-source=recording]"
                           " .lane-answer')?.textContent.length > 20", timeout=30_000)
    boxes = page.evaluate(LANE_BOXES)
    screenshot(page, "live-race-phone")
    # The recording beside the live lane, not above it out of sight: both in the window, in one row.
    assert boxes["off"]["seen"] and boxes["on"]["seen"], boxes
    assert boxes["off"]["right"] <= boxes["on"]["left"] and abs(boxes["off"]["top"] - boxes["on"]["top"]) <= 1
    assert page.evaluate(OVERFLOWING) == []
    done = wait_race_done(tab)
    assert done["finish_reason"] == "stop"
    samples = [s for s in page.evaluate("window.samples")
               if s["on"]["source"] == "live" and s["off"]["state"] == s["on"]["state"] == "streaming"]
    for lane in ("off", "on"):
        heights = [s[lane]["height"] for s in spread_over(samples, 4)]
        assert all(b > a for a, b in zip(heights, heights[1:])), (lane, heights)
    screenshot(page, "live-race-phone-done")
    assert page.evaluate(OVERFLOWING) == []
    # The narrow lane's acceptance strip keeps its width for the bars, its caption under them.
    lane = page.locator(".msg.race .race-lane[data-lane=on]")
    bars, body = lane.locator(".accept-strip canvas").bounding_box(), lane.locator(".lane-body").bounding_box()
    assert bars["width"] >= 0.9 * body["width"], (bars, body)


def test_replay_brings_both_lanes_into_view(tab):
    tab.page.set_viewport_size({"width": 1280, "height": 800})
    slow_long_race(tab)
    tab.server.engine.delay_s = 0.01
    view = race(tab, "Count the steps", 1)
    wait_race_done(tab)
    page = tab.page
    replay = view.get_by_role("button", name="Replay race")
    replay.scroll_into_view_if_needed()  # where the presenter is after the race: at its summary
    assert not any(lane["seen"] for lane in page.evaluate(LANE_BOXES).values())
    replay.click()
    page.wait_for_selector(".msg.race[data-replaying=true]")
    boxes = page.evaluate(LANE_BOXES)
    screenshot(page, "replay-in-view")
    assert boxes["off"]["seen"] and boxes["on"]["seen"], boxes
    page.wait_for_selector(".msg.race[data-replaying=false]", timeout=30_000)


def test_runs_auto_says_which_pair_is_running(tab):
    slow_long_race(tab)
    engine = tab.server.engine
    engine.delay_s = 0.004
    stream = engine.stream

    def held_on_lanes(turn):
        """Each pair's drafter-on lane pauses a few tokens in until the test has read the status: a lane of a
        fraction of a second could otherwise pass between two frames of a busy machine."""
        if turn.options.speculative:
            engine.holds = [3]
        return stream(turn)

    engine.stream = held_on_lanes
    race(tab, "Count the steps", "auto")
    shown = []
    while len(shown) < 10:  # at most 9 pairs, then the end
        status = tab.page.wait_for_function("""(n) => {
            const race = document.querySelector(".msg.race");
            if (race?.dataset.state === "done") return "done";
            const status = race?.querySelector(".race-status").textContent ?? "";
            return status.startsWith(`Run ${n}: drafter on`) && status;
        }""", arg=len(shown) + 1, timeout=30_000).json_value()
        if status == "done":
            break
        shown.append(status)
        engine.resume()
    done = wait_race_done(tab)
    pairs = done["runs"]
    assert pairs >= 5
    assert shown == [f"Run {n}: drafter on, live beside drafter off's recording…" for n in range(1, pairs + 1)]
    samples = tab.page.evaluate("window.samples")
    # However many pairs it takes, each lane's header names its pair, the recording the same as the live lane.
    live = {s[lane]["run"] for s in samples for lane in ("off", "on") if s[lane]["source"] == "live"}
    assert live == {f"run {n}" for n in range(1, pairs + 1)}, live
    beside = [s for s in samples if "recording" in (s["off"]["source"], s["on"]["source"])]
    assert beside and all(s["off"]["run"] == s["on"]["run"] for s in beside)


def test_the_recording_plays_to_its_end_after_the_live_lane_wins(tab):
    slow_long_race(tab)
    race(tab, "Count the steps", 1)
    done = wait_race_done(tab)
    page = tab.page
    assert done["finish_reason"] == "stop"
    samples = page.evaluate("window.samples")
    # The drafter-on lane, live, finished first; the drafter-off recording went on at its pace, growing, with
    # the status saying so, and then ended whole.
    after = [s for s in samples if s["on"]["state"] == "done" and s["off"]["source"] == "recording"
             and s["off"]["state"] == "streaming"]
    assert after, "the recording was cut short when the live lane ended"
    heights = [s["off"]["height"] for s in after]
    assert heights[-1] > heights[0] and len(squeeze(after[0]["off"]["text"])) < len(squeeze(LONG_ANSWER))
    assert after[-1]["status"] == "drafter on finished first; drafter off's recording plays to its end…"
    # The race is over: the composer, Stop while the lanes ran, is free while the recording plays out.
    assert any(s["stop"] for s in samples) and not after[-1]["stop"]
    off = page.locator(".msg.race .race-lane[data-lane=off]")
    assert off.get_attribute("data-state") == "done"
    assert squeeze(off.locator(".lane-answer").inner_text()) == squeeze(LONG_ANSWER)
    assert off.locator(".lane-rate-value").inner_text() == f"{done['off']['tok_s']['median']:.1f}"
    assert page.locator(".msg.race .race-status").inner_text() == "Done · 1 run each way"


def test_a_lane_still_measuring_says_so_without_a_unit(tab):
    slow_long_race(tab)
    race(tab, "Count the steps", 1)
    # The first tokens of the drafter-off lane: no rate yet, and no "tok/s" after the word that says so.
    shown = tab.page.wait_for_function("""() => {
      const rate = document.querySelector('.race-lane[data-lane=off] .lane-rate[data-measuring=true]');
      return rate && rate.innerText;
    }""", timeout=30_000, polling="raf").json_value()
    assert shown.startswith("measuring…") and "tok/s" not in shown and shown.endswith("LIVE"), shown
    tab.page.click("#stop")
    wait_race_done(tab)
