"""The open tabs: each a chat session on its socket, and frames sent to all of them."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Tab(Protocol):
    """An open tab as the host uses it (web/chat.py's ChatSession on its socket)."""

    def hello(self) -> None:
        """Queue the tab's greeting, with the state it starts from."""

    def send(self, frame: dict) -> None:
        """Queue a frame for the tab; never blocks."""

    def flush(self, timeout: float) -> bool:
        """Wait until every queued frame is on the socket; True when done in time."""


class Tabs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sessions: set[Tab] = set()

    def add(self, session: Tab) -> None:
        with self._lock:
            self.sessions.add(session)

    def remove(self, session: Tab) -> None:
        with self._lock:
            self.sessions.discard(session)

    def all(self) -> list[Tab]:
        with self._lock:
            return list(self.sessions)

    def broadcast(self, frame: dict) -> None:
        for session in self.all():
            session.send(frame)

    def flush(self, within_s: float) -> None:
        """Wait until each tab's queued frames are on its socket; a tab that stopped reading is not waited on
        past ``within_s`` in all."""
        deadline = time.monotonic() + within_s
        for session in self.all():
            session.flush(max(0.0, deadline - time.monotonic()))
