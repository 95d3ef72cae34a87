"""The one thread that runs MLX work, shared by every MLX engine of the process.

MLX gives each thread that computes its own streams, and a stream's native worker thread is never
ended, not even by ``mx.clear_streams()``: an engine with a thread of its own left a native thread and
its buffers behind at every load (each MLX → other engine → MLX switch). A stream must also be released
on the thread that made it before the process exits, or the process aborts; and once released, that
thread can compute no more. So one thread lives as long as the process and releases its streams at exit.
"""

from __future__ import annotations

import atexit
import queue
import threading
from concurrent.futures import Future

_EXIT_WAIT_S = 10.0  # at exit, how long a job still running may delay the release of the streams


class ModelThread:
    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="mlx-model", daemon=True)
        self._thread.start()

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        self._jobs.put((future, fn, args))
        return future

    def _run(self) -> None:
        while True:
            future, fn, args = self._jobs.get()
            if fn is None:
                return
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # the caller gets it from result()
                    future.set_exception(exc)

    def close(self) -> None:
        """Release this thread's MLX streams on it, then end it (at process exit)."""
        import mlx.core as mx

        self.submit(mx.clear_streams)
        self._jobs.put((None, None, ()))
        self._thread.join(_EXIT_WAIT_S)


_shared: ModelThread | None = None
_lock = threading.Lock()


def model_thread() -> ModelThread:
    """The process's MLX thread, started on first use."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = ModelThread()
            atexit.register(_shared.close)
        return _shared
