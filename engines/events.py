"""Typed events an engine stream yields. Nothing else crosses the engine boundary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

FinishReason = Literal["stop", "length", "cancelled", "error", "tool_calls"]


@dataclass(frozen=True)
class Delta:
    """Text as it streams, with what speculative decoding did for it.

    ``rounds``: drafts accepted in each verify round that ended within this
    text. ``draft_spans``: (start, end) character ranges of ``text`` whose
    tokens came from accepted drafts.
    """

    text: str
    rounds: tuple[int, ...] = ()
    draft_spans: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Thinking(Delta):
    pass


@dataclass(frozen=True)
class Answer(Delta):
    pass


@dataclass(frozen=True)
class ToolCall:
    """A call the model made, outside its thinking: ``call`` names it within the reply, ``arguments`` are
    parsed from the model's JSON. Arguments that could not be read leave ``arguments`` empty and say why in
    ``error``, which goes back to the model as the call's result, so that the reply goes on."""

    call: str
    name: str
    arguments: dict = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class Stats:
    """Live numbers so far (same keys as the final stats)."""

    values: dict


@dataclass(frozen=True)
class Done:
    """The one terminal event of every stream."""

    finish_reason: FinishReason
    stats: dict = field(default_factory=dict)
    error_code: str | None = None
    error_message: str | None = None


Event = Union[Thinking, Answer, ToolCall, Stats, Done]
