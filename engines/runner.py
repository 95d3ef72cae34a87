"""The one place that guarantees a stream ends with exactly one ``Done``."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from .errors import EngineError
from .events import Done, Event

log = logging.getLogger(__name__)


def guarded(events: Iterator[Event]) -> Iterator[Event]:
    """Pass events through; turn exceptions and a missing end into one ``Done``.

    Closing this generator closes the engine's stream too, which is how a
    consumer that goes away cancels generation.
    """
    try:
        for event in events:
            yield event
            if isinstance(event, Done):
                return
    except EngineError as exc:
        yield Done("error", error_code=exc.code, error_message=exc.message)
        return
    except Exception as exc:  # an engine bug must still end the turn for the user
        log.exception("engine stream failed")
        yield Done(
            "error",
            error_code="internal",
            error_message=f"The engine failed: {exc}. See the server log; the next message may work.",
        )
        return
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    yield Done(
        "error",
        error_code="internal",
        error_message="The engine ended the reply without finishing it. See the server log.",
    )
