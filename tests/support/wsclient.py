"""The tests' protocol v1 client: the `websockets` library, which offers permessage-deflate as a browser does."""

from __future__ import annotations

from websockets.sync.client import connect

from tests.support.harness import FrameClient


class WsClient(FrameClient):
    def __init__(self, url: str, **kwargs):
        self._connection = connect(url, open_timeout=10, max_size=None, **kwargs)
        self.ws = self._connection.__enter__()
        self.hello = self.recv()

    def _send_raw(self, data: str | bytes) -> None:
        self.ws.send(data)

    def _recv_text(self, timeout: float) -> str:
        return self.ws.recv(timeout=timeout)

    def close(self) -> None:
        self._connection.__exit__(None, None, None)


def texts(frames: list[dict], kind: str) -> str:
    return "".join(f["text"] for f in frames if f["type"] == kind)


def set_settings(ws: FrameClient, **values) -> dict:
    """Change settings over the socket: the values the server answers with."""
    ws.send({"type": "settings", "values": values})
    return ws.until("settings")[0]["values"]
