"""Split a streamed text into thinking and answer parts at ``<think>``/``</think>``.

Tags may arrive split across chunks: text that could be the start of a tag is
held back until the next chunk tells which it is. The line breaks a model
writes after ``</think>`` belong to neither part: the answer starts at its
first character after them.
"""

from __future__ import annotations

from .events import Answer, Thinking

OPEN, CLOSE = "<think>", "</think>"


def _partial_tag_start(text: str, tag: str) -> int:
    """Index where a proper prefix of ``tag`` starts at the end of ``text``, or len(text)."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return len(text) - n
    return len(text)


class ThinkSplitter:
    def __init__(self, thinking: bool = False):
        self.thinking = thinking
        self._held = ""
        self._after_thinking = False  # thinking ended and no answer text came yet

    def after_thinking(self) -> None:
        """Thinking ended outside the text (a separate reasoning field, a budget cut): the answer comes next."""
        self._after_thinking = True

    def feed(self, text: str) -> list[Thinking | Answer]:
        text = self._held + text
        self._held = ""
        out: list[Thinking | Answer] = []
        while text:
            tag = CLOSE if self.thinking else OPEN
            at = text.find(tag)
            if at >= 0:
                self._emit(out, text[:at])
                text = text[at + len(tag) :]
                self.thinking = not self.thinking
                self._after_thinking = not self.thinking
                continue
            cut = _partial_tag_start(text, tag)
            self._emit(out, text[:cut])
            self._held = text[cut:]
            break
        return out

    def flush(self) -> list[Thinking | Answer]:
        """Release held-back text at the end of the stream."""
        out: list[Thinking | Answer] = []
        self._emit(out, self._held)
        self._held = ""
        return out

    def _emit(self, out: list, text: str) -> None:
        if not self.thinking and self._after_thinking:
            text = text.lstrip("\r\n")
            self._after_thinking = not text
        if text:
            out.append(Thinking(text) if self.thinking else Answer(text))
