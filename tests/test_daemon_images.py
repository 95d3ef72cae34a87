"""Images on the daemon engines: ``image_url`` parts with data URLs (a tool's images in a user message after its
result), what a server's /v1/models says about vision, a server that refuses images, and MTPLX with and without a
vision tower (the fake daemon)."""

import base64
import hashlib
import io
import json
import time
from http.server import BaseHTTPRequestHandler

import pytest
import requests

from engines import Answer, EngineError, Image, Message, ToolCall, Turn
from engines.mtplx import MtplxEngine
from engines.openai_compat import OpenAICompatEngine
from engines.sse import http_error
from engines.tool_calls import TOOL_IMAGES
from tests.support.engine_runs import OPTIONS, run, text
from tests.support.fake_mtplx import FakeDaemon
from tests.support.fault_peer import send_json
from tests.support.peers import serving

# llama.cpp's words for an image sent to a model loaded without its projector.
LLAMA_CPP_REFUSAL = "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"


def png(width: int, height: int, color: tuple[int, int, int]) -> Image:
    from PIL import Image as Pillow

    buffer = io.BytesIO()
    Pillow.new("RGB", (width, height), color).save(buffer, "PNG")
    data = buffer.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    return Image(digest[:16], digest, "image/png", width, height, data)


RED, BLUE = png(64, 48, (200, 30, 30)), png(32, 32, (20, 40, 220))


def image_turn(*messages: Message, options=OPTIONS) -> Turn:
    messages = messages or (Message("user", "What is in the picture?", images=(RED,)),)
    return Turn(id=f"t{time.monotonic_ns()}", conversation_id="c-images", messages=list(messages), options=options)


def decoded(url: str) -> bytes:
    header, _, payload = url.partition(",")
    assert header == "data:image/png;base64"
    return base64.b64decode(payload)


class Scripted:
    """An OpenAI-compatible server that records each chat body and answers as ``mode`` says: ``ok`` (a short
    reply), ``refuse`` (400 with llama.cpp's refusal), ``error_chunk`` (mlx-vlm's error event before any token)."""

    def __init__(self, mode: str = "ok", model: dict | None = None):
        outer = self
        self.bodies: list[dict] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                send_json(self, 200, {"object": "list", "data": [model or {"id": "scripted"}]})

            def do_POST(self):
                outer.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                if mode == "refuse":
                    return send_json(self, 400, {"error": {"code": 400, "message": LLAMA_CPP_REFUSAL,
                                                           "type": "invalid_request_error"}})
                chunks = ([{"error": "[reshape] Cannot reshape array of size 24576 into shape (20,3,2,14,14)."}]
                          if mode == "error_chunk" else
                          [{"choices": [{"index": 0, "delta": {"content": "A red square."}, "finish_reason": None}]},
                           {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 90, "completion_tokens": 4, "total_tokens": 94}}])
                data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())

        self.handler = Handler


@pytest.fixture
def scripted(request):
    """(the server, an OpenAI engine loaded against it); ``request.param``: Scripted's arguments."""
    server = Scripted(**getattr(request, "param", {}))
    with serving(server.handler) as url:
        engine = OpenAICompatEngine(url + "/v1", stall_s=5.0)
        engine.load(OPTIONS)
        yield server, engine
        engine.unload()


def test_images_go_as_image_url_parts_with_their_bytes(scripted):
    server, engine = scripted
    assert engine.info().vision is True  # the server does not say: images are sent
    done, events = run(engine, image_turn(
        Message("user", "Compare these.", images=(RED, BLUE)),
        Message("assistant", "The first is red."),
        Message("user", "And this one?", images=(BLUE,)),
        Message("assistant", "Blue."),
        Message("user", "Thanks"),
    ))
    assert (done.finish_reason, text(events, Answer)) == ("stop", "A red square.")
    system, first, reply, second, _, last = server.bodies[-1]["messages"]
    assert system == {"role": "system", "content": OPTIONS.system_prompt}
    assert first["role"] == "user" and [p["type"] for p in first["content"]] == ["text", "image_url", "image_url"]
    assert first["content"][0] == {"type": "text", "text": "Compare these."}
    assert [decoded(p["image_url"]["url"]) for p in first["content"][1:]] == [RED.data, BLUE.data]
    assert second["content"][0] == {"type": "text", "text": "And this one?"}
    assert decoded(second["content"][1]["image_url"]["url"]) == BLUE.data
    # Messages without images stay plain strings.
    assert reply == {"role": "assistant", "content": "The first is red."} and last == {"role": "user",
                                                                                        "content": "Thanks"}


def test_an_image_without_text_is_sent_alone(scripted):
    server, engine = scripted
    run(engine, image_turn(Message("user", "", images=(RED,))))
    assert server.bodies[-1]["messages"][-1]["content"] == [{"type": "image_url",
                                                             "image_url": {"url": RED.data_url()}}]


def test_a_tools_images_go_in_a_user_message_after_the_tool_messages(scripted):
    """OpenAI's API takes only text in a tool message: the images follow the results, in their order."""
    server, engine = scripted
    calls = (ToolCall("c1", "camera"), ToolCall("c2", "clock"), ToolCall("c3", "camera"))
    run(engine, image_turn(
        Message("user", "What do the cameras see?"),
        Message("assistant", "", tool_calls=calls),
        Message("tool", "front door", images=(RED, BLUE), tool_call_id="c1"),
        Message("tool", "noon", tool_call_id="c2"),
        Message("tool", "", images=(BLUE,), tool_call_id="c3"),
    ))
    *_, said, first, second, third, shown = server.bodies[-1]["messages"]
    assert [c["id"] for c in said["tool_calls"]] == ["c1", "c2", "c3"]
    assert first == {"role": "tool", "tool_call_id": "c1", "content": "front door"}
    assert second == {"role": "tool", "tool_call_id": "c2", "content": "noon"}
    assert third == {"role": "tool", "tool_call_id": "c3", "content": ""}
    assert shown["role"] == "user" and shown["content"][0] == {"type": "text", "text": TOOL_IMAGES}
    assert [decoded(p["image_url"]["url"]) for p in shown["content"][1:]] == [RED.data, BLUE.data, BLUE.data]


@pytest.mark.parametrize("scripted", [{"mode": "refuse"}], indirect=True)
def test_a_server_that_refuses_images_says_so_in_its_own_words(scripted):
    server, engine = scripted
    done, _ = run(engine, image_turn())
    assert (done.finish_reason, done.error_code) == ("error", "images_refused")
    assert LLAMA_CPP_REFUSAL in done.error_message
    assert "refused the message with its images" in done.error_message
    assert "load one that can there" in done.error_message and "remove the images" in done.error_message
    # The user's text went out with the images: the app keeps it, and the server saw it.
    assert server.bodies[-1]["messages"][-1]["content"][0] == {"type": "text", "text": "What is in the picture?"}


@pytest.mark.parametrize("status", [400, 413, 415, 422])
def test_any_refusal_of_a_request_with_images_names_them(status):
    refusal = http_error(status, "the server's words", "The server", images=True)
    assert refusal.code == "images_refused"
    assert refusal.message.startswith("The server refused the message with its images (the server's words).")
    assert http_error(status, "the server's words", "The server").code != "images_refused"


@pytest.mark.parametrize("scripted", [{"mode": "error_chunk"}], indirect=True)
def test_an_error_event_before_any_token_on_images_says_what_to_try(scripted):
    _, engine = scripted
    done, _ = run(engine, image_turn())
    assert (done.finish_reason, done.error_code) == ("error", "server_error")
    assert "Cannot reshape array of size 24576" in done.error_message
    assert "If its model cannot see images, load one that can there" in done.error_message


@pytest.mark.parametrize("scripted", [{"model": {"id": "m", "supports_vision": False}},
                                      {"model": {"id": "m", "modalities": {"input": ["text"], "output": ["text"]}}}],
                         indirect=True)
def test_a_server_that_says_its_model_cannot_see_gets_no_images(scripted):
    server, engine = scripted
    info = engine.info()
    assert info.vision is False and "says its model m cannot see images" in info.vision_note
    with pytest.raises(EngineError) as refused:
        engine.stream(image_turn())
    assert refused.value.code == "no_vision" and refused.value.message == info.vision_note
    assert not server.bodies
    assert run(engine)[0].finish_reason == "stop"  # text goes on


@pytest.mark.parametrize("scripted", [{"model": {"id": "m", "supports_vision": True}},
                                      {"model": {"id": "m", "modalities": {"input": ["text", "image"]}}}],
                         indirect=True)
def test_a_server_that_says_its_model_sees(scripted):
    _, engine = scripted
    assert engine.info().vision is True and engine.info().vision_note is None


@pytest.fixture(scope="module")
def seeing():
    daemon = FakeDaemon("--model", "org/Qwen3.5-9B-MTPLX", env={"FAKE_MTPLX_VISION": "1"})
    yield daemon
    daemon.stop()


@pytest.fixture(scope="module")
def blind():
    daemon = FakeDaemon("--model", "org/Qwen3.8-27B-MTPLX")
    yield daemon
    daemon.stop()


def mtplx(daemon) -> MtplxEngine:
    engine = MtplxEngine(daemon.url)
    engine.load(OPTIONS)
    assert engine.info().state == "ready"
    return engine


def test_mtplx_with_a_vision_model_sends_the_images(seeing):
    engine = mtplx(seeing)
    try:
        assert engine.info().vision is True and engine.info().vision_note is None
        plain, _ = run(engine, image_turn(Message("user", "What is in the picture?")))
        done, events = run(engine, image_turn(Message("user", "What is in the picture?", images=(RED, BLUE))))
        assert done.finish_reason == "stop", done.error_message
        assert text(events, Answer) == "Hello! How can I help?"
        request = seeing.state()["requests"][-1]
        assert request["images"] == [RED.sha256, BLUE.sha256]  # the bytes arrived whole, in order
        assert request["body"]["generation_mode"] == "mtp"
        assert done.stats["prompt_tokens"] == plain.stats["prompt_tokens"] + 2 * 64  # the fake's tokens per image
    finally:
        engine.unload()


def test_mtplx_takes_images_only_while_drafting(seeing):
    engine = mtplx(seeing)
    try:
        sent = len(seeing.state()["requests"])
        with pytest.raises(EngineError) as refused:
            engine.stream(image_turn(options=OPTIONS.updated({"speculative": False})))
        assert refused.value.code == "invalid_settings" and "Turn the drafter on" in refused.value.message
        assert len(seeing.state()["requests"]) == sent
    finally:
        engine.unload()


def test_mtplx_without_a_vision_model_refuses_images_up_front(blind):
    engine = mtplx(blind)
    try:
        info = engine.info()
        assert info.vision is False
        assert "mtplx-qwen38-27b-mtplx" in info.vision_note and "cannot see images" in info.vision_note
        assert "Load a vision-capable model in MTPLX" in info.vision_note
        sent = len(blind.state()["requests"])
        with pytest.raises(EngineError) as refused:
            engine.stream(image_turn())
        assert refused.value.code == "no_vision" and refused.value.message == info.vision_note
        assert len(blind.state()["requests"]) == sent
    finally:
        engine.unload()


@pytest.mark.parametrize("vision, mode, url, message", [
    (False, "mtp", RED.data_url(), "this model has no vision tower; image content is not supported for it"),
    (True, "ar", RED.data_url(), "image content requires MTP generation mode"),
    (True, "mtp", "data:image/png," + "x" * 8, "image data URL must be base64 encoded"),
    (True, "mtp", "file:///etc/passwd", "image_url must be a data: URL or an http(s) URL"),
])
def test_the_fake_daemon_refuses_images_as_mtplx_does(seeing, blind, vision, mode, url, message):
    daemon = seeing if vision else blind
    models = requests.get(daemon.url + "/v1/models", timeout=5).json()["data"][0]
    assert models["supports_vision"] is vision and ("image" in models["modalities"]["input"]) is vision
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"},
                                                      {"type": "image_url", "image_url": {"url": url}}]}],
            "generation_mode": mode, "stream": True}
    response = requests.post(daemon.url + "/v1/chat/completions", json=body, timeout=5)
    assert response.status_code == 400
    assert response.json()["error"] == {"message": message, "type": "invalid_request_error",
                                        "code": "HTTPException", "param": None}
