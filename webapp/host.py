"""The app's engine, its settings and the open tabs, bound to the app with init_app."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from engines import Engine, EngineInfo

from .settings import SettingsStore

if TYPE_CHECKING:
    from .chat import ChatSession

log = logging.getLogger(__name__)


class EngineHost:
    def __init__(self, engine: Engine, settings: SettingsStore):
        self.engine = engine
        self.settings = settings
        self._sessions: set[ChatSession] = set()
        self._lock = threading.Lock()
        engine.on_change(self._engine_changed)

    def init_app(self, app) -> None:
        app.extensions["specchat"] = self

    def start_loading(self) -> threading.Thread:
        """Load in the background: the port is open and the UI shows progress meanwhile."""
        thread = threading.Thread(
            target=self.engine.load, args=(self.settings.current,), name="engine-load", daemon=True
        )
        thread.start()
        return thread

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
        options = self.settings.update(values)
        self.engine.prepare(options)
        full = options.model_dump()
        self.broadcast({"type": "settings", "values": full})
        return full

    def cancel_all(self) -> None:
        """Stop every reply and wait until each tab got its ``done`` frame."""
        with self._lock:
            sessions = list(self._sessions)
        for session in sessions:
            session.cancel()
        for session in sessions:
            session.cancel(wait=True)

    def _engine_changed(self, info: EngineInfo) -> None:
        self.broadcast({"type": "engine", "engine": info.to_dict()})
