"""Races, sweeps, receipts and the drafter-off baseline over a real socket and REST, on the scripted engine."""

import json
import statistics
import threading

import pytest
import requests

from engines.fake import ANSWER, FakeEngine
from tests.support.servers import LiveServer
from tests.support.wsclient import WsClient, texts
from tests.support.poll import wait_until

RACE_FRAMES = ("start", "thinking", "answer", "stats", "done")


def race(ws: WsClient, id: str = "r1", timeout: float = 60, **fields) -> tuple[dict, list[dict]]:
    ws.send({"type": "race", "id": id, "text": "hello", **fields})
    return ws.until("race_done", timeout=timeout, id=id)


def lane_runs(frames: list[dict]) -> list[tuple[str, int]]:
    return [(f["lane"], f["run"]) for f in frames if f["type"] == "start"]


def dones(frames: list[dict], lane: str) -> list[dict]:
    return sorted((f for f in frames if f["type"] == "done" and f["lane"] == lane), key=lambda f: f["run"])


def test_race_interleaves_lanes_and_tags_every_frame(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        summary, frames = race(ws, runs=3)
    assert lane_runs(frames) == [("off", 0), ("on", 0), ("off", 1), ("on", 1), ("off", 2), ("on", 2)]  # off first
    reply = [f for f in frames if f["type"] in RACE_FRAMES]
    assert all(f["id"] == "r1" and f["lane"] in ("off", "on") and f["run"] in (0, 1, 2) for f in reply)
    assert [f["type"] for f in frames].count("race_done") == 1 and frames[-1] is summary
    # Deltas carry the time since their lane started, rising within the lane.
    for lane, run in lane_runs(frames):
        times = [f["t_ms"] for f in frames
                 if f["type"] in ("thinking", "answer") and (f["lane"], f["run"]) == (lane, run)]
        assert times and times == sorted(times) and times[0] > 0
    # Drafted text and verify rounds show in the drafter-on lane only.
    on = [f for f in frames if f["type"] == "answer" and f["lane"] == "on"]
    off = [f for f in frames if f["type"] == "answer" and f["lane"] == "off"]
    assert any("draft_spans" in f for f in on) and any("rounds" in f for f in on)
    assert not any("draft_spans" in f or "rounds" in f for f in off)
    for lane in ("off", "on"):
        assert [texts([f for f in frames if f.get("lane") == lane and f.get("run") == r], "answer").split()
                for r in range(3)] == [ANSWER.split()] * 3


def test_race_summary_is_recomputed_from_the_lanes(fake_server):
    fake_server.host.update_settings({"temperature": 0.7})  # the race is greedy unless asked otherwise
    with WsClient(fake_server.ws_url) as ws:
        summary, frames = race(ws, runs=3)
    off, on = dones(frames, "off"), dones(frames, "on")
    ratios = [b["stats"]["tok_s"] / a["stats"]["tok_s"] for a, b in zip(off, on)]
    assert summary["speedup"]["median"] == pytest.approx(statistics.median(ratios), abs=1e-3)
    assert summary["speedup"]["min"] == pytest.approx(min(ratios), abs=1e-3)
    assert summary["speedup"]["max"] == pytest.approx(max(ratios), abs=1e-3)
    assert summary["speedup"]["median"] > 1.5  # the fake's drafter makes fewer forward passes
    assert summary["off"]["tok_s"]["median"] == pytest.approx(statistics.median(d["stats"]["tok_s"] for d in off),
                                                              abs=0.051)
    assert summary["on"]["ttft_ms"]["max"] == max(d["stats"]["ttft_ms"] for d in on)
    assert summary["off"]["stats"] == off[-1]["stats"] and summary["on"]["stats"] == on[-1]["stats"]
    assert summary["on"]["stats"]["rounds"] > 0 and summary["off"]["stats"]["rounds"] is None
    assert (summary["runs"], summary["finish_reason"]) == (3, "stop")
    assert summary["identical"] is True and summary["first_divergence"] is None
    lanes = [t for t in fake_server.engine.turns if t.id == "r1"]
    assert {t.options.temperature for t in lanes} == {0.0}
    assert [t.options.speculative for t in lanes[1:]] == [False, True, False, True, False, True]  # off first


def test_each_lane_is_its_own_engine_conversation_and_the_race_joins_the_history(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1")
        race(ws, runs=2)
        ws.chat("m2", "after the race")
        conversation = ws.hello["conversation"]
    lanes = [t for t in fake_server.engine.turns if t.id == "r1"]
    ids = {t.conversation_id for t in lanes}
    assert len(ids) == len(lanes) == 5 and conversation not in ids  # a warm-up, then 2 × 2 lanes
    assert all([m.content for m in t.messages] == [m.content for m in lanes[0].messages] for t in lanes)
    assert not ids & set(fake_server.engine._seen)  # each lane's cache was forgotten
    history = fake_server.engine.turns[-1].messages
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant", "user"]
    assert history[2].content == "hello" and history[3].content.split() == ANSWER.split()


def test_stop_ends_the_whole_race_once(fake_server):
    fake_server.engine.delay_s = 0.03
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "race", "id": "r1", "text": "hello", "runs": 3})
        ws.until("start")
        _, frames = ws.until("thinking")
        ws.send({"type": "stop", "id": "r1"})
        summary, rest = ws.until("race_done", id="r1")
        assert summary["finish_reason"] == "cancelled"
        finished = [f for f in frames + rest if f["type"] == "done"]
        assert len(finished) == 1 and finished[0]["finish_reason"] == "cancelled"
        # Nothing of the race follows its end, and the tab is free again.
        done, after = ws.chat("m2")
        assert done["finish_reason"] == "stop"
        assert not [f for f in after if f.get("id") == "r1"]
    assert summary["runs"] == 0 and summary["speedup"] is None and summary["identical"] is None


def test_race_while_busy_is_refused_and_the_race_holds_the_engine(fake_server):
    fake_server.engine.delay_s = 0.02
    with WsClient(fake_server.ws_url) as ws, WsClient(fake_server.ws_url) as other:
        ws.send({"type": "chat", "id": "m1", "text": "hello"})
        ws.until("start")
        ws.send({"type": "race", "id": "r1", "text": "hello"})
        error, _ = ws.until("error")
        assert (error["code"], error["id"]) == ("busy", "r1") and "this tab" in error["message"]
        other.send({"type": "race", "id": "o1", "text": "hello"})
        error, _ = other.until("error")
        assert (error["code"], error["id"]) == ("busy", "o1")  # the engine is generating ws's reply
        ws.until("done", id="m1")
        ws.send({"type": "race", "id": "r2", "text": "hello"})
        ws.until("start")
        other.send({"type": "chat", "id": "o2", "text": "me too"})
        error, _ = other.until("error")
        assert (error["code"], error["id"]) == ("busy", "o2")
        assert requests.post(fake_server.url + "/api/calibrate").status_code == 409
        assert ws.until("race_done", id="r2")[0]["finish_reason"] == "stop"
        assert other.chat("o3")[0]["finish_reason"] == "stop"


@pytest.mark.parametrize("fields", [
    {"runs": 0}, {"runs": 10}, {"runs": "2"}, {"id": "a/b"}, {"id": ""}, {"parent": 5}, {"text": ""}, {"greedy": 1},
])
def test_bad_race_frames_get_an_error(fake_server, fields):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "race", "id": "r1", "text": "hello", **fields})
        error, _ = ws.until("error")
        assert error["code"] == "bad_frame" and "race" in error["message"]
        assert ws.chat("m1")[0]["finish_reason"] == "stop"
    assert not [t for t in fake_server.engine.turns if t.id == "r1"]


def test_a_reconnecting_tab_gets_the_whole_race(fake_server):
    fake_server.engine.delay_s = 0.02
    ws = WsClient(fake_server.ws_url)
    conversation = ws.hello["conversation"]
    ws.send({"type": "race", "id": "r1", "text": "hello", "runs": 2})
    ws.until("done")  # the first lane is over
    ws.close()
    with WsClient(f"{fake_server.ws_url}?conversation={conversation}") as back:
        summary, frames = back.until("race_done", id="r1")
    assert lane_runs(frames) == [("off", 0), ("on", 0), ("off", 1), ("on", 1)]
    assert summary["finish_reason"] == "stop" and summary["runs"] == 2


def test_receipt_as_json_and_markdown_survives_a_restart(fake_server, tmp_path):
    with WsClient(fake_server.ws_url) as ws:
        summary, frames = race(ws, id="receipt-1", runs=2)
    assert summary["receipt"] == "/api/receipts/receipt-1"
    body = requests.get(fake_server.url + summary["receipt"]).json()
    assert body["ok"] is True
    receipt = body["receipt"]
    assert (receipt["engine"], receipt["model"], receipt["drafter"]) == ("fake", "fake-model", "fake drafter")
    assert receipt["speedup"] == summary["speedup"] and receipt["identical"] is True
    assert receipt["off"]["tok_s"] == summary["off"]["tok_s"] and receipt["on"]["ttft_ms"] == summary["on"]["ttft_ms"]
    assert receipt["runs"] == {"asked": 2, "measured": 2} and receipt["prompt"] == "hello"
    # Acceptance over both drafter-on runs, as the rates are.
    on_done = [f["stats"] for f in frames if f["type"] == "done" and f.get("lane") == "on"]
    assert len(on_done) == 2
    assert receipt["acceptance"] == summary["on"]["acceptance"] == round(
        sum(s["accepted"] for s in on_done) / sum(s["drafted"] for s in on_done), 4)
    assert receipt["mean_accepted"] == summary["on"]["mean_accepted"] == round(
        sum(s["accepted"] for s in on_done) / sum(s["rounds"] for s in on_done), 3)
    assert receipt["acceptance_by_depth"] == summary["on"]["acceptance_by_depth"] and receipt["acceptance_by_depth"]
    assert receipt["sampling"] == {"temperature": 0.0, "top_p": 1.0}
    # The default block is "auto": the receipt names the block it ran most, from both drafter-on runs.
    assert receipt["block_size"] == summary["block_size"] == "auto"
    history = summary["on"]["block_history"]
    assert history == {k: sum(s["block_history"].get(k, 0) for s in on_done) for k in history}
    most = max(history, key=lambda k: (history[k], int(k)))
    assert receipt["chose"] == summary["chose"] == f"auto ({'off' if most == '1' else most})"
    assert receipt["block_history"] == history
    assert set(receipt["machine"]) == {"cpu", "cores", "os", "accelerator", "blas"} and receipt["machine"]["cores"] > 0
    assert set(receipt["versions"]) == {"specchat", "mlx", "mlx-vlm"} and receipt["versions"]["specchat"]
    assert receipt["command"].startswith("specchat bench --engine fake --prompt hello --blocks 1,auto --runs 2")

    page = requests.get(fake_server.url + summary["receipt"], params={"format": "markdown"})
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/markdown")
    assert "| decode tok/s, median (min–max) |" in page.text and f"block {summary['chose']} ·" in page.text
    assert f"{summary['speedup']['median']}×" in page.text and receipt["command"] in page.text

    bad = requests.get(fake_server.url + summary["receipt"], params={"format": "pdf"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_format"
    for unknown in ("nope", "receipt.1"):
        missing = requests.get(fake_server.url + "/api/receipts/" + unknown)
        assert missing.status_code == 404 and missing.json()["ok"] is False
        assert missing.json()["error"]["code"] == "unknown_receipt"

    data_dir = fake_server.app.extensions["specchat"].settings._path.parent
    assert json.loads((data_dir / "receipts" / "receipt-1.json").read_text()) == receipt
    restarted = LiveServer(FakeEngine(), data_dir)
    try:
        assert requests.get(restarted.url + summary["receipt"]).json()["receipt"] == receipt
    finally:
        restarted.stop()


def test_sweep_runs_each_block_and_names_the_best(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "sweep", "id": "s1", "text": "hello", "blocks": [1, 2, 4], "runs": 2})
        summary, frames = ws.until("sweep_done", id="s1")
    starts = [(f["block"], f["run"]) for f in frames if f["type"] == "start"]
    assert starts == [(1, 0), (2, 0), (4, 0), (2, 1), (4, 1), (1, 1)]
    assert all("block" in f and "lane" not in f for f in frames if f["type"] in RACE_FRAMES)
    rows = {row["block"]: row for row in summary["rows"]}
    assert list(rows) == [1, 2, 4] and summary["finish_reason"] == "stop"
    assert rows[1]["speedup"] == 1.0 and rows[1]["acceptance"] is None
    assert rows[4]["speedup"] > rows[2]["speedup"] > 1.0  # the fake keeps more drafts per round at block 4
    assert all(row["identical"] for row in rows.values())
    assert summary["best"] == max(rows, key=lambda b: rows[b]["tok_s"]["median"])
    for block, row in rows.items():
        rates = [f["stats"]["tok_s"] for f in frames if f["type"] == "done" and f["block"] == block]
        assert row["tok_s"]["median"] == pytest.approx(statistics.median(rates), abs=0.051)  # rounded to 0.1


def test_baseline_from_a_race_and_from_calibration(fake_server):
    with WsClient(fake_server.ws_url) as ws, WsClient(fake_server.ws_url) as other:
        assert ws.hello["baseline"] is None
        assert requests.get(fake_server.url + "/api/baseline").json() == {"ok": True, "baseline": None}
        summary, frames = race(ws, runs=3)
        announced = [f for f in frames if f["type"] == "engine"][-1]["baseline"]
        assert announced["source"] == "race" and announced["tok_s"] == summary["off"]["tok_s"]["median"]
        assert other.until("engine")[0]["baseline"] == announced  # every tab learns it
        calibrated = requests.post(fake_server.url + "/api/calibrate").json()
        assert calibrated["ok"] is True and calibrated["baseline"]["source"] == "calibration"
        assert calibrated["baseline"]["tok_s"] > 0
        assert ws.until("engine")[0]["baseline"] == calibrated["baseline"]
    calibration = fake_server.engine.turns[-1]
    assert calibration.options.speculative is False and calibration.options.max_tokens == 64
    data_dir = fake_server.app.extensions["specchat"].settings._path.parent
    saved = json.loads((data_dir / "baselines.json").read_text())
    assert saved == {"fake:fake-model": calibrated["baseline"]}
    with WsClient(fake_server.ws_url) as fresh:
        assert fresh.hello["baseline"] == calibrated["baseline"]


def test_a_calibration_that_finds_a_reply_running_gives_way_to_it(fake_server):
    """The measurement's request can reach the server after the message that was sent to overtake it."""
    fake_server.engine.delay_s = 0.1
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "chat", "id": "m1", "text": "hello"})
        ws.until("start")
        assert fake_server.engine.busy
        response = requests.post(fake_server.url + "/api/calibrate", timeout=30)
        assert response.status_code == 200 and response.json()["gave_way"] is True
        assert ws.until("done", id="m1")[0]["finish_reason"] == "stop"
    assert fake_server.host.baselines.get(fake_server.engine.info()) is None
    assert not fake_server.host.exclusive.locked()


def test_a_message_goes_before_a_calibration_and_ends_it(fake_server):
    fake_server.engine.delay_s = 0.2  # the calibration's dozen tokens take seconds
    answer = {}
    calibrating = threading.Thread(
        target=lambda: answer.update(response=requests.post(fake_server.url + "/api/calibrate", timeout=60)))
    calibrating.start()
    with WsClient(fake_server.ws_url) as ws:
        assert wait_until(fake_server.host.exclusive.locked), "the calibration did not start"
        done, _ = ws.chat("m1")
        calibrating.join(timeout=30)
        assert done["finish_reason"] == "stop"
    response = answer["response"]
    assert response.status_code == 200 and response.json()["gave_way"] is True
    assert response.json()["baseline"] is None and "let a message through" in response.json()["message"]
    assert fake_server.host.baselines.get(fake_server.engine.info()) is None  # nothing half-measured is kept
    # A race still holds the engine against a message: only a calibration gives way.
    with WsClient(fake_server.ws_url) as ws, WsClient(fake_server.ws_url) as other:
        fake_server.engine.delay_s = 0.05
        ws.send({"type": "race", "id": "r1", "text": "hello"})
        ws.until("start")
        other.send({"type": "chat", "id": "o1", "text": "me too"})
        error, _ = other.until("error")
        assert (error["code"], error["id"]) == ("busy", "o1")
        assert ws.until("race_done", id="r1")[0]["finish_reason"] == "stop"


def test_a_message_at_the_instant_a_calibration_takes_the_engine_still_goes_first(fake_server, monkeypatch):
    """Between the calibration taking the engine and naming its cancel, a message found the engine held by
    something it could not end, and was refused as busy."""
    from engines.cancel import Relay
    from webapp.hosting import exclusive

    held, asked = threading.Event(), threading.Event()

    class NamedLate(Relay):
        def __init__(self):
            held.set()  # the engine is taken; the cancel is not named yet
            asked.wait(timeout=30)
            super().__init__()

    monkeypatch.setattr(exclusive, "Relay", NamedLate)
    entered, yield_calibration = threading.Event(), fake_server.host.yield_calibration
    monkeypatch.setattr(fake_server.host, "yield_calibration",
                        lambda *args: entered.set() or yield_calibration(*args))
    fake_server.engine.delay_s = 0.2
    answer = {}
    calibrating = threading.Thread(
        target=lambda: answer.update(response=requests.post(fake_server.url + "/api/calibrate", timeout=60)))
    calibrating.start()
    with WsClient(fake_server.ws_url) as ws:
        assert held.wait(timeout=30), "the calibration did not start"
        ws.send({"type": "chat", "id": "m1", "text": "hello"})
        assert entered.wait(timeout=30), "the message did not ask for the engine"
        threading.Timer(0.2, asked.set).start()  # the message has asked while the cancel is unnamed
        done, _ = ws.until("done", id="m1")
        calibrating.join(timeout=30)
    assert done["finish_reason"] == "stop"
    assert answer["response"].json()["gave_way"] is True


def test_reply_deltas_carry_rounds_and_drafted_spans(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        done, frames = ws.chat("m1")
        deltas = [f for f in frames if f["type"] in ("thinking", "answer")]
        assert sum(len(f.get("rounds", [])) for f in deltas) == done["stats"]["rounds"] > 0
        spans = [(f["text"], span) for f in deltas for span in f.get("draft_spans", [])]
        assert spans and all(0 <= a < b <= len(text) for text, (a, b) in spans)
        assert all("t_ms" not in f and "lane" not in f for f in deltas)
        ws.send({"type": "settings", "values": {"speculative": False}})
        ws.until("settings")
        _, frames = ws.chat("m2")
        assert not [f for f in frames if "rounds" in f or "draft_spans" in f]


@pytest.mark.parametrize("blocks", [[2, 3], [1, 1, 2], [0, 1], [1, 17], []])
def test_bad_sweeps_get_an_error(fake_server, blocks):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "sweep", "id": "s1", "text": "hello", "blocks": blocks})
        error, _ = ws.until("error")
        assert (error["code"], error["id"]) == ("bad_frame", "s1") and "blocks" in error["message"]
    assert not [t for t in fake_server.engine.turns if t.id == "s1"]


def test_a_contest_that_breaks_off_still_ends_in_one_summary_and_frees_the_engine(fake_server, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(fake_server.host.receipts, "record", broken)
    monkeypatch.setattr(fake_server.host.receipts, "record_sweep", broken)
    with WsClient(fake_server.ws_url) as ws:
        summary, frames = race(ws, id="broken", runs=1)
        assert [f["type"] for f in frames].count("race_done") == 1
        assert summary["finish_reason"] == "error" and summary["error"]["code"] == "internal"
        assert summary["on"]["tok_s"] is None and summary["speedup"] is None and summary["message"]
        ws.send({"type": "sweep", "id": "broken-sweep", "text": "hello", "blocks": [1, 2], "runs": 1})
        swept, frames = ws.until("sweep_done", timeout=60, id="broken-sweep")
        assert [f["type"] for f in frames].count("sweep_done") == 1
        assert swept["finish_reason"] == "error" and [row["block"] for row in swept["rows"]] == [1, 2]
        monkeypatch.undo()
        summary, _ = race(ws, id="after", runs=1)
    assert summary["finish_reason"] == "stop" and summary["speedup"] is not None


def test_a_race_at_a_fixed_block_and_a_sweep_with_auto_name_their_blocks(fake_server):
    fake_server.host.update_settings({"draft_block_size": 3})
    with WsClient(fake_server.ws_url) as ws:
        summary, _ = race(ws, id="fixed", runs=1)
        assert (summary["block_size"], summary["chose"]) == (3, "3")
        assert set(summary["on"]["block_history"]) == {"3"}
        ws.send({"type": "sweep", "id": "s-auto", "text": "hello", "blocks": ["auto", 1, 2], "runs": 1})
        sweep, frames = ws.until("sweep_done", id="s-auto")
    assert [f["block"] for f in frames if f["type"] == "start"] == [1, 2, "auto"]  # "auto" after the fixed ones
    rows = {row["block"]: row for row in sweep["rows"]}
    assert rows["auto"]["chose"].startswith("auto (") and rows["auto"]["identical"] is True
    assert rows[2]["chose"] == "2" and rows[1]["block_history"] == {"1": rows[1]["block_history"]["1"]}
    receipt = requests.get(fake_server.url + sweep["receipt"]).json()["receipt"]
    assert receipt["blocks"] == [1, 2, "auto"] and "--blocks 1,2,auto" in receipt["command"]
    page = requests.get(fake_server.url + sweep["receipt"], params={"format": "markdown"}).text
    assert f"| {rows['auto']['chose']} |" in page or f"**{rows['auto']['chose']}** (best)" in page
