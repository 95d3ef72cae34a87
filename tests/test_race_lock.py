"""A race that fails while it starts, after it took the race lock and opened its warm-up, lets both go: the next
race runs."""

import time

import pytest
from websockets.exceptions import ConnectionClosed

from tests.support.wsclient import WsClient


def test_a_race_that_fails_while_starting_releases_the_engine_and_the_race_lock(fake_server, monkeypatch):
    from webapp.measurement import race

    def broken(*args, **kwargs):
        raise RuntimeError("the reply's settings could not be written")

    with monkeypatch.context() as patched:
        patched.setattr(race, "produced_by", broken)  # after the lock is taken and the warm-up holds the engine
        with WsClient(fake_server.ws_url) as ws:
            ws.send({"type": "race", "id": "broken", "text": "hello"})
            with pytest.raises(ConnectionClosed):  # an unexpected failure ends the socket
                ws.until("race_done", timeout=10)
    deadline = time.monotonic() + 10
    while (fake_server.host.exclusive.locked() or fake_server.engine.busy) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not fake_server.host.exclusive.locked()
    assert not fake_server.engine.busy
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "race", "id": "after", "text": "hello"})
        done, _ = ws.until("race_done", timeout=30)
        assert done["id"] == "after"
