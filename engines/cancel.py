"""A cancel flag for work of several streams in turn (a race's lanes, a reply's tool steps)."""

from __future__ import annotations

import threading


class Relay(threading.Event):
    """A cancel flag that also reaches the stream running now (``follow``): set once, every later one is
    stopped at its start too."""

    def __init__(self) -> None:
        super().__init__()
        self._current: threading.Event | None = None

    def set(self) -> None:
        super().set()
        current = self._current
        if current is not None:
            current.set()

    def follow(self, cancel: threading.Event) -> None:
        self._current = cancel
        if self.is_set():
            cancel.set()
