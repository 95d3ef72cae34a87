"""The engine in use: loading it in the background, switching to another, and unloading each exactly once."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pydantic import ValidationError

from engines import Engine, EngineError
from engines.registry import NAMES, EngineSpec, TabPolicy

from ..errors import ClientError, describe_validation
from .settings import SettingsStore

log = logging.getLogger(__name__)


class EngineLifecycle:
    def __init__(self, engine: Engine, settings: SettingsStore, spec: EngineSpec | None,
                 factory: Callable[[EngineSpec, TabPolicy], Engine] | None, policy: TabPolicy | None):
        self.engine = engine
        self.policy = policy or TabPolicy()  # what a tab's engine spec may name
        self.spec = spec or EngineSpec(name=engine.name if engine.name in NAMES else "fake")
        self.settings = settings
        self.factory = factory
        self._lock = threading.Lock()
        self._loads: list[threading.Thread] = []  # loads and hand-overs, for unload_last to wait on
        self.closing = False

    def start_loading(self) -> threading.Thread:
        """Load in the background: the port is open and the UI shows progress meanwhile."""
        with self._lock:
            return self._background(self.engine.load, (self.settings.current,), "engine-load")

    def _background(self, target, args: tuple, name: str) -> threading.Thread:
        """Start a load or hand-over that unload_last waits for; the caller holds ``_lock``."""
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._loads = [t for t in self._loads if t.is_alive()]
        self._loads.append(thread)
        thread.start()
        return thread

    def new_engine(self, values: dict) -> tuple[Engine, EngineSpec]:
        """The engine ``values`` (a tab's engine spec) names, not loaded yet."""
        if self.factory is None:
            raise ClientError("invalid_engine", "This server cannot switch engines; restart it with --engine.")
        try:
            spec = EngineSpec.model_validate(values)
        except ValidationError as exc:
            raise ClientError("invalid_engine", f"Engine not changed: {describe_validation(exc)}.") from None
        try:
            return self.factory(spec, self.policy), spec
        except EngineError as exc:
            raise ClientError("invalid_engine", f"Engine not changed: {exc.message}") from None

    def replace(self, engine: Engine, spec: EngineSpec, announce: Callable[[], None]) -> None:
        """Use ``engine`` from now on: ``announce`` tells the tabs, then the old one's resources are released
        and the new one loads. Announced before the hand-over starts, so the switch's own frame can never
        follow the new engine's ready (a tab would take that stale frame's state for the engine's)."""
        with self._lock:
            if self.closing:
                raise ClientError("shutting_down", "specchat is shutting down: start it again to switch engines.")
            old, self.engine, self.spec = self.engine, engine, spec
            announce()
            self._background(self._hand_over, (old, engine), "engine-switch")

    def _hand_over(self, old: Engine, new: Engine) -> None:
        try:
            old.unload()
        except Exception:  # the new engine must still load
            log.exception("unloading %s failed", old.name)
        if new is self.engine and not self.closing:
            new.load(self.settings.current)

    def refuse_switches(self) -> None:
        with self._lock:
            self.closing = True

    def unload_last(self) -> None:
        """Wait for a load or hand-over in flight, then unload the engine in use.

        Every engine is unloaded exactly once: a replaced one by its hand-over, the last one here.
        """
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
