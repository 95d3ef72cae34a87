"""The conversations' REST routes, and a reply that survives its server being killed mid-stream."""

import re
import signal
import time

import pytest
import requests

from engines.fake import ANSWER, THINKING
from tests.support.wsclient import WsClient, texts
from webapp.conversations.conversation import SAVE_EVERY_S


def chat(server, *texts_, conversation=None):
    """A conversation with one exchange per text; returns its id and each reply's frames."""
    url = f"{server.ws_url}?conversation={conversation}" if conversation else server.ws_url
    with WsClient(url) as ws:
        replies = [ws.chat(f"m{n}", text)[1] for n, text in enumerate(texts_)]
        return ws.hello["conversation"], replies


def api(server, method, path, **kwargs):
    return requests.request(method, server.url + "/api" + path, timeout=10, **kwargs)


def test_list_search_and_page_newest_first(fake_server):
    fox, _ = chat(fake_server, "Tell me about foxes")
    tea, _ = chat(fake_server, "Brewing green tea")
    both, _ = chat(fake_server, "Unrelated", "a fox and its teapot")
    listed = api(fake_server, "GET", "/conversations").json()
    assert [c["id"] for c in listed["conversations"]] == [both, tea, fox]
    assert listed["conversations"][0] == {**listed["conversations"][0], "title": "Unrelated", "message_count": 4}
    assert set(listed["conversations"][0]) == {"id", "title", "created_at", "updated_at", "message_count"}
    page = api(fake_server, "GET", "/conversations", params={"limit": 1}).json()["conversations"]
    rest = api(fake_server, "GET", "/conversations", params={"before": page[0]["updated_at"]}).json()
    assert [c["id"] for c in page + rest["conversations"]] == [both, tea, fox]
    found = api(fake_server, "GET", "/conversations", params={"q": "fox"}).json()["conversations"]
    assert [c["id"] for c in found] == [both, fox]
    found = api(fake_server, "GET", "/conversations", params={"q": "tea"}).json()["conversations"]
    assert [c["id"] for c in found] == [both, tea]  # "tea" is also a prefix of "teapot"
    found = api(fake_server, "GET", "/conversations", params={"q": "green"}).json()["conversations"]
    assert [c["id"] for c in found] == [tea]


@pytest.mark.parametrize("params, code", [({"limit": "0"}, "bad_limit"), ({"limit": "x"}, "bad_limit"),
                                          ({"limit": "201"}, "bad_limit"), ({"before": "yesterday"}, "bad_before")])
def test_bad_list_parameters_are_400_in_the_error_shape(fake_server, params, code):
    response = api(fake_server, "GET", "/conversations", params=params)
    assert response.status_code == 400
    assert response.json()["ok"] is False and response.json()["error"]["code"] == code


def test_read_rename_and_delete(fake_server):
    conversation, (frames,) = chat(fake_server, "Name me")
    got = api(fake_server, "GET", f"/conversations/{conversation}").json()
    assert got["id"] == conversation and got["title"] == "Name me" and got["current"] == frames[0]["message"]
    assert [m["role"] for m in got["messages"]] == ["user", "assistant"]
    renamed = api(fake_server, "PATCH", f"/conversations/{conversation}", json={"title": " Renamed "})
    assert renamed.status_code == 200 and renamed.json()["title"] == "Renamed"
    assert api(fake_server, "PATCH", f"/conversations/{conversation}", json={"title": ""}).status_code == 400
    assert api(fake_server, "GET", f"/conversations/{conversation}").json()["title"] == "Renamed"
    deleted = api(fake_server, "DELETE", f"/conversations/{conversation}")
    assert deleted.status_code == 204 and deleted.content == b""
    assert api(fake_server, "GET", f"/conversations/{conversation}").status_code == 404
    assert api(fake_server, "GET", "/conversations").json()["conversations"] == []


@pytest.mark.parametrize("method, path", [("GET", "/conversations/nope"), ("PATCH", "/conversations/nope"),
                                          ("DELETE", "/conversations/nope"), ("GET", "/conversations/nope/export")])
def test_an_unknown_id_is_404_in_the_error_shape(fake_server, method, path):
    response = api(fake_server, method, path, json={"title": "x"})
    assert response.status_code == 404
    assert response.json() == {"ok": False, "error": {"code": "unknown_conversation", "message": response.json()[
        "error"]["message"]}} and "nope" in response.json()["error"]["message"]


def test_deleting_the_open_conversation_lets_its_tab_go_on_afresh(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        conversation = ws.hello["conversation"]
        ws.chat("m1", "first")
        assert api(fake_server, "DELETE", f"/conversations/{conversation}").status_code == 204
        ws.chat("m2", "second")
    assert [m.content for m in fake_server.engine.turns[-1].messages] == ["second"]
    got = api(fake_server, "GET", f"/conversations/{conversation}").json()
    assert [m["content"] for m in got["messages"]][:1] == ["second"] and got["messages"][0]["parent"] is None


def test_export_json_imports_to_an_equal_tree(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        conversation = ws.hello["conversation"]
        ws.chat("m1", "one")
        ws.chat("m2", "two")
        ws.send({"type": "regenerate", "id": "m3"})
        ws.until("done", id="m3")
    export = api(fake_server, "GET", f"/conversations/{conversation}/export", params={"format": "json"})
    assert export.status_code == 200 and "attachment" in export.headers["Content-Disposition"]
    body = export.json()
    created = api(fake_server, "POST", "/conversations/import", json=body)
    assert created.status_code == 201
    copy = api(fake_server, "GET", f"/conversations/{created.json()['id']}").json()
    assert copy["id"] != conversation
    assert copy["messages"] == body["messages"] and len(copy["messages"]) == 5
    assert (copy["title"], copy["current"]) == (body["title"], body["current"])


def test_export_markdown_is_the_current_branch_with_thinking_folded(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        conversation = ws.hello["conversation"]
        ws.chat("m1", "first question")
        ws.send({"type": "regenerate", "id": "m2"})
        ws.until("done", id="m2")
    md = api(fake_server, "GET", f"/conversations/{conversation}/export", params={"format": "markdown"})
    assert md.status_code == 200 and md.headers["Content-Type"].startswith("text/markdown")
    text = md.text
    assert text.startswith("# first question\n") and text.count("## You") == 1 and text.count("## Assistant") == 1
    assert "<details><summary>Thinking</summary>" in text and THINKING.split()[0] in text
    # The default block is "auto": named with the block it ran most in that reply.
    assert "print('hello')" in text and re.search(r"drafter on · block auto \((\d|off)\) · budget 512", text)
    bad = api(fake_server, "GET", f"/conversations/{conversation}/export", params={"format": "pdf"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_format"


GOOD = {"format": "specchat.conversation", "version": 1, "title": "t", "messages": [
    {"id": "a", "parent": None, "role": "user", "content": "hi", "created_at": "2025-01-01T00:00:00.000000Z"}]}


@pytest.mark.parametrize("body, says", [
    ([1, 2], "Send a conversation export"),
    ({**GOOD, "format": "other"}, "format"),
    ({**GOOD, "messages": []}, "messages"),
    ({**GOOD, "messages": [{**GOOD["messages"][0], "role": "system"}]}, "messages.0.role"),
    ({**GOOD, "messages": [{**GOOD["messages"][0], "parent": "zz"}]}, "not the id of an earlier message"),
    ({**GOOD, "messages": GOOD["messages"] * 2}, "appears twice"),
    ({**GOOD, "messages": [{**GOOD["messages"][0], "created_at": "today"}]}, "messages.0.created_at"),
    ({**GOOD, "messages": [{**GOOD["messages"][0], "extra": 1}]}, "messages.0.extra"),
    ({**GOOD, "current": "zz"}, "current"),
])
def test_a_bad_import_is_400_saying_what_is_wrong_and_creates_nothing(fake_server, body, says):
    response = api(fake_server, "POST", "/conversations/import", json=body)
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_import"
    assert says in response.json()["error"]["message"]
    assert api(fake_server, "GET", "/conversations").json()["conversations"] == []
    assert api(fake_server, "POST", "/conversations/import", json=GOOD).status_code == 201  # the good one does


def test_a_reply_killed_mid_stream_reads_interrupted_with_what_it_had_said(start_server, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECCHAT_FAKE_DELAY_S", "0.2")
    server = start_server("--engine", "fake", data_dir=tmp_path / "data")
    server.wait_ready()
    ws = WsClient(server.ws_url)
    conversation = ws.hello["conversation"]
    ws.send({"type": "settings", "values": {"speculative": False}})  # one word of thinking per 0.2 s
    ws.until("settings")
    ws.send({"type": "chat", "id": "m1", "text": "hello"})
    frames = [ws.until("start")[0]]
    while len(texts(frames, "thinking").split()) < 3:
        frames.append(ws.recv())
    said = texts(frames, "thinking")
    time.sleep(SAVE_EVERY_S + 0.2)  # an autosave after all of ``said`` arrived; the reply is half way
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(timeout=10)
    ws.close()
    assert server.proc.returncode == -signal.SIGKILL
    again = start_server("--engine", "fake", data_dir=tmp_path / "data")
    again.wait_ready()
    reply = api(again, "GET", f"/conversations/{conversation}").json()["messages"][1]
    assert reply["finish_reason"] == "interrupted"
    assert reply["thinking"].startswith(said) and len(reply["thinking"].split()) < len(THINKING.split())
    assert reply["content"] == ""
    with WsClient(f"{again.ws_url}?conversation={conversation}") as back:
        assert back.hello["resumed"] is True
        back.send({"type": "settings", "values": {"reasoning_budget": 0}})
        back.until("settings")
        done, _ = back.chat("m2", "go on")
        assert done["finish_reason"] == "stop"
    sent = api(again, "GET", f"/conversations/{conversation}").json()["messages"]
    assert [m["content"] for m in sent][::2] == ["hello", "go on"] and sent[3]["content"].split() == ANSWER.split()
