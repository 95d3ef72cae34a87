"""Tool calls on the daemon engines: the OpenAI-compatible engine against the fake MTPLX daemon scripted with
split, interleaved and malformed ``tool_calls`` deltas, and against a real server that emits them (specchat's own
API on the fake engine); the MTPLX engine the same way; the tools and the calls' history sent as servers take them."""

import json

from engines import Answer, Message, ToolCall, Turn
from engines.mtplx import MtplxEngine
from engines.openai_compat import OpenAICompatEngine
from engines.tool_calls import ToolCallAssembler
from tests.support.engine_runs import OPTIONS, run, text
from tests.support.fake_mtplx import free_port, install_mtplx
from tests.test_openai_engine import daemon, engine  # noqa: F401 (the fake daemon and the engine on it)

CALCULATOR = {"type": "function", "function": {
    "name": "calculator", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}
CLOCK = {"type": "function", "function": {"name": "clock", "parameters": {"type": "object", "properties": {}}}}


def tool_turn(messages=None, **kwargs) -> Turn:
    return Turn(id="t-tools", conversation_id="c-tools", messages=messages or [Message("user", "12.5% of 80?")],
                options=OPTIONS, tools=(CALCULATOR, CLOCK), **kwargs)


def piece(index=None, id=None, name=None, arguments=None) -> dict:
    out = {} if index is None else {"index": index}
    if id:
        out.update(id=id, type="function")
    function = {k: v for k, v in (("name", name), ("arguments", arguments)) if v is not None}
    if function:
        out["function"] = function
    return out


def test_calls_split_and_interleaved_arrive_whole_in_index_order(engine, daemon):
    daemon.next(tool_calls=[
        [piece(0, "call_a", "calculator", "")],
        [piece(0, arguments='{"expres')],
        [piece(1, "call_b", "clock", "{}")],
        [piece(0, arguments='sion": "12.5% of 80"}')],
    ])
    done, events = run(engine, tool_turn())
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert calls == [ToolCall("call_a", "calculator", {"expression": "12.5% of 80"}),
                     ToolCall("call_b", "clock", {})]
    assert done.finish_reason == "tool_calls" and events[-2] == calls[-1]  # the calls come last, before Done
    assert text(events, Answer) == "Hello! How can I help?"  # content before the calls still streams
    body = daemon.state()["requests"][-1]["body"]
    assert body["tools"] == [CALCULATOR, CLOCK] and body["tool_choice"] == "auto"


def test_malformed_arguments_become_the_calls_error_and_the_reply_ends_normally(engine, daemon):
    daemon.next(tool_calls=[[piece(0, "call_a", "calculator", "{not json")], [piece(1, "call_b", "clock", "[1]")],
                            [piece(2, "call_c", None, "{}")]])
    done, events = run(engine, tool_turn())
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [c.call for c in calls] == ["call_a", "call_b", "call_c"] and done.finish_reason == "tool_calls"
    assert "not valid JSON" in calls[0].error and calls[0].arguments == {}
    assert "not an object" in calls[1].error
    assert "named no function" in calls[2].error


def test_without_tools_declared_no_call_is_read(engine, daemon):
    daemon.next(tool_calls=[[piece(0, "call_a", "clock", "{}")]])
    done, events = run(engine, Turn(id="t", conversation_id="c", messages=[Message("user", "hi")], options=OPTIONS))
    assert done.finish_reason == "stop" and not any(isinstance(e, ToolCall) for e in events)
    assert "tools" not in daemon.state()["requests"][-1]["body"]


def test_the_calls_history_is_sent_as_servers_take_it(engine, daemon):
    history = [Message("user", "12.5% of 80?"),
               Message("assistant", "", tool_calls=(ToolCall("call_a", "calculator", {"expression": "12.5% of 80"}),)),
               Message("tool", "10", tool_call_id="call_a")]
    done, _ = run(engine, tool_turn(history, tool_choice={"type": "function", "function": {"name": "calculator"}}))
    assert done.finish_reason == "stop"
    body = daemon.state()["requests"][-1]["body"]
    assert body["messages"][-2:] == [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_a", "type": "function", "function": {
            "name": "calculator", "arguments": '{"expression":"12.5% of 80"}'}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "10"}]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "calculator"}}


def test_pieces_without_an_index_start_a_call_when_they_name_a_function():
    calls = ToolCallAssembler()
    calls.feed([piece(None, "a", "calculator", '{"expression": ')])
    calls.feed([piece(None, arguments='"1+1"}')])
    calls.feed([piece(None, "b", "clock", None)])
    calls.feed("not a list")
    calls.feed([42])
    assert calls.calls() == [ToolCall("a", "calculator", {"expression": "1+1"}), ToolCall("b", "clock", {})]


def test_against_a_real_server_that_emits_calls(fake_server):
    """specchat's own API on the fake engine is a real OpenAI-compatible server that makes calls."""
    fake_server.engine.tool_calls = [("calculator", {"expression": "12.5% of 80"})]
    engine = OpenAICompatEngine(fake_server.url + "/v1", model="fake-model", stall_s=5.0)
    engine.load(OPTIONS)
    try:
        done, events = run(engine, tool_turn())
        assert [e for e in events if isinstance(e, ToolCall)] == [
            ToolCall("call_0", "calculator", {"expression": "12.5% of 80"})]
        assert done.finish_reason == "tool_calls"
        history = tool_turn().messages + [Message("assistant", "", tool_calls=(
            ToolCall("call_0", "calculator", {"expression": "12.5% of 80"}),)), Message("tool", "10",
                                                                                    tool_call_id="call_0")]
        done, events = run(engine, tool_turn(history))
        assert done.finish_reason == "stop" and text(events, Answer).startswith("The tool said: 10")
        served = fake_server.engine.turns[-1]
        assert served.messages[-1].role == "tool" and served.messages[-2].tool_calls[0].name == "calculator"
    finally:
        engine.unload()


def test_the_mtplx_engine_sends_tools_and_reads_its_calls(tmp_path, monkeypatch):
    install_mtplx(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("FAKE_MTPLX_READY_S", "0.2")
    engine = MtplxEngine(base_url=f"http://127.0.0.1:{free_port()}", model="org/Qwen3.5-9B-MTPLX", grace_s=3.0)
    engine.load(OPTIONS)
    try:
        assert engine.info().tools
        from tests.support.fake_mtplx import control
        control(engine.supervisor.base_url, "/fake/next", {"tool_calls": [
            [piece(0, "call_a", "clock", "")], [piece(0, arguments="{}")]]})
        done, events = run(engine, tool_turn())
        assert [e for e in events if isinstance(e, ToolCall)] == [ToolCall("call_a", "clock", {})]
        assert done.finish_reason == "tool_calls"
        body = control(engine.supervisor.base_url, "/fake/state")["requests"][-1]["body"]
        assert json.dumps(body["tools"]) == json.dumps([CALCULATOR, CLOCK])
    finally:
        engine.unload()
