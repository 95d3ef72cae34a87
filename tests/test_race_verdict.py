"""A race's and a sweep's pairs judged over a real socket on the scripted engine: wins, the interval for the
median speed-up and the verdict from the lanes' own rates, and runs "auto" adding pairs until they settle it."""

import pytest
import requests

from engines.fake import FakeEngine
from tests.support.races import stopped_by_the_rule
from tests.support.servers import LiveServer
from tests.support.wsclient import WsClient
from webapp.measurement.pairs import coverage, settled


class Alternating(FakeEngine):
    """Drafting pays in one run and costs in the next, so the pairs never settle."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.drafting = 0

    def stream(self, turn):
        if turn.options.speculative:
            self.drafting += 1
            self.round_s = 0.0 if self.drafting % 2 else 0.16
        return super().stream(turn)


@pytest.fixture
def alternating_server(tmp_path):
    server = LiveServer(Alternating(delay_s=0.02), tmp_path / "data")
    # A fixed block: "auto" would turn the costly runs' drafting off, and they would tie instead of losing.
    server.host.update_settings({"draft_block_size": 4})
    yield server
    server.stop()


def race(ws: WsClient, id: str = "r1", **fields) -> tuple[dict, list[dict]]:
    ws.send({"type": "race", "id": id, "text": "hello", **fields})
    return ws.until("race_done", timeout=120, id=id)


def pair_ratios(frames: list[dict], lanes=("off", "on"), key="lane") -> list[float]:
    rate = {(f[key], f["run"]): f["stats"]["tok_s"] for f in frames if f["type"] == "done"}
    runs = sorted({run for _, run in rate})
    return [rate[lanes[1], run] / rate[lanes[0], run] for run in runs]


def min_max_verdict(ratios: list[float]) -> str:
    """The verdict of 5 to 7 pairs, whose interval is their min–max: faster only if every pair was won."""
    return "faster" if min(ratios) > 1 else "slower" if max(ratios) < 1 else "unclear"


def test_five_pairs_are_judged_by_their_min_max_interval(fake_server):
    fake_server.engine.delay_s = 0.02  # long enough steps that a loaded machine's stalls rarely flip a pair
    with WsClient(fake_server.ws_url) as ws:
        summary, frames = race(ws, runs=5)
    ratios = pair_ratios(frames)
    assert summary["ratios"] == [round(r, 3) for r in ratios]
    assert summary["wins"] == sum(r > 1 for r in ratios) and summary["verdict"] == min_max_verdict(ratios)
    assert sorted(ratios)[2] > 1.5  # the fake's drafter makes fewer forward passes: most pairs go to it
    # Five pairs: [x(1), x(5)] holds the median with 1 − 2/32 = 93.75%.
    assert summary["confidence"] == {"low": round(min(ratios), 3), "high": round(max(ratios), 3), "coverage": 0.9375}
    assert summary["block_size"] == "auto" and summary["speedup"]["median"] == round(sorted(ratios)[2], 3)
    receipt = requests.get(fake_server.url + summary["receipt"]).json()["receipt"]
    assert {k: receipt[k] for k in ("ratios", "wins", "confidence", "verdict")} == \
        {k: summary[k] for k in ("ratios", "wins", "confidence", "verdict")}
    page = requests.get(fake_server.url + summary["receipt"], params={"format": "markdown"}).text
    confidence = summary["confidence"]
    assert (f"{summary['verdict']}: {summary['wins']} of 5 pairs faster, 94% interval "
            f"{confidence['low']}–{confidence['high']}×") in page


def test_a_drafter_that_costs_more_than_it_saves_is_slower_and_three_pairs_are_unclear(fake_server):
    fake_server.engine.delay_s = 0.01
    fake_server.engine.round_s = 0.08  # a verify round costs 9 plain tokens and yields about 3
    fake_server.host.update_settings({"draft_block_size": 4})  # a fixed block: "auto" would turn drafting off
    with WsClient(fake_server.ws_url) as ws:
        slower, frames = race(ws, runs=5)
        short, short_frames = race(ws, id="r2", runs=3)
    ratios = pair_ratios(frames)
    assert sorted(ratios)[2] < 0.7
    assert (slower["wins"], slower["verdict"]) == (sum(r > 1 for r in ratios), min_max_verdict(ratios))
    assert slower["confidence"]["coverage"] == 0.9375
    ratios = pair_ratios(short_frames)
    # Three pairs: min–max holds the median with only 75%, too little for a verdict whatever they say.
    assert short["confidence"] == {"low": round(min(ratios), 3), "high": round(max(ratios), 3), "coverage": 0.75}
    assert (short["wins"], short["verdict"]) == (sum(r > 1 for r in ratios), "unclear")


def test_runs_auto_stops_once_the_pairs_settle_it(fake_server):
    fake_server.engine.delay_s = 0.02
    with WsClient(fake_server.ws_url) as ws:
        summary, frames = race(ws, runs="auto")
    ratios = pair_ratios(frames)
    assert stopped_by_the_rule(ratios) and summary["runs"] == len(ratios) and summary["finish_reason"] == "stop"
    # The fake's drafter wins all but a stalled pair: five pairs settle it, on a loaded machine a few more.
    assert len(ratios) < 9 and summary["verdict"] == "faster"
    assert [f for f in frames if f["type"] == "start"][0]["runs"] == "auto"
    receipt = requests.get(fake_server.url + summary["receipt"]).json()["receipt"]
    assert receipt["runs"] == {"asked": "auto", "measured": len(ratios)}
    assert f"--runs {len(ratios)}" in receipt["command"]


def test_runs_auto_stops_at_nine_pairs_when_they_do_not_settle(alternating_server):
    with WsClient(alternating_server.ws_url) as ws:
        summary, frames = race(ws, runs="auto")
    ratios = pair_ratios(frames)
    assert len(ratios) == 9 and summary["runs"] == 9 and stopped_by_the_rule(ratios)
    assert summary["wins"] == sum(r > 1 for r in ratios) and summary["verdict"] == "unclear"
    # Nine pairs: [x(2), x(8)] holds the median with 1 − 2·10/512 ≈ 96.1%.
    assert summary["confidence"] == {"low": round(sorted(ratios)[1], 3), "high": round(sorted(ratios)[7], 3),
                                     "coverage": 0.9609}


def test_a_sweep_judges_each_block_and_runs_auto_settles_every_block(fake_server):
    fake_server.engine.delay_s = 0.02
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "sweep", "id": "s1", "text": "hello", "blocks": [1, 2, 4], "runs": "auto"})
        summary, frames = ws.until("sweep_done", timeout=180, id="s1")
    rows = {row["block"]: row for row in summary["rows"]}
    ratios = {block: pair_ratios(frames, (1, block), key="block") for block in (2, 4)}
    n = len(ratios[4])
    assert summary["runs"] == "auto" and rows[4]["runs"] == rows[2]["runs"] == n == len(ratios[2])
    # It stopped at the first run, from the fifth on, at which both drafting blocks were settled, or at 9.
    assert not any(all(settled(r[:k]) for r in ratios.values()) for k in range(5, n))
    assert n == 9 or all(settled(r) for r in ratios.values())
    k = 1 if n < 8 else 2  # [x(k), x(n+1−k)]: the largest k with 90% coverage
    for block, pairs in ratios.items():
        ordered = sorted(pairs)
        low, high = ordered[k - 1], ordered[n - k]
        assert rows[block]["ratios"] == [round(r, 3) for r in pairs]
        assert rows[block]["wins"] == sum(r > 1 for r in pairs)
        assert rows[block]["confidence"] == {"low": round(low, 3), "high": round(high, 3),
                                             "coverage": round(coverage(n, k), 4)}
        assert rows[block]["verdict"] == ("faster" if low > 1 else "slower" if high < 1 else "unclear")
    assert rows[4]["verdict"] == "faster" and n < 9  # the fake's block 4 keeps about 3 tokens a round
    assert rows[1]["ratios"] == [1.0] * n and rows[1]["verdict"] == "unclear"
    receipt = requests.get(fake_server.url + summary["receipt"]).json()["receipt"]
    assert receipt["rows"] == summary["rows"] and f"--runs {n}" in receipt["command"]
    assert receipt["busy"] == summary["busy"] and set(summary["busy"]) == {"percent", "flagged", "threshold"}
    page = requests.get(fake_server.url + summary["receipt"], params={"format": "markdown"}).text
    confidence = rows[4]["confidence"]
    assert (f"| faster: {rows[4]['wins']} of {n} pairs faster, {confidence['coverage']:.0%} interval "
            f"{confidence['low']}–{confidence['high']}× |") in page
    assert ("The machine was busy" in page) is summary["busy"]["flagged"]


@pytest.mark.parametrize("runs", ["Auto", "9x", 2.5, True])
def test_runs_is_one_to_nine_or_auto(fake_server, runs):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "race", "id": "r1", "text": "hello", "runs": runs})
        error, _ = ws.until("error")
    assert error["code"] == "bad_frame" and 'use 1 to 9 runs, or "auto"' in error["message"]


def test_auto_turns_off_a_drafter_that_costs_more_than_it_saves(fake_server):
    fake_server.engine.delay_s = 0.02
    fake_server.engine.round_s = 0.16
    with WsClient(fake_server.ws_url) as ws:
        summary, frames = race(ws, runs=3)
    assert summary["chose"] == "auto (off)" and set(summary["on"]["block_history"]) == {"1"}
    # Plain steps on both lanes: as fast as drafter off, within a loaded machine's stalls.
    assert 0.8 < summary["speedup"]["median"] < 1.25
