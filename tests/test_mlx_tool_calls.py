"""Tool calls on the in-process MLX engine, on a tiny checkpoint whose weights script its greedy replies
(tests/support/tool_model.py): asked "What is 2+3?" with tools offered, it thinks, calls the calculator in Qwen 3.5's
markup and, given the result, answers "The answer is 5"; a trigger word in the message gets a malformed call, or a
call of ``add`` whose values the schema types. Its drafter drafts well inside calls only.

The tools reach the model through the checkpoint's own chat template, the markup never shows as text, each call
is a ``ToolCall``, drafting changes nothing but the speed and counts its acceptance inside calls apart, the step
after a call prefills only the result, and Stop ends a reply inside a call at once."""

import json
import sys

import pytest
import requests

from engines import Answer, EngineError, GenerationOptions, Message, Thinking, ToolCall, Turn, guarded
from engines.mlx.engine import MlxEngine
from engines.mlx.loading import load_model
from engines.mlx.prompts import PromptBuilder
from tests.support.servers import LiveServer
from tests.support.tool_model import ADD_TOOL, build_tool_checkpoint
from tests.support.wsclient import WsClient, set_settings
from webapp.tools.builtin import builtin_tools

BUILTIN = tuple(tool.spec().function() for tool in builtin_tools().values())
PLAIN = GenerationOptions(speculative=False, reasoning_budget=64, max_tokens=64)
MARKUP = ("<tool_call>", "</tool_call>", "<function", "<parameter", "</parameter>", "</function>", '{"name"')
# What the template writes after the calls for the result "5": only this is prefilled for the next step.
AFTER_CALLS = "\n<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n"


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory):
    return build_tool_checkpoint(tmp_path_factory.mktemp("models") / "tiny-tools")


@pytest.fixture(scope="module")
def engine(tool_model):
    engine = MlxEngine(str(tool_model))
    engine.load(PLAIN)
    assert engine.info().state == "ready", engine.info()
    yield engine
    engine.unload()


def reply(engine, messages, options=PLAIN, tools=BUILTIN, conversation="c", cancel_at=None):
    """The reply's events up to its Done (the conversation's cache is kept for a next step)."""
    turn = Turn(f"t-{conversation}-{len(messages)}", conversation, list(messages), options, tools=tools)
    events = list(guarded(engine.stream(turn)))
    return events[-1], events


def text(events, kind) -> str:
    return "".join(e.text for e in events if isinstance(e, kind))


def calls(events) -> list[ToolCall]:
    return [e for e in events if isinstance(e, ToolCall)]


def test_the_checkpoints_template_renders_the_tools_and_a_template_without_them_is_refused(engine, tool_model,
                                                                                           tiny_model):
    assert engine.info().tools is True
    prompts = PromptBuilder(load_model(str(tool_model)))
    offered = prompts.render([Message("user", "What is 2+3?")], tools=BUILTIN)
    assert '"name": "calculator"' in offered and "exact arithmetic" in offered.lower()
    assert "calculator" not in prompts.render([Message("user", "What is 2+3?")])
    # A call and its result are written by the template too.
    call = ToolCall("call_1", "calculator", {"expression": "2+3"})
    said = prompts.render([Message("user", "What is 2+3?"), Message("assistant", "", tool_calls=(call,)),
                           Message("tool", "5", tool_call_id="call_1")], tools=BUILTIN)
    assert "<function=calculator>\n<parameter=expression>\n2+3\n</parameter>" in said
    assert "<tool_response>\n5\n</tool_response>" in said
    plain = MlxEngine(str(tiny_model))
    plain.load(PLAIN)
    try:
        assert plain.info().tools is False
        with pytest.raises(EngineError, match="chat template does not render tools") as refused:
            plain.stream(Turn("t", "c", [Message("user", "hi")], PLAIN, tools=BUILTIN))
        assert refused.value.code == "no_tools"
    finally:
        plain.unload()


def test_without_mlx_vlms_tool_parsers_the_model_still_loads_with_tools_off(tool_model, monkeypatch):
    from engines.mlx.tool_markup import tool_markup

    loaded = load_model(str(tool_model))
    assert tool_markup(loaded, PromptBuilder(loaded))[0] is not None
    monkeypatch.setitem(sys.modules, "mlx_vlm.tools", None)  # as when its server's packages are missing
    markup, why = tool_markup(loaded, PromptBuilder(loaded))
    assert markup is None and "mlx-vlm's tool parsers could not be imported" in why


def test_a_call_is_a_tool_call_event_and_its_markup_never_text(engine):
    done, events = reply(engine, [Message("user", "What is 2+3?")], conversation="call")
    assert done.finish_reason == "tool_calls"
    (call,) = calls(events)
    assert (call.name, call.arguments, call.error) == ("calculator", {"expression": "2+3"}, None)
    assert call.call.startswith("call_")
    assert text(events, Thinking) == "Use the calculator." and text(events, Answer) == ""
    shown = text(events, Thinking) + text(events, Answer)
    assert not [m for m in MARKUP if m in shown]
    # The call comes after the thinking, before the end.
    kinds = [type(e) for e in events if not type(e).__name__ == "Stats"]
    assert kinds.index(ToolCall) > max(i for i, k in enumerate(kinds) if k is Thinking)


def test_argument_values_take_the_types_of_the_tools_schema(engine):
    done, events = reply(engine, [Message("user", "Please tally 4 and 6.")], PLAIN.model_copy(
        update={"reasoning_budget": 0}), tools=(ADD_TOOL,), conversation="typed")
    (call,) = calls(events)
    assert done.finish_reason == "tool_calls"
    assert call.name == "add" and call.arguments == {"a": 4, "b": 6}
    assert all(type(value) is int for value in call.arguments.values())


def test_malformed_markup_is_a_call_with_an_error_for_the_model(engine):
    done, events = reply(engine, [Message("user", "Please botch it.")], PLAIN.model_copy(
        update={"reasoning_budget": 0}), conversation="botched")
    (call,) = calls(events)
    assert done.finish_reason == "tool_calls"
    assert call.arguments == {} and "could not be read" in call.error and '{"name": "calculator"}' in call.error
    assert not [m for m in MARKUP if m in text(events, Answer) + text(events, Thinking)]


@pytest.mark.parametrize("block", [2, 4])
def test_drafting_through_a_call_changes_nothing_and_counts_its_acceptance_apart(engine, block):
    ask = [Message("user", "What is 2+3?")]
    off_done, off = reply(engine, ask, conversation=f"off{block}")
    options = PLAIN.model_copy(update={"speculative": True, "draft_block_size": block})
    on_done, on = reply(engine, ask, options, conversation=f"on{block}")
    assert text(on, Thinking) == text(off, Thinking) and text(on, Answer) == text(off, Answer)
    assert [(c.name, c.arguments) for c in calls(on)] == [(c.name, c.arguments) for c in calls(off)]
    assert on_done.finish_reason == off_done.finish_reason == "tool_calls"
    stats = on_done.stats
    assert off_done.stats["tool_acceptance"] is None  # nothing drafted
    assert 0 < stats["tool_drafted"] < stats["drafted"]
    rest = (stats["accepted"] - stats["tool_accepted"]) / (stats["drafted"] - stats["tool_drafted"])
    # The drafter knows the calls' tokens only: inside calls it is right, elsewhere it is not.
    assert stats["tool_acceptance"] == round(stats["tool_accepted"] / stats["tool_drafted"], 4) > rest
    assert stats["acceptance"] == round(stats["accepted"] / stats["drafted"], 4)  # every round, calls included


def test_mlx_vlms_loop_reads_the_same_call(engine):
    options = PLAIN.model_copy(update={"decode_loop": "mlx-vlm"})
    done, events = reply(engine, [Message("user", "What is 2+3?")], options, conversation="vlm")
    assert done.stats["decode_loop"] == "mlx-vlm" and done.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in calls(events)] == [("calculator", {"expression": "2+3"})]
    assert text(events, Thinking) == "Use the calculator."


def test_the_step_after_a_call_prefills_only_the_result_and_the_generation_prompt(engine):
    ask = [Message("user", "What is 2+3?")]
    first, events = reply(engine, ask, conversation="steps")
    (call,) = calls(events)
    said = Message("assistant", text(events, Answer), text(events, Thinking), tool_calls=(call,))
    second, then = reply(engine, [*ask, said, Message("tool", "5", tool_call_id=call.call)], conversation="steps")
    assert second.finish_reason == "stop" and calls(then) == []
    assert text(then, Thinking) == "Got it." and text(then, Answer) == "The answer is 5"
    # Every token the model has seen is cached, its call and stop token too; only the template's text after them
    # is new (written as one text or as two: the line break after the stop token, then the rest).
    assert second.stats["cached_tokens"] == first.stats["prompt_tokens"] + first.stats["tokens"] + 1
    new = second.stats["prompt_tokens"] - second.stats["cached_tokens"]
    assert 0 < new <= len(engine._prompts.encode(AFTER_CALLS)) + 1 < second.stats["prompt_tokens"] / 20


def test_stop_inside_a_call_ends_the_reply_at_once(engine, monkeypatch):
    from engines.mlx import tool_markup

    opened = {}
    read = tool_markup.CallReader.read

    def stop_on_open(self, token):  # Stop as the call opens, on the model's thread: no later token may be read
        opened.setdefault("tokens", 0)
        opened["tokens"] += 1
        if opened["tokens"] == 1:
            opened["turn"].cancel.set()
        return read(self, token)

    monkeypatch.setattr(tool_markup.CallReader, "read", stop_on_open)
    turn = Turn("t-stop", "stop", [Message("user", "What is 2+3?")], PLAIN, tools=BUILTIN)
    opened["turn"] = turn
    events = list(guarded(engine.stream(turn)))
    assert events[-1].finish_reason == "cancelled" and calls(events) == []
    assert opened["tokens"] == 1  # the call's opening token, and none after it


def test_a_chat_calls_the_calculator_and_answers_from_its_result(tool_model, tmp_path):
    server = LiveServer(MlxEngine(str(tool_model)), tmp_path / "data")
    try:
        assert server.engine.info().tools is True
        with WsClient(server.ws_url) as ws:
            set_settings(ws, reasoning_budget=64, max_tokens=64, draft_block_size=4)
            ws.send({"type": "chat", "id": "m1", "text": "What is 2+3?"})
            while True:
                call, before = ws.until("tool_call", id="m1")
                if call["state"] == "waiting":
                    break
            assert (call["name"], call["server"], call["arguments"]) == ("calculator", "builtin",
                                                                        {"expression": "2+3"})
            ws.send({"type": "tool_approval", "call": call["call"], "decision": "once"})
            done, after = ws.until("done", id="m1")
            result = next(f for f in after if f["type"] == "tool_result")
            assert result["ok"] and result["content"] == [{"type": "text", "text": "5"}]
            shown = [f["text"] for f in before + after if f["type"] in ("thinking", "answer")]
            assert "".join(f["text"] for f in after if f["type"] == "answer") == "The answer is 5"
            assert not [m for m in MARKUP if m in "".join(shown)]
            stats = done["stats"]
            assert done["finish_reason"] == "stop" and stats["tool_calls"] == 1
            # Summed over both steps: the drafts inside the call were all right, the rest's were not.
            assert stats["tool_acceptance"] == 1.0 and stats["acceptance"] < 1.0
            stored = requests.get(f"{server.url}/api/conversations/{ws.hello['conversation']}", timeout=5).json()
            reply_message = stored["messages"][-1]
            assert reply_message["content"] == "The answer is 5"
            assert reply_message["thinking"] == "Use the calculator.Got it."
    finally:
        server.stop()
        server.engine.unload()


def test_the_openai_api_returns_the_models_call_and_answers_from_the_clients_result(tool_model, tmp_path):
    """A client of /v1 runs its own tools: specchat returns the model's call, and answers once given the result."""
    import openai

    calculator = next(tool for tool in BUILTIN if tool["function"]["name"] == "calculator")
    server = LiveServer(MlxEngine(str(tool_model)), tmp_path / "data")
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        model = client.models.list().data[0].id
        asked = [{"role": "user", "content": "What is 2+3?"}]
        settings = dict(model=model, max_tokens=64, temperature=0, tools=[calculator],
                        extra_body={"reasoning_budget": 64, "draft_block_size": 4})
        first = client.chat.completions.create(messages=asked, **settings)
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls
        assert call.function.name == "calculator" and json.loads(call.function.arguments) == {"expression": "2+3"}
        assert not [m for m in MARKUP if m in (choice.message.content or "")]
        then = asked + [{"role": "assistant", "content": choice.message.content or "",
                         "tool_calls": [call.model_dump()]},
                        {"role": "tool", "tool_call_id": call.id, "content": "5"}]
        second = client.chat.completions.create(messages=then, **settings)
        assert second.choices[0].finish_reason == "stop"
        assert second.choices[0].message.content == "The answer is 5"
    finally:
        server.stop()
        server.engine.unload()


def test_a_later_turn_gives_the_engine_the_calls_and_results_and_reuses_its_cache(tool_model, tmp_path):
    engine = MlxEngine(str(tool_model))
    seen: list[Turn] = []
    stream = engine.stream
    engine.stream = lambda turn: (seen.append(turn), stream(turn))[1]  # what each step and turn was given
    server = LiveServer(engine, tmp_path / "data")
    try:
        with WsClient(server.ws_url) as ws:
            set_settings(ws, reasoning_budget=64, max_tokens=64, draft_block_size=4)
            requests.patch(f"{server.url}/api/tools/builtin/calculator", json={"always_allow": True}, timeout=5)
            ws.send({"type": "chat", "id": "m1", "text": "What is 2+3?"})
            first, _ = ws.until("done", id="m1")
            assert first["stats"]["tool_calls"] == 1
            ws.send({"type": "chat", "id": "m2", "text": "And 4+4?"})
            later, _ = ws.until("done", id="m2")
        given = seen[-1].messages
        assert [m.role for m in given] == ["user", "assistant", "tool", "assistant", "user"]
        assert given[1].tool_calls[0].name == "calculator" and given[1].tool_calls[0].arguments == {"expression": "2+3"}
        assert given[2].content == "5" and given[2].tool_call_id == given[1].tool_calls[0].call
        assert given[3].content == "The answer is 5"
        assert seen[-1].conversation_id == seen[0].conversation_id  # the same conversation in the engine
        # Everything the reply's steps left in the cache is reused: only the new user turn is prefilled.
        stats = later["stats"]
        assert stats["prompt_tokens"] - stats["cached_tokens"] <= len(engine._prompts.encode("And 4+4?")) + 12
    finally:
        server.stop()
        engine.unload()
