"""The internals of other libraries that specchat leans on, checked by name so that an upgrade fails here, in CI,
with a message naming what moved, and not at a user's. pyproject.toml pins each of these libraries exactly."""

import base64
import os
import socket
import threading
from importlib.metadata import version

import httpx
import pytest
import simple_websocket

from webapp.web.serving import ReaderThread

PINNED = {"simple-websocket": "1.1.0", "httpcore": "1.0.9", "waitress": "3.0.2"}


@pytest.mark.parametrize("package", sorted(PINNED))
def test_installed_version_is_the_one_the_internals_were_read_from(package):
    assert version(package) == PINNED[package], (
        f"{package} {version(package)} is installed, but specchat uses internals read from {PINNED[package]}: "
        f"re-check them (this file names each) and update the pin in pyproject.toml")


def _server_socket_pair():
    ours, theirs = socket.socketpair()
    key = base64.b64encode(os.urandom(16)).decode()
    environ = {"werkzeug.socket": ours, "HTTP_HOST": "127.0.0.1", "HTTP_UPGRADE": "websocket",
               "HTTP_CONNECTION": "Upgrade", "HTTP_SEC_WEBSOCKET_KEY": key, "HTTP_SEC_WEBSOCKET_VERSION": "13"}
    return environ, ours, theirs


def test_simple_websocket_server_has_what_the_reader_thread_and_chat_use():
    """webapp/web/serving.py's ReaderThread reads ``target.__self__`` and sets ``connected`` and ``event``;
    webapp/web/chat.py shuts down ``sock`` to cut off a tab that stopped reading."""
    environ, ours, theirs = _server_socket_pair()
    try:
        ws = simple_websocket.Server(environ, thread_class=ReaderThread)
        for name in ("connected", "event", "sock", "thread"):
            assert hasattr(ws, name), f"simple_websocket.Server has no '{name}' any more"
        assert ws.sock is ours, "simple_websocket.Server.sock is no longer the connection's socket"
        assert isinstance(ws.thread, ReaderThread), "simple-websocket ignores thread_class"
        assert ws.thread._ws is ws, "the reader thread's target is no longer a method of the Server"
        assert ws.connected is True
        theirs.shutdown(socket.SHUT_RDWR)  # the peer leaves: the reader ends and must wake the route
        ws.thread.join(timeout=5)
        assert not ws.thread.is_alive()
        assert ws.connected is False and ws.event.is_set()
    finally:
        ours.close()
        theirs.close()


def test_httpcore_exposes_what_stop_uses_to_interrupt_a_request():
    """engines/sse.py shuts down the socket of a streaming response (``extensions["network_stream"]``) and of
    a request still waiting for headers (the ``trace`` event ``connection.connect_tcp.complete``)."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    events: dict[str, object] = {}

    def trace(event: str, info: dict) -> None:
        events[event] = info

    try:
        with httpx.Client(timeout=5) as client:
            request = client.build_request("GET", f"http://127.0.0.1:{server.server_address[1]}/")
            request.extensions = {**request.extensions, "trace": trace}
            response = client.send(request, stream=True)
            try:
                assert "connection.connect_tcp.complete" in events, (
                    f"httpcore no longer traces connection.connect_tcp.complete (saw {sorted(events)})")
                connected = events["connection.connect_tcp.complete"]["return_value"]
                assert isinstance(connected.get_extra_info("socket"), socket.socket)
                stream = response.extensions.get("network_stream")
                assert stream is not None, "httpx responses no longer carry extensions['network_stream']"
                assert isinstance(stream.get_extra_info("socket"), socket.socket)
                assert response.read() == b"ok"
            finally:
                response.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_mlx_vlm_has_what_images_use(vision_model):
    """engines/mlx/images.py, qwen35.py and vlm_loop.py: Qwen3-VL's image processor (``num_image_tokens``,
    ``merge_size``, ``patch_size``, called on a list of images for ``pixel_values`` and ``image_grid_thw``), the
    model's ``vision_tower`` (None when the tower was left out) and ``config.image_token_id``, the language
    model's ``get_rope_index``, ``apply_chat_template``'s ``num_images`` with image parts, and ``stream_generate``
    taking ``pixel_values``, ``image_grid_thw`` and ``cached_image_features`` beside ``input_ids``."""
    import inspect

    import mlx.core as mx
    import numpy as np
    from mlx_vlm import load, stream_generate
    from mlx_vlm.prompt_utils import apply_chat_template
    from PIL import Image

    model, processor = load(str(vision_model))[:2]
    images = processor.image_processor
    for name in ("num_image_tokens", "merge_size", "patch_size"):
        assert hasattr(images, name), f"mlx-vlm's Qwen3-VL image processor has no '{name}' any more"
    out = images([Image.new("RGB", (140, 100))])
    assert set(out) >= {"pixel_values", "image_grid_thw"}
    grid = mx.array(out["image_grid_thw"], dtype=mx.int32)
    tokens = int(np.prod(out["image_grid_thw"][0])) // images.merge_size ** 2
    assert images.num_image_tokens(100, 140) == tokens
    assert model.vision_tower is not None and isinstance(model.config.image_token_id, int)
    assert "grid_thw" in inspect.signature(model.vision_tower.__call__).parameters
    features = model.vision_tower(mx.array(out["pixel_values"]).astype(mx.bfloat16), grid)[0]
    assert features.shape[0] == tokens, "the vision tower no longer returns one feature per image token"
    text = apply_chat_template(processor, {"model_type": "qwen3_5"},
                               [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "hi"}]}],
                               num_images=1)
    assert text.count("<|image_pad|>") == 1
    ids = processor.tokenizer.encode(text, add_special_tokens=False)
    pad = model.config.image_token_id
    ids = [t for token in ids for t in ([token] * tokens if token == pad else [token])]
    positions, delta = model.language_model.get_rope_index(mx.array([ids]), grid)
    assert positions.shape == (3, 1, len(ids)) and delta.size == 1
    chunks = list(stream_generate(model, processor, "", input_ids=mx.array([ids]), max_tokens=2,
                                  pixel_values=mx.array(out["pixel_values"]), image_grid_thw=grid,
                                  cached_image_features=features))
    assert chunks[-1].finish_reason is not None


def test_mlx_vlm_has_what_tool_calls_use():
    """engines/mlx/tool_markup.py: mlx-vlm's registry names the parser for a Qwen 3.5 chat template from the
    processor's tokenizer, and that parser has the markers and ``parse_tool_call``, which types values by the schema."""
    from types import SimpleNamespace

    from mlx_vlm.tools import _infer_tool_parser_from_processor, load_tool_module

    template = "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"
    name = _infer_tool_parser_from_processor(SimpleNamespace(tokenizer=SimpleNamespace(chat_template=template)))
    assert name == "qwen3_coder", f"mlx-vlm now reads Qwen 3.5's tool calls with {name!r}"
    parser = load_tool_module(name)
    assert (parser.tool_call_start, parser.tool_call_end) == ("<tool_call>", "</tool_call>")
    tools = [{"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}}}]
    parsed = parser.parse_tool_call("<function=add>\n<parameter=a>\n4\n</parameter>\n<parameter=b>\n4\n</parameter>\n"
                                    "</function>", tools)
    assert parsed == {"name": "add", "arguments": {"a": 4, "b": "4"}}
    with pytest.raises(ValueError):
        parser.parse_tool_call('{"name": "add"}', tools)
