"""A tool's result as the model reads it: its text, and its images for a model that can see.

A tool's images are checked as uploads are (``images.read_image``: Pillow decodes them, with the same size
limits), so an engine only ever gets images it can take. What cannot be passed on becomes a note in the text
instead, never an error: the reply goes on, and the model knows an image was there.
"""

from __future__ import annotations

import base64
import binascii

from engines import Message

from ..errors import ClientError
from ..tools.results import ToolResult
from .images import MAX_PER_MESSAGE, read_image


def tool_message(call: str, result: ToolResult, vision: bool) -> Message:
    """The tool message answering ``call`` with ``result``; its images go with it when ``vision`` (the engine
    can see), else a note says how many the model cannot see."""
    parts = [part for part in result.content if part["type"] == "image"]
    notes: list[str] = []
    images = []
    if parts and not vision:
        notes.append(f"[The tool returned {_images(len(parts))}, which this model cannot see.]")
        parts = []
    for part in parts[:MAX_PER_MESSAGE]:
        try:
            images.append(read_image(_decoded(part)).as_image())
        except ClientError as exc:
            notes.append(f"[An image the tool returned was left out: {exc.message}]")
    if len(parts) > MAX_PER_MESSAGE:
        notes.append(f"[{len(parts) - MAX_PER_MESSAGE} more images the tool returned were left out: at most "
                     f"{MAX_PER_MESSAGE} are passed on.]")
    text = "\n".join(filter(None, [result.text(), *notes]))
    return Message("tool", text, images=tuple(images), tool_call_id=call)


def _decoded(part: dict) -> bytes:
    try:
        return base64.b64decode(part.get("data") or "", validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise ClientError("bad_image", "its data is not base64: the tool should send the image's bytes "
                          "base64-encoded.") from None


def _images(n: int) -> str:
    return f"{n} image{'' if n == 1 else 's'}"
