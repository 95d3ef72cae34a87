"""Notice reasoning that has degenerated into one line repeated over and over."""

from __future__ import annotations

from collections import Counter, deque

MIN_LINE_CHARS = 8  # short lines ("Wait.", "OK") legitimately recur
WINDOW_LINES = 32
MAX_REPEATS = 6


class RepetitionGuard:
    """Fed streamed text; ``triggered`` once a line fills too much of the recent lines."""

    def __init__(self, max_repeats: int = MAX_REPEATS, window: int = WINDOW_LINES):
        self.max_repeats = max_repeats
        self._recent: deque[str] = deque(maxlen=window)
        self._partial = ""
        self.triggered_line: str | None = None

    @property
    def triggered(self) -> bool:
        return self.triggered_line is not None

    def feed(self, text: str) -> bool:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            line = " ".join(line.split())
            if len(line) < MIN_LINE_CHARS:
                continue
            self._recent.append(line)
            if Counter(self._recent)[line] >= self.max_repeats:
                self.triggered_line = line
        return self.triggered
