"""Join a fast model's deltas so each crosses threads and the socket once per display frame."""

from __future__ import annotations

import time
from collections.abc import Callable

from .events import Answer, Event, Thinking

FLUSH_INTERVAL_S = 0.015  # about one display frame


class DeltaBatch:
    """Consecutive deltas of one kind become one event, at most one per interval.

    A token arriving after a gap longer than the interval goes out at once, so a
    slow model's text is never held back; a fast one's tokens share an event.
    """

    def __init__(self, emit: Callable[[Event], None]):
        self._emit = emit
        self._kind: type | None = None
        self._parts: list[str] = []
        self._last = 0.0

    def add(self, event: Thinking | Answer) -> None:
        if type(event) is not self._kind:
            self.flush()
            self._kind = type(event)
        self._parts.append(event.text)
        if time.perf_counter() - self._last >= FLUSH_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        if self._parts:
            self._emit(self._kind("".join(self._parts)))
            self._parts = []
            self._last = time.perf_counter()
