"""Images a tool returns, from a real MCP server (tests/support/mcp_servers.py) through a chat reply on the fake
engine: shown to the tab in the ``tool_result`` frame, passed to a model that can see as the tool message's images
(checked as uploads are), a note instead for a blind one, and kept by store, export and import."""

import base64
import hashlib
import io
import json
import sys

import pytest
import requests

from engines.fake import FakeEngine
from tests.support.mcp_servers import PNG
from tests.support.poll import wait_until
from tests.support.servers import LiveServer
from tests.support.wsclient import WsClient
from webapp import ROOT
from webapp.conversations.images import MAX_PER_MESSAGE
from webapp.conversations.tool_message import tool_message
from webapp.tools.results import ToolResult, image_part, text_part

PNG_PART = image_part(base64.b64encode(PNG).decode(), "image/png")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The app on the fake engine with the test MCP server ``local``, its ``image`` tool always allowed."""
    data = tmp_path_factory.mktemp("data")
    server = {"command": sys.executable, "cwd": str(ROOT),
              "args": ["-m", "tests.support.mcp_servers", "--name", "local", "--lifetime", "120"]}
    (data / "mcp.json").write_text(json.dumps({"mcpServers": {"local": server}}))
    live = LiveServer(FakeEngine(delay_s=0.0), data)

    def ready() -> bool:
        servers = requests.get(f"{live.url}/api/tools", timeout=5).json()["servers"]
        return any(s["name"] == "local" and s["state"] == "ready" for s in servers)

    assert wait_until(ready, timeout=30)
    switched = requests.patch(f"{live.url}/api/tools/local/image", json={"always_allow": True}, timeout=5)
    assert switched.status_code == 200, switched.text
    yield live
    live.stop()
    live.app.extensions["tools"].close()


def api(server, method, path, **kwargs):
    return requests.request(method, server.url + "/api" + path, timeout=10, **kwargs)


def draw(served, vision: bool) -> tuple[dict, list[dict], str]:
    """A reply that calls ``image`` on an engine that can see or not: (its done frame, its frames, the chat)."""
    served.engine.vision = vision
    served.engine.tool_calls = [("image", {})]
    try:
        with WsClient(served.ws_url) as ws:
            done, frames = ws.chat("m1", "Draw me something")
            return done, frames, ws.hello["conversation"]
    finally:
        served.engine.vision = True


def test_a_model_that_can_see_gets_the_tools_image_and_the_tab_is_shown_it(served):
    done, frames, _ = draw(served, vision=True)
    assert done["finish_reason"] == "stop"
    (result,) = [f for f in frames if f["type"] == "tool_result"]
    assert result["ok"] and result["content"] == [PNG_PART]
    step = served.engine.turns[-1]
    answered = step.messages[-1]
    assert answered.role == "tool" and answered.content == ""
    (image,) = answered.images
    assert (image.sha256, image.mime, image.width, image.height) == (hashlib.sha256(PNG).hexdigest(), "image/png", 1, 1)
    assert image.data == PNG


def test_a_blind_model_is_told_of_the_image_and_the_reply_goes_on(served):
    done, frames, _ = draw(served, vision=False)
    assert done["finish_reason"] == "stop"
    answered = served.engine.turns[-1].messages[-1]
    assert answered.images == ()
    assert answered.content == "[The tool returned 1 image, which this model cannot see.]"
    answer = "".join(f["text"] for f in frames if f["type"] == "answer")
    assert answer.startswith("The tool said: [The tool returned 1 image")
    (result,) = [f for f in frames if f["type"] == "tool_result"]
    assert result["content"] == [PNG_PART]  # the tab still shows it


def test_the_image_is_stored_exported_and_imported_with_its_call(served):
    _, _, conversation = draw(served, vision=True)
    stored = api(served, "GET", f"/conversations/{conversation}").json()["messages"][-1]
    (call,) = stored["tool_calls"]
    assert call["name"] == "image" and call["content"] == [PNG_PART]
    body = api(served, "GET", f"/conversations/{conversation}/export", params={"format": "json"}).json()
    created = api(served, "POST", "/conversations/import", json=body)
    assert created.status_code == 201, created.text
    copy = api(served, "GET", f"/conversations/{created.json()['id']}").json()
    assert copy["messages"] == body["messages"] and copy["messages"][-1]["tool_calls"][0]["content"] == [PNG_PART]
    markdown = api(served, "GET", f"/conversations/{conversation}/export", params={"format": "markdown"}).text
    assert "> Called `image` (local) with `{}`: done (1 image)" in markdown
    # An export whose tool image was changed is refused, saying where.
    body["messages"][-1]["tool_calls"][0]["content"] = [image_part(base64.b64encode(b"not a png").decode(),
                                                                   "image/png")]
    refused = api(served, "POST", "/conversations/import", json=body)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "bad_import"
    message = refused.json()["error"]["message"]
    assert "tool_calls.0.content" in message and "part 0" in message and "not an image" in message


def png(width: int, height: int) -> str:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 200, 30)).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def test_images_the_checker_refuses_become_notes_for_the_model():
    good = image_part(png(8, 6), "image/jpeg")  # the type is read from the bytes, never the tool's word
    result = ToolResult(True, [text_part("two pictures"), good, image_part("%%%", "image/png"),
                               image_part(base64.b64encode(b"<svg></svg>").decode(), "image/svg+xml")], 3.0)
    message = tool_message("c1", result, vision=True)
    assert message.tool_call_id == "c1" and [(i.mime, i.width, i.height) for i in message.images] == [
        ("image/png", 8, 6)]
    lines = message.content.split("\n")
    assert lines[0] == "two pictures" and len(lines) == 3
    assert lines[1].startswith("[An image the tool returned was left out: its data is not base64")
    assert lines[2].startswith("[An image the tool returned was left out: SVG images are not supported")


def test_images_past_the_per_message_limit_become_a_note():
    parts = [image_part(png(4 + n, 4), "image/png") for n in range(MAX_PER_MESSAGE + 2)]
    message = tool_message("c1", ToolResult(True, parts, 1.0), vision=True)
    assert [i.width for i in message.images] == [4 + n for n in range(MAX_PER_MESSAGE)]
    assert message.content == f"[2 more images the tool returned were left out: at most {MAX_PER_MESSAGE} are " \
                              "passed on.]"
