"""The open tabs: each a chat session on its socket, and frames sent to all of them."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..web.chat import ChatSession


class Tabs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sessions: set[ChatSession] = set()

    def add(self, session: ChatSession) -> None:
        with self._lock:
            self.sessions.add(session)

    def remove(self, session: ChatSession) -> None:
        with self._lock:
            self.sessions.discard(session)

    def all(self) -> list[ChatSession]:
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
