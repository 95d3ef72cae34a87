"""Stored conversations over the websocket: ids, branches, regenerate, select, races, restarts."""

import time

import pytest

from engines.fake import ANSWER, THINKING, FakeEngine
from tests.support.servers import LiveServer
from tests.support.wsclient import WsClient, texts
from webapp.conversations.conversation import SAVE_EVERY_S


def stored(server, conversation):
    return server.host.store.conversation(conversation)


def test_every_message_is_stored_under_the_conversation_id_the_tab_was_given(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        conversation = ws.hello["conversation"]
        assert stored(fake_server, conversation) is None  # nothing stored before the first message
        done, frames = ws.chat("m1", "What is specchat?")
    reply = frames[0]["message"]
    assert {f["message"] for f in frames} == {reply}  # every frame names the message it writes to
    tree = stored(fake_server, conversation)
    assert tree["title"] == "What is specchat?" and tree["current"] == reply
    user, answer = tree["messages"]
    assert (user["role"], user["content"], user["parent"], user["id"]) == ("user", "What is specchat?", None,
                                                                         frames[0]["parent"])
    assert (answer["id"], answer["parent"], answer["finish_reason"]) == (reply, user["id"], "stop")
    assert answer["content"] == texts(frames, "answer") and answer["thinking"] == texts(frames, "thinking")
    assert answer["stats"] == done["stats"]
    assert answer["settings"] == {"engine": "fake", "model": "fake-model", "drafter": "fake drafter",
                                  "speculative": True, "draft_block_size": "auto", "reasoning_budget": 512,
                                  "temperature": 0.0, "top_p": 1.0, "max_tokens": 1024}


def test_the_reply_is_written_while_it_streams_even_when_the_engine_stalls(fake_server):
    thinking_words = len(THINKING.split())
    fake_server.engine.holds = [thinking_words + 3]  # a stall three words into the answer
    with WsClient(fake_server.ws_url) as ws:
        conversation = ws.hello["conversation"]
        ws.send({"type": "chat", "id": "m1", "text": "hello"})
        frames = [ws.until("start")[0]]
        while len(texts(frames, "answer").split()) < 3:
            frames.append(ws.recv())
        deadline = time.monotonic() + 2 * SAVE_EVERY_S + 0.5
        while time.monotonic() < deadline:
            reply = stored(fake_server, conversation)["messages"][1]
            if reply["content"] == texts(frames, "answer"):
                break
            time.sleep(0.05)
        assert reply["content"] == texts(frames, "answer") and reply["thinking"] == texts(frames, "thinking")
        assert reply["finish_reason"] is None  # still streaming
        fake_server.engine.resume()
        ws.until("done")
    assert stored(fake_server, conversation)["messages"][1]["content"].split() == ANSWER.split()


def test_edit_regenerate_and_select_make_and_walk_branches(fake_server):
    engine = fake_server.engine
    with WsClient(fake_server.ws_url) as ws:
        conversation = ws.hello["conversation"]
        _, first = ws.chat("m1", "one")
        q1, a1 = first[0]["parent"], first[0]["message"]
        _, second = ws.chat("m2", "two")
        q2, a2 = second[0]["parent"], second[0]["message"]
        assert [m.content for m in engine.turns[-1].messages][::2] == ["one", "two"]

        ws.send({"type": "regenerate", "id": "m3"})  # the last reply, answered again
        _, third = ws.until("done", id="m3")
        a2b = third[0]["message"]
        assert third[0]["parent"] == q2 and a2b != a2
        assert [m.role for m in engine.turns[-1].messages] == ["user", "assistant", "user"]

        ws.send({"type": "chat", "id": "m4", "text": "two, edited", "parent": a1})  # an edit of "two"
        _, fourth = ws.until("done", id="m4")
        assert [m.content for m in engine.turns[-1].messages][::2] == ["one", "two, edited"]

        ws.send({"type": "chat", "id": "m5", "text": "one, edited", "parent": None})  # an edit of the first
        _, fifth = ws.until("done", id="m5")
        assert [m.content for m in engine.turns[-1].messages] == ["one, edited"]

        ws.send({"type": "regenerate", "id": "m6", "message": a1})
        _, sixth = ws.until("done", id="m6")
        assert sixth[0]["parent"] == q1
        assert [m.content for m in engine.turns[-1].messages] == ["one"]

        tree = stored(fake_server, conversation)
        parents = {m["id"]: m["parent"] for m in tree["messages"]}
        assert parents[fourth[0]["parent"]] == a1 and parents[fifth[0]["parent"]] is None
        assert parents[sixth[0]["message"]] == q1 and tree["current"] == sixth[0]["message"]
        assert len(tree["messages"]) == 10  # 2 + 2 + 1 + 2 + 2 + 1

        ws.send({"type": "select", "message": q2})  # back to the branch through "two": its newest leaf
        selected, _ = ws.until("selected")
        assert selected == {"type": "selected", "message": q2, "current": a2b}
        assert stored(fake_server, conversation)["current"] == a2b
        ws.chat("m7", "three")
        assert [m.content for m in engine.turns[-1].messages][::2] == ["one", "two", "three"]
        assert engine.turns[-1].messages[3].content == texts(third, "answer")


@pytest.mark.parametrize("frame, code", [
    ({"type": "chat", "id": "x", "text": "hi", "parent": "nope"}, "unknown_message"),
    ({"type": "chat", "id": "x", "text": "hi", "parent": "QUESTION"}, "bad_parent"),
    ({"type": "regenerate", "id": "x", "message": "nope"}, "unknown_message"),
    ({"type": "regenerate", "id": "x", "message": "QUESTION"}, "unknown_message"),
    ({"type": "select", "message": "nope"}, "unknown_message"),
    ({"type": "select"}, "bad_frame"),
    ({"type": "race", "id": "x", "text": "hi", "parent": "nope"}, "unknown_message"),
])
def test_a_bad_or_unknown_message_id_is_an_error_and_changes_nothing(fake_server, frame, code):
    with WsClient(fake_server.ws_url) as ws:
        conversation = ws.hello["conversation"]
        _, frames = ws.chat("m1")
        for key in ("parent", "message"):
            if frame.get(key) == "QUESTION":
                frame[key] = frames[0]["parent"]
        before = stored(fake_server, conversation)
        ws.send(frame)
        error, _ = ws.until("error")
        assert error["code"] == code and error["message"]
        assert stored(fake_server, conversation) == before
        assert ws.chat("m2")[0]["finish_reason"] == "stop"  # the socket is still open


def test_regenerate_with_nothing_to_regenerate_is_an_error(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "regenerate", "id": "r"})
        error, _ = ws.until("error")
        assert error["code"] == "unknown_message" and error["id"] == "r"
        assert stored(fake_server, ws.hello["conversation"]) is None


def test_a_failed_reply_is_stored_as_seen_but_not_sent_to_the_model(fake_server):
    engine = fake_server.engine
    with WsClient(fake_server.ws_url) as ws:
        conversation = ws.hello["conversation"]
        ws.chat("m1", "first")
        engine.fail_after = 3
        done, frames = ws.chat("m2", "second")
        assert done["finish_reason"] == "error"
        engine.fail_after = None
        ws.chat("m3", "third")
    failed = stored(fake_server, conversation)["messages"][3]
    assert failed["finish_reason"] == "error" and failed["thinking"] == texts(frames, "thinking") != ""
    assert failed["stats"]["error"]["code"] == "generation_failed"
    sent = engine.turns[-1].messages
    assert [(m.role, m.content) for m in sent if m.role == "user"] == [("user", "first"), ("user", "second"),
                                                                       ("user", "third")]
    assert [m.role for m in sent] == ["user", "assistant", "user", "user"]
    # The engine was told the history changed (a new engine conversation), so no cache is reused for it.
    assert engine.turns[-1].conversation_id != engine.turns[-2].conversation_id


def test_a_race_is_stored_like_a_reply(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        conversation = ws.hello["conversation"]
        _, first = ws.chat("m1", "before the race")
        ws.send({"type": "race", "id": "r1", "text": "race me", "parent": first[0]["message"]})
        summary, frames = ws.until("race_done", id="r1")
        reply = summary["message"]
        assert {f["message"] for f in frames if f.get("id") == "r1"} == {reply}
        ws.chat("m2", "after the race")
    tree = stored(fake_server, conversation)
    by_id = {m["id"]: m for m in tree["messages"]}
    raced = by_id[reply]
    on = [f for f in frames if f.get("lane") == "on"]
    assert raced["content"] == texts(on, "answer") and raced["finish_reason"] == "stop"
    assert raced["settings"]["speculative"] is True and raced["stats"] == summary["on"]["stats"]
    assert by_id[raced["parent"]]["content"] == "race me"
    sent = fake_server.engine.turns[-1].messages
    assert [m.content for m in sent][::2] == ["before the race", "race me", "after the race"]
    assert sent[3].content == raced["content"]


def test_after_a_restart_a_stored_conversation_opens_and_its_next_turn_has_the_history(tmp_path):
    first = LiveServer(FakeEngine(delay_s=0.001), tmp_path / "data")
    try:
        with WsClient(first.ws_url) as ws:
            conversation = ws.hello["conversation"]
            _, frames = ws.chat("m1", "remember me")
    finally:
        first.stop()
    second = LiveServer(FakeEngine(delay_s=0.001), tmp_path / "data")
    try:
        with WsClient(f"{second.ws_url}?conversation={conversation}") as ws:
            assert ws.hello["resumed"] is True and ws.hello["conversation"] == conversation
            _, next_frames = ws.chat("m2", "and now?")
        sent = second.engine.turns[-1].messages
        assert [(m.role, m.content) for m in sent] == [
            ("user", "remember me"), ("assistant", texts(frames, "answer")), ("user", "and now?")]
        assert sent[1].reasoning == texts(frames, "thinking")
        assert next_frames[0]["parent"] and stored(second, conversation)["messages"][2]["parent"] == frames[0]["message"]
    finally:
        second.stop()


def test_continue_goes_on_with_a_stopped_reply_in_the_same_message(fake_server):
    thinking_words = len(THINKING.split())
    fake_server.engine.holds = [thinking_words + 3]  # hold three words into the answer, then stop there
    with WsClient(fake_server.ws_url) as ws:
        conversation = ws.hello["conversation"]
        ws.send({"type": "chat", "id": "m1", "text": "hello"})
        start = ws.until("start")[0]
        frames = [start]
        while len(texts(frames, "answer").split()) < 3:
            frames.append(ws.recv())
        ws.send({"type": "stop", "id": "m1"})  # the held reply ends at the stop
        first, _ = ws.until("done", id="m1")
        assert first["finish_reason"] == "cancelled"
        partial = stored(fake_server, conversation)["messages"][1]
        assert partial["finish_reason"] == "cancelled" and 0 < len(partial["content"].split()) < len(ANSWER.split())
        ws.send({"type": "continue", "id": "m2"})
        _, later = ws.until("done", id="m2")
    starts = [f for f in later if f["type"] == "start"]
    assert starts and starts[0]["message"] == start["message"]  # the same message, not a new one
    assert later[-1]["finish_reason"] == "stop"
    tree = stored(fake_server, conversation)
    assert len(tree["messages"]) == 2  # nothing added: the reply grew
    reply = tree["messages"][1]
    assert reply["finish_reason"] == "stop" and reply["content"].split() == ANSWER.split()
    assert reply["content"] == partial["content"] + texts(later, "answer")
    assert fake_server.engine.turns[-1].continued and fake_server.engine.turns[-1].messages[-1].content == partial["content"]


def test_continue_refuses_a_finished_reply(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1", "hello")
        ws.send({"type": "continue", "id": "m2"})
        error, _ = ws.until("error")
    assert error["code"] == "cannot_continue" and error["id"] == "m2"
