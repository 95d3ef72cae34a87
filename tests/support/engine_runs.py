"""An engine driven directly, as the web layer drives it: a turn, and the turn's events up to its one Done."""

from __future__ import annotations

import time

from engines import Done, GenerationOptions, Message, Turn, guarded

OPTIONS = GenerationOptions(reasoning_budget=64, max_tokens=64, temperature=0.0)


def turn(text: str = "hi", options: GenerationOptions = OPTIONS, conversation: str = "c1") -> Turn:
    return Turn(id=f"t{time.monotonic_ns()}", conversation_id=conversation, messages=[Message("user", text)],
                options=options)


def run(engine, t: Turn | None = None, on_event=None) -> tuple[Done, list]:
    """The turn's events to the end (``on_event(turn, event)`` as each comes): (its Done, every event)."""
    t = t or turn()
    events = []
    for event in guarded(engine.stream(t)):
        events.append(event)
        if on_event:
            on_event(t, event)
    return events[-1], events


def text(events, kind) -> str:
    return "".join(e.text for e in events if isinstance(e, kind))
