"""Protocol v1 over a real socket, against the scripted engine."""

import json

import pytest
import requests
from websockets.exceptions import InvalidStatus

from engines.fake import ANSWER
from tests.support.wsclient import WsClient, texts


def test_hello_describes_engine_and_settings(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        assert ws.hello["type"] == "hello" and ws.hello["protocol"] == 1
        assert ws.hello["engine"]["state"] == "ready" and ws.hello["engine"]["name"] == "fake"
        assert ws.hello["settings"]["reasoning_budget"] == 512


def test_chat_streams_thinking_then_answer_then_one_done(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        done, frames = ws.chat("m1")
        kinds = [f["type"] for f in frames]
        assert kinds[0] == "start"
        assert kinds.index("answer") > kinds.index("thinking")
        assert "thinking" not in kinds[kinds.index("answer"):]
        assert kinds.count("done") == 1
        assert texts(frames, "answer").split() == ANSWER.split()
        assert done["finish_reason"] == "stop"
        stats = done["stats"]
        for key in ("ttft_ms", "prompt_tokens", "cached_tokens", "thinking_tokens", "answer_tokens",
                    "tokens", "tok_s", "thinking_ms", "drafted", "accepted", "acceptance"):
            assert key in stats
        assert stats["tokens"] == stats["thinking_tokens"] + stats["answer_tokens"]


def test_live_stats_are_rate_limited(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "settings", "values": {"reasoning_budget": 12}})
        ws.until("settings")
        done, frames = ws.chat("m1")
        stats = [f for f in frames if f["type"] == "stats"]
        assert stats, "expected live stats during a ~200 ms reply"
        elapsed_s = done["stats"]["elapsed_ms"] / 1000
        assert len(stats) <= elapsed_s * 10 + 1


def test_stop_cancels_and_the_next_message_works(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "chat", "id": "m1", "text": "hello"})
        ws.until("thinking")
        ws.send({"type": "stop", "id": "m1"})
        done, _ = ws.until("done", id="m1")
        assert done["finish_reason"] == "cancelled"
        done, _ = ws.chat("m2")
        assert done["finish_reason"] == "stop"
    conversation = fake_server.engine.turns[-1].messages
    assert [m.role for m in conversation] == ["user", "assistant", "user"]


def test_second_chat_while_streaming_is_busy_and_first_is_unharmed(fake_server):
    with WsClient(fake_server.ws_url) as ws, WsClient(fake_server.ws_url) as other:
        ws.send({"type": "chat", "id": "m1", "text": "hello"})
        ws.until("start")
        ws.send({"type": "chat", "id": "m2", "text": "again"})
        other.send({"type": "chat", "id": "o1", "text": "me too"})
        busy, frames = ws.until("error")
        assert busy["code"] == "busy" and busy["id"] == "m2"
        assert other.until("error")[0]["code"] == "busy"
        done, rest = ws.until("done", id="m1")
        assert done["finish_reason"] == "stop"
        assert texts(frames + rest, "answer").split() == ANSWER.split()


@pytest.mark.parametrize(
    "raw, code",
    [
        ("{not json", "bad_json"),
        ('"just a string"', "bad_frame"),
        ('{"text": "no type"}', "bad_type"),
        ('{"type": "warp"}', "bad_type"),
        ('{"type": "chat", "id": 1, "text": "x"}', "bad_frame"),
        ('{"type": "chat", "id": "x", "text": ["a"]}', "bad_frame"),
        ('{"type": "stop", "id": "never-sent"}', "unknown_id"),
        ('{"type": "settings", "values": {"reasoning_budget": -5}}', "invalid_settings"),
        ('{"type": "settings", "values": {"temperature": "hot"}}', "invalid_settings"),
        ('{"type": "settings", "values": {"nope": 1}}', "invalid_settings"),
        ('{"type": "chat", "id": "big", "text": "' + "x" * (1 << 20) + '"}', "too_large"),
    ],
)
def test_bad_input_gets_an_error_and_loses_nothing(fake_server, raw, code):
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1")
        before = requests.get(fake_server.url + "/api/settings").json()["values"]
        ws.send(raw)
        error, _ = ws.until("error")
        assert error["code"] == code and error["message"]
        assert requests.get(fake_server.url + "/api/settings").json()["values"] == before
        done, _ = ws.chat("m2")
        assert done["finish_reason"] == "stop"
    roles = [m.role for m in fake_server.engine.turns[-1].messages]
    assert roles == ["user", "assistant", "user"]


def test_settings_round_trip_reaches_every_tab(fake_server):
    with WsClient(fake_server.ws_url) as ws, WsClient(fake_server.ws_url) as other:
        ws.send({"type": "settings", "values": {"reasoning_budget": 0, "temperature": 0.7}})
        for client in (ws, other):
            values = client.until("settings")[0]["values"]
            assert values["reasoning_budget"] == 0 and values["temperature"] == 0.7
        done, frames = ws.chat("m1")
        assert not [f for f in frames if f["type"] == "thinking"]
        assert done["stats"]["thinking_tokens"] == 0
    assert json.loads((fake_server.app.extensions["specchat"].settings._path).read_text())["reasoning_budget"] == 0


def test_rest_settings_and_cache_reset(fake_server):
    bad = requests.post(fake_server.url + "/api/settings", json={"max_tokens": 0})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_settings"
    ok = requests.post(fake_server.url + "/api/settings", json={"max_tokens": 9})
    assert ok.json()["values"]["max_tokens"] == 9
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1")
        ws.send({"type": "reset_cache"})
        freed = ws.until("cache_reset")[0]["freed"]
        assert freed["entries"] == 1 and freed["prompt_tokens"] > 0
    again = requests.post(fake_server.url + "/api/cache/reset").json()
    assert again == {"ok": True, "freed": {"prompt_tokens": 0, "entries": 0, "bytes": 0}}


def test_new_chat_forgets_the_conversation(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1")
        ws.send({"type": "new_chat"})
        ws.until("new_chat")
        ws.chat("m2")
    assert [m.role for m in fake_server.engine.turns[-1].messages] == ["user"]


def test_engine_failure_mid_stream_ends_with_done_error(fake_server):
    fake_server.engine.fail_after = 3
    with WsClient(fake_server.ws_url) as ws:
        done, frames = ws.chat("m1")
        assert done["finish_reason"] == "error"
        assert done["error"]["code"] == "generation_failed" and "on purpose" in done["error"]["message"]
        assert len(texts(frames, "thinking").split()) == 3
        fake_server.engine.fail_after = None
        assert ws.chat("m2")[0]["finish_reason"] == "stop"


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1:1"},
        {"Host": "evil.example"},
    ],
)
def test_foreign_origin_or_host_is_refused(fake_server, headers):
    with pytest.raises(InvalidStatus) as info:
        WsClient(fake_server.ws_url, additional_headers=headers)
    assert info.value.response.status_code == 403
    assert requests.post(fake_server.url + "/api/cache/reset", headers=headers).status_code == 403
    assert requests.get(fake_server.url + "/api/health", headers=headers).status_code == 403


def test_own_origin_is_accepted(fake_server):
    port = fake_server.server.port
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
        with WsClient(fake_server.ws_url, additional_headers={"Origin": origin}) as ws:
            assert ws.hello["type"] == "hello"


def test_page_and_assets_are_served(fake_server):
    page = requests.get(fake_server.url + "/")
    assert page.status_code == 200 and "<textarea" in page.text
    for src in __import__("re").findall(r'(?:src|href)="(/static/[^"]+)"', page.text):
        assert requests.get(fake_server.url + src).status_code == 200, src
