"""A small synchronous websocket client for protocol v1, with bounded waits."""

from __future__ import annotations

import json
import time

from websockets.sync.client import connect


class WsClient:
    def __init__(self, url: str, **kwargs):
        self._connection = connect(url, open_timeout=10, max_size=None, **kwargs)
        self.ws = self._connection.__enter__()
        self.hello = self.recv()

    def send(self, frame: dict | str) -> None:
        self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))

    def recv(self, timeout: float = 30) -> dict:
        return json.loads(self.ws.recv(timeout=timeout))

    def until(self, kind: str, timeout: float = 60, id: str | None = None) -> tuple[dict, list[dict]]:
        """Frames up to and including the first of ``kind`` (for ``id`` when given)."""
        seen, deadline = [], time.monotonic() + timeout
        while True:
            frame = self.recv(timeout=max(0.1, deadline - time.monotonic()))
            seen.append(frame)
            if frame["type"] == kind and (id is None or frame.get("id") == id):
                return frame, seen

    def chat(self, id: str, text: str = "hello", timeout: float = 120) -> tuple[dict, list[dict]]:
        self.send({"type": "chat", "id": id, "text": text})
        return self.until("done", timeout=timeout, id=id)

    def close(self) -> None:
        self._connection.__exit__(None, None, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def texts(frames: list[dict], kind: str) -> str:
    return "".join(f["text"] for f in frames if f["type"] == kind)
