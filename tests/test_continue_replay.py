"""A tab that comes back during a continuation (`continue`) gets the whole reply: the continuation's `start`
carries what the reply said before it, and the stored message is that text plus the continuation."""

from engines.fake import ANSWER, THINKING
from tests.support.wsclient import WsClient, texts


def stopped_reply(server, ws, words: int) -> dict:
    """A reply stopped ``words`` words into its answer; returns its stored message."""
    server.engine.holds = [len(THINKING.split()) + words]
    ws.send({"type": "chat", "id": "m1", "text": "hello"})
    frames = [ws.until("start", id="m1")[0]]
    while len(texts(frames, "answer").split()) < words:
        frames.append(ws.recv())
    ws.send({"type": "stop", "id": "m1"})
    assert ws.until("done", id="m1")[0]["finish_reason"] == "cancelled"
    return server.host.store.conversation(ws.hello["conversation"])["messages"][1]


def test_a_tab_back_mid_continuation_gets_the_reply_whole(fake_server):
    engine = fake_server.engine
    ws = WsClient(fake_server.ws_url)
    conversation = ws.hello["conversation"]
    before = stopped_reply(fake_server, ws, 3)
    engine.holds = [2]  # the continuation pauses two words in, while the tab is away
    ws.send({"type": "continue", "id": "m2"})
    start, _ = ws.until("start", id="m2")
    assert start["continued_from"] == {"content": before["content"], "thinking": before["thinking"]}
    seen = [start]
    while len(texts(seen, "answer").split()) < 2:
        seen.append(ws.recv())
    ws.close()

    with WsClient(f"{fake_server.ws_url}?conversation={conversation}") as back:
        replayed, _ = back.until("start", id="m2")
        assert replayed == start  # with the text before the continuation
        engine.resume()
        done, frames = back.until("done", id="m2")
    assert done["finish_reason"] == "stop"
    whole = start["continued_from"]["content"] + texts(frames, "answer")
    assert whole.split() == ANSWER.split()
    reply = fake_server.host.store.conversation(conversation)["messages"][1]
    assert reply["id"] == start["message"] and reply["content"] == whole
    assert reply["thinking"] == before["thinking"] != ""


def test_a_new_reply_says_nothing_of_a_continuation(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        _, frames = ws.chat("m1", "hello")
    assert "continued_from" not in frames[0]
