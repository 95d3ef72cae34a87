"""Engine frames reach the tabs in the order their states were read: a calibration's or a race's engine frame (sent
once it stored a new baseline) never lands after a newer one, and a joining tab's hello never after a change.

Each test forces the interleaving: a frame's state is read, then another thread changes the engine and tries to
send its own frame, and only then is the first frame queued. The host's engine-frame lock is watched, so the first
thread goes on as soon as the other either got its frame out (no lock kept it back) or waits on that lock: no test
here waits for a time.
"""

from __future__ import annotations

import threading

from engines.fake import FakeEngine
from tests.support.poll import wait_until
from tests.support.tabs import RecordingTab
from webapp import create_app
from webapp.measurement.race import start_race
from webapp.web.protocol import RaceFrame


class WatchedLock:
    """A lock that tells when a thread had to wait for it."""

    def __init__(self, lock):
        self._lock = lock
        self.waited = threading.Event()

    def __enter__(self):
        if not self._lock.acquire(blocking=False):
            self.waited.set()
            self._lock.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self._lock.release()


def ready_host(tmp_path):
    host = create_app(FakeEngine(delay_s=0.001), data_dir=tmp_path).extensions["specchat"]
    host.start_loading().join(timeout=10)
    assert host.engine.info().state == "ready"
    return host


def overtaken_once(host, tab: Tab, lock: WatchedLock) -> list[threading.Thread]:
    """Make the next engine frame read stop right after its read: the engine is unloaded on another thread meanwhile
    (a newer state, with a frame of its own), and the read goes on once that frame reached ``tab`` or waits on the
    engine-frame lock. Returns that thread, once started."""
    read, unloading = host.engine_frame, []

    def engine_frame() -> dict:
        frame = read()
        if not unloading:
            unloading.append(threading.Thread(target=host.engine.unload, daemon=True))
            unloading[0].start()
            wait_until(lambda: lock.waited.is_set() or "error" in tab.engine_states(), timeout=30)
        return frame

    host.engine_frame = engine_frame
    return unloading


def watch_engine_frames(host) -> WatchedLock:
    lock = host._engine_frames = WatchedLock(host._engine_frames)
    return lock


def test_a_calibrations_engine_frame_is_never_sent_after_a_newer_one(tmp_path):
    host = ready_host(tmp_path)
    lock = watch_engine_frames(host)
    tab = RecordingTab(host)
    host.join(tab)
    unloading = overtaken_once(host, tab, lock)
    assert host.calibrate() is not None
    unloading[0].join(timeout=10)  # started while the calibration sent its engine frame
    assert host.engine.info().state == "error"
    assert tab.engine_states()[-2:] == ["ready", "error"]  # the unload's frame, last


def test_a_races_engine_frame_is_never_sent_after_a_newer_one(tmp_path):
    host = ready_host(tmp_path)
    lock = watch_engine_frames(host)
    tab = RecordingTab(host)
    host.join(tab)
    conversation, _ = host.conversations.open(None)
    said: list[dict] = []
    conversation.attach(said.append, {"type": "hello"})
    unloading = overtaken_once(host, tab, lock)
    start_race(host, conversation, RaceFrame.model_validate({"type": "race", "id": "r1", "text": "hello"}))
    assert wait_until(lambda: any(f["type"] == "race_done" for f in said), timeout=30)
    unloading[0].join(timeout=10)  # started while the race, having stored its baseline, sent its engine frame
    assert host.engine.info().state == "error"
    assert tab.engine_states()[-2:] == ["ready", "error"]


def test_changes_made_while_a_tab_is_greeted_reach_it_after_its_hello(tmp_path):
    """Between reading the state its hello carries and queuing the hello, the engine loads and the settings change
    on other threads."""
    host = create_app(FakeEngine(), data_dir=tmp_path).extensions["specchat"]
    engine_lock = watch_engine_frames(host)
    settings_lock = host._settings_lock = WatchedLock(host._settings_lock)
    tab = RecordingTab(host)
    changes: list[threading.Thread] = []
    read = host.engine_frame

    def hello() -> None:
        greeting = {**read(), "type": "hello", "settings": host.settings.current.model_dump()}  # not loaded yet
        changes.append(host.start_loading())  # loading, then ready: each a frame for every tab
        changes.append(threading.Thread(target=host.update_settings, args=({"max_tokens": 22},)))
        changes[1].start()
        wait_until(lambda: (engine_lock.waited.is_set() or "ready" in tab.engine_states())
                   and (settings_lock.waited.is_set() or any(f["type"] == "settings" for f in tab.frames)),
                   timeout=30)
        tab.send(greeting)

    tab.hello = hello
    host.join(tab)
    for change in changes:
        change.join(timeout=10)
    assert tab.frames[0]["type"] == "hello" and tab.frames[0]["engine"]["state"] == "loading"
    assert tab.engine_states()[-1] == host.engine.info().state == "ready"
    settings_seen = [f.get("settings") or f["values"] for f in tab.frames if f["type"] in ("hello", "settings")]
    assert settings_seen[-1]["max_tokens"] == host.settings.current.max_tokens == 22
