"""A Hugging Face hub on 127.0.0.1 that serves the resolve URLs huggingface_hub asks for, from local folders,
and records every file asked for (HEAD or GET)."""

from __future__ import annotations

import hashlib
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

RESOLVE = re.compile(r"/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<file>.+)")
COMMIT = "1" * 40


class FakeHub:
    def __init__(self, repos: dict[str, Path]):
        self.repos = repos  # repo id -> folder whose files it serves
        self.requested: list[tuple[str, str]] = []  # (repo id, file)
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self):
                self.answer(body=False)

            def do_GET(self):
                self.answer(body=True)

            def answer(self, body: bool):
                match = RESOLVE.fullmatch(self.path.split("?")[0])
                folder = hub.repos.get(match["repo"]) if match else None
                file = folder / match["file"] if folder else None
                if match:
                    hub.requested.append((match["repo"], match["file"]))
                if file is None or not file.is_file():
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound" if folder else "RepoNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = file.read_bytes()
                self.send_response(200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def log_message(self, *args):  # quiet: the test reads ``requested``
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def files(self, repo: str) -> set[str]:
        return {file for r, file in self.requested if r == repo}
