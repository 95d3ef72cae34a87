"""An OpenAI-compatible peer on a real loopback socket whose next chat request fails as a test tells it to.

``fault``: "ok" (a streamed reply), "500" (an error status with a JSON body), "hang" (headers never come),
"close" (two deltas, then the connection closes mid-stream), "garbage" (an event stream of junk).
``refuse()`` closes the listening socket, so connections are refused; ``accept()`` opens it again on the same
port. Every wait is bounded, and stop() releases anything held.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fault-model"
ANSWER = ["Hello", " from", " the", " peer."]
HANG_S = 30.0  # the longest a hanging request holds its connection


def send_json(handler: BaseHTTPRequestHandler, status: int, body: dict) -> None:
    """A whole JSON response from a test server's handler."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class FaultPeer:
    def __init__(self):
        self.fault = "ok"
        self.port = 0
        self.chats = 0  # chat requests received
        self.released = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self.accept()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def accept(self) -> None:
        peer = self

        class Handler(_Handler):
            owner = peer

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def refuse(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def stop(self) -> None:
        self.released.set()
        self.refuse()


class _Handler(BaseHTTPRequestHandler):
    owner: FaultPeer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        peer = self.owner
        peer.chats += 1
        fault = peer.fault
        if fault == "500":
            self._json(500, {"error": {"message": "the model crashed", "type": "server_error"}})
            return
        if fault == "hang":
            peer.released.wait(HANG_S)
            self.close_connection = True
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if fault == "garbage":
            self.wfile.write(b"data: {not json at all\n\n\x00\xff\xfe garbage\n\ndata: [1, 2\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            return
        pieces = ANSWER[:2] if fault == "close" else ANSWER
        for text in pieces:
            self._event({"id": "c1", "object": "chat.completion.chunk", "model": MODEL,
                         "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})
        if fault == "close":
            self.wfile.flush()
            return  # the connection closes with no finish and no [DONE]
        self._event({"id": "c1", "object": "chat.completion.chunk", "model": MODEL,
                     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        self.wfile.write(b"data: [DONE]\n\n")

    def _event(self, body: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(body).encode() + b"\n\n")
        self.wfile.flush()

    def _json(self, status: int, body: dict) -> None:
        send_json(self, status, body)
