"""A chat reply that calls tools, over a real socket on the fake engine with the built-in tools: each call waits
for the user's approval (unless always allowed), runs, and its result goes back to the model, whose reply goes on
in the same message; the frames say so in order, the stored message keeps the calls, and Stop, denial, the
call limit, malformed calls and a reattaching tab each do what the user expects."""

import requests

from engines.fake import ANSWER
from tests.support.wsclient import WsClient, set_settings


def scripted(server, *calls):
    server.engine.tool_calls = list(calls)
    return server.engine


def stored_reply(server, conversation: str) -> dict:
    messages = requests.get(f"{server.url}/api/conversations/{conversation}", timeout=5).json()["messages"]
    return messages[-1]


def waiting_call(ws, id: str) -> tuple[dict, list[dict]]:
    while True:
        frame, seen = ws.until("tool_call", id=id)
        if frame["state"] == "waiting":
            return frame, seen


def test_a_call_waits_for_approval_runs_and_the_reply_goes_on_from_its_result(fake_server):
    engine = scripted(fake_server, ("calculator", {"expression": "12.5% of 80"}))
    with WsClient(fake_server.ws_url) as ws:
        set_settings(ws, reasoning_budget=4)
        ws.send({"type": "chat", "id": "m1", "text": "What is 12.5% of 80?"})
        call, before = waiting_call(ws, "m1")
        assert [f["type"] for f in before if f["type"] in ("thinking", "answer")][-1] == "thinking"
        thinking = "".join(f["text"] for f in before if f["type"] == "thinking")
        assert (call["name"], call["server"], call["arguments"]) == ("calculator", "builtin",
                                                                    {"expression": "12.5% of 80"})
        assert call["at"] == {"thinking": len(thinking), "content": 0}
        assert [t["function"]["name"] for t in engine.turns[-1].tools] == ["calculator", "clock"]
        ws.send({"type": "tool_approval", "call": call["call"], "decision": "once"})
        done, after = ws.until("done", id="m1")
        states = [f["state"] for f in after if f["type"] == "tool_call"]
        assert states == ["running", "done"]
        result = next(f for f in after if f["type"] == "tool_result")
        assert result["ok"] and result["content"] == [{"type": "text", "text": "10"}] and result["ms"] >= 0
        answer = "".join(f["text"] for f in after if f["type"] == "answer")
        assert answer == f"The tool said: 10\n\n{ANSWER} "
        assert done["finish_reason"] == "stop" and done["stats"]["tool_calls"] == 1
        assert done["stats"]["tool_ms"] >= 0 and "tool_acceptance" in done["stats"]
        # The model's second step saw its call and the result, under the same engine conversation.
        second = engine.turns[-1]
        assert [m.role for m in second.messages[-3:]] == ["user", "assistant", "tool"]
        assert second.messages[-1].content == "10" and second.conversation_id == engine.turns[-2].conversation_id
        stored = stored_reply(fake_server, ws.hello["conversation"])
        assert stored["content"] == answer and stored["thinking"] == thinking * 2
        (kept,) = stored["tool_calls"]
        assert kept["state"] == "done" and kept["ok"] and kept["content"] == result["content"]
        assert kept["at"] == call["at"] and kept["call"] == call["call"]


def test_always_allowing_a_tool_runs_its_next_calls_without_asking(fake_server):
    scripted(fake_server, ("clock", {"action": "today"}))
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "chat", "id": "m1", "text": "What day is it?"})
        call, _ = waiting_call(ws, "m1")
        ws.send({"type": "tool_approval", "call": call["call"], "decision": "always"})
        ws.until("done", id="m1")
        tools = requests.get(f"{fake_server.url}/api/tools", timeout=5).json()["servers"]
        clock = next(t for s in tools if s["name"] == "builtin" for t in s["tools"] if t["name"] == "clock")
        assert clock["always_allow"] is True
        done, frames = ws.chat("m2", "And again?")
        assert [f["state"] for f in frames if f["type"] == "tool_call"] == ["running", "done"]
        assert done["stats"]["tool_calls"] == 1


def test_a_denied_call_is_reported_to_the_model_and_the_reply_goes_on(fake_server):
    scripted(fake_server, ("calculator", {"expression": "2 + 2"}))
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "chat", "id": "m1", "text": "2 + 2?"})
        call, _ = waiting_call(ws, "m1")
        ws.send({"type": "tool_approval", "call": call["call"], "decision": "deny"})
        done, after = ws.until("done", id="m1")
        assert [f["state"] for f in after if f["type"] == "tool_call"] == ["denied"]
        assert "".join(f["text"] for f in after if f["type"] == "answer").startswith(
            "The tool said: The user denied this call.")
        assert done["finish_reason"] == "stop"


def test_stop_while_a_call_waits_ends_the_reply_at_once(fake_server):
    scripted(fake_server, ("calculator", {"expression": "2 + 2"}))
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "chat", "id": "m1", "text": "2 + 2?"})
        call, _ = waiting_call(ws, "m1")
        ws.send({"type": "stop", "id": "m1"})
        done, after = ws.until("done", id="m1", timeout=5)
        assert done["finish_reason"] == "cancelled"
        assert [f["state"] for f in after if f["type"] == "tool_call"] == ["failed"]
        ws.send({"type": "tool_approval", "call": call["call"], "decision": "once"})
        error, _ = ws.until("error")
        assert error["code"] == "unknown_call"
        (kept,) = stored_reply(fake_server, ws.hello["conversation"])["tool_calls"]
        assert kept["state"] == "failed" and kept["error"] == "The reply was stopped."


def test_calls_past_the_limit_and_malformed_calls_fail_without_asking(fake_server):
    scripted(fake_server, ("clock", {"action": "now"}), ("calculator", {"expression": "1 +"}),
             ("calculator", {"expression": "2"}))
    with WsClient(fake_server.ws_url) as ws:
        set_settings(ws, max_tool_steps=2)
        with_limit = {"type": "tool_approval", "decision": "always"}
        requests.patch(f"{fake_server.url}/api/tools/builtin/clock", json={"always_allow": True}, timeout=5)
        requests.patch(f"{fake_server.url}/api/tools/builtin/calculator", json={"always_allow": True}, timeout=5)
        done, frames = ws.chat("m1", "Several things?")
        finals = {f["call"]: f for f in frames if f["type"] == "tool_call"}
        states = [(f["name"], f["state"]) for f in finals.values()]
        assert states == [("clock", "done"), ("calculator", "failed"), ("calculator", "failed")], with_limit
        errors = [f["error"] for f in finals.values() if f["state"] == "failed"]
        assert "1 +" in errors[0] or "expression" in errors[0].lower()
        assert "max_tool_steps" in errors[1]
        assert done["stats"]["tool_calls"] == 3


def test_with_tools_off_nothing_is_offered(fake_server):
    engine = scripted(fake_server, ("calculator", {"expression": "2 + 2"}))
    with WsClient(fake_server.ws_url) as ws:
        set_settings(ws, tools=False)
        done, frames = ws.chat("m1", "2 + 2?")
        assert engine.turns[-1].tools == () and not any(f["type"] == "tool_call" for f in frames)
        assert done["finish_reason"] == "stop"


def test_a_tab_that_reattaches_sees_the_call_still_waiting(fake_server):
    scripted(fake_server, ("calculator", {"expression": "2 + 2"}))
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "chat", "id": "m1", "text": "2 + 2?"})
        call, _ = waiting_call(ws, "m1")
        conversation = ws.hello["conversation"]
    with WsClient(fake_server.ws_url + f"?conversation={conversation}") as again:
        replayed, _ = waiting_call(again, "m1")
        assert replayed["call"] == call["call"]
        again.send({"type": "tool_approval", "call": call["call"], "decision": "once"})
        done, _ = again.until("done", id="m1")
        assert done["stats"]["tool_calls"] == 1


def test_the_calls_are_exported_and_imported_with_the_reply(fake_server):
    scripted(fake_server, ("calculator", {"expression": "12.5% of 80"}))
    requests.patch(f"{fake_server.url}/api/tools/builtin/calculator", json={"always_allow": True}, timeout=5)
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1", "What is 12.5% of 80?")
        conversation = ws.hello["conversation"]
    base = f"{fake_server.url}/api/conversations"
    export = requests.get(f"{base}/{conversation}/export", params={"format": "json"}, timeout=5).json()
    calls = export["messages"][-1]["tool_calls"]
    assert [(c["name"], c["state"], c["content"]) for c in calls] == [
        ("calculator", "done", [{"type": "text", "text": "10"}])]
    created = requests.post(f"{base}/import", json=export, timeout=5)
    assert created.status_code == 201, created.text
    assert stored_reply(fake_server, created.json()["id"])["tool_calls"] == calls
    markdown = requests.get(f"{base}/{conversation}/export", params={"format": "markdown"}, timeout=5).text
    assert '> Called `calculator` (builtin) with `{"expression":"12.5% of 80"}`: done, 10' in markdown
    broken = {**export, "messages": [*export["messages"][:-1], {**export["messages"][-1], "tool_calls": [
        {**calls[0], "state": "exploded"}]}]}
    refused = requests.post(f"{base}/import", json=broken, timeout=5)
    assert refused.status_code == 400 and "state" in refused.json()["error"]["message"]
