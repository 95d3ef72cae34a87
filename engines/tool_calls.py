"""Tool calls as OpenAI-compatible servers stream them, and messages that hold calls as those servers take them.

A server streams a call in pieces (``delta.tool_calls``): the first piece of each call has its ``index``, ``id``
and function name, later pieces add fragments of its JSON arguments, and calls may interleave by index. The
calls are read whole when the stream ends; arguments that are not a JSON object become the call's ``error``,
which the model is told, so a malformed call never ends the reply.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import orjson

from .base import Message
from .events import ToolCall

ERROR_TEXT_LIMIT = 200  # characters of unreadable arguments quoted back to the model
# What the user message that carries a tool's images says (``images_after_tools``).
TOOL_IMAGES = "The tool returned these images:"


@dataclass
class _Pieces:
    call: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    whole: dict | None = None  # a server that sends the arguments as an object, not a string


class ToolCallAssembler:
    """Collects ``delta.tool_calls`` pieces; ``calls()`` gives the calls, in the order of their index."""

    def __init__(self) -> None:
        self._by_index: dict[int, _Pieces] = {}

    def feed(self, pieces) -> None:
        if not isinstance(pieces, list):
            return
        for piece in pieces:
            if not isinstance(piece, dict):
                continue
            index = piece.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                # Without an index a piece that names a function starts a call; one that does not continues the last.
                last = max(self._by_index, default=-1)
                starts = isinstance(piece.get("function"), dict) and piece["function"].get("name")
                index = last + 1 if starts or last < 0 else last
            entry = self._by_index.setdefault(index, _Pieces())
            if isinstance(piece.get("id"), str) and piece["id"] and not entry.call:
                entry.call = piece["id"]
            function = piece.get("function")
            if not isinstance(function, dict):
                continue
            if isinstance(function.get("name"), str) and function["name"] and not entry.name:
                entry.name = function["name"]
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                entry.arguments.append(arguments)
            elif isinstance(arguments, dict):
                entry.whole = arguments

    def calls(self) -> list[ToolCall]:
        out = []
        for number, index in enumerate(sorted(self._by_index)):
            entry = self._by_index[index]
            call = entry.call or f"call_{number}"
            if not entry.name:
                out.append(ToolCall(call, "", {}, "The call named no function. Name one of the tools offered."))
                continue
            if entry.whole is not None:
                out.append(ToolCall(call, entry.name, entry.whole))
                continue
            out.append(read_arguments(call, entry.name, "".join(entry.arguments)))
        return out


def read_arguments(call: str, name: str, text: str) -> ToolCall:
    """A call whose arguments are ``text``: a JSON object, or nothing (no arguments); else the call carries why."""
    if not text.strip():
        return ToolCall(call, name, {})
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return ToolCall(call, name, {}, f"The arguments were not valid JSON ({exc}): "
                        f"{text[:ERROR_TEXT_LIMIT]!r}. Send them as one JSON object.")
    if not isinstance(value, dict):
        return ToolCall(call, name, {}, f"The arguments were JSON but not an object: {text[:ERROR_TEXT_LIMIT]!r}. "
                        "Send them as one JSON object of named arguments.")
    return ToolCall(call, name, value)


def openai_tool_calls(calls) -> list[dict]:
    """``calls`` as an assistant message's ``tool_calls`` (arguments as a JSON string, as the API has them)."""
    return [{"id": c.call, "type": "function",
             "function": {"name": c.name, "arguments": orjson.dumps(c.arguments).decode()}} for c in calls]


def images_after_tools(messages: list[Message]) -> list[Message]:
    """``messages`` with the images of each run of tool messages moved into a user message right after the run.
    OpenAI's API takes only text in a tool message, and some chat templates write only a tool message's text:
    this way the model still gets the images, in the order the results gave them."""
    out: list[Message] = []
    held: list = []
    for message in messages:
        if held and message.role != "tool":
            out.append(Message("user", TOOL_IMAGES, images=tuple(held)))
            held = []
        if message.role == "tool" and message.images:
            held.extend(message.images)
            message = replace(message, images=())
        out.append(message)
    if held:
        out.append(Message("user", TOOL_IMAGES, images=tuple(held)))
    return out
