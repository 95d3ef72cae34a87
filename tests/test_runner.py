from engines.errors import EngineError
from engines.events import Answer, Done
from engines.runner import guarded


def test_passes_through_and_stops_after_done():
    def stream():
        yield Answer("a")
        yield Done("stop")
        yield Answer("after done")

    assert list(guarded(stream())) == [Answer("a"), Done("stop")]


def test_engine_error_becomes_one_done():
    def stream():
        yield Answer("a")
        raise EngineError("disk on fire", code="fire")

    events = list(guarded(stream()))
    assert events[-1] == Done("error", error_code="fire", error_message="disk on fire")
    assert sum(isinstance(e, Done) for e in events) == 1


def test_crash_and_missing_done_each_end_with_done():
    def crash():
        yield Answer("a")
        raise ValueError("boom")

    def silent():
        yield Answer("a")

    for stream in (crash(), silent()):
        events = list(guarded(stream))
        assert isinstance(events[-1], Done) and events[-1].finish_reason == "error"
        assert sum(isinstance(e, Done) for e in events) == 1


def test_closing_closes_the_engine_stream():
    closed = []

    def stream():
        try:
            yield Answer("a")
            yield Answer("b")
        finally:
            closed.append(True)

    events = guarded(stream())
    next(events)
    events.close()
    assert closed == [True]
