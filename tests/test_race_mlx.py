"""Races and receipts on the real server (CLI in a subprocess) with the real MLX engine on the tiny model."""

import statistics

import mlx.core as mx
import pytest
import requests

from tests.support.wsclient import WsClient, set_settings, texts


def test_greedy_race_is_identical_and_its_receipt_names_the_machine(mlx_server, tiny_model):
    with WsClient(mlx_server.ws_url) as ws:
        set_settings(ws, reasoning_budget=10, max_tokens=24, temperature=0.9, speculative=True, draft_block_size=3)
        ws.send({"type": "race", "id": "mlx-race", "text": "race me", "runs": 2})
        summary, frames = ws.until("race_done", id="mlx-race", timeout=300)
    assert summary["finish_reason"] == "stop" and summary["runs"] == 2
    assert summary["identical"] is True and summary["first_divergence"] is None
    starts = [(f["lane"], f["run"]) for f in frames if f["type"] == "start"]
    assert starts == [("off", 0), ("on", 0), ("off", 1), ("on", 1)]
    answers = {texts([g for g in frames if (g.get("lane"), g.get("run")) == start], "answer") for start in starts}
    assert len(answers) == 1 and answers.pop()
    done = {(f["lane"], f["run"]): f["stats"] for f in frames if f["type"] == "done"}
    ratios = [done["on", r]["tok_s"] / done["off", r]["tok_s"] for r in range(2)]
    assert summary["speedup"]["median"] == pytest.approx(statistics.median(ratios), abs=1e-3)
    assert done["on", 0]["drafted"] > 0 and done["off", 0]["drafted"] is None
    assert summary["on"]["stats"]["acceptance_by_depth"] and len(summary["on"]["stats"]["acceptance_by_depth"]) == 2

    receipt = requests.get(mlx_server.url + "/api/receipts/mlx-race").json()["receipt"]
    assert (receipt["engine"], receipt["model"], receipt["block_size"]) == ("mlx", str(tiny_model), 3)
    assert receipt["sampling"]["temperature"] == 0.0 and receipt["identical"] is True
    on_gpu = mx.default_device().type == mx.gpu  # the server computes where this process does
    assert (receipt["machine"]["accelerator"] is not None) == on_gpu and receipt["machine"]["blas"]
    assert not str(receipt["machine"]["accelerator"]).startswith("Device(")  # a name, not MLX's repr
    assert receipt["versions"]["mlx"] and receipt["versions"]["mlx-vlm"]
    assert f"--model {tiny_model}" in receipt["command"] and "--blocks 1,3 --runs 2" in receipt["command"]
    markdown = requests.get(mlx_server.url + "/api/receipts/mlx-race?format=markdown").text
    assert "| identical output | yes |" in markdown and receipt["command"] in markdown


def test_sweep_on_the_real_engine(mlx_server):
    with WsClient(mlx_server.ws_url) as ws:
        set_settings(ws, reasoning_budget=6, max_tokens=16, temperature=0.0)
        ws.send({"type": "sweep", "id": "mlx-sweep", "text": "sweep me", "blocks": [1, 2, 3]})
        summary, _ = ws.until("sweep_done", id="mlx-sweep", timeout=300)
    rows = {row["block"]: row for row in summary["rows"]}
    assert summary["finish_reason"] == "stop" and list(rows) == [1, 2, 3]
    assert rows[1]["acceptance"] is None and rows[2]["acceptance"] is not None
    assert all(row["identical"] for row in rows.values()) and summary["best"] in rows
