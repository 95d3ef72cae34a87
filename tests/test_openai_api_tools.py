"""Tools through the OpenAI-compatible API, driven by the official ``openai`` library against a real server on the
fake engine: the model's calls come back to the client (whole, and streamed in pieces), the client's results go
in as tool messages and the model answers from them; an engine that cannot call tools refuses them by name."""

import json

import openai
import pytest

from engines.fake import ANSWER

MODEL = "fake-model"
CALCULATOR = {"type": "function", "function": {
    "name": "calculator", "description": "Exact arithmetic.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}
CLOCK = {"type": "function", "function": {"name": "clock", "parameters": {"type": "object", "properties": {}}}}


@pytest.fixture
def client(fake_server):
    return openai.OpenAI(base_url=fake_server.url + "/v1", api_key="unused", max_retries=0, timeout=30)


@pytest.fixture
def scripted(fake_server):
    fake_server.engine.tool_calls = [("calculator", {"expression": "12.5% of 80"}), ("clock", {})]
    return fake_server.engine


def test_the_models_calls_come_back_and_its_answer_uses_their_results(client, scripted):
    question = [{"role": "user", "content": "What is 12.5% of 80, and what day is it?"}]
    reply = client.chat.completions.create(model=MODEL, messages=question, tools=[CALCULATOR, CLOCK],
                                           extra_body={"reasoning_budget": 0})
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("calculator", {"expression": "12.5% of 80"}), ("clock", {})]
    assert len({c.id for c in calls}) == 2
    turn = scripted.turns[-1]
    assert [t["function"]["name"] for t in turn.tools] == ["calculator", "clock"] and turn.tool_choice == "auto"

    results = [{"role": "tool", "tool_call_id": calls[0].id, "content": "10"},
               {"role": "tool", "tool_call_id": calls[1].id, "content": "Saturday"}]
    follow = client.chat.completions.create(
        model=MODEL, messages=question + [choice.message.model_dump(exclude_none=True)] + results,
        tools=[CALCULATOR, CLOCK], extra_body={"reasoning_budget": 0})
    assert follow.choices[0].finish_reason == "stop"
    assert follow.choices[0].message.content == f"The tool said: 10 The tool said: Saturday\n\n{ANSWER} "
    sent = scripted.turns[-1].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [c.name for c in sent[1].tool_calls] == ["calculator", "clock"]
    assert sent[1].tool_calls[0].arguments == {"expression": "12.5% of 80"}
    assert sent[2].tool_call_id == calls[0].id and sent[3].content == "Saturday"


def test_streamed_calls_arrive_as_tool_call_deltas(client, scripted):
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "12.5% of 80?"}], tools=[CALCULATOR], stream=True,
        extra_body={"reasoning_budget": 3}))
    deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or ()]
    assert [(d.index, d.function.name, json.loads(d.function.arguments)) for d in deltas] == [
        (0, "calculator", {"expression": "12.5% of 80"})]  # the clock is not offered, so not called
    assert deltas[0].id and chunks[-1].choices[0].finish_reason == "tool_calls"
    thinking = "".join(c.choices[0].delta.model_extra.get("reasoning_content") or "" for c in chunks if c.choices)
    assert len(thinking.split()) == 3  # the thinking still streams before the call


def test_tool_choice_none_answers_without_calling(client, scripted):
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                           tools=[CALCULATOR], tool_choice="none", extra_body={"reasoning_budget": 0})
    assert reply.choices[0].finish_reason == "stop" and reply.choices[0].message.tool_calls is None
    assert reply.choices[0].message.content == ANSWER + " "


def test_an_engine_that_cannot_call_tools_refuses_them_by_name(client, fake_server):
    fake_server.engine.calls_tools = False
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], tools=[CALCULATOR])
    assert raised.value.body["param"] == "tools" and raised.value.body["code"] == "unsupported_parameter"
    assert fake_server.engine.turns == []
