"""A stored reply that called tools, as the model saw it: one assistant message per step with the calls that step
made, the tool messages answering them, then what it said after the last. Later turns give the engine these same
messages, so the model keeps the results in view and the engine's cache of the reply is reused.

Each stored call says where in the reply's text it was made (``at``: UTF-16 code units of thinking and content, as
the page counts them) and in which step (``step``; calls stored before steps were numbered are grouped by place).
"""

from __future__ import annotations

from itertools import groupby

from engines import Message, ToolCall

from ..tools.results import ToolResult
from .tool_message import tool_message


def replayed(content: str, thinking: str, calls: list[dict], vision: bool) -> list[Message]:
    """The messages the engine saw for a reply that said ``content`` and ``thinking`` and made ``calls`` (as
    stored); ``vision``: the engine can see the tools' images."""
    answered = [call for call in calls if call.get("ok") is not None]  # a call stopped before its result: unseen
    if not answered:
        return [Message("assistant", content, thinking)]
    messages: list[Message] = []
    content_from = thinking_from = 0
    for group in steps(answered):
        at = group[0]["at"]
        content_to, thinking_to = index_at(content, at["content"]), index_at(thinking, at["thinking"])
        made = tuple(ToolCall(call["call"], call["name"], call["arguments"]) for call in group)
        messages.append(Message("assistant", content[content_from:content_to], thinking[thinking_from:thinking_to],
                                tool_calls=made))
        messages += [tool_message(call["call"], ToolResult(bool(call["ok"]), call["content"], call["ms"] or 0.0),
                                  vision) for call in group]
        content_from, thinking_from = content_to, thinking_to
    if content[content_from:] or thinking[thinking_from:]:  # a reply stopped at a call ends with its results
        messages.append(Message("assistant", content[content_from:], thinking[thinking_from:]))
    return messages


def steps(calls: list[dict]) -> list[list[dict]]:
    """``calls`` grouped by the step that made them, in order."""
    return [list(group) for _, group in groupby(calls, key=step_of)]


def step_of(call: dict):
    step = call.get("step")
    return step if step is not None else (call["at"]["content"], call["at"]["thinking"])


def index_at(text: str, units: int) -> int:
    """The index in ``text`` where its first ``units`` UTF-16 code units end."""
    counted = 0
    for index, char in enumerate(text):
        if counted >= units:
            return index
        counted += 2 if ord(char) > 0xFFFF else 1
    return len(text)
