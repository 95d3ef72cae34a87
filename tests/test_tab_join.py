"""A tab that joins while the engine's state or the settings change: its view ends on what the server holds."""

import threading

from engines.fake import FakeEngine
from webapp import create_app


class SlowToGreet:
    """A tab whose greeting is slow: between reading the state its hello carries and queuing the hello, the engine
    loads and the settings change on other threads (each given a bounded while to get its frame out first)."""

    def __init__(self, host):
        self.host = host
        self.frames: list[dict] = []
        self.changes: list[threading.Thread] = []

    def hello(self) -> None:
        engine, settings = self.host.engine_frame()["engine"], self.host.settings.current.model_dump()
        self.changes = [self.host.start_loading(),
                        threading.Thread(target=self.host.update_settings, args=({"max_tokens": 22},))]
        self.changes[1].start()
        for change in self.changes:
            change.join(timeout=0.5)
        self.send({"type": "hello", "engine": engine, "settings": settings})

    def send(self, frame: dict) -> None:
        self.frames.append(frame)


def test_changes_made_while_a_tab_is_greeted_reach_it_after_its_hello(tmp_path):
    host = create_app(FakeEngine(), data_dir=tmp_path).extensions["specchat"]
    tab = SlowToGreet(host)
    host.join(tab)
    for change in tab.changes:
        change.join(timeout=10)
    assert tab.frames[0]["type"] == "hello" and tab.frames[0]["engine"]["state"] == "loading"
    engine_seen = [f["engine"] for f in tab.frames if f["type"] in ("hello", "engine")][-1]
    settings_seen = [f.get("settings") or f["values"] for f in tab.frames if f["type"] in ("hello", "settings")][-1]
    assert engine_seen["state"] == host.engine.info().state == "ready"
    assert settings_seen["max_tokens"] == host.settings.current.max_tokens == 22
