"""HTTP servers on a loopback port, each in a thread of this process, standing in for the servers specchat talks
to: any handler (``serving``), a web server that is not an OpenAI-compatible one (``HtmlHandler``), and one that
answers /health like MTPLX and /v1/models like an OpenAI server (``Daemon``)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.fault_peer import send_json


@contextmanager
def serving(handler):
    """``handler`` on a loopback port: its base URL, the server stopped on leaving."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class HtmlHandler(BaseHTTPRequestHandler):
    """A web server that is not an OpenAI-compatible one: HTML everywhere."""

    def log_message(self, *args):
        pass

    def _send(self, data: bytes, content_type: str):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _html(self):
        self._send(b"<html><body>It works!</body></html>", "text/html")

    do_GET = do_POST = _html


class Daemon:
    """A server on a loopback port answering /health like MTPLX and /v1/models like an OpenAI server."""

    def __init__(self, health_ok: bool = True, served: list[str] | None = None):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/health":
                    self.reply(200, {"ok": outer.health_ok})
                elif self.path == "/v1/models":
                    self.reply(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in outer.served]})
                else:
                    self.reply(404, {"error": "no such route"})

            def reply(self, status, body):
                send_json(self, status, body)

            def log_message(self, *args):
                pass

        self.health_ok = health_ok
        self.served = served or []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

