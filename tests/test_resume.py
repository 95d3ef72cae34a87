"""A dropped socket loses nothing: the reply goes on and the reconnected tab gets all of it."""

from engines.fake import ANSWER
from tests.support.wsclient import WsClient, texts


def test_reply_survives_a_dropped_socket_and_resumes_whole(fake_server):
    ws = WsClient(fake_server.ws_url)
    conversation = ws.hello["conversation"]
    assert ws.hello["resumed"] is False
    ws.send({"type": "chat", "id": "m1", "text": "hello"})
    ws.until("thinking")
    ws.close()  # mid-reply, as a network blip or a reload would
    with WsClient(f"{fake_server.ws_url}?conversation={conversation}") as back:
        assert back.hello["resumed"] is True and back.hello["conversation"] == conversation
        done, frames = back.until("done", id="m1")
        assert frames[0]["type"] == "start" and frames[0]["id"] == "m1"  # the reply from its start, then live
        assert {f["message"] for f in frames} == {frames[0]["message"]}
        assert done["finish_reason"] == "stop"
        assert texts(frames, "answer").split() == ANSWER.split()
        assert texts(frames, "thinking").strip()
        # The conversation goes on where it was.
        back.chat("m2")
    assert [m.role for m in fake_server.engine.turns[-1].messages] == ["user", "assistant", "user"]


def test_a_finished_reply_is_replayed_once_on_return(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        conversation = ws.hello["conversation"]
        ws.chat("m1")
    with WsClient(f"{fake_server.ws_url}?conversation={conversation}") as back:
        done, frames = back.until("done", id="m1")
        assert [f["type"] for f in frames].count("start") == 1 and done["finish_reason"] == "stop"


def test_unknown_or_attached_conversation_starts_a_new_one(fake_server):
    with WsClient(f"{fake_server.ws_url}?conversation=nope") as ws:
        assert ws.hello["resumed"] is False and ws.hello["conversation"] != "nope"
        with WsClient(f"{fake_server.ws_url}?conversation={ws.hello['conversation']}") as other:
            assert other.hello["resumed"] is False
            assert other.hello["conversation"] != ws.hello["conversation"]


def test_new_chat_starts_another_conversation_and_the_old_one_stays_stored(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        old = ws.hello["conversation"]
        ws.chat("m1")
        ws.send({"type": "new_chat"})
        assert ws.until("new_chat")[0]["conversation"] != old
    with WsClient(f"{fake_server.ws_url}?conversation={old}") as back:
        assert back.hello["resumed"] is True and back.hello["conversation"] == old
        back.chat("m2")
    assert [m.content for m in fake_server.engine.turns[-1].messages][::2] == ["hello", "hello"]
