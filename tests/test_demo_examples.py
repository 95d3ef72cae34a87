"""The demo model's example prompts: shipped with the checkpoint, read by the engine, and answered right."""

import json
import logging

import pytest

from demo_model import DEFAULT_MODEL as DEMO
from engines import Answer, Done, EngineInfo, GenerationOptions, Message, Thinking, ToolCall, Turn, guarded
from engines.base import Example, read_examples
from training.corpus import is_held_out
from webapp.tools.builtin import builtin_tools, run_builtin

SHIPPED = json.loads((DEMO / "examples.json").read_text())
THINKING_ON, THINKING_OFF = 512, 0


def modes(example: dict) -> list[int]:
    """The reasoning budgets an example is offered with: thinking on always, off unless it needs thinking."""
    return [THINKING_ON] if example.get("thinking") else [THINKING_ON, THINKING_OFF]


CASES = [pytest.param(ex, budget, id=f"{ex['text']}-{'on' if budget else 'off'}") for ex in SHIPPED for budget in modes(ex)]


def test_read_examples(tmp_path, caplog):
    assert read_examples(tmp_path) == ()
    (tmp_path / "examples.json").write_text(json.dumps([{"text": "What is 2 + 2?", "expect": "4", "thinking": True},
                                                        {"text": "Hi", "expect": "Hello"}]))
    assert read_examples(tmp_path) == (Example("What is 2 + 2?", "4", True), Example("Hi", "Hello", False))
    (tmp_path / "examples.json").write_text('[{"text": "no expect"}]')
    with caplog.at_level(logging.WARNING):
        assert read_examples(tmp_path) == ()
    assert "examples.json" in caplog.text
    (tmp_path / "examples.json").write_text("{not json")
    assert read_examples(tmp_path) == ()


def test_engine_info_sends_text_and_mode_only():
    info = EngineInfo("mlx", "m", None, "ready", examples=(Example("Hi", "Hello", True),))
    assert info.to_dict()["examples"] == [{"text": "Hi", "thinking": True}]
    assert EngineInfo("fake", "m", None, "ready").to_dict()["examples"] == []


def test_shipped_examples_cover_the_skills():
    assert 4 <= len(SHIPPED) <= 6
    assert all(set(ex) == {"text", "expect", "thinking"} and ex["text"] and ex["expect"] for ex in SHIPPED)
    assert len({ex["text"] for ex in SHIPPED}) == len(SHIPPED)
    # Sums are ones the model never saw in training (corpus.is_held_out).
    for ex in SHIPPED:
        words = ex["text"].rstrip("?").split()
        if len(words) == 5 and words[:2] == ["What", "is"] and words[3] in "+-":
            assert is_held_out(int(words[2]), words[3], int(words[4])), ex["text"]


def _reply(engine, text: str, budget: int, conversation: str) -> tuple[str, str, Done]:
    """The reply as the app makes it: the built-in tools offered when the model's template renders them, each call
    approved and run, the reply going on after its result; the text of its last step, and that step's Done."""
    # Block 4, where the acceptance asserted below (and quoted in the README) is measured: auto's block moves with
    # this machine's timings, and acceptance falls with depth.
    options = GenerationOptions(reasoning_budget=budget, temperature=0.0, draft_block_size=4)
    tools = builtin_tools() if engine.info().tools else {}
    messages = [Message("user", text)]
    for step in range(options.max_tool_steps + 1):
        turn = Turn(id=f"t{len(messages)}", conversation_id=conversation, messages=list(messages), options=options,
                    tools=tuple(tool.spec().function() for tool in tools.values()))
        thinking, answer, calls, done = [], [], [], None
        for event in guarded(engine.stream(turn)):
            if isinstance(event, Thinking):
                thinking.append(event.text)
            elif isinstance(event, Answer):
                answer.append(event.text)
            elif isinstance(event, ToolCall):
                calls.append(event)
            elif isinstance(event, Done):
                done = event
        if not calls or step == options.max_tool_steps:
            return "".join(thinking), "".join(answer), done
        messages.append(Message("assistant", "".join(answer), "".join(thinking), tool_calls=tuple(calls)))
        messages += [Message("tool", _result(tools, call), tool_call_id=call.call) for call in calls]


def _result(tools: dict, call: ToolCall) -> str:
    """What the app sends the model for ``call`` (webapp/tools): the tool's text, or why it could not run."""
    if call.error or call.name not in tools:
        return call.error or f"There is no tool named {call.name}."
    return run_builtin(tools[call.name], call.arguments).text()


@pytest.fixture(scope="module")
def engine():
    from engines.mlx.engine import MlxEngine

    engine = MlxEngine(str(DEMO))
    engine.load(GenerationOptions())
    assert engine.info().state == "ready", engine.info().message
    yield engine
    engine.unload()


@pytest.fixture(scope="module")
def replies(engine):
    """Each example's greedy reply in each mode it is offered for, made once for the module."""
    made = {}

    def reply(text: str, budget: int):
        if (text, budget) not in made:
            made[text, budget] = _reply(engine, text, budget, f"example-{len(made)}")
        return made[text, budget]

    return reply


def test_the_engine_offers_the_shipped_examples(engine):
    offered = engine.info().to_dict()["examples"]
    assert offered == [{"text": ex["text"], "thinking": ex["thinking"]} for ex in SHIPPED]


@pytest.mark.slow
@pytest.mark.parametrize("example, budget", CASES)
def test_example_is_answered_right(replies, example, budget):
    thinking, answer, done = replies(example["text"], budget)
    assert done.finish_reason == "stop", done
    assert example["expect"] in answer, f"{example['text']!r} with budget {budget}: {answer!r}"
    if budget:
        assert thinking.strip() and done.stats["thinking_tokens"] > 0
    else:
        assert not thinking and done.stats["thinking_tokens"] == 0


@pytest.mark.slow
def test_one_example_is_a_long_reply_where_drafting_pays(replies):
    runs = [(ex["text"], replies(ex["text"], THINKING_ON)[2].stats) for ex in SHIPPED]
    text, stats = max(runs, key=lambda run: run[1]["tokens"])
    assert stats["tokens"] >= 120, (text, stats["tokens"])
    assert stats["acceptance"] >= 0.8, (text, stats["acceptance"])
