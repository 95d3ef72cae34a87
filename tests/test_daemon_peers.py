"""Real OpenAI-compatible peers on the tiny checkpoint, driven end to end through the CLI and the websocket.

``python -m mlx_vlm.server`` streams ``delta.reasoning_content`` and honours a
thinking budget, but refuses one when it drafts; ``python -m mlx_lm server``
streams ``delta.reasoning`` and knows no budget. The budget holds on all three.
Images go to mlx-vlm's server through the engine: one on a checkpoint that can
see answers and drafts after the image, one on the tiny checkpoint (a tower
never trained, no image processor config) fails on them in its own words.
"""

import os
import subprocess
import sys
import time

import pytest
import requests

from engines import Answer, Message
from engines.openai_compat import OpenAICompatEngine
from engines.sse import IMAGES_HINT
from tests.support.engine_runs import OPTIONS, run, text, turn
from tests.support.fake_mtplx import free_port
from tests.support.harness import end_process
from tests.support.wsclient import WsClient, texts
from tests.test_daemon_images import RED, image_turn

pytestmark = pytest.mark.slow


class Peer:
    def __init__(self, args: list[str], env: dict):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc = subprocess.Popen([sys.executable, "-m", *args, "--host", "127.0.0.1", "--port", str(self.port)],
                                     env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"peer exited with {self.proc.returncode}")
            try:
                if requests.get(self.url + "/models", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.2)
        raise TimeoutError("peer did not start")

    def stop(self) -> None:
        end_process(self.proc, 15)


@pytest.fixture(scope="module")
def peers(tiny_model, tmp_path_factory):
    """Both peers start together (each takes seconds to import), once for the module."""
    cache = tmp_path_factory.mktemp("mlx-vlm-cache")
    vlm = Peer(["mlx_vlm.server", "--model", str(tiny_model)],
               {"APC_DISK_ENABLED": "0", "MLX_VLM_CACHE_HOME": str(cache)})
    drafting = Peer(["mlx_vlm.server", "--model", str(tiny_model), "--draft-model", str(tiny_model),
                     "--draft-kind", "mtp"], {"APC_DISK_ENABLED": "0", "MLX_VLM_CACHE_HOME": str(cache)})
    # mlx_lm's /v1/models scans the hub cache and sends an empty body when that folder is missing.
    hub = tmp_path_factory.mktemp("hf-hub")
    lm = Peer(["mlx_lm", "server", "--model", str(tiny_model)], {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub)})
    try:
        for peer in (vlm, drafting, lm):
            peer.wait_ready()
        yield {"mlx_vlm": vlm, "mlx_vlm_drafting": drafting, "mlx_lm": lm}
    finally:
        for peer in (vlm, drafting, lm):
            peer.stop()


def chat(server, **settings) -> tuple[dict, list[dict]]:
    with WsClient(server.ws_url) as ws:
        ws.send({"type": "settings", "values": settings})
        ws.until("settings")
        return ws.chat("m1", "hello")


def test_mlx_vlm_server_thinking_answer_and_stats(peers, tiny_model, start_server):
    server = start_server("--engine", "openai", "--base-url", peers["mlx_vlm"].url, "--model", str(tiny_model))
    engine = server.wait_ready(timeout=30)
    assert (engine["name"], engine["model"]) == ("openai", str(tiny_model))
    done, frames = chat(server, reasoning_budget=8, max_tokens=12, temperature=0.0)
    kinds = [f["type"] for f in frames if f["type"] in ("thinking", "answer")]
    assert "thinking" in kinds and "answer" in kinds
    assert max(i for i, k in enumerate(kinds) if k == "thinking") < kinds.index("answer")
    assert texts(frames, "thinking").strip() and texts(frames, "answer").strip()
    assert done["finish_reason"] == "length"
    stats = done["stats"]
    # The server closed thinking at the budget itself; its usage: 8 + 12 (and the </think> token).
    assert (stats["budget_bound"], stats["thinking_tokens"], stats["answer_tokens"]) == ("server", 8, 12)
    assert stats["tokens"] == 20 and stats["prompt_tokens"] > 0
    assert stats["tok_s"] > 0 and stats["ttft_ms"] > 0 and stats["thinking_ms"] is not None


def test_mlx_lm_server_reasoning_field_and_thinking_off(peers, tiny_model, start_server):
    server = start_server("--engine", "openai", "--base-url", peers["mlx_lm"].url)
    assert server.wait_ready(timeout=30)["model"] == str(tiny_model)  # the first served model
    # The model thinks on past 64 tokens: it is cut there and the answer asked for, which max_tokens bounds.
    done, frames = chat(server, reasoning_budget=64, max_tokens=4, temperature=0.0)
    assert texts(frames, "thinking").strip() and texts(frames, "answer").strip()
    assert done["finish_reason"] == "length"
    stats = done["stats"]
    assert (stats["budget_bound"], stats["thinking_tokens"], stats["answer_tokens"], stats["tokens"]) == (
        "cut", 64, 4, 68)
    done, frames = chat(server, reasoning_budget=0, max_tokens=6, temperature=0.0)
    assert texts(frames, "answer").strip() and not texts(frames, "thinking")
    assert done["stats"]["tokens"] == 6 and done["stats"]["thinking_tokens"] == 0


def test_mlx_vlm_server_that_drafts_refuses_the_budget_so_thinking_is_cut(peers, tiny_model, start_server):
    server = start_server("--engine", "openai", "--base-url", peers["mlx_vlm_drafting"].url)
    server.wait_ready(timeout=30)
    for _ in range(2):  # the refusal is learnt once; the next reply is cut straight away
        done, frames = chat(server, reasoning_budget=8, max_tokens=12, temperature=0.0)
        kinds = [f["type"] for f in frames if f["type"] in ("thinking", "answer")]
        assert max(i for i, k in enumerate(kinds) if k == "thinking") < kinds.index("answer")
        assert done["finish_reason"] == "length" and "error" not in done
        stats = done["stats"]
        assert (stats["budget_bound"], stats["thinking_tokens"], stats["answer_tokens"]) == ("cut", 8, 12)
        assert stats["drafted"] > 0  # the answer request's drafting, from the server's timings


@pytest.fixture(scope="module")
def seeing_peer(vision_model, tmp_path_factory):
    """mlx-vlm's server on a checkpoint that can see, drafting with its MTP head."""
    peer = Peer(["mlx_vlm.server", "--model", str(vision_model), "--draft-model", f"{vision_model}-mtp",
                 "--draft-kind", "mtp"],
                {"APC_DISK_ENABLED": "0", "MLX_VLM_CACHE_HOME": str(tmp_path_factory.mktemp("mlx-vlm-cache"))})
    try:
        peer.wait_ready()
        yield peer
    finally:
        peer.stop()


def test_mlx_vlm_server_takes_an_image(seeing_peer):
    engine = OpenAICompatEngine(seeing_peer.url)
    engine.load(OPTIONS)
    try:
        assert engine.info().vision is True
        options = OPTIONS.updated({"reasoning_budget": 0, "max_tokens": 6})
        plain, _ = run(engine, turn("What is in the picture?", options))
        done, events = run(engine, image_turn(Message("user", "What is in the picture?", images=(RED,)),
                                              options=options))
        assert done.finish_reason in ("stop", "length") and done.error_code is None, done
        assert text(events, Answer)
        # Random weights say nothing of the picture, but its tokens were in the prompt the server counted.
        assert done.stats["prompt_tokens"] > plain.stats["prompt_tokens"]
        assert done.stats["prefill_ms"] > 0 and done.stats["drafted"] > 0  # it drafts after the image
    finally:
        engine.unload()


def test_mlx_vlm_server_on_a_model_that_cannot_see_says_why_in_its_words(peers):
    engine = OpenAICompatEngine(peers["mlx_vlm"].url)
    engine.load(OPTIONS)
    try:
        options = OPTIONS.updated({"reasoning_budget": 0, "max_tokens": 4})
        done, events = run(engine, image_turn(options=options))
        assert (done.finish_reason, done.error_code) == ("error", "server_error")
        said = done.error_message.split("stopped the reply with an error: ", 1)[1].removesuffix(IMAGES_HINT)
        assert said.strip(" .") and done.error_message.endswith(IMAGES_HINT)  # the server's words, then the fix
        assert not text(events, Answer)
        assert run(engine, turn("hello", options))[0].finish_reason == "length"  # text goes on
    finally:
        engine.unload()
