"""The OpenAI-compatible API (/v1) driven by the official ``openai`` library against a real server on the fake
engine: replies streamed and not, thinking, images, stop strings, every refusal in OpenAI's error shape, the
queue in arrival order with 429 beyond it, a client that leaves mid-stream, and a tab beside the API."""

import base64
import io
import json
import socket
import threading
import time

import openai
import pytest
import requests
from PIL import Image

from engines.fake import ANSWER, THINKING
from tests.support.wsclient import WsClient
from webapp import create_app
from engines.fake import FakeEngine

MODEL = "fake-model"


@pytest.fixture
def client(fake_server):
    return openai.OpenAI(base_url=fake_server.url + "/v1", api_key="unused", max_retries=0, timeout=30)


def ask(client, text="Hello", **kwargs):
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": text}], **kwargs)


def png_url(size=(64, 48)) -> str:
    out = io.BytesIO()
    Image.new("RGB", size, (10, 200, 30)).save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def thinking_text(budget=512) -> str:
    return "".join(w + " " for w in THINKING.split()[:budget])


def test_models_lists_the_loaded_model(client, fake_server):
    fake_server.engine.context_words = 4096
    (model,) = client.models.list().data
    assert model.id == MODEL and model.owned_by == "specchat"
    extra = model.model_extra
    assert extra["context_length"] == 4096 and extra["vision"] is True and extra["drafter"] == "fake drafter"


def test_a_reply_with_its_thinking_usage_and_timings(client):
    reply = ask(client)
    choice = reply.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert choice.message.content == ANSWER + " "
    assert choice.message.model_extra["reasoning_content"] == thinking_text()
    usage = reply.usage
    assert usage.completion_tokens == len(THINKING.split()) + len(ANSWER.split(" "))
    assert usage.completion_tokens_details.reasoning_tokens == len(THINKING.split())
    assert usage.prompt_tokens == 1 and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details.cached_tokens == 0
    timings = reply.model_extra["timings"]
    assert timings["predicted_n"] == usage.completion_tokens and timings["predicted_per_second"] > 0
    assert timings["draft_n"] > 0 and 0 < timings["draft_n_accepted"] <= timings["draft_n"]
    assert timings["acceptance_by_depth"] and timings["prompt_ms"] > 0


def test_a_streamed_reply_sends_thinking_then_answer_then_usage(client):
    stream = ask(client, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    thinking = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    answer = "".join(d.content or "" for d in deltas)
    assert thinking == thinking_text() and answer == ANSWER + " "
    assert deltas[0].role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == len(THINKING.split()) + len(
        ANSWER.split(" "))
    assert chunks[-1].model_extra["timings"]["draft_n"] > 0
    assert len({c.id for c in chunks}) == 1


def test_the_request_fields_reach_the_engine(client, fake_server):
    ask(client, max_completion_tokens=3, temperature=0.5, top_p=0.9, extra_body={
        "reasoning_budget": 2, "speculative": False})
    options = fake_server.engine.turns[-1].options
    assert (options.max_tokens, options.temperature, options.top_p, options.reasoning_budget,
            options.speculative) == (3, 0.5, 0.9, 2, False)
    reply = ask(client, reasoning_effort="none", max_tokens=2, extra_body={"draft_block_size": 3})
    options = fake_server.engine.turns[-1].options
    assert (options.reasoning_budget, options.max_tokens, options.draft_block_size) == (0, 2, 3)
    ask(client, max_tokens=2, extra_body={"draft_block_size": "auto"})
    assert fake_server.engine.turns[-1].options.draft_block_size == "auto"
    assert reply.choices[0].finish_reason == "length" and "reasoning_content" not in reply.choices[0].message.model_extra


def test_system_messages_become_the_system_prompt_and_history_is_kept(client, fake_server):
    client.chat.completions.create(model=MODEL, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "developer", "content": "Use words."},
        {"role": "user", "content": "one"}, {"role": "assistant", "content": "two", "reasoning_content": "hm"},
        {"role": "user", "content": [{"type": "text", "text": "three"}]},
    ])
    turn = fake_server.engine.turns[-1]
    assert turn.options.system_prompt == "Be brief.\n\nUse words."
    assert [(m.role, m.content, m.reasoning) for m in turn.messages] == [
        ("user", "one", ""), ("assistant", "two", "hm"), ("user", "three", "")]


def test_an_image_part_reaches_the_engine(client, fake_server):
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [
        {"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": png_url()}}]}])
    assert reply.choices[0].message.content.startswith("I got 1 image: 64×48 PNG.")
    assert fake_server.engine.turns[-1].messages[-1].images[0].width == 64


def test_a_stop_string_cuts_the_answer(client):
    reply = ask(client, stop=["**an"], max_tokens=50)
    assert reply.choices[0].message.content == "Here is " and reply.choices[0].finish_reason == "stop"
    streamed = "".join(c.choices[0].delta.content or "" for c in ask(client, stop="answer**", stream=True)
                       if c.choices)
    assert streamed == "Here is **an "


@pytest.mark.parametrize("kwargs, status, code, param", [
    ({"model": "gpt-4"}, 404, "model_not_found", "model"),
    ({"n": 2}, 400, "unsupported_parameter", "n"),
    ({"logprobs": True}, 400, "unsupported_parameter", "logprobs"),
    ({"response_format": {"type": "json_object"}}, 400, "unsupported_parameter", "response_format"),
    ({"presence_penalty": 0.5}, 400, "unsupported_parameter", "presence_penalty"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
      "tool_choice": {"type": "function", "function": {"name": "g"}}}, 400, "invalid_value", "tool_choice"),
    ({"tool_choice": "required"}, 400, "invalid_value", "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "two words"}}]}, 400, "invalid_value",
     "tools[0].function.name"),
    ({"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_9", "content": "4"}]},
     400, "invalid_value", "messages[1].tool_call_id"),
    ({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "4"}]}, 400, "invalid_value",
     "messages[1].tool_calls[0].function.arguments"),
    ({"seed": 3, "temperature": 0.7}, 400, "unsupported_parameter", "seed"),
    ({"extra_body": {"frobnicate": 1}}, 400, "unsupported_parameter", "frobnicate"),
    ({"temperature": 3}, 400, "invalid_value", "temperature"),
    ({"max_tokens": 0}, 400, "invalid_value", "max_tokens"),
    ({"extra_body": {"speculative": "yes"}}, 400, "invalid_value", "speculative"),
    ({"messages": [{"role": "assistant", "content": "hi"}]}, 400, "invalid_value", "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "https://example.com/a.png"}}]}]}, 400, "invalid_image", "messages[0].content[0].image_url"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "data:image/png;base64,aGVsbG8="}}]}]}, 400, "bad_image", "messages[0].content[0].image_url"),
])
def test_bad_requests_get_openai_errors_naming_the_field(client, fake_server, kwargs, status, code, param):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **kwargs}
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(**body)
    error = raised.value
    assert error.status_code == status
    assert error.body["code"] == code and error.body["param"] == param and error.body["message"]
    assert error.body["type"] in ("invalid_request_error",)
    assert fake_server.engine.turns == []


def test_malformed_json_and_unknown_routes_are_openai_errors(fake_server):
    response = requests.post(fake_server.url + "/v1/chat/completions", data=b"{nope",
                             headers={"Content-Type": "application/json"}, timeout=10)
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"
    response = requests.get(fake_server.url + "/v1/completions", timeout=10)
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_a_prompt_over_the_context_and_images_for_a_blind_model(client, fake_server):
    fake_server.engine.context_words = 5
    with pytest.raises(openai.BadRequestError) as raised:
        ask(client, "one two three four five six")
    assert raised.value.body["code"] == "context_length_exceeded"
    fake_server.engine.context_words = None
    fake_server.engine.vision = False
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": png_url()}}]}])
    assert raised.value.body["code"] == "no_vision"
    assert ask(client).choices[0].finish_reason == "stop"


def test_eight_wait_their_turn_in_order_and_a_ninth_is_refused(client, fake_server):
    engine = fake_server.engine
    engine.holds = [1]
    replies, errors = {}, []

    def one(n):
        try:
            replies[n] = ask(client, f"request {n}", max_tokens=20, extra_body={"reasoning_budget": 0})
        except Exception as exc:  # the test fails below with what went wrong
            errors.append(exc)

    first = threading.Thread(target=one, args=(0,))
    first.start()
    assert wait_for(lambda: engine.busy)
    rest = []
    for n in range(1, 8):
        rest.append(threading.Thread(target=one, args=(n,)))
        rest[-1].start()
        assert wait_for(lambda: fake_server.host.api.state()["waiting"] == n)
    ninth = requests.post(fake_server.url + "/v1/chat/completions", json={
        "model": MODEL, "messages": [{"role": "user", "content": "ninth"}]}, timeout=10)
    assert ninth.status_code == 429 and ninth.headers["Retry-After"] == "2"
    assert ninth.json()["error"]["code"] == "queue_full" and ninth.json()["error"]["type"] == "rate_limit_error"
    engine.resume()
    for thread in [first, *rest]:
        thread.join(timeout=30)
    assert errors == [] and len(replies) == 8
    asked = [t.messages[-1].content for t in engine.turns]
    assert asked == [f"request {n}" for n in range(8)]  # arrival order


def test_a_client_that_leaves_mid_stream_cancels_its_reply(fake_server):
    engine = fake_server.engine
    engine.answer = " ".join(["word"] * 3000)
    engine.delay_s = 0.01
    response = requests.post(fake_server.url + "/v1/chat/completions", json={
        "model": MODEL, "stream": True, "messages": [{"role": "user", "content": "long"}]}, stream=True, timeout=10)
    lines = response.iter_lines()
    for _ in range(10):
        next(lines)
    response.close()
    assert wait_for(lambda: engine.turns[-1].cancel.is_set() and not engine.busy, timeout=5)
    engine.answer = None
    assert requests.post(fake_server.url + "/v1/chat/completions", json={
        "model": MODEL, "messages": [{"role": "user", "content": "again"}]}, timeout=30).status_code == 200


def test_a_client_that_leaves_before_a_whole_reply_cancels_it(fake_server):
    """Not streamed: the reply stops once the client has closed its connection, not after the whole reply."""
    engine = fake_server.engine
    engine.answer = " ".join(["word"] * 3000)
    engine.delay_s = 0.01
    client = socket.create_connection(("127.0.0.1", fake_server.port), timeout=5)
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "long"}], "max_tokens": 3000,
                       "speculative": False}).encode()  # 30 s of reply
    client.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{fake_server.port}\r\nContent-Type: "
                   f"application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    assert wait_for(lambda: engine.busy and engine.turns)
    client.close()
    assert wait_for(lambda: engine.turns[-1].cancel.is_set() and not engine.busy, timeout=3)
    engine.answer = None
    assert requests.post(fake_server.url + "/v1/chat/completions", json={
        "model": MODEL, "messages": [{"role": "user", "content": "again"}]}, timeout=30).status_code == 200


def test_a_tab_beside_the_api(client, fake_server):
    engine = fake_server.engine
    with WsClient(fake_server.ws_url) as ws:
        engine.holds = [1]
        answered = {}
        api = threading.Thread(target=lambda: answered.update(reply=ask(client, "from the API")))
        api.start()
        assert wait_for(lambda: engine.busy)
        frame = ws.until("engine")[0]
        while not frame["api"]["answering"]:
            frame = ws.until("engine")[0]
        ws.send({"type": "chat", "id": "m1", "text": "from the tab"})
        error = ws.until("error")[0]
        assert error["code"] == "busy" and "API" in error["message"]
        engine.resume()
        api.join(timeout=30)
        assert answered["reply"].choices[0].finish_reason == "stop"
        # The other way: the API waits while the tab's reply streams, then goes.
        engine.holds = [1]
        ws.send({"type": "chat", "id": "m2", "text": "tab first"})
        ws.until("stats", id="m2")
        api = threading.Thread(target=lambda: answered.update(later=ask(client, "API second")))
        api.start()
        assert wait_for(lambda: fake_server.host.api.state()["waiting"] == 1)
        engine.resume()
        assert ws.until("done", id="m2")[0]["finish_reason"] == "stop"
        api.join(timeout=30)
        assert answered["later"].choices[0].finish_reason == "stop"
    assert [t.messages[-1].content for t in engine.turns] == ["from the API", "tab first", "API second"]


def test_a_race_waits_for_the_apis_request_and_the_next_request_for_the_race(client, fake_server):
    engine = fake_server.engine
    answered = {}
    with WsClient(fake_server.ws_url) as ws:
        engine.holds = [1]
        first = threading.Thread(target=lambda: answered.update(first=ask(client, "API first")))
        first.start()
        assert wait_for(lambda: fake_server.host.api.state()["answering"])
        ws.send({"type": "race", "id": "r1", "text": "race second", "runs": 1})
        assert wait_for(lambda: fake_server.host.exclusive.locked())  # the race holds its place, waiting
        second = threading.Thread(target=lambda: answered.update(second=ask(client, "API third")))
        second.start()
        assert wait_for(lambda: fake_server.host.api.state()["waiting"] == 1)
        engine.resume()
        done, frames = ws.until("race_done", id="r1")
        assert done["finish_reason"] == "stop" and not any(f["type"] == "error" for f in frames)
        first.join(timeout=30)
        second.join(timeout=30)
    assert answered["first"].choices[0].finish_reason == answered["second"].choices[0].finish_reason == "stop"
    order = [t.messages[-1].content for t in engine.turns]
    assert order[0] == "API first" and order[-1] == "API third" and set(order[1:-1]) == {"race second"}


def test_the_api_needs_the_token_when_the_page_does(tmp_path):
    app = create_app(FakeEngine(), data_dir=tmp_path, config={"ACCESS_TOKEN": "a-long-token"})
    web = app.test_client()
    refused = web.get("/v1/models")
    assert refused.status_code == 401 and refused.json["error"]["code"] == "invalid_api_key"
    assert web.get("/v1/models", headers={"Authorization": "Bearer a-long-token"}).status_code == 200


def test_a_page_of_another_site_is_refused_in_openais_shape(tmp_path):
    app = create_app(FakeEngine(), data_dir=tmp_path, config={"ALLOWED_HOSTS": {"127.0.0.1:8000"}})
    web = app.test_client()
    foreign = {"Host": "127.0.0.1:8000", "Origin": "http://evil.example"}
    refused = web.get("/v1/models", headers=foreign)
    assert refused.status_code == 403 and set(refused.json) == {"error"}
    error = refused.json["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", None, "forbidden_origin")
    assert "open it at its own address (127.0.0.1:8000)" in error["message"]
    refused = web.get("/api/health", headers=foreign)  # specchat's own API keeps its own shape
    assert refused.status_code == 403 and refused.json["ok"] is False
    assert refused.json["error"]["code"] == "forbidden_origin"
    assert web.get("/v1/models", headers={"Host": "127.0.0.1:8000"}).status_code == 200


def test_api_store_keeps_each_exchange_in_the_history(client, fake_server):
    ask(client, "not kept")
    assert requests.get(fake_server.url + "/api/conversations", timeout=10).json()["conversations"] == []
    fake_server.app.config["API_STORE"] = True
    reply = ask(client, "Kept too")
    (listed,) = requests.get(fake_server.url + "/api/conversations", timeout=10).json()["conversations"]
    assert listed["title"] == "Kept too"
    kept = requests.get(fake_server.url + f"/api/conversations/{listed['id']}", timeout=10).json()["messages"]
    assert [(m["role"], m["content"]) for m in kept] == [("user", "Kept too"),
                                                         ("assistant", reply.choices[0].message.content)]
    assert kept[1]["settings"]["source"] == "api" and kept[1]["finish_reason"] == "stop"


def test_api_store_keeps_a_streamed_exchange_with_its_images(client, fake_server):
    fake_server.app.config["API_STORE"] = True
    chunks = list(client.chat.completions.create(model=MODEL, stream=True, messages=[
        {"role": "user", "content": "first"}, {"role": "assistant", "content": "one"},
        {"role": "user", "content": [{"type": "text", "text": "Keep this"},
                                     {"type": "image_url", "image_url": {"url": png_url()}}]}]))
    answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert wait_for(lambda: requests.get(fake_server.url + "/api/conversations", timeout=10).json()["conversations"])
    (listed,) = requests.get(fake_server.url + "/api/conversations", timeout=10).json()["conversations"]
    kept = requests.get(fake_server.url + f"/api/conversations/{listed['id']}", timeout=10).json()["messages"]
    assert [(m["role"], m["content"]) for m in kept] == [("user", "first"), ("assistant", "one"),
                                                         ("user", "Keep this"), ("assistant", answer)]
    (image,) = kept[2]["images"]
    assert requests.get(fake_server.url + f"/api/attachments/{image}", timeout=10).content == base64.b64decode(
        png_url().split(",")[1])


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False
