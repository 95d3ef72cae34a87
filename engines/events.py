"""Typed events an engine stream yields. Nothing else crosses the engine boundary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

FinishReason = Literal["stop", "length", "cancelled", "error"]


@dataclass(frozen=True)
class Thinking:
    text: str


@dataclass(frozen=True)
class Answer:
    text: str


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


Event = Union[Thinking, Answer, Stats, Done]
