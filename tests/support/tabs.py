"""A tab as the host sees it (the protocol in webapp/hosting/tabs.py), keeping every frame it is sent: for tests
that drive the host in this process, without a socket."""

from __future__ import annotations


class RecordingTab:
    def __init__(self, host):
        self.host = host
        self.frames: list[dict] = []

    def hello(self) -> None:
        self.send({**self.host.engine_frame(), "type": "hello"})

    def send(self, frame: dict) -> None:
        self.frames.append(frame)

    def flush(self, timeout: float) -> bool:
        return True

    def engine_states(self) -> list[str]:
        """The engine's state in each frame that carries it, the hello's first."""
        return [f["engine"]["state"] for f in self.frames if f["type"] in ("hello", "engine")]
