"""Daemon engines learn the served model's context from the server, so a long conversation drops its oldest
turns for them too: the OpenAI-compatible engine from /models, MTPLX from /health (the fake daemon serves
both as the reference says)."""

import pytest

from engines import GenerationOptions, Image, Message
from engines.openai_compat import OpenAICompatEngine
from tests.support.fake_mtplx import FakeDaemon
from webapp.conversations.window import Window, fit

OPTIONS = GenerationOptions(reasoning_budget=0, max_tokens=64, temperature=0.0)
WINDOW = 600


@pytest.fixture(scope="module")
def daemon():
    server = FakeDaemon("--model", "org/Qwen3.5-9B-MTPLX", "--context-window", str(WINDOW))
    yield server
    server.stop()


def conversation(turns: int) -> tuple[list[Message], list[str]]:
    messages, ids = [], []
    for i in range(turns):
        messages += [Message("user", f"Question {i}: " + "tell me more " * 20), Message("assistant", "word " * 40)]
        ids += [f"u{i}", f"a{i}"]
    return messages[:-1], ids[:-1]  # ends on the user's newest question


def test_the_openai_engine_reads_the_context_from_models_and_drops_old_turns(daemon):
    engine = OpenAICompatEngine(daemon.url + "/v1")
    engine.load(OPTIONS)
    try:
        assert engine.context == WINDOW
        short, _ = conversation(1)
        size, limit = engine.prompt_size(short, OPTIONS)
        assert limit == WINDOW and 0 < size < WINDOW
        messages, ids = conversation(12)
        assert engine.prompt_size(messages, OPTIONS)[0] > WINDOW
        kept, window = fit(engine, messages, ids, OPTIONS)
        assert window.dropped > 0 and kept[0].role == "user" and kept[-1] == messages[-1]
        assert engine.prompt_size(kept, OPTIONS)[0] + OPTIONS.max_tokens <= WINDOW
    finally:
        engine.unload()


def test_a_server_that_does_not_say_gets_every_turn(daemon):
    engine = OpenAICompatEngine(daemon.url + "/v1")
    engine.load(OPTIONS)
    try:
        engine.context = None  # as after /models without a context length
        messages, ids = conversation(12)
        assert fit(engine, messages, ids, OPTIONS) == (messages, Window())
    finally:
        engine.unload()


def test_mtplx_reads_the_context_window_from_health(daemon):
    from engines.mtplx.engine import MtplxEngine

    engine = MtplxEngine(daemon.url)  # adopts the daemon that is already running
    engine.load(OPTIONS)
    try:
        assert engine.info().state == "ready" and engine.context == WINDOW
        messages, ids = conversation(12)
        kept, window = fit(engine, messages, ids, OPTIONS)
        assert window.dropped > 0 and kept[-1] == messages[-1]
    finally:
        engine.unload()


def test_images_count_towards_the_estimate(daemon):
    engine = OpenAICompatEngine(daemon.url + "/v1")
    engine.load(OPTIONS)
    try:
        small = Image("a" * 32, "0" * 64, "image/png", 64, 64)  # 4 tokens of 32×32 pixels
        large = Image("b" * 32, "1" * 64, "image/png", 4000, 3000)  # counted as at most 2 megapixels
        text = engine.prompt_size([Message("user", "Look")], OPTIONS)[0]
        assert engine.prompt_size([Message("user", "Look", images=(small,))], OPTIONS)[0] == text + 4
        assert engine.prompt_size([Message("user", "Look", images=(large,))], OPTIONS)[0] == text + 2048
        turns = [Message("user", "Look", images=(large,)), Message("assistant", "ok"), Message("user", "And?")]
        kept, window = fit(engine, turns, ["u0", "a0", "u1"], OPTIONS)
        assert window.dropped == 1 and kept == turns[-1:]  # the image's turn went: it would not fit
    finally:
        engine.unload()
