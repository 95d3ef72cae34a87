"""The one-reply guard every engine shares: one reply holds the engine at a time, and gives it back however its
stream ends (read to the end, failed, closed, or dropped unread)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from .events import Event

BUSY = "A reply is already being generated. Wait for it or press Stop, then send again."


class Claimed(Iterator[Event]):
    """The events of a reply that holds the engine. The hold ends exactly once: when the events end or fail,
    when the stream is closed, or when it is dropped unread. Closed before its end, it sets the turn's cancel,
    so the engine stops at its next token."""

    def __init__(self, events: Iterator[Event], cancel: threading.Event, release: Callable[[], None]):
        self._events, self._cancel, self._release = events, cancel, release
        self._lock = threading.Lock()
        self._held = True

    def __iter__(self) -> Claimed:
        return self

    def __next__(self) -> Event:
        try:
            return next(self._events)
        except StopIteration:
            self._end()
            raise
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if not self.held:
            return
        self._cancel.set()
        try:
            close = getattr(self._events, "close", None)
            if close is not None:
                close()
        finally:
            self._end()

    @property
    def held(self) -> bool:
        return self._held

    def _end(self) -> None:
        with self._lock:
            if not self._held:
                return
            self._held = False
        self._release()

    def __del__(self) -> None:
        # A stream opened and never read (a refused start, a consumer that went away) still frees the engine.
        self.close()
