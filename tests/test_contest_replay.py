"""Block sweeps get a receipt like races, and a tab that comes back during or after a race or sweep is sent every
frame of it it missed, then the rest live: over a real socket and REST, on the scripted engine."""

import json

import pytest
import requests

from engines.fake import FakeEngine
from tests.support.servers import LiveServer
from tests.support.wsclient import WsClient

CONTEST_FRAMES = ("start", "thinking", "answer", "stats", "done", "race_done", "sweep_done")


def sweep(ws: WsClient, id: str = "s1", blocks=(1, 2, 4), runs: int = 2, text: str = "hello") -> tuple[dict, list]:
    ws.send({"type": "sweep", "id": id, "text": text, "blocks": list(blocks), "runs": runs})
    return ws.until("sweep_done", id=id)


def test_a_sweep_has_a_receipt_as_json_and_markdown_that_survives_a_restart(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1", "an earlier message")
        summary, _ = sweep(ws, "sweep-1", blocks=(4, 1, 2), runs=2, text="count to ten")
    assert summary["receipt"] == "/api/receipts/sweep-1"
    receipt = requests.get(fake_server.url + summary["receipt"]).json()["receipt"]
    assert receipt["kind"] == "sweep" and receipt["id"] == "sweep-1" and receipt["finish_reason"] == "stop"
    assert receipt["rows"] == summary["rows"] and receipt["best"] == summary["best"]
    assert [row["block"] for row in receipt["rows"]] == receipt["blocks"] == [1, 2, 4]
    assert receipt["runs"] == {"asked": 2, "measured": 2} and receipt["prompt"] == "count to ten"
    assert receipt["context_messages"] == 2
    assert (receipt["engine"], receipt["model"], receipt["drafter"]) == ("fake", "fake-model", "fake drafter")
    assert set(receipt["machine"]) == {"cpu", "cores", "os", "accelerator", "blas"}
    assert set(receipt["versions"]) == {"specchat", "mlx", "mlx-vlm"} and receipt["versions"]["specchat"]
    assert receipt["sampling"] == {"temperature": 0.0, "top_p": 1.0}
    assert receipt["command"] == ("specchat bench --engine fake --prompt 'count to ten' --blocks 1,2,4 --runs 2 "
                                  "--max-tokens 1024 --budget 512")

    page = requests.get(fake_server.url + summary["receipt"], params={"format": "markdown"})
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/markdown")
    text = page.text
    assert text.startswith("# specchat block sweep sweep-1") and receipt["command"] in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit() or
            line.startswith("| **")]
    assert len(rows) == 3 and "drafter off" in rows[0]
    best = next(row for row in summary["rows"] if row["block"] == summary["best"])
    assert f"**{best['block']}** (best)" in text and f"{best['tok_s']['median']} (" in text
    for row in summary["rows"][1:]:
        assert f"{row['speedup']}× ({row['speedup_range']['min']}–{row['speedup_range']['max']})" in text

    data_dir = fake_server.app.extensions["specchat"].settings._path.parent
    assert json.loads((data_dir / "receipts" / "sweep-1.json").read_text()) == receipt
    restarted = LiveServer(FakeEngine(), data_dir)
    try:
        assert requests.get(restarted.url + summary["receipt"]).json()["receipt"] == receipt
        again = requests.get(restarted.url + summary["receipt"], params={"format": "markdown"})
        assert again.text == text
    finally:
        restarted.stop()


def test_a_stopped_sweep_has_a_receipt_of_what_it_measured(fake_server):
    fake_server.engine.delay_s = 0.02
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "sweep", "id": "s-stop", "text": "hello", "blocks": [1, 2, 3], "runs": 1})
        ws.until("done", id="s-stop")  # block 1 is measured
        ws.send({"type": "stop", "id": "s-stop"})
        summary, _ = ws.until("sweep_done", id="s-stop")
    receipt = requests.get(fake_server.url + summary["receipt"]).json()["receipt"]
    assert summary["finish_reason"] == receipt["finish_reason"] == "cancelled"
    assert receipt["rows"][0]["tok_s"] is not None and receipt["runs"]["measured"] == 0


def contest_frames(frames: list[dict], id: str) -> list[dict]:
    """The contest's frames, with its live numbers left out (a replay keeps only the latest of a run)."""
    return [f for f in frames if f.get("id") == id and f["type"] in CONTEST_FRAMES and f["type"] != "stats"]


@pytest.mark.parametrize("kind", ["race", "sweep"])
def test_a_tab_that_comes_back_mid_lane_gets_every_frame_from_the_start(fake_server, kind):
    engine = fake_server.engine
    engine.delay_s = 0.01
    words = 6
    engine.holds = [words]  # the first lane pauses mid-answer while the tab is away
    ws = WsClient(fake_server.ws_url)
    conversation = ws.hello["conversation"]
    contest = {"type": kind, "id": "c1", "text": "hello", "runs": 2}
    if kind == "sweep":
        contest["blocks"] = [1, 3]
    ws.send(contest)
    first, seen = ws.until("start", id="c1")
    while sum(f["type"] in ("thinking", "answer") for f in seen) < words:
        seen.append(ws.recv())
    ws.close()
    with WsClient(f"{fake_server.ws_url}?conversation={conversation}") as back:
        assert back.hello["resumed"] is True
        replayed = [back.recv() for _ in range(len(seen))]
        engine.resume()
        end, rest = back.until(f"{kind}_done", id="c1")
    # The first frames again, as they were, then the rest live, ending with the one summary.
    assert [f for f in replayed if f["type"] != "stats"] == [f for f in seen if f["type"] != "stats"]
    frames = contest_frames(replayed + rest, "c1")
    assert frames[0] == first and first["runs"] == 2 and first["message"] and first["parent"]
    key = "lane" if kind == "race" else "block"
    starts = [(f[key], f["run"]) for f in frames if f["type"] == "start"]
    assert len(starts) == 4 and {lane for lane, _ in starts} == ({"off", "on"} if kind == "race" else {1, 3})
    assert [f["type"] for f in frames].count("done") == 4 and frames[-1] == end
    assert end["finish_reason"] == "stop"

    # A tab that comes back after the end gets the whole contest, summary included, and nothing more.
    with WsClient(f"{fake_server.ws_url}?conversation={conversation}") as late:
        again, after = late.until(f"{kind}_done", id="c1", timeout=5)
        assert again == end
        with pytest.raises(TimeoutError):
            late.recv(timeout=0.3)
    assert contest_frames(after, "c1") == frames
