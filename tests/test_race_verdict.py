"""A race's and a sweep's pairs judged over a real socket on the scripted engine: wins, the interval for the
median speed-up and the verdict from the lanes' own rates, and runs "auto" adding pairs until they settle it."""

import pytest
import requests

from engines.fake import FakeEngine
from tests.conftest import LiveServer
from tests.wsclient import WsClient


class Alternating(FakeEngine):
    """Drafting pays in one run and costs in the next, so the pairs never settle."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.drafting = 0

    def stream(self, turn):
        if turn.options.speculative:
            self.drafting += 1
            self.round_s = 0.0 if self.drafting % 2 else 0.08
        return super().stream(turn)


@pytest.fixture
def alternating_server(tmp_path):
    server = LiveServer(Alternating(delay_s=0.01), tmp_path / "data")
    yield server
    server.stop()


def race(ws: WsClient, id: str = "r1", **fields) -> tuple[dict, list[dict]]:
    ws.send({"type": "race", "id": id, "text": "hello", **fields})
    return ws.until("race_done", timeout=120, id=id)


def pair_ratios(frames: list[dict], lanes=("off", "on"), key="lane") -> list[float]:
    rate = {(f[key], f["run"]): f["stats"]["tok_s"] for f in frames if f["type"] == "done"}
    runs = sorted({run for _, run in rate})
    return [rate[lanes[1], run] / rate[lanes[0], run] for run in runs]


def test_five_pairs_the_drafter_wins_are_faster_with_the_min_max_interval(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        summary, frames = race(ws, runs=5)
    ratios = pair_ratios(frames)
    assert all(r > 1 for r in ratios)  # the fake's drafter makes fewer forward passes
    assert summary["ratios"] == [round(r, 3) for r in ratios]
    assert summary["wins"] == 5 and summary["verdict"] == "faster"
    # Five pairs: [x(1), x(5)] holds the median with 1 − 2/32 = 93.75%.
    assert summary["confidence"] == {"low": round(min(ratios), 3), "high": round(max(ratios), 3), "coverage": 0.9375}
    assert summary["block_size"] == 4 and summary["speedup"]["median"] == round(sorted(ratios)[2], 3)
    receipt = requests.get(fake_server.url + summary["receipt"]).json()["receipt"]
    assert {k: receipt[k] for k in ("ratios", "wins", "confidence", "verdict")} == \
        {k: summary[k] for k in ("ratios", "wins", "confidence", "verdict")}
    page = requests.get(fake_server.url + summary["receipt"], params={"format": "markdown"}).text
    confidence = summary["confidence"]
    assert f"faster: 5 of 5 pairs faster, 94% interval {confidence['low']}–{confidence['high']}×" in page


def test_a_drafter_that_costs_more_than_it_saves_is_slower_and_three_pairs_are_unclear(fake_server):
    fake_server.engine.round_s = 0.08  # a verify round costs 9 plain tokens and yields about 3
    with WsClient(fake_server.ws_url) as ws:
        slower, frames = race(ws, runs=5)
        short, short_frames = race(ws, id="r2", runs=3)
    assert all(r < 1 for r in pair_ratios(frames))
    assert (slower["wins"], slower["verdict"], slower["confidence"]["coverage"]) == (0, "slower", 0.9375)
    ratios = pair_ratios(short_frames)
    # Three pairs, all lost: min–max holds the median with only 75%, too little for a verdict.
    assert short["confidence"] == {"low": round(min(ratios), 3), "high": round(max(ratios), 3), "coverage": 0.75}
    assert (short["wins"], short["verdict"]) == (0, "unclear")


def test_runs_auto_stops_once_five_pairs_settle_it(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        summary, frames = race(ws, runs="auto")
    starts = [f for f in frames if f["type"] == "start"]
    assert len(starts) == 10 and summary["runs"] == 5 and summary["finish_reason"] == "stop"
    assert starts[0]["runs"] == "auto" and (summary["wins"], summary["verdict"]) == (5, "faster")
    receipt = requests.get(fake_server.url + summary["receipt"]).json()["receipt"]
    assert receipt["runs"] == {"asked": "auto", "measured": 5} and "--runs 5" in receipt["command"]


def test_runs_auto_stops_at_nine_pairs_when_they_do_not_settle(alternating_server):
    with WsClient(alternating_server.ws_url) as ws:
        summary, frames = race(ws, runs="auto")
    ratios = pair_ratios(frames)
    assert len(ratios) == 9 and summary["runs"] == 9
    assert summary["wins"] == sum(r > 1 for r in ratios) == 5 and summary["verdict"] == "unclear"
    # Nine pairs: [x(2), x(8)] holds the median with 1 − 2·10/512 ≈ 96.1%.
    assert summary["confidence"] == {"low": round(sorted(ratios)[1], 3), "high": round(sorted(ratios)[7], 3),
                                     "coverage": 0.9609}


def test_a_sweep_judges_each_block_and_runs_auto_settles_every_block(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "sweep", "id": "s1", "text": "hello", "blocks": [1, 2, 4], "runs": "auto"})
        summary, frames = ws.until("sweep_done", timeout=120, id="s1")
    rows = {row["block"]: row for row in summary["rows"]}
    assert summary["runs"] == "auto" and rows[4]["runs"] == 5  # both drafting blocks settle at five pairs
    for block in (2, 4):
        ratios = pair_ratios(frames, (1, block), key="block")
        assert rows[block]["ratios"] == [round(r, 3) for r in ratios]
        assert (rows[block]["wins"], rows[block]["verdict"]) == (5, "faster")
        assert rows[block]["confidence"] == {"low": round(min(ratios), 3), "high": round(max(ratios), 3),
                                             "coverage": 0.9375}
    assert rows[1]["ratios"] == [1.0] * 5 and rows[1]["verdict"] == "unclear"
    receipt = requests.get(fake_server.url + summary["receipt"]).json()["receipt"]
    assert receipt["rows"] == summary["rows"] and "--runs 5" in receipt["command"]
    assert receipt["busy"] == summary["busy"] and set(summary["busy"]) == {"percent", "flagged", "threshold"}
    page = requests.get(fake_server.url + summary["receipt"], params={"format": "markdown"}).text
    confidence = rows[4]["confidence"]
    assert f"| faster: 5 of 5 pairs faster, 94% interval {confidence['low']}–{confidence['high']}× |" in page
    assert ("The machine was busy" in page) is summary["busy"]["flagged"]


@pytest.mark.parametrize("runs", ["Auto", "9x", 2.5, True])
def test_runs_is_one_to_nine_or_auto(fake_server, runs):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "race", "id": "r1", "text": "hello", "runs": runs})
        error, _ = ws.until("error")
    assert error["code"] == "bad_frame" and 'use 1 to 9 runs, or "auto"' in error["message"]
