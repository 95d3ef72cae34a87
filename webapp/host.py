"""The app's engine, its settings and the open tabs, bound to the app with init_app."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import ValidationError

from engines import Engine, EngineError, EngineInfo
from engines.registry import NAMES, EngineSpec, TabPolicy

from .baseline import Baselines, calibrate
from .busy import CpuWatch
from .conversation import Conversations
from .errors import ClientError, describe_validation
from .lanes import Relay
from .receipts import Receipts
from .settings import SettingsStore
from .store import Store

if TYPE_CHECKING:
    from .chat import ChatSession

log = logging.getLogger(__name__)
CALIBRATION_YIELD_S = 10.0  # how long a message waits for a calibration to stop at its next token


class EngineHost:
    def __init__(
        self,
        engine: Engine,
        settings: SettingsStore,
        receipts: Receipts,
        baselines: Baselines,
        spec: EngineSpec | None = None,
        factory: Callable[[EngineSpec], Engine] | None = None,
        store: Store | None = None,
        policy: TabPolicy | None = None,
    ):
        self.engine = engine
        self.policy = policy or TabPolicy()  # what a tab's engine spec may name
        self.spec = spec or EngineSpec(name=engine.name if engine.name in NAMES else "fake")
        self.settings = settings
        self.receipts = receipts
        self.baselines = baselines
        # Held by a race, sweep or calibration from start to end: no other tab's reply runs between its lanes.
        self.exclusive = threading.Lock()
        self._calibration: Relay | None = None  # a running calibration's cancel: a message goes first
        self._factory = factory
        self._sessions: set[ChatSession] = set()
        self.store = store or Store(None)
        self.conversations = Conversations(lambda: self.engine, self.store)
        self._lock = threading.Lock()
        # Held from a settings change to its broadcast: crossing changes reach the engine and the tabs in the
        # order they were applied, so both end with the settings held.
        self._settings_lock = threading.Lock()
        self._loads: list[threading.Thread] = []  # loads and hand-overs, for shut_down to wait on
        self._closing = False
        self._watch(engine)

    def init_app(self, app) -> None:
        app.extensions["specchat"] = self

    def _watch(self, engine: Engine) -> None:
        # A replaced engine's last words (unloading) must not reach the tabs.
        engine.on_change(lambda info: engine is self.engine and self._engine_changed(info))

    def engine_frame(self) -> dict:
        info = self.engine.info()
        return {"type": "engine", "engine": info.to_dict(), "spec": self.spec.public(),
                "choices": list(NAMES) if self._factory else [self.spec.name],
                "deep_reset": self.engine.supports_deep_reset, "baseline": self.baselines.get(info)}

    def calibrate(self) -> dict | None:
        """Measure and store the drafter-off rate with a short reply while the engine is idle. A message
        sent meanwhile ends it (``yield_calibration``): then None, and nothing is stored."""
        if not self.exclusive.acquire(blocking=False):
            raise ClientError("busy", "A race or calibration is running: wait for it to finish, then try again.", 409)
        cancel = self._calibration = Relay()
        try:
            try:
                watch = CpuWatch()  # a calibration on a busy machine is flagged as a race's drafter-off lane is
                result = calibrate(self.engine, self.settings.current, cancel)
                busy = watch.result()
            except EngineError as exc:
                raise ClientError(exc.code, exc.message, 409) from None
        finally:
            self._calibration = None
            self.exclusive.release()
        if cancel.is_set():
            return None
        if result.error:
            raise ClientError(result.error["code"], f"Calibration failed: {result.error['message']}", 409)
        if result.stats.get("tok_s") is None:
            raise ClientError("too_short", "The calibration reply was too short to time: try again.", 409)
        baseline = self.baselines.put(self.engine.info(), result.stats["tok_s"], "calibration",
                                      prompt_tokens=result.stats.get("prompt_tokens"), busy=busy)
        self.broadcast(self.engine_frame())
        return baseline

    def yield_calibration(self, wait_s: float = CALIBRATION_YIELD_S) -> bool:
        """End a running calibration so that a message goes first; whether the engine is free now
        (False when a race or sweep holds it)."""
        cancel = self._calibration
        if cancel is None:
            return not self.exclusive.locked()
        cancel.set()  # it stops at its next token
        if not self.exclusive.acquire(timeout=wait_s):
            return False
        self.exclusive.release()
        return True

    def start_loading(self) -> threading.Thread:
        """Load in the background: the port is open and the UI shows progress meanwhile."""
        with self._lock:
            return self._background(self.engine.load, (self.settings.current,), "engine-load")

    def _background(self, target, args: tuple, name: str) -> threading.Thread:
        """Start a load or hand-over that shut_down waits for; the caller holds ``_lock``."""
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._loads = [t for t in self._loads if t.is_alive()]
        self._loads.append(thread)
        thread.start()
        return thread

    def switch_engine(self, values: dict) -> None:
        """Replace the engine: the old one's resources are released, then the new one loads."""
        if self._factory is None:
            raise ClientError("invalid_engine", "This server cannot switch engines; restart it with --engine.")
        try:
            spec = EngineSpec.model_validate(values)
        except ValidationError as exc:
            raise ClientError("invalid_engine", f"Engine not changed: {describe_validation(exc)}.") from None
        try:
            engine = self._factory(spec, self.policy)
        except EngineError as exc:
            raise ClientError("invalid_engine", f"Engine not changed: {exc.message}") from None
        self.cancel_all()
        self._watch(engine)
        with self._lock:
            if self._closing:
                raise ClientError("shutting_down", "specchat is shutting down: start it again to switch engines.")
            old, self.engine, self.spec = self.engine, engine, spec
            self._background(self._hand_over, (old, engine), "engine-switch")
        self.broadcast(self.engine_frame())

    def _hand_over(self, old: Engine, new: Engine) -> None:
        try:
            old.unload()
        except Exception:  # the new engine must still load
            log.exception("unloading %s failed", old.name)
        if new is self.engine and not self._closing:
            new.load(self.settings.current)

    def add(self, session: ChatSession) -> None:
        with self._lock:
            self._sessions.add(session)

    def remove(self, session: ChatSession) -> None:
        with self._lock:
            self._sessions.discard(session)

    def broadcast(self, frame: dict) -> None:
        with self._lock:
            sessions = list(self._sessions)
        for session in sessions:
            session.send(frame)

    def update_settings(self, values: dict) -> dict:
        with self._settings_lock:
            options = self.settings.update(values)
            self.engine.prepare(options)
            full = options.model_dump()
            self.broadcast({"type": "settings", "values": full})
        return full

    def close(self) -> None:
        """Shutdown's first half, before the sockets close: refuse new replies and switches, stop every
        reply and wait until each sent its ``done``, and until each tab's queued frames are on its socket."""
        with self._lock:
            self._closing = True
        self.conversations.close()
        with self._lock:
            sessions = list(self._sessions)
        deadline = time.monotonic() + 2
        for session in sessions:  # a tab that stopped reading is not waited on past the deadline
            session.flush(max(0.0, deadline - time.monotonic()))

    def shut_down(self) -> None:
        """Shutdown's second half: wait for a load or hand-over in flight, then unload the engine in use.

        Every engine is unloaded exactly once: a replaced one by its hand-over, the last one here.
        """
        self.close()
        with self._lock:
            loads = list(self._loads)
        if any(thread.is_alive() for thread in loads):
            log.info("waiting for the engine load in flight to finish")
        for thread in loads:
            thread.join()
        try:
            self.engine.unload()
        except Exception:
            log.exception("unloading %s failed", self.engine.name)

    def cancel_all(self) -> None:
        """Stop every reply and wait until each got its ``done`` frame."""
        conversations = self.conversations.all()
        for conversation in conversations:
            conversation.cancel()
        for conversation in conversations:
            conversation.cancel(wait=True)

    def _engine_changed(self, info: EngineInfo) -> None:
        self.broadcast(self.engine_frame())
