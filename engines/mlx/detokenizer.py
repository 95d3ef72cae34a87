"""Token ids to streamed text, each token's text out as soon as its bytes are whole.

mlx-vlm's detokenizer for byte-level BPE (Qwen's) holds each word until a token starting the next one arrives,
so a reply's first text, and the first text after a tool's result, waited a whole decode step for the second
token. Here the bytes go through an incremental UTF-8 decoder: only a character split across tokens is held.
Other tokenizers keep mlx-vlm's detokenizer.
"""

from __future__ import annotations

import codecs


def _byte_of() -> dict[str, int]:
    """GPT-2's byte-level alphabet read backwards: the printable bytes stand for themselves, the others for the
    characters from U+0100 on, in order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {chr(b): b for b in printable}
    table.update({chr(256 + i): b for i, b in enumerate(b for b in range(256) if b not in printable)})
    return table


BYTE_OF = _byte_of()


def _bytes(piece: str) -> bytes:
    """A vocabulary entry's bytes; a character outside the byte alphabet (an added token written as plain text)
    stands for itself."""
    return b"".join(bytes((BYTE_OF[c],)) if c in BYTE_OF else c.encode() for c in piece)


class EagerBPEDetokenizer:
    """The interface of mlx-vlm's streaming detokenizers (``add_token``, ``finalize``, ``last_segment``,
    ``text``), for a byte-level BPE vocabulary."""

    def __init__(self, tokenmap: list[str | None], trim_space: bool):
        self._tokenmap = tokenmap
        self._trim_space = trim_space
        self.reset()

    def reset(self) -> None:
        self.text = ""
        self.offset = 0
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add_token(self, token: int, skip_special_token_ids=()) -> None:
        if token in skip_special_token_ids:
            return
        self._append(self._utf8.decode(_bytes(self._tokenmap[token] or "")))

    def finalize(self) -> None:
        # A character left incomplete is dropped, as mlx-vlm's finalize drops it.
        self._utf8.reset()

    @property
    def last_segment(self) -> str:
        segment = self.text[self.offset :]
        self.offset = len(self.text)
        return segment

    def _append(self, text: str) -> None:
        if not self.text and self._trim_space and text.startswith(" "):
            text = text[1:]
        self.text += text


def streaming_detokenizer(processor):
    """A fresh streaming detokenizer for ``processor``'s tokenizer."""
    from mlx_vlm.tokenizer_utils import BPEStreamingDetokenizer, make_streaming_detokenizer

    library = make_streaming_detokenizer(processor)
    if type(library) is not BPEStreamingDetokenizer:
        return library
    return EagerBPEDetokenizer(library.tokenmap, library.trim_space)
