"""The stored-conversation contract over REST and the websocket with the real MLX engine on the tiny model: chat,
regenerate, edit, select, continue, export and import, and a restart whose next turn has the history.

The engine's own numbers say what it was given: ``prompt_tokens`` of a reply read afresh equals the size of the
stored branch as the engine renders it, and ``cached_tokens`` tells a reused cache from a fresh read."""

import pytest
import requests

from engines import Message
from engines.mlx.engine import MlxEngine
from tests.support.servers import LiveServer
from tests.support.wsclient import WsClient, texts

pytestmark = pytest.mark.slow

SETTINGS = {"reasoning_budget": 12, "max_tokens": 10, "temperature": 0.0}


def start(model, data_dir) -> LiveServer:
    server = LiveServer(MlxEngine(str(model)), data_dir)
    assert server.engine.info().state == "ready", server.engine.info()
    server.host.update_settings(SETTINGS)
    return server


def stop(server: LiveServer) -> None:
    server.stop()
    server.engine.unload()


@pytest.fixture(scope="module")
def mlx_app(tiny_model, tmp_path_factory):
    server = start(tiny_model, tmp_path_factory.mktemp("data"))
    yield server
    stop(server)


def api(server, method, path, **kwargs):
    return requests.request(method, server.url + "/api" + path, timeout=30, **kwargs)


def tree(server, conversation) -> dict:
    response = api(server, "GET", f"/conversations/{conversation}")
    assert response.status_code == 200
    return response.json()


def branch(found: dict, leaf: str) -> list[dict]:
    by_id = {m["id"]: m for m in found["messages"]}
    path = []
    while leaf is not None:
        path.append(by_id[leaf])
        leaf = by_id[leaf]["parent"]
    return path[::-1]


def rendered(server, messages: list[dict], then: str | None = None) -> int:
    """Tokens the engine's fresh render of ``messages`` (then a new user message) takes."""
    said = [Message(m["role"], m["content"], m["thinking"]) for m in messages]
    if then is not None:
        said.append(Message("user", then))
    return server.engine.prompt_size(said, server.host.settings.current)[0]


def send(ws, id: str, frame: dict) -> tuple[dict, list[dict]]:
    ws.send({"id": id, **frame})
    done, frames = ws.until("done", id=id, timeout=120)
    assert done["finish_reason"] in ("stop", "length"), done
    return done, frames


def test_chat_stores_what_streamed_and_the_next_turn_extends_the_cache(mlx_app):
    with WsClient(mlx_app.ws_url) as ws:
        conversation = ws.hello["conversation"]
        first, frames = ws.chat("m1", "What is 2 + 3?")
        second, _ = ws.chat("m2", "And 4 + 5?")
    assert first["finish_reason"] in ("stop", "length") and second["finish_reason"] in ("stop", "length")
    found = tree(mlx_app, conversation)
    question, reply = found["messages"][:2]
    assert (question["role"], question["content"], question["parent"]) == ("user", "What is 2 + 3?", None)
    assert reply["content"] == texts(frames, "answer") and reply["thinking"] == texts(frames, "thinking")
    assert reply["stats"] == first["stats"] and reply["finish_reason"] == first["finish_reason"]
    assert reply["settings"]["engine"] == "mlx" and reply["settings"]["reasoning_budget"] == 12
    assert first["stats"]["prompt_tokens"] == rendered(mlx_app, [], "What is 2 + 3?")
    # The second turn went on from the first one's cache: every token of the first turn was cached.
    assert second["stats"]["cached_tokens"] >= first["stats"]["prompt_tokens"] + first["stats"]["tokens"] - 1
    listed = api(mlx_app, "GET", "/conversations", params={"q": "What"}).json()["conversations"]
    assert conversation in [c["id"] for c in listed]


def test_regenerate_edit_and_select_give_the_engine_each_branch(mlx_app):
    with WsClient(mlx_app.ws_url) as ws:
        conversation = ws.hello["conversation"]
        _, one = ws.chat("m1", "Name a colour.")
        _, two = ws.chat("m2", "Name another.")
        q1, a1, q2 = one[0]["parent"], one[0]["message"], two[0]["parent"]
        # Regenerated twice: the same history read afresh each time, so greedy decoding says the same.
        again, again_frames = send(ws, "r1", {"type": "regenerate"})
        twice, twice_frames = send(ws, "r2", {"type": "regenerate", "message": two[0]["message"]})
        found = tree(mlx_app, conversation)
        history = branch(found, q2)
        assert again["stats"]["prompt_tokens"] == twice["stats"]["prompt_tokens"] == rendered(mlx_app, history)
        assert texts(again_frames, "answer") == texts(twice_frames, "answer")
        assert texts(again_frames, "thinking") == texts(twice_frames, "thinking")
        assert {again_frames[0]["parent"], twice_frames[0]["parent"]} == {q2}

        # An edit of the second question: a new branch after the first reply.
        edited, edited_frames = send(ws, "e1", {"type": "chat", "text": "Name a fruit.", "parent": a1})
        found = tree(mlx_app, conversation)
        assert edited["stats"]["prompt_tokens"] == rendered(mlx_app, branch(found, a1), "Name a fruit.")
        assert found["current"] == edited_frames[0]["message"]

        # Back to the branch through the second question: its newest leaf, and the next turn follows it.
        ws.send({"type": "select", "message": q2})
        selected, _ = ws.until("selected")
        assert selected["current"] == twice_frames[0]["message"]
        third, third_frames = send(ws, "m3", {"type": "chat", "text": "And a third?"})
    found = tree(mlx_app, conversation)
    sent = branch(found, third_frames[0]["parent"])
    assert [m["content"] for m in sent if m["role"] == "user"] == ["Name a colour.", "Name another.", "And a third?"]
    assert sent[3]["id"] == twice_frames[0]["message"]
    assert third["stats"]["prompt_tokens"] == rendered(mlx_app, sent[:-1], "And a third?")
    assert sum(m["parent"] == q2 for m in found["messages"]) == 3 and len(found["messages"]) == 10
    assert branch(found, found["current"])[0]["id"] == q1


def test_continue_goes_on_from_the_replys_own_tokens_in_the_same_message(mlx_app):
    # Block 4 as before auto: its rounds end at the sixth token, so the cache holds no token past the cut (with
    # one it would start afresh) and the reply can go on from its own tokens.
    mlx_app.host.update_settings({"reasoning_budget": 0, "max_tokens": 6, "draft_block_size": 4})
    try:
        with WsClient(mlx_app.ws_url) as ws:
            conversation = ws.hello["conversation"]
            cut, frames = ws.chat("m1", "Tell me a long story about a cat.")
            assert cut["finish_reason"] == "length" and cut["stats"]["answer_tokens"] == 6
            more, more_frames = send(ws, "c1", {"type": "continue"})
    finally:
        mlx_app.host.update_settings(SETTINGS)
    assert more_frames[0]["message"] == frames[0]["message"]
    assert more_frames[0]["continued_from"]["content"] == texts(frames, "answer")
    # The engine went on from the cut reply's own tokens, all of them cached.
    assert more["stats"]["cached_tokens"] >= cut["stats"]["prompt_tokens"] + 6 - 1
    found = tree(mlx_app, conversation)
    assert len(found["messages"]) == 2
    reply = found["messages"][1]
    assert reply["content"] == texts(frames, "answer") + texts(more_frames, "answer") != texts(frames, "answer")
    assert reply["finish_reason"] == more["finish_reason"]


def test_export_and_import_round_trip_and_the_copy_goes_on_with_its_history(mlx_app):
    with WsClient(mlx_app.ws_url) as ws:
        conversation = ws.hello["conversation"]
        ws.chat("m1", "Hello there.")
        ws.chat("m2", "How are you?")
        send(ws, "r1", {"type": "regenerate"})
    export = api(mlx_app, "GET", f"/conversations/{conversation}/export", params={"format": "json"})
    assert export.status_code == 200
    body = export.json()
    created = api(mlx_app, "POST", "/conversations/import", json=body)
    assert created.status_code == 201
    copy_id = created.json()["id"]
    copy = tree(mlx_app, copy_id)
    assert copy_id != conversation and copy["messages"] == body["messages"] and len(copy["messages"]) == 5
    assert (copy["title"], copy["current"]) == (body["title"], body["current"])
    markdown = api(mlx_app, "GET", f"/conversations/{copy_id}/export", params={"format": "markdown"}).text
    assert "How are you?" in markdown and branch(copy, copy["current"])[-1]["content"].strip() in markdown

    with WsClient(f"{mlx_app.ws_url}?conversation={copy_id}") as ws:
        assert ws.hello["resumed"] is True and ws.hello["conversation"] == copy_id
        done, frames = ws.chat("m3", "Goodbye.")
    history = branch(copy, copy["current"])
    assert done["stats"]["prompt_tokens"] == rendered(mlx_app, history, "Goodbye.")
    assert done["stats"]["cached_tokens"] < done["stats"]["prompt_tokens"] // 2  # read afresh: nothing cached
    assert tree(mlx_app, copy_id)["current"] == frames[0]["message"]
    assert len(tree(mlx_app, conversation)["messages"]) == 5  # the original is untouched


def test_after_a_restart_the_next_turn_has_the_stored_history(tiny_model, tmp_path):
    first = start(tiny_model, tmp_path / "data")
    try:
        with WsClient(first.ws_url) as ws:
            conversation = ws.hello["conversation"]
            ws.chat("m1", "Remember the number 7.")
            ws.chat("m2", "And the number 9.")
        before = tree(first, conversation)
    finally:
        stop(first)
    second = start(tiny_model, tmp_path / "data")
    try:
        assert tree(second, conversation) == before
        with WsClient(f"{second.ws_url}?conversation={conversation}") as ws:
            assert ws.hello["resumed"] is True
            done, frames = ws.chat("m3", "Which numbers?")
        history = branch(before, before["current"])
        assert done["finish_reason"] in ("stop", "length")
        assert done["stats"]["prompt_tokens"] == rendered(second, history, "Which numbers?")
        assert rendered(second, history, "Which numbers?") > rendered(second, [], "Which numbers?") + 10
        after = tree(second, conversation)
        assert after["messages"][:4] == before["messages"] and len(after["messages"]) == 6
        assert after["messages"][4]["parent"] == before["current"]
    finally:
        stop(second)
