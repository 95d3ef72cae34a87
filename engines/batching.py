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
        self._length = 0
        self._rounds: list[int] = []
        self._spans: list[tuple[int, int]] = []
        self._last = 0.0

    def add(self, event: Thinking | Answer) -> None:
        if type(event) is not self._kind:
            self.flush()
            self._kind = type(event)
        self._parts.append(event.text)
        self._rounds.extend(event.rounds)
        for a, b in event.draft_spans:
            a, b = self._length + a, self._length + b
            if self._spans and self._spans[-1][1] == a:  # adjacent drafted tokens make one span
                a = self._spans.pop()[0]
            self._spans.append((a, b))
        self._length += len(event.text)
        if time.perf_counter() - self._last >= FLUSH_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        if self._parts:
            self._emit(self._kind("".join(self._parts), tuple(self._rounds), tuple(self._spans)))
            self._parts, self._rounds, self._spans, self._length = [], [], [], 0
            self._last = time.perf_counter()
