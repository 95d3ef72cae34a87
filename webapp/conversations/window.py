"""Which part of a long conversation the model sees: its newest turns that fit the context, the system prompt
kept (the engine adds it to every prompt).

A conversation longer than the model's context drops its oldest turns, whole
(a user message and its replies). Once it drops, it drops well below the limit
and keeps that start while the history fits, so the next turns extend the
engine's cached prompt instead of re-reading a history shifted by one turn
each time.
"""

from __future__ import annotations

from dataclasses import dataclass

from engines import Engine, GenerationOptions, Message

FILL = 0.75  # after a drop, the history takes at most this share of what the reply leaves of the context
ROOM_SHARE = 4  # the reply's room is its token limits, but at most 1/ROOM_SHARE of the context


@dataclass(frozen=True)
class Window:
    start: str | None = None  # the first message the model sees; None: the conversation's first
    dropped: int = 0  # user turns before ``start`` that the model no longer sees


def reply_room(options: GenerationOptions, limit: int) -> int:
    """Tokens a prompt leaves for the reply: its thinking budget and answer, within reason."""
    return min(options.max_tokens + options.reasoning_budget, limit // ROOM_SHARE)


def fit(engine: Engine, messages: list[Message], ids: list[str], options: GenerationOptions,
        continued: bool = False, previous: Window | None = None) -> tuple[list[Message], Window]:
    """``messages`` (whose stored ids are ``ids``) cut to the newest turns the engine's context holds with
    room for the reply, starting no earlier than ``previous`` when that is on this branch.

    An engine that cannot tell its prompt's size or limit gets every message. The last turn is always
    sent, so a single message too long for the context is refused by the engine, saying so.
    """
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
    first = ids.index(previous.start) if previous and previous.start in ids else 0
    starts = [first] + [i for i in range(first + 1, last_user + 1) if messages[i].role == "user"]

    def size(start: int) -> tuple[int, int] | None:
        return engine.prompt_size(messages[start:], options, continued)

    measured = size(starts[0])
    if measured is None:
        return messages, Window()
    tokens, limit = measured
    room = reply_room(options, limit)
    chosen = starts[0]
    if tokens + room > limit:
        # The fewest dropped turns that bring the history under the target (sizes fall as the start moves on).
        target = int((limit - room) * FILL)
        low, high = 1, len(starts) - 1
        chosen = starts[-1]
        while low <= high:
            middle = (low + high) // 2
            if size(starts[middle])[0] <= target:
                chosen, high = starts[middle], middle - 1
            else:
                low = middle + 1
    dropped = sum(1 for m in messages[:chosen] if m.role == "user")
    return messages[chosen:], Window(ids[chosen] if chosen < len(ids) else None, dropped)
