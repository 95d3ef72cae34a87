"""The real server (CLI in a subprocess) on a real tiny qwen3_5 checkpoint with an MTP head."""

import signal
import subprocess
import sys
import time

import requests

from tests.support.wsclient import WsClient, set_settings, texts
from webapp import ROOT


def test_health_names_the_engine(mlx_server, tiny_model):
    engine = requests.get(mlx_server.url + "/api/health").json()["engine"]
    assert engine == {
        "name": "mlx", "model": str(tiny_model), "drafter": "bundled MTP head (mtp)",
        "state": "ready", "message": "", "progress": None, "examples": [], "drafter_note": None,
        "decode_loop_reason": None, "quantized_verify_ratio": None, "vision": False,
        "vision_note": engine["vision_note"], "tools": False,
    }
    assert "preprocessor_config.json" in engine["vision_note"]  # the tiny checkpoint has no image processor


def test_budget_cuts_thinking_then_the_answer_streams(mlx_server):
    with WsClient(mlx_server.ws_url) as ws:
        set_settings(ws, reasoning_budget=12, max_tokens=10, speculative=False, temperature=0.0)
        done, frames = ws.chat("m1")
        kinds = [f["type"] for f in frames]
        assert "thinking" in kinds and "answer" in kinds
        assert max(i for i, k in enumerate(kinds) if k == "thinking") < kinds.index("answer")
        stats = done["stats"]
        assert stats["thinking_tokens"] == 12
        assert 0 < stats["answer_tokens"] <= 10
        assert done["finish_reason"] in ("stop", "length")
        assert stats["drafted"] is None and stats["acceptance"] is None
        assert stats["tok_s"] > 0 and stats["ttft_ms"] > 0 and stats["thinking_ms"] > 0


def test_budget_zero_has_no_thinking(mlx_server):
    with WsClient(mlx_server.ws_url) as ws:
        set_settings(ws, reasoning_budget=0, max_tokens=12, speculative=False)
        done, frames = ws.chat("m1")
        assert not [f for f in frames if f["type"] == "thinking"]
        assert done["stats"]["thinking_tokens"] == 0 and done["stats"]["thinking_ms"] is None


def test_drafter_output_identical_to_plain_greedy(mlx_server):
    results = {}
    for speculative in (False, True):
        with WsClient(mlx_server.ws_url) as ws:
            set_settings(ws, reasoning_budget=10, max_tokens=24, temperature=0.0,
                         speculative=speculative, draft_block_size=3)
            done, frames = ws.chat("m1", "compare drafting")
            results[speculative] = (texts(frames, "thinking"), texts(frames, "answer"), done["stats"])
    assert results[True][:2] == results[False][:2]
    assert results[True][1]
    spec_stats = results[True][2]
    assert spec_stats["drafted"] > 0 and spec_stats["accepted"] is not None
    assert 0.0 <= spec_stats["acceptance"] <= 1.0
    by_depth = spec_stats["acceptance_by_depth"]
    assert len(by_depth) == 2 and all(0.0 <= a <= 1.0 for a in by_depth)
    assert results[False][2]["drafted"] is None


def test_next_turn_reuses_the_conversation_cache(mlx_server):
    with WsClient(mlx_server.ws_url) as ws:
        set_settings(ws, reasoning_budget=8, max_tokens=8, speculative=True)
        first, _ = ws.chat("m1", "first question " * 20)
        second, _ = ws.chat("m2", "second")
        history = first["stats"]["prompt_tokens"] + first["stats"]["tokens"]
        assert second["stats"]["prompt_tokens"] > history
        assert second["stats"]["cached_tokens"] >= history - 1


def test_stop_mid_stream_then_next_message_works(mlx_server):
    with WsClient(mlx_server.ws_url) as ws:
        set_settings(ws, reasoning_budget=4000, max_tokens=4000, speculative=False)
        ws.send({"type": "chat", "id": "long", "text": "think a lot"})
        ws.until("thinking")
        ws.send({"type": "stop", "id": "long"})
        done, frames = ws.until("done", id="long")
        assert done["finish_reason"] == "cancelled"
        assert done["stats"]["tokens"] < 4000
        set_settings(ws, reasoning_budget=4, max_tokens=4)
        assert ws.chat("m2")[0]["finish_reason"] in ("stop", "length")


def test_busy_while_generating(mlx_server):
    with WsClient(mlx_server.ws_url) as ws, WsClient(mlx_server.ws_url) as other:
        set_settings(ws, reasoning_budget=300, max_tokens=300, speculative=False)
        ws.send({"type": "chat", "id": "a", "text": "hello"})
        ws.until("thinking")
        other.send({"type": "chat", "id": "b", "text": "me too"})
        error, _ = other.until("error")
        assert error["code"] == "busy" and error["id"] == "b"
        done, _ = ws.until("done", id="a")
        assert done["finish_reason"] in ("stop", "length")
        assert done["stats"]["tokens"] > 0


def test_cache_reset_reports_what_it_freed(mlx_server):
    with WsClient(mlx_server.ws_url) as ws:
        set_settings(ws, reasoning_budget=4, max_tokens=4, prefix_cache=True)
        ws.chat("m1")
        ws.send({"type": "reset_cache"})
        freed = ws.until("cache_reset")[0]["freed"]
        assert freed["prompt_tokens"] > 0 and freed["entries"] > 0 and freed["bytes"] > 0
        ws.send({"type": "reset_cache"})
        assert ws.until("cache_reset")[0]["freed"]["prompt_tokens"] == 0
        done, _ = ws.chat("m2")
        assert done["stats"]["cached_tokens"] == 0


def test_settings_persist_across_restart(start_server, tiny_model, tmp_path):
    first = start_server("--model", str(tiny_model))
    with WsClient(first.ws_url) as ws:
        set_settings(ws, reasoning_budget=33, system_prompt="Answer in French.")
    assert first.stop() == 0
    second = start_server("--model", str(tiny_model))
    with WsClient(second.ws_url) as ws:
        assert ws.hello["settings"]["reasoning_budget"] == 33
        assert ws.hello["settings"]["system_prompt"] == "Answer in French."


def test_sigterm_cancels_closes_sockets_and_exits_zero(start_server, tiny_model):
    server = start_server("--model", str(tiny_model))
    server.wait_ready()
    ws = WsClient(server.ws_url)
    ws.send({"type": "settings", "values": {"reasoning_budget": 5000, "max_tokens": 5000}})
    ws.send({"type": "chat", "id": "long", "text": "go on"})
    ws.until("thinking")
    server.proc.send_signal(signal.SIGTERM)
    done, _ = ws.until("done", id="long", timeout=20)
    assert done["finish_reason"] == "cancelled"
    from websockets.exceptions import ConnectionClosed

    try:
        while True:
            ws.recv(timeout=20)
    except ConnectionClosed as closed:
        assert closed.rcvd.code == 1001
    assert server.proc.wait(timeout=30) == 0


def test_port_is_open_while_loading(start_server, tiny_model):
    server = start_server("--model", str(tiny_model))
    states = set()
    deadline = time.monotonic() + 60
    while "ready" not in states and time.monotonic() < deadline:
        states.add(requests.get(server.url + "/api/health").json()["engine"]["state"])
    assert states >= {"loading", "ready"} or states == {"ready"}
    with WsClient(server.ws_url) as ws:
        assert ws.hello["engine"]["state"] == "ready"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webapp", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_missing_model_path_exits_with_one_clear_line(tmp_path):
    result = run_cli("--model", str(tmp_path / "nowhere"), "--data-dir", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"specchat: Model path {tmp_path / 'nowhere'} does not exist. Pass --model a model folder or a hub id."
    ]


def test_folder_that_is_not_a_model_exits_non_zero(tmp_path):
    (tmp_path / "notes").mkdir()
    result = run_cli("--model", str(tmp_path / "notes"), "--data-dir", str(tmp_path))
    assert result.returncode == 2
    assert "is not a model folder" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_separate_drafter_folder(start_server, tiny_model, tmp_path):
    drafter = tmp_path / "drafter"
    subprocess.run([sys.executable, "-m", "mlx_vlm.split_mtp", "--model", str(tiny_model), "--output", str(drafter)],
                   check=True, capture_output=True, timeout=120)
    server = start_server("--model", str(tiny_model), "--drafter", str(drafter))
    assert server.wait_ready()["drafter"] == f"{drafter} (mtp)"
    answers = {}
    with WsClient(server.ws_url) as ws:
        for speculative in (True, False):
            set_settings(ws, reasoning_budget=6, max_tokens=16, temperature=0.0, speculative=speculative)
            ws.send({"type": "new_chat"})
            ws.until("new_chat")
            done, frames = ws.chat(f"m{speculative}", "draft with a separate head")
            answers[speculative] = (texts(frames, "thinking"), texts(frames, "answer"))
            assert (done["stats"]["drafted"] or 0) > 0 if speculative else done["stats"]["drafted"] is None
    assert answers[True] == answers[False]


def test_drafter_none_turns_drafting_off(start_server, tiny_model):
    server = start_server("--model", str(tiny_model), "--drafter", "none")
    assert server.wait_ready()["drafter"] is None
    with WsClient(server.ws_url) as ws:
        set_settings(ws, reasoning_budget=4, max_tokens=4, speculative=True)
        assert ws.chat("m1")[0]["stats"]["drafted"] is None


def test_switch_live_from_fake_to_mlx(start_server, tiny_model):
    server = start_server("--engine", "fake", "--models-dir", str(tiny_model.parent))  # a tab loads listed models
    server.wait_ready()
    with WsClient(server.ws_url) as ws:
        ws.chat("m1")
        ws.send({"type": "switch_engine", "spec": {"name": "mlx", "model": str(tiny_model)}})
        frame, _ = ws.until("engine")
        while frame["engine"]["state"] != "ready":
            frame, _ = ws.until("engine", timeout=60)
        assert frame["engine"]["drafter"] == "bundled MTP head (mtp)"
        set_settings(ws, reasoning_budget=4, max_tokens=6)
        done, frames = ws.chat("m2")
        assert done["finish_reason"] in ("stop", "length") and texts(frames, "answer")
        # The whole conversation went to the new engine: both user turns are in its prompt.
        assert done["stats"]["prompt_tokens"] > 20


def test_without_model_the_bundled_demo_model_runs(start_server):
    from demo_model import DEFAULT_MODEL

    server = start_server()
    engine = server.wait_ready()
    assert engine["model"] == str(DEFAULT_MODEL) and engine["drafter"] == "bundled MTP head (mtp)"
    with WsClient(server.ws_url) as ws:
        set_settings(ws, reasoning_budget=256, max_tokens=64, temperature=0.0)
        done, frames = ws.chat("m1", "What is 21 + 34?")
        assert texts(frames, "answer").strip() == "21 + 34 = 55."
        assert done["finish_reason"] == "stop" and done["stats"]["acceptance"] > 0.5
