"""The one way a test waits for something to become true."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.02,
               sleep: Callable[[float], None] = time.sleep) -> bool:
    """True once ``predicate()`` is true, False if it is still false after ``timeout`` seconds.

    ``sleep`` is what passes the time between tries: a browser test passes the page's own wait, so that its
    event handlers run meanwhile.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        sleep(interval)
    return True
