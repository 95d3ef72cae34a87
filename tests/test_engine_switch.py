"""Switching engines live from a tab."""

import pytest
import requests

from engines.fake import FakeEngine
from engines.registry import EngineSpec
from tests.support.tabs import RecordingTab
from tests.support.wsclient import WsClient
from webapp.hosting.engine_lifecycle import EngineLifecycle
from webapp.hosting.host import EngineHost
from webapp.hosting.settings import SettingsStore
from webapp.measurement.baseline import Baselines
from webapp.measurement.receipts import Receipts


def test_switch_reaches_every_tab_and_the_new_engine_answers(fake_server):
    old = fake_server.host.engine
    with WsClient(fake_server.ws_url) as ws, WsClient(fake_server.ws_url) as other:
        assert ws.hello["spec"]["name"] == "fake" and "mlx" in ws.hello["choices"]
        ws.chat("m1")
        ws.send({"type": "switch_engine", "spec": {"name": "fake"}})
        for client in (ws, other):
            frame, _ = client.until("engine")
            while frame["engine"]["state"] != "ready":
                frame, _ = client.until("engine")
        assert fake_server.host.engine is not old
        assert old.info().state == "error" and old.info().message == "unloaded"
        done, _ = ws.chat("m2")
        assert done["finish_reason"] == "stop"
    # The conversation carries over to the new engine.
    assert [m.role for m in fake_server.host.engine.turns[-1].messages] == ["user", "assistant", "user"]


def test_a_switch_ends_on_its_one_ready_even_when_the_load_wins(tmp_path, monkeypatch):
    """The switch's own frame used to be read after the hand-over started: one whose load won went out after the
    new engine's ready, a second ready that a tab took for its next switch's (then chatted with an engine not
    ready yet)."""
    # Each hand-over runs to its end before the switching thread goes on, as it may when that thread is preempted.
    monkeypatch.setattr(EngineLifecycle, "_background", lambda self, target, args, name: target(*args))
    host = EngineHost(FakeEngine(), SettingsStore(tmp_path), Receipts(tmp_path), Baselines(tmp_path),
                      EngineSpec(name="fake"), lambda spec, policy: FakeEngine())
    host.start_loading()
    tab = RecordingTab(host)
    host.join(tab)
    host.switch_engine({"name": "fake"})
    states = [(f["engine"]["state"], f["engine"]["message"]) for f in tab.frames if f["type"] == "engine"]
    assert states == [("loading", "waiting to load"), ("loading", "loading the fake model"), ("ready", "")]


def test_switch_stops_a_reply_in_flight(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "chat", "id": "long", "text": "hi"})
        ws.until("thinking")
        ws.send({"type": "switch_engine", "spec": {"name": "fake"}})
        done, _ = ws.until("done", id="long")
        assert done["finish_reason"] == "cancelled"


@pytest.mark.parametrize(
    "spec, words",
    [
        ({"name": "warp"}, "name"),
        ({"name": "openai"}, "/v1 URL"),
        ({"name": "mlx", "model": "./no/such/model"}, "is not a model specchat lists"),
        ({"name": "fake", "colour": "red"}, "colour"),
    ],
)
def test_bad_engine_spec_changes_nothing(fake_server, spec, words):
    before = fake_server.host.engine
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "switch_engine", "spec": spec})
        error, _ = ws.until("error")
        assert error["code"] == "invalid_engine" and words in error["message"]
        assert ws.chat("m1")[0]["finish_reason"] == "stop"
    assert fake_server.host.engine is before


def test_rest_switch_and_health_never_show_the_key(fake_server):
    reply = requests.post(fake_server.url + "/api/engine", json={"name": "fake", "api_key": "sk-secret"})
    assert reply.status_code == 200 and reply.json()["spec"]["api_key_set"] is True
    health = requests.get(fake_server.url + "/api/health").text
    assert "sk-secret" not in health and '"api_key_set":true' in health
