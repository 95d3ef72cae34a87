import time

from engines.batching import FLUSH_INTERVAL_S, DeltaBatch
from engines.events import Answer, Thinking


def test_fast_deltas_share_an_event_and_kinds_never_mix():
    out = []
    batch = DeltaBatch(out.append)
    for text in ("a", "b", "c"):
        batch.add(Thinking(text))
    batch.add(Answer("x"))
    batch.add(Answer("y"))
    batch.flush()
    assert out == [Thinking("a"), Thinking("bc"), Answer("xy")]


def test_a_delta_after_a_pause_goes_out_at_once():
    out = []
    batch = DeltaBatch(out.append)
    batch.add(Answer("first"))
    time.sleep(FLUSH_INTERVAL_S * 2)
    batch.add(Answer("later"))
    assert out == [Answer("first"), Answer("later")]
