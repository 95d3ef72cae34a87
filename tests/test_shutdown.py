"""Shutting down: every engine unloaded once, a load in flight waited for, every started reply's done sent."""

import random
import signal
import threading
import time
from types import SimpleNamespace

import pytest
import requests
from websockets.exceptions import ConnectionClosed

from engines.fake import FakeEngine
from engines.registry import EngineSpec
from tests.support.poll import wait_until
from tests.support.wsclient import WsClient
from webapp.conversations import conversation as conversation_module
from webapp.conversations.conversation import Conversation, Said, new_message
from webapp.conversations.store import Store
from webapp.errors import ClientError
from webapp.hosting.host import EngineHost
from webapp.hosting.settings import SettingsStore
from webapp.measurement.baseline import Baselines
from webapp.measurement.busy import CpuWatch
from webapp.measurement.receipts import Receipts


class CountingEngine(FakeEngine):
    """Records loads and unloads in one shared log; a load can be held until ``release`` is set."""

    def __init__(self, label: str, log: list[str], hold: threading.Event | None = None):
        super().__init__()
        self.label, self.log, self.hold = label, log, hold

    def load(self, options) -> None:
        self.log.append(f"{self.label} load")
        if self.hold is not None:
            assert self.hold.wait(10)
        super().load(options)
        self.log.append(f"{self.label} ready")

    def unload(self) -> None:
        self.log.append(f"{self.label} unload")
        super().unload()


def make_host(tmp_path, log, hold=None):
    made = iter("BCDE")
    host = EngineHost(CountingEngine("A", log), SettingsStore(tmp_path), Receipts(tmp_path), Baselines(tmp_path),
                      EngineSpec(name="fake"), lambda spec, policy: CountingEngine(next(made), log, hold))
    return host


def test_shut_down_after_a_switch_unloads_each_engine_once(tmp_path):
    log: list[str] = []
    host = make_host(tmp_path, log)
    host.start_loading().join(5)
    host.switch_engine({"name": "fake"})
    assert wait_until(lambda: "B ready" in log)
    host.shut_down()
    assert log == ["A load", "A ready", "A unload", "B load", "B ready", "B unload"]


def test_shut_down_waits_for_a_load_in_flight_then_unloads_it(tmp_path):
    log: list[str] = []
    hold = threading.Event()
    host = make_host(tmp_path, log, hold)
    host.start_loading().join(5)
    host.switch_engine({"name": "fake"})
    assert wait_until(lambda: "B load" in log)
    stopper = threading.Thread(target=host.shut_down)
    stopper.start()
    stopper.join(0.3)
    assert stopper.is_alive(), "shut_down did not wait for the load in flight"
    hold.set()
    stopper.join(10)
    assert not stopper.is_alive()
    assert log == ["A load", "A ready", "A unload", "B load", "B ready", "B unload"]
    with pytest.raises(ClientError) as info:
        host.switch_engine({"name": "fake"})
    assert info.value.code == "shutting_down"


def test_cancel_waits_for_a_reply_whose_thread_is_still_starting(monkeypatch):
    """SIGTERM right after a chat: the reply's thread may exist but not have started yet."""
    starting = threading.Event()

    class SlowStart(threading.Thread):
        def start(self):
            starting.set()
            time.sleep(0.3)
            super().start()

    monkeypatch.setattr(conversation_module, "threading",
                        SimpleNamespace(Thread=SlowStart, Lock=threading.Lock, Event=threading.Event))
    conversation, frames = Conversation(Store(None), lambda: None, CpuWatch), []
    conversation.attach(frames.append, {"type": "hello"})
    job = SimpleNamespace(id="r1", cancel=threading.Event())

    def work():
        job.cancel.wait(10)
        return Said("partial", "", "cancelled", {}, {"type": "done", "id": "r1", "finish_reason": "cancelled"})

    said = new_message("user", None, "hi")
    new = [said, new_message("assistant", said["id"])]
    beginner = threading.Thread(target=conversation.begin, args=(job, new, work))
    beginner.start()
    assert starting.wait(5)
    conversation.cancel()
    conversation.cancel(wait=True)
    beginner.join(5)
    assert frames[-1] == {"type": "done", "id": "r1", "finish_reason": "cancelled"}


def test_new_chat_during_a_reply_still_gets_its_done(fake_server):
    fake_server.engine.holds = [3]
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "chat", "id": "r1", "text": "hi"})
        ws.until("thinking", id="r1")
        ws.send({"type": "new_chat"})
        _, frames = ws.until("new_chat", timeout=10)
        assert [f["finish_reason"] for f in frames if f["type"] == "done" and f["id"] == "r1"] == ["cancelled"]


def test_sigterm_right_after_a_chat_exits_zero_and_a_started_reply_gets_its_done(start_server, tmp_path):
    """The chat and the signal race: whichever wins, a reply that started ends with its done, then 1001."""
    rng = random.Random(8)
    started = 0
    for run in range(8):
        server = start_server("--engine", "fake", data_dir=tmp_path / f"data{run}")
        server.wait_ready()
        ws = WsClient(server.ws_url)
        ws.send({"type": "settings", "values": {"reasoning_budget": 5000, "max_tokens": 5000}})
        ws.until("settings")
        ws.send({"type": "chat", "id": "r1", "text": "hi"})
        time.sleep(rng.uniform(0, 0.004))
        server.proc.send_signal(signal.SIGTERM)
        frames = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                frames.append(ws.recv(timeout=20))
        kinds = [f["type"] for f in frames if f.get("id") == "r1"]
        assert kinds in ([], ["error"]) or (kinds[0] == "start" and kinds[-1] == "done"), kinds
        started += bool(kinds) and kinds[0] == "start"
        assert closed.value.rcvd.code == 1001
        assert server.proc.wait(timeout=30) == 0
        assert not any("Traceback" in line for line in server.lines), "".join(server.lines)
    assert started, "no run raced the signal with a started reply"


def unloaded_lines(server, name):
    return [line for line in server.lines if f"engine {name}: unloaded" in line]


def test_sigterm_after_switching_away_from_mlx_exits_zero(start_server, tiny_model):
    server = start_server("--model", str(tiny_model))
    server.wait_ready()
    assert requests.post(server.url + "/api/engine", json={"name": "fake"}, timeout=10).status_code == 200
    server.wait_ready()
    assert server.stop() == 0
    assert not any("Traceback" in line for line in server.lines), "".join(server.lines)
    assert len(unloaded_lines(server, "mlx")) == 1 and len(unloaded_lines(server, "fake")) == 1


def test_sigterm_after_switching_to_mlx_unloads_it(start_server, tiny_model):
    server = start_server("--engine", "fake", "--models-dir", str(tiny_model.parent))  # a tab loads listed models
    server.wait_ready()
    reply = requests.post(server.url + "/api/engine", json={"name": "mlx", "model": str(tiny_model)}, timeout=10)
    assert reply.status_code == 200
    time.sleep(0.2)  # the load is in flight: shutdown waits for it, then unloads
    assert server.stop() == 0
    assert not any("Traceback" in line for line in server.lines), "".join(server.lines)
    assert len(unloaded_lines(server, "fake")) == 1 and len(unloaded_lines(server, "mlx")) == 1
    assert any("engine mlx: ready" in line for line in server.lines)


@pytest.mark.parametrize("state, message, words", [
    ("error", "unloaded", "unloaded"),
    ("loading", "loading the model", "loading the model"),
    ("loading", "warming up", "loading: warming up"),
    ("ready", "", "ready"),
    ("error", "Could not load m: gone", "error: Could not load m: gone"),
])
def test_state_log_words(state, message, words):
    from engines.base import describe_state

    assert describe_state(state, message) == words
