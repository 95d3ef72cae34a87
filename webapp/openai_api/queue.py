"""API requests share the one model with the page's tabs: each waits its turn in arrival order while a tab's
reply, a race, a sweep or an earlier request holds the engine; at most ``limit`` are in the queue (the one
being answered counted), a request beyond that is refused at once with 429 and a ``Retry-After``."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from engines import EngineBusy, EngineError, Turn

from .errors import ApiError

DEFAULT_API_QUEUE = 8
POLL_S = 0.02  # how often the first in line looks whether the engine came free
RETRY_AFTER_S = 2


class ApiQueue:
    def __init__(self, limit: int, changed: Callable[[], None] = lambda: None):
        self.limit = limit
        self._changed = changed  # the tabs are told who holds the engine
        self._cond = threading.Condition()
        self._line: deque[object] = deque()  # requests waiting, first in line first
        self._admitted = 0  # waiting or being answered
        self.answering = 0

    def state(self) -> dict:
        """What the tabs are shown: whether the engine answers an API request, and how many wait."""
        with self._cond:
            return {"answering": self.answering > 0, "waiting": len(self._line)}

    def open(self, host, turn: Turn, gone: Callable[[], bool], wait_s: float) -> Iterator:
        """The engine's stream for ``turn`` once it is this request's turn; ``ApiError`` when the queue is full,
        the engine cannot answer, the client left or ``wait_s`` passed."""
        ticket = object()
        with self._cond:
            if self._admitted >= self.limit:
                raise ApiError(429, "queue_full", f"{self._admitted} requests are queued for the model already (the "
                               f"most specchat takes, --api-queue {self.limit}): retry in a moment.",
                               headers={"Retry-After": str(RETRY_AFTER_S)})
            self._admitted += 1
            self._line.append(ticket)
        self._changed()
        deadline = time.monotonic() + wait_s
        try:
            while True:
                with self._cond:
                    first = self._line[0] is ticket
                if first:
                    stream = self._try(host, turn)
                    if stream is not None:
                        with self._cond:
                            self._line.popleft()
                            self.answering += 1
                            self._cond.notify_all()
                        self._changed()
                        return self._answering(stream)
                if gone():
                    raise ApiError(499, "client_gone", "The client left before the model was free.")
                if time.monotonic() > deadline:
                    raise ApiError(503, "engine_busy", f"The model stayed busy for {wait_s:.0f} s: retry later.",
                                   headers={"Retry-After": str(RETRY_AFTER_S)})
                with self._cond:
                    self._cond.wait(POLL_S)
        except BaseException:
            with self._cond:
                if ticket in self._line:
                    self._line.remove(ticket)
                self._admitted -= 1
                self._cond.notify_all()
            self._changed()
            raise

    @staticmethod
    def _try(host, turn: Turn):
        """The engine's stream, or None while a tab's reply, a race or a sweep holds it."""
        if host.exclusive.locked() and not host.yield_calibration(0):
            return None
        try:
            return host.engine.stream(turn)
        except EngineBusy:
            return None
        except EngineError as exc:
            status = 503 if exc.code == "not_ready" else 400
            raise ApiError(status, exc.code, exc.message) from None

    def _answering(self, stream: Iterator) -> Iterator:
        """``stream``, counted as answered until it ends or is closed."""
        try:
            yield from stream
        finally:
            stream.close()
            with self._cond:
                self.answering -= 1
                self._admitted -= 1
                self._cond.notify_all()
            self._changed()
