"""specchat's own OpenAI engine pointed at another specchat's API (a real server on the fake engine): the other's
thinking and answer come through as they were made, its thinking switches and budget are honoured, and its
drafter's numbers (acceptance, acceptance by depth, rounds) arrive live while the reply streams."""

import pytest

from engines import Answer, GenerationOptions, Message, Stats, Thinking, Turn
from engines.fake import ANSWER, THINKING
from engines.openai_compat import OpenAICompatEngine
from tests.support.engine_runs import run, text

OPTIONS = GenerationOptions(reasoning_budget=64, max_tokens=256, temperature=0.0)


@pytest.fixture
def peer(fake_server):
    fake_server.engine.delay_s = 0.02  # long enough a reply for live numbers to go out on the way
    engine = OpenAICompatEngine(fake_server.url + "/v1", model="fake-model", stall_s=5.0)
    engine.load(OPTIONS)
    yield engine, fake_server.engine
    engine.unload()


def ask(options=OPTIONS) -> Turn:
    return Turn(id="t", conversation_id="c", messages=[Message("user", "hi")], options=options)


def test_thinking_and_answer_come_through_with_the_drafters_numbers_live(peer):
    engine, _ = peer
    done, events = run(engine, ask())
    assert text(events, Thinking) == "".join(w + " " for w in THINKING.split())
    assert text(events, Answer) == ANSWER + " "
    live = [e.values for e in events if isinstance(e, Stats)]
    assert any(s.get("rounds") and s.get("acceptance_by_depth") and s.get("acceptance") for s in live), live
    final = done.stats
    assert final["rounds"] > 0 and final["drafted"] > 0 and 0 < final["acceptance"] < 1
    assert final["acceptance_by_depth"] and all(0 <= a <= 1 for a in final["acceptance_by_depth"])
    assert final["accepted"] == round(final["acceptance"] * final["drafted"])


def test_thinking_off_and_the_budget_are_honoured_there(peer):
    engine, served = peer
    done, events = run(engine, ask(OPTIONS.updated({"reasoning_budget": 0})))
    assert text(events, Thinking) == "" and served.turns[-1].options.reasoning_budget == 0
    done, events = run(engine, ask(OPTIONS.updated({"reasoning_budget": 8})))
    assert 0 < len(text(events, Thinking).split()) <= 8 and text(events, Answer) == ANSWER + " "
