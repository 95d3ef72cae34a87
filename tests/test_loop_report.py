"""Every stats frame, summary, receipt and bench table says which decode loop ran, and why when it is mlx-vlm's."""

import json

import pytest
import requests

from engines import Done, GenerationOptions, Message, Stats, Turn, guarded
from tests.support.harness import bench
from tests.support.wsclient import WsClient, set_settings

ASKED = "the settings ask for mlx-vlm's loop"


@pytest.fixture(scope="module")
def engine(tiny_model):
    from engines.mlx.engine import MlxEngine

    engine = MlxEngine(str(tiny_model))
    engine.load(GenerationOptions())
    yield engine
    engine.unload()


def _stats(engine, options, conversation):
    """Every stats dict of one reply, live ones first, the final one last."""
    turn = Turn(id="t", conversation_id=conversation, messages=[Message("user", "count to ten")], options=options)
    events = list(guarded(engine.stream(turn)))
    assert isinstance(events[-1], Done) and events[-1].finish_reason in ("stop", "length")
    return [e.values for e in events if isinstance(e, Stats)] + [events[-1].stats]


@pytest.mark.parametrize("loop, reason", [("specchat", None), ("mlx-vlm", ASKED)])
@pytest.mark.parametrize("speculative", [False, True])
def test_every_stats_frame_names_the_loop(engine, loop, reason, speculative):
    options = GenerationOptions(reasoning_budget=0, max_tokens=200, temperature=0.0, speculative=speculative,
                                decode_loop=loop)
    every = _stats(engine, options, f"{loop}-{speculative}")
    assert len(every) >= 1
    for stats in every:
        assert (stats["decode_loop"], stats["decode_loop_reason"]) == (loop, reason)
        assert "tok_s" in stats and "budget_bound" in every[-1]  # the other fields stay


def test_race_sweep_and_receipts_name_the_loop_that_ran(mlx_server):
    with WsClient(mlx_server.ws_url) as ws:
        set_settings(ws, reasoning_budget=0, max_tokens=12, decode_loop="mlx-vlm", draft_block_size=3)
        ws.send({"type": "race", "id": "loop-race", "text": "race me"})
        race, _ = ws.until("race_done", id="loop-race", timeout=300)
        set_settings(ws, decode_loop="specchat")
        ws.send({"type": "sweep", "id": "loop-sweep", "text": "sweep me", "blocks": [1, 3]})
        sweep, _ = ws.until("sweep_done", id="loop-sweep", timeout=300)
    for lane in ("off", "on"):
        assert race[lane]["stats"]["decode_loop"] == "mlx-vlm"
        assert race[lane]["stats"]["decode_loop_reason"] == ASKED
    receipt = requests.get(mlx_server.url + "/api/receipts/loop-race").json()["receipt"]
    assert (receipt["decode_loop"], receipt["decode_loop_reason"]) == ("mlx-vlm", ASKED)
    assert receipt["off"]["decode_loop"] == receipt["on"]["decode_loop"] == "mlx-vlm"
    markdown = requests.get(mlx_server.url + "/api/receipts/loop-race?format=markdown").text
    assert f"| decode loop | off mlx-vlm · on mlx-vlm ({ASKED}) |" in markdown

    assert [(row["block"], row["decode_loop"], row["decode_loop_reason"]) for row in sweep["rows"]] == [
        (1, "specchat", None), (3, "specchat", None)]
    receipt = requests.get(mlx_server.url + "/api/receipts/loop-sweep").json()["receipt"]
    assert receipt["decode_loop"] == "specchat" and receipt["decode_loop_reason"] is None
    markdown = requests.get(mlx_server.url + "/api/receipts/loop-sweep?format=markdown").text
    assert "Decode loop: specchat. " in markdown


def test_bench_says_which_loop_ran(tiny_model, tmp_path):
    out = tmp_path / "bench.json"
    done = bench("--model", str(tiny_model), "--prompt", "a prompt", "--blocks", "1,2", "--runs", "1",
                 "--max-tokens", "8", "--budget", "0", "--loop", "both", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "decode loop: specchat\n" in done.stdout
    assert f"decode loop: mlx-vlm ({ASKED})\n" in done.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [(row["loop"], row["decode_loop"]) for row in rows] == [
        ("specchat", "specchat"), ("specchat", "specchat"), ("mlx-vlm", "mlx-vlm"), ("mlx-vlm", "mlx-vlm")]
