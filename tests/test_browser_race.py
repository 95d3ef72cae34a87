"""The speculative demo in headless Chromium: races, replay, the acceptance strip, honest early numbers,
the not-paying-off notice, the block-size sweep and the receipt card, against the server on the fake engine."""

import re
import struct

import pytest
import requests

from tests.support.browser import factor, painted, race, wait_for_frame, wait_race_done, wait_ready

pytestmark = pytest.mark.browser


def test_race_fills_both_lanes_and_sums_up(tab):
    engine = tab.server.engine
    engine.delay_s = 0.02
    engine.holds = [1]  # the first lane pauses at its first token (the warm-up is cancelled at its own)
    tab.open()
    view = race(tab, "Convert 5 km to meters", 3)
    # While it runs, Stop stands in for Send.
    tab.page.wait_for_selector(".msg.race .race-lane[data-lane=off][data-state=streaming]")
    assert tab.page.locator("#stop").is_visible() and tab.page.locator("#send").is_hidden()
    assert view.get_attribute("data-state") != "done" and not tab.of_type("race_done")
    engine.resume()
    done = wait_race_done(tab)
    assert done["finish_reason"] == "stop" and done["runs"] == 3

    # Lane after lane, off before on in every run.
    starts = [(f["lane"], f["run"]) for f in tab.of_type("start") if f.get("id") == done["id"]]
    assert starts == [("off", 0), ("on", 0), ("off", 1), ("on", 1), ("off", 2), ("on", 2)]
    for lane in ("off", "on"):
        box = view.locator(f".race-lane[data-lane={lane}]")
        assert box.get_attribute("data-state") == "done"
        assert "Here is an answer with code" in box.locator(".lane-answer").inner_text()
        assert box.locator(".lane-answer strong").inner_text() == "an answer"  # Markdown, not raw text
        assert re.fullmatch(r"\d+\.\d", box.locator(".lane-rate-value").inner_text())
        assert "run 3 of 3" in box.locator(".lane-run").inner_text()
    # Only the drafter-on lane verifies drafts.
    assert view.locator(".race-lane[data-lane=off] .accept-strip").is_hidden()
    assert int(view.locator(".race-lane[data-lane=on] .accept-strip").get_attribute("data-rounds")) > 0

    verdict = view.locator(".race-verdict").inner_text()
    assert verdict.startswith(factor(done["speedup"]["median"]))
    assert f"{factor(done['speedup']['min'])}–{factor(done['speedup']['max'])}" in verdict
    assert "median of 3 runs" in verdict
    assert view.locator("tr[data-row=tok_s] td").nth(1).inner_text().startswith(f"{done['on']['tok_s']['median']:.1f}")
    # The default block is "auto": the summary names the block it ran most.
    assert done["chose"].startswith("auto (")
    assert view.locator("tr[data-row=block] td").nth(1).inner_text() == done["chose"]
    assert view.locator(".race-identical").get_attribute("data-identical") == "true"
    # The drafter-off lane's median becomes the bar later replies are judged against.
    assert f"{done['off']['tok_s']['median']:.1f} tok/s (from the last race)" in \
        tab.page.locator("#baseline-status").inner_text()

    # A past message races again from its own button, with the runs selector's count, in its own place:
    # a new branch beside it (here a new first message), not a turn after everything since.
    tab.page.select_option("#race-runs", "1")
    tab.page.locator(".msg.user").first.hover()
    since = len(tab.frames)
    tab.page.get_by_role("button", name="Re-race this prompt").first.click()
    second = wait_for_frame(tab, "race_done", since, timeout_ms=30_000)
    wait_race_done(tab)  # the new race's view, in place of the old one
    assert second["id"] != done["id"] and second["runs"] == 1
    sent = next(f for f in tab.sent if f.get("id") == second["id"])
    assert sent["type"] == "race" and "parent" in sent and sent["parent"] is None
    assert tab.page.locator(".msg.user .bubble").all_inner_texts() == ["Convert 5 km to meters"]
    tab.page.locator(".msg.user .branch-count").wait_for()
    assert tab.page.locator(".msg.user .branch-count").inner_text() == "2/2"


def test_replay_plays_both_lanes_at_their_recorded_pace(tab):
    # slow enough that the drafter-on answer is shown partly for a few hundred ms: sampled even when frames are few
    tab.server.engine.delay_s = 0.08
    tab.open()
    view = race(tab, "hello", 1)
    done = wait_race_done(tab)
    final = {lane: view.locator(f".race-lane[data-lane={lane}] .lane-answer").text_content() for lane in ("off", "on")}
    last_t = {lane: max(f["t_ms"] for f in tab.frames if f.get("id") == done["id"] and f.get("lane") == lane
                        and f["type"] in ("thinking", "answer")) for lane in ("off", "on")}

    # Sample both lanes' text length every frame while the replay runs.
    tab.page.evaluate("""() => {
      const lanes = ['off', 'on'].map((l) => document.querySelector(`.race-lane[data-lane=${l}] .lane-answer`));
      const race = document.querySelector('.msg.race');
      window.samples = [];
      let t0 = null;
      let after = 10; // frames sampled once the replay says it ended, for its last render
      const sample = (now) => {
        if (t0 === null && race.dataset.replaying === 'true') t0 = now;
        if (t0 !== null) window.samples.push([now - t0, ...lanes.map((el) => el.textContent.length)]);
        if (race.dataset.replaying === 'false') after -= 1;
        if (after > 0) requestAnimationFrame(sample);
        else window.sampled = true;
      };
      requestAnimationFrame(sample);
    }""")
    tab.page.get_by_role("button", name="Replay race").click()
    assert view.get_attribute("data-replaying") == "true"
    tab.page.wait_for_selector('.msg.race[data-replaying="false"]', timeout=30_000)
    tab.page.wait_for_function("() => window.sampled === true")
    samples = tab.page.evaluate("window.samples")

    lengths = {lane: len(final[lane]) for lane in ("off", "on")}
    assert all(lengths.values())
    # Both lanes start over and grow: the text is shown partly, not all at once.
    assert any(s[1] < lengths["off"] and s[2] < lengths["on"] for s in samples)
    assert any(0 < s[1] < lengths["off"] for s in samples) and any(0 < s[2] < lengths["on"] for s in samples)
    # Each lane completes no sooner than its recorded last delta, and the drafter-on lane (faster) first.
    complete = {lane: next(s[0] for s in samples if s[i] >= lengths[lane]) for i, lane in ((1, "off"), (2, "on"))}
    assert complete["off"] >= 0.9 * last_t["off"] and complete["on"] >= 0.9 * last_t["on"]
    assert last_t["on"] < last_t["off"] and complete["on"] < complete["off"]
    for lane in ("off", "on"):
        assert view.locator(f".race-lane[data-lane={lane}] .lane-answer").text_content() == final[lane]
        assert "done in" in view.locator(f".race-lane[data-lane={lane}] .lane-clock").inner_text()


def test_acceptance_strip_and_measuring_until_16_tokens(tab):
    engine = tab.server.engine
    # The reply pauses after its first verify round (4 tokens), then again once past 16 tokens (18), so each
    # live state lasts until the test has looked at it; the whole reply is 22 tokens.
    engine.holds = [1, 16]
    tab.open()
    tab.page.fill("#prompt", "hello")
    tab.page.press("#prompt", "Enter")
    reply = tab.page.locator(".msg.assistant").last
    # Early on, speed and acceptance say "measuring…" rather than a number.
    tab.page.wait_for_function(
        "() => { const s = document.querySelector('.msg.assistant .stats[data-live=true]');"
        " return s && /tok\\/s measuring…/.test(s.textContent) && /accepted measuring…/.test(s.textContent); }",
        timeout=20_000)
    live = [f["stats"] for f in tab.of_type("stats")]
    assert live and live[-1]["tokens"] < 16
    engine.resume()
    # From 16 tokens on, the live numbers are shown.
    tab.page.wait_for_function(
        "() => { const s = document.querySelector('.msg.assistant .stats[data-live=true] [data-stat=tok_s]');"
        " return s && /^[\\d,.]+ tok\\/s$/.test(s.textContent); }", timeout=20_000)
    live = [f["stats"] for f in tab.of_type("stats")]
    assert live[-1]["tokens"] >= 16 and not tab.of_type("done")
    assert reply.get_attribute("data-state") == "streaming"
    engine.resume()
    tab.page.wait_for_selector('.msg.assistant[data-state="done"]', timeout=30_000)
    painted(tab.page)

    stats = tab.of_type("done")[-1]["stats"]
    strip = reply.locator(".accept-strip")
    assert strip.is_visible()
    # One bar per verify round, as many accepted drafts as the stats count.
    assert int(strip.get_attribute("data-rounds")) == stats["rounds"] > 0
    assert int(strip.get_attribute("data-accepted")) == stats["accepted"] > 0
    sent = [r for f in tab.frames if f.get("type") in ("thinking", "answer") for r in f.get("rounds", [])]
    assert len(sent) == stats["rounds"]
    inked = strip.locator("canvas").evaluate(
        "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }")
    assert inked > 0
    assert "measuring" not in reply.locator(".stats").inner_text()
    assert re.search(r"\d+\.\d tok/s", reply.locator(".stats").inner_text())


def test_tint_marks_drafted_text_without_touching_the_markdown(tab):
    tab.open()
    page = tab.page
    if page.locator("#tint-drafted").is_hidden():
        page.click("#settings-toggle")
    assert not page.locator("#tint-drafted").is_checked()
    page.check("#tint-drafted")
    page.fill("#prompt", "hello")
    page.press("#prompt", "Enter")
    page.wait_for_selector('.msg.assistant[data-state="done"]', timeout=30_000)
    answer = page.locator(".msg.assistant .answer")
    tinted = page.evaluate("""() => [...(CSS.highlights.get('drafted') ?? [])].map((s) => {
      const r = document.createRange(); r.setStart(s.startContainer, s.startOffset); r.setEnd(s.endContainer, s.endOffset);
      return r.toString(); })""")
    drafted = "".join(
        f["text"][a:b] for f in tab.of_type("answer") for a, b in f.get("draft_spans", []))
    assert tinted and drafted
    # What is tinted is drafted text, in the sanitized Markdown as rendered (bold and code block intact).
    assert all(piece.strip() in drafted for piece in tinted if piece.strip())
    assert answer.locator("strong").inner_text() == "an answer" and answer.locator(".code-block").count() == 1
    assert answer.locator("mark, [style]").count() == 0
    # The choice is this browser's and survives a reload; off removes the tint.
    page.reload()
    wait_ready(page)
    assert page.locator("#tint-drafted").is_checked()
    page.uncheck("#tint-drafted")
    assert page.evaluate("CSS.highlights.has('drafted')") is False


def test_slow_drafting_gets_a_notice_with_a_block_that_the_depths_or_the_sweep_support(tab):
    host = tab.server.host
    host.update_settings({"draft_block_size": 4})  # a fixed block to advise below ("auto" would pick its own)
    # No drafter can beat that, at the context of the replies here.
    host.baselines.put(host.engine.info(), 100_000.0, "calibration", prompt_tokens=10)
    tab.open()
    tab.page.fill("#prompt", "hello")
    tab.page.press("#prompt", "Enter")
    tab.page.wait_for_selector('.msg.assistant[data-state="done"]', timeout=30_000)
    note = tab.page.locator(".msg.assistant .note-slow-draft")
    assert "Drafting is not paying off" in note.inner_text() and "100,000.0 tok/s without it" in note.inner_text()
    block = tab.of_type("hello")[0]["settings"]["draft_block_size"]
    # So far short, a smaller block's fewer drafts cannot make it up: the drafter off, not block − 1.
    assert f"no block below {block} should beat the drafter off" in note.inner_text()
    # A reply timed while other work took the machine says so.
    busy = [f for f in tab.frames if f.get("type") == "done"][-1]["stats"]["busy"]
    assert ("The machine was busy" in note.inner_text()) is busy["flagged"]
    seen = len(tab.frames)
    note.get_by_role("button", name="Turn the drafter off").click()
    assert wait_for_frame(tab, "settings", seen)["values"]["speculative"] is False

    # After a sweep, its fastest block below the one that lost that it measured faster than block 1.
    host.update_settings({"speculative": True, "draft_block_size": block})
    tab.page.fill("#prompt", "sweep me")
    tab.page.get_by_role("button", name="Find the best block size").click()
    tab.page.wait_for_selector('.msg.sweep[data-state="done"]', timeout=60_000)
    rows = tab.of_type("sweep_done")[-1]["rows"]
    base = next(row for row in rows if row["block"] == 1)["tok_s"]["median"]
    # One run each: a block counts as faster than block 1 by more than the 20% two rates can differ by.
    faster = [row for row in rows if isinstance(row["block"], int) and 1 < row["block"] < block  # not "auto"
              and row["tok_s"]["median"] > base * 1.2]
    tab.page.fill("#prompt", "hello again")
    tab.page.press("#prompt", "Enter")
    tab.page.wait_for_function("() => document.querySelectorAll('.msg.assistant[data-state=\"done\"]').length === 2",
                               timeout=30_000)
    note = tab.page.locator(".msg.assistant").last.locator(".note-slow-draft")
    seen = len(tab.frames)
    if faster:
        advised = max(faster, key=lambda row: row["tok_s"]["median"])["block"]
        assert f"The last block sweep measured block {advised} faster than the drafter off." in note.inner_text()
        note.get_by_role("button", name=f"Use block {advised}").click()
        assert wait_for_frame(tab, "settings", seen)["values"]["draft_block_size"] == advised
    else:  # a loaded machine can leave no block clearly faster in one run
        assert f"The last block sweep found no block below {block} faster" in note.inner_text()
        note.get_by_role("button", name="Turn the drafter off").click()
        assert wait_for_frame(tab, "settings", seen)["values"]["speculative"] is False
        host.update_settings({"speculative": True})

    # A reply that beats the baseline gets no notice.
    host.baselines.put(host.engine.info(), 1.0, "calibration", prompt_tokens=10)
    seen = len(tab.frames)
    host.broadcast(host.engine_frame())
    assert wait_for_frame(tab, "engine", seen)["baseline"]["tok_s"] == 1.0
    tab.page.fill("#prompt", "again")
    tab.page.press("#prompt", "Enter")
    tab.page.wait_for_function("() => document.querySelectorAll('.msg.assistant[data-state=\"done\"]').length === 3",
                               timeout=30_000)
    assert tab.page.locator(".msg.assistant").last.locator(".note-slow-draft").count() == 0


def test_stop_ends_the_whole_race(tab):
    tab.server.engine.delay_s = 0.05
    tab.open()
    view = race(tab, "hello", 5)
    tab.page.wait_for_selector(".msg.race .race-lane[data-lane=off] .lane-answer:not(:empty), "
                               ".msg.race .race-lane[data-lane=off] .lane-thinking:not(:empty)")
    tab.page.click("#stop")
    tab.page.wait_for_selector('.msg.race[data-finish="cancelled"]', timeout=20_000)
    painted(tab.page)
    assert tab.of_type("race_done")[-1]["finish_reason"] == "cancelled"
    assert "Stopped" in view.locator(".race-status").inner_text()
    tab.page.fill("#prompt", "next")
    assert tab.page.locator("#send").is_enabled() and tab.page.locator("#stop").is_hidden()


def test_sweep_charts_every_block_and_sets_the_best(tab):
    tab.open()
    tab.page.fill("#prompt", "hello")
    tab.page.get_by_role("button", name="Find the best block size").click()
    tab.page.wait_for_selector('.msg.sweep[data-state="done"]', timeout=60_000)
    painted(tab.page)
    done = tab.of_type("sweep_done")[-1]
    chart = tab.page.locator(".msg.sweep svg.sweep-chart")
    assert chart.locator("g.bar").count() == 7  # blocks 1-6 and auto
    heights = {g.get_attribute("data-block"): float(g.locator("rect").get_attribute("height"))
               for g in chart.locator("g.bar").all()}
    rates = {str(row["block"]): row["tok_s"]["median"] for row in done["rows"]}
    assert set(rates) == {"1", "2", "3", "4", "5", "6", "auto"}
    auto = next(row for row in done["rows"] if row["block"] == "auto")
    assert chart.locator('g.bar[data-block="auto"] text.label').text_content() == auto["chose"]  # what auto ran
    # Taller bar, faster block: the chart's order is the measured order.
    assert sorted(heights, key=heights.get) == sorted(rates, key=rates.get)
    assert chart.locator("g.bar.best").get_attribute("data-block") == str(done["best"])
    seen = len(tab.frames)
    tab.page.get_by_role("button", name=re.compile(r"Use draft block size|Turn the drafter off")).click()
    values = wait_for_frame(tab, "settings", seen)["values"]
    if done["best"] == 1:
        assert values["speculative"] is False
    else:
        assert values["draft_block_size"] == done["best"] and values["speculative"] is True


def test_receipt_saves_a_png_card_and_links_the_server_receipt(tab, tmp_path):
    tab.open()
    view = race(tab, "Convert 5 km to meters", 1)
    done = wait_race_done(tab)
    assert tab.page.get_by_role("button", name="Save receipt").inner_text() == "Receipt"
    with tab.page.expect_download() as download:
        tab.page.get_by_role("button", name="Save receipt").click()
    path = tmp_path / "card.png"
    download.value.save_as(path)
    assert download.value.suggested_filename == f"specchat-race-{done['id']}.png"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert 800 <= width <= 4096 and 400 <= height <= 4096 and 1.5 < width / height < 2.0
    # The card was drawn from the server's receipt, not from this page's fallback numbers.
    assert view.locator(".race-receipt-status").inner_text() == "Saved the receipt card."
    for name, kind in (("Open receipt as Markdown", "markdown"), ("Download receipt as JSON", "json")):
        href = view.get_by_role("link", name=name).get_attribute("href")
        answer = requests.get(tab.server.url + href, timeout=10)
        assert answer.status_code == 200
        if kind == "json":
            assert answer.json()["receipt"]["id"] == done["id"]
        else:
            assert done["id"] in answer.text


def test_calibration_measures_the_drafter_off_speed(tab):
    tab.open()
    page = tab.page
    if page.locator("#calibrate").is_hidden():
        page.click("#settings-toggle")
    assert "not measured yet" in page.locator("#baseline-status").inner_text()
    page.get_by_role("button", name="Measure drafter-off speed").click()
    page.wait_for_function(
        "() => /tok\\/s \\(measured\\)/.test(document.querySelector('#baseline-status').textContent)",
        timeout=20_000)
    stored = tab.server.host.baselines.get(tab.server.host.engine.info())
    assert stored["source"] == "calibration"
    assert f"{stored['tok_s']:.1f} tok/s" in page.locator("#baseline-status").inner_text()
    # One calibration reply has no spread of its own: the notice's margin is the 20% two rates can differ by.
    assert "slower than this by more than 20% get a notice" in page.locator("#baseline-status").inner_text()
    assert page.locator("#calibrate").is_enabled() and page.locator("#calibrate-error").is_hidden()


def test_the_first_drafter_on_reply_measures_the_drafter_off_speed_once_and_is_judged(tab):
    host, engine = tab.server.host, tab.server.engine
    engine.round_s = 0.2  # each verify round costs more than its drafts save: drafting does not pay here
    engine.delay_s = 0.05
    host.update_settings({"draft_block_size": 4})  # at a fixed block: "auto" would turn drafting off
    calibrations = []
    tab.page.on("response", lambda r: r.url.endswith("/api/calibrate") and calibrations.append(r.status))
    tab.open()
    assert host.baselines.get(host.engine.info()) is None
    assert "not measured yet" in tab.page.locator("#baseline-status").text_content()

    # No rate to judge the reply by, so the tab measures one, then judges the reply that asked for it.
    tab.page.fill("#prompt", "hello")
    tab.page.press("#prompt", "Enter")
    note = tab.page.locator(".msg.assistant .note-slow-draft")
    note.wait_for(timeout=30_000)
    stored = host.baselines.get(host.engine.info())
    assert calibrations == [200] and stored["source"] == "calibration"
    assert f"{stored['tok_s']:.1f} tok/s without it" in note.inner_text()
    assert "tok/s (measured)" in tab.page.locator("#baseline-status").text_content()

    # Once known, the rate is not measured again: the next reply is judged by it at once.
    tab.page.fill("#prompt", "again")
    tab.page.press("#prompt", "Enter")
    tab.page.wait_for_function("() => document.querySelectorAll('.msg.assistant .note-slow-draft').length === 2",
                               timeout=30_000)
    assert calibrations == [200]


def test_a_message_sent_while_the_speed_is_measured_goes_first(tab):
    host, engine = tab.server.host, tab.server.engine
    stream = engine.stream
    measurements = []

    def held_first_measurement(turn):
        """The first measurement pauses at its first token until a message ends it: the message is sent while it
        runs, however long the page takes to send it."""
        if turn.id == "calibration":
            measurements.append(turn)
            if len(measurements) == 1:
                engine.holds = [1]
        return stream(turn)

    engine.stream = held_first_measurement
    calibrations = []
    tab.page.on("response", lambda r: r.url.endswith("/api/calibrate") and calibrations.append(r.status))
    tab.open()
    # The second measurement's response, once the page has it: the one taken again after the next reply.
    with tab.page.expect_response(lambda r: r.url.endswith("/api/calibrate") and len(measurements) == 2,
                                  timeout=60_000):
        tab.page.fill("#prompt", "hello")
        tab.page.press("#prompt", "Enter")
        tab.page.wait_for_function(
            "() => document.querySelector('#baseline-status').textContent.startsWith('Measuring')", timeout=30_000)
        tab.page.fill("#prompt", "next")
        tab.page.press("#prompt", "Enter")
        tab.page.wait_for_function(
            "() => document.querySelectorAll('.msg.assistant[data-state=\"done\"]').length === 2", timeout=30_000)
        assert tab.page.locator(".msg.assistant").nth(1).get_attribute("data-finish") == "stop"
        # The measurement gave way, quietly, and is taken again after the next drafter-on reply.
        tab.page.wait_for_function(
            "() => /tok\\/s \\(measured\\)/.test(document.querySelector('#baseline-status').textContent)",
            timeout=30_000)
    assert measurements[0].cancel.is_set()  # the message ended the first measurement
    assert calibrations == [200, 200] and tab.page.locator("#calibrate-error").is_hidden()
    assert host.baselines.get(host.engine.info())["source"] == "calibration"


def test_a_chat_started_by_a_race_is_listed_while_its_lanes_run(tab):
    engine = tab.server.engine
    engine.delay_s = 0.05  # the race lasts long enough to look at the sidebar before it ends
    tab.open()
    conversation = tab.of_type("hello")[0]["conversation"]
    race(tab, "A race opens this chat", 1)
    tab.page.wait_for_selector(f'#history-list .history-link[href="/?c={conversation}"]', timeout=10_000)
    assert not tab.of_type("race_done"), "listed only once the race ended"
    wait_race_done(tab)


def test_a_first_race_runs_until_it_settles(open_page):
    """Three pairs can never settle the sign test's interval: a page that never chose runs races "auto"."""
    page = open_page()
    assert page.locator("#race-runs").input_value() == "auto"
