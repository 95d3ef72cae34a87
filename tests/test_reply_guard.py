"""The one-reply guard, owned by the base engine: a stream refused, never read, closed early or abandoned gives
the engine back, on the scripted engine and the real MLX engine alike (every engine inherits the guard)."""

import gc

import pytest

from engines import Done, EngineBusy, GenerationOptions, Message, Turn, guarded
from engines.fake import FakeEngine
from engines.mlx.engine import MlxEngine
from tests.support.wsclient import WsClient

OPTIONS = GenerationOptions().updated({"reasoning_budget": 0, "max_tokens": 24, "temperature": 0.0})


def turn(id: str = "t1") -> Turn:
    return Turn(id, f"c-{id}", [Message("user", "hello")], OPTIONS)


def finishes(engine) -> bool:
    """Whether one whole reply streams to its end (a random tiny model may run to its length)."""
    events = list(guarded(engine.stream(turn("after"))))
    assert sum(isinstance(e, Done) for e in events) == 1
    return events[-1].finish_reason in ("stop", "length")


@pytest.fixture
def fake():
    engine = FakeEngine(delay_s=0.001)
    engine.load(OPTIONS)
    return engine


@pytest.fixture(scope="module")
def mlx(tiny_model):
    engine = MlxEngine(str(tiny_model))
    engine.load(OPTIONS)
    assert engine.info().state == "ready"
    yield engine
    engine.unload()


@pytest.fixture(params=["fake", "mlx"])
def engine(request):
    return request.getfixturevalue(request.param)


def test_a_second_stream_is_refused_while_one_holds_the_engine(engine):
    first = engine.stream(turn())
    with pytest.raises(EngineBusy):
        engine.stream(turn("t2"))
    first.close()
    assert not engine.busy
    assert finishes(engine)


def test_a_stream_opened_and_never_read_gives_the_engine_back_when_dropped(engine):
    events = engine.stream(turn())
    assert engine.busy
    del events
    gc.collect()
    assert not engine.busy
    assert finishes(engine)


def test_a_stream_abandoned_mid_reply_gives_the_engine_back(engine):
    events = engine.stream(turn())
    next(events)
    events.close()
    assert not engine.busy
    assert finishes(engine)


def test_a_stream_read_to_its_end_gives_the_engine_back(engine):
    assert finishes(engine)
    assert not engine.busy


def test_a_failing_stream_gives_the_engine_back(fake):
    fake.fail_after = 3
    events = list(guarded(fake.stream(turn())))
    assert events[-1].finish_reason == "error"
    assert not fake.busy
    fake.fail_after = None
    assert finishes(fake)


def test_a_chat_refused_at_shutdown_leaves_the_engine_free(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        fake_server.host.conversations.close()  # shutting down: new jobs are refused
        ws.send({"type": "chat", "id": "late", "text": "hello"})
        error, _ = ws.until("error")
        assert error["code"] == "shutting_down"
    assert not fake_server.engine.busy
    assert finishes(fake_server.engine)


def test_a_race_refused_at_shutdown_releases_the_engine_and_the_race_lock(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        fake_server.host.conversations.close()
        ws.send({"type": "race", "id": "late", "text": "hello"})
        error, _ = ws.until("error")
        assert error["code"] == "shutting_down"
    assert not fake_server.host.exclusive.locked()
    assert not fake_server.engine.busy
    assert finishes(fake_server.engine)
