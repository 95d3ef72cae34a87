"""Two tabs against the real MLX engine on the tiny model, a few hundred random operations in random interleavings:
settings changes, races, chats, stops and new conversations, sent without waiting for what came before.

Nothing is lost (every reply a tab started ends with exactly one terminal frame: ``done``, ``race_done`` or an
error for its id), nothing hangs (every wait is bounded), the guard is free at the end and the engine holds the
settings the tabs last set. The seed is in every failure's message; SPECCHAT_STRESS_SEED replays one.
"""

from __future__ import annotations

import os
import queue
import random
import threading
import time
from concurrent.futures import Future

import pytest

from engines.mlx.engine import MlxEngine
from tests.support.servers import LiveServer
from tests.support.wsclient import WsClient

pytestmark = pytest.mark.slow

OPERATIONS = 300
SETTLE_S = 90  # every reply started must have ended within this after the last operation
BASE = {"reasoning_budget": 0, "max_tokens": 4, "temperature": 0.0, "speculative": True}
# Each settings change sets every key here, so the last one applied names the whole expected state.
CHOICES = {"max_tokens": [2, 3, 4, 5], "draft_block_size": [2, 3], "system_prompt": ["Be brief.", "Be kind."],
           "prefix_cache_entries": [2, 3], "reasoning_budget": [0, 2]}


class Tab:
    """A websocket tab whose frames a reader thread collects, so the driver never blocks on one tab."""

    def __init__(self, url: str, name: str):
        self.name, self.ws = name, WsClient(url)
        self.frames: queue.Queue[dict] = queue.Queue()
        self.seen: list[dict] = []
        self.open: set[str] = set()  # replies started here whose terminal frame has not come yet
        self.stops: dict[str, int] = {}  # stops sent per id: each may be answered by unknown_id
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                self.frames.put(self.ws.recv(timeout=3600))
            except Exception:
                return

    def drain(self) -> None:
        while True:
            try:
                self.seen.append(self.frames.get_nowait())
            except queue.Empty:
                return

    def close(self) -> None:
        self.ws.close()
        self._reader.join(timeout=10)


def terminals(tab: Tab, id: str) -> list[dict]:
    """The frames that end reply ``id``: its done (a chat's) or race_done, or an error for it; an unknown_id
    answer to a stop sent for it is not one."""
    ends = [f for f in tab.seen if f.get("id") == id and (
        (f["type"] == "done" and "lane" not in f) or f["type"] == "race_done" or f["type"] == "error")]
    stale, kept = tab.stops.get(id, 0), []
    for frame in ends:
        if frame["type"] == "error" and frame["code"] == "unknown_id" and stale:
            stale -= 1
            continue
        kept.append(frame)
    return kept


def ran_to_its_end(tab: Tab, frame: dict, kind: str, timeout: float = 60) -> dict:
    """Send ``frame`` from ``tab``; its terminal frame, which must be of ``kind``."""
    tab.ws.send(frame)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tab.drain()
        ends = terminals(tab, frame["id"])
        if ends:
            assert [f["type"] for f in ends] == [kind], ends
            return ends[0]
        time.sleep(0.05)
    raise AssertionError(f"{frame['id']} did not end in {timeout} s")


def model_thread_idle(engine: MlxEngine) -> None:
    """Wait until the model thread has run everything queued before this (settings preparations included)."""
    done: Future = engine._thread.submit(lambda: None)
    done.result(timeout=60)


@pytest.fixture(scope="module")
def server(tiny_model, tmp_path_factory):
    live = LiveServer(MlxEngine(str(tiny_model)), tmp_path_factory.mktemp("data"))
    assert live.engine.info().state == "ready", live.engine.info()
    live.host.update_settings(BASE)
    yield live
    live.stop()
    live.engine.unload()


def test_two_tabs_in_random_interleavings_lose_nothing_and_leave_the_guard_free(server):
    seed = int(os.environ.get("SPECCHAT_STRESS_SEED") or random.SystemRandom().randrange(1 << 32))
    rng, why = random.Random(seed), f"seed {seed} (SPECCHAT_STRESS_SEED={seed} replays it)"
    tabs = [Tab(server.ws_url, "a"), Tab(server.ws_url, "b")]
    sent_settings: list[dict] = []
    started: list[tuple[Tab, str]] = []
    try:
        for step in range(OPERATIONS):
            tab = rng.choice(tabs)
            tab.drain()
            for other in tabs:
                other.open = {id for id in other.open if not terminals(other, id)}
            op = rng.choices(["settings", "chat", "race", "stop", "new_chat"], weights=[2, 6, 2, 1, 1])[0]
            if op == "settings":
                # Often both tabs at once, so their changes cross on the server.
                for sender in (tabs if rng.random() < 0.5 else [tab]):
                    values = {key: rng.choice(options) for key, options in CHOICES.items()}
                    sent_settings.append(values)
                    sender.ws.send({"type": "settings", "values": values})
            elif op in ("chat", "race"):
                id = f"{tab.name}-{op}-{step}"
                frame = {"type": op, "id": id, "text": rng.choice(["hi", "2+2?", "name a fruit"])}
                if op == "race":
                    frame["runs"] = rng.choice([1, 2])
                tab.open.add(id)
                started.append((tab, id))
                tab.ws.send(frame)
            elif op == "stop":
                candidates = sorted(tab.open) or [id for t, id in started if t is tab][-1:]
                if candidates:
                    id = rng.choice(candidates)
                    tab.stops[id] = tab.stops.get(id, 0) + 1
                    tab.ws.send({"type": "stop", "id": id})
            else:
                tab.ws.send({"type": "new_chat"})
            time.sleep(rng.choice([0, 0.002, 0.01, 0.05, 0.15]))

        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            for tab in tabs:
                tab.drain()
            if all(terminals(tab, id) for tab, id in started) and answered_settings(tabs) >= len(sent_settings):
                break
            time.sleep(0.05)
        for tab in tabs:
            tab.drain()

        lost = [(tab.name, id) for tab, id in started if not terminals(tab, id)]
        assert not lost, f"{why}: replies that never ended: {lost[:10]}"
        twice = [(tab.name, id, [f["type"] for f in terminals(tab, id)]) for tab, id in started
                 if len(terminals(tab, id)) > 1]
        assert not twice, f"{why}: replies with more than one terminal frame: {twice[:10]}"
        assert answered_settings(tabs) == len(sent_settings), f"{why}: a settings change got no answer"
        bad = [f for tab in tabs for f in tab.seen if f["type"] == "error" and f["code"] in ("internal", "bad_frame")]
        assert not bad, f"{why}: {bad[:5]}"

        engine, host = server.engine, server.host
        assert not engine.busy, f"{why}: the engine is still claimed"
        assert not host.exclusive.locked(), f"{why}: the race lock is still held"
        if sent_settings:
            last = [settings_frames(tab)[-1] for tab in tabs]
            assert last[0] == last[1], f"{why}: the tabs were told different last settings"
            current = host.settings.current.model_dump()
            assert last[0] == current, f"{why}: the tabs' last settings frame is not what the server holds"
            assert any(all(current[k] == v for k, v in values.items()) for values in sent_settings), why
            model_thread_idle(engine)
            assert engine._apc_entries == current["prefix_cache_entries"], f"{why}: the prefix cache is stale"
            assert engine._primed_system == current["system_prompt"], f"{why}: a stale system prompt is primed"
        # However the mix fell (on a busy machine every race in it may have been refused or stopped), a race and
        # a chat sent after it run to their end: nothing it left behind holds the engine.
        after = tabs[0]
        assert ran_to_its_end(after, {"type": "race", "id": "after-race", "text": "hi", "runs": 1}, "race_done")
        assert ran_to_its_end(after, {"type": "chat", "id": "after-chat", "text": "hi"}, "done")
    finally:
        for tab in tabs:
            tab.close()


def settings_frames(tab: Tab) -> list[dict]:
    return [f["values"] for f in tab.seen if f["type"] == "settings"]


def answered_settings(tabs: list[Tab]) -> int:
    """Settings changes answered: each applied one is broadcast to both tabs, each refused one is an error
    (without an id) to its own tab."""
    refused = sum(1 for tab in tabs for f in tab.seen
                  if f["type"] == "error" and f.get("id") is None and f["code"] != "unknown_id")
    return len(settings_frames(tabs[0])) + refused
