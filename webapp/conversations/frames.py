"""Server frames for a reply's engine events, shared by plain replies and race lanes."""

from __future__ import annotations

from engines import Answer, Done, Event, Stats, Thinking


def reply_frame(event: Event, tag: dict) -> dict:
    """The frame for one event; ``tag`` is what every frame of this reply carries (its id, a race's lane)."""
    if isinstance(event, (Thinking, Answer)):
        frame = {"type": "thinking" if isinstance(event, Thinking) else "answer", **tag, "text": event.text}
        if event.rounds:
            frame["rounds"] = list(event.rounds)
        if event.draft_spans:
            frame["draft_spans"] = [list(span) for span in event.draft_spans]
        return frame
    if isinstance(event, Stats):
        return {"type": "stats", **tag, "stats": event.values}
    return done_frame(event, tag)


def done_frame(done: Done, tag: dict) -> dict:
    frame = {"type": "done", **tag, "finish_reason": done.finish_reason, "stats": done.stats}
    if done.error_code:
        frame["error"] = {"code": done.error_code, "message": done.error_message}
    return frame
