"""What the tests and the benchmarks drive specchat with: the real CLI in a subprocess and a protocol v1 client.

Only specchat's own dependencies are used here (simple-websocket comes with flask-sock), so the benchmarks that
import it run in a venv that ``make install`` made.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from simple_websocket import Client

from webapp import ROOT


def end_process(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM, then SIGKILL if it is still there after ``grace_s``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``specchat bench ARGS`` to its end."""
    return subprocess.run([sys.executable, "-m", "webapp", "bench", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def get_json(url: str, timeout: float = 5) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        return json.load(reply)


class Addresses:
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"


class ServerProcess(Addresses):
    """``python -m webapp`` (or another ``command`` that starts specchat, run in ``cwd``) in a subprocess: the
    real CLI, signals and all. ``lines`` collects its log."""

    def __init__(self, args: list[str], data_dir: Path, command: list[str] | None = None, cwd: Path = ROOT):
        self.data_dir = data_dir
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [*(command or [sys.executable, "-m", "webapp"]), "--port", "0", "--data-dir", str(data_dir), *args],
            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )
        self.lines: list[str] = []
        self.port = None
        deadline = time.monotonic() + 60
        while self.port is None:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("server exited early:\n" + "".join(self.lines))
            self.lines.append(line)
            found = re.search(r"open http://127\.0\.0\.1:(\d+)/", line)
            if found:
                self.port = int(found.group(1))
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start:\n" + "".join(self.lines))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_ready(self, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # A health request waits as long as readiness may: a loaded machine, or an engine unloading meanwhile,
            # can keep the answer back for seconds, and that is not the server failing.
            engine = get_json(self.url + "/api/health", timeout=max(1.0, deadline - time.monotonic()))["engine"]
            if engine["state"] == "ready":
                return engine
            if engine["state"] == "error":
                raise RuntimeError(f"engine failed: {engine['message']}")
            time.sleep(0.1)
        raise TimeoutError("engine not ready:\n" + "".join(self.lines))

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def rss_mib(self) -> float:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024

    def stop(self) -> int:
        end_process(self.proc, 30)
        self._reader.join(timeout=5)
        return self.proc.returncode


class FrameClient:
    """Protocol v1 over a websocket: JSON frames out, JSON frames in, every wait bounded.

    A subclass connects and provides ``_send_raw`` and ``_recv_text``; ``hello`` is the first frame.
    """

    hello: dict

    def _send_raw(self, data: str | bytes) -> None:
        """A text frame for str, a binary frame for bytes."""
        raise NotImplementedError

    def _recv_text(self, timeout: float) -> str:
        raise NotImplementedError

    def send(self, frame: dict | str | bytes) -> None:
        self._send_raw(frame if isinstance(frame, (str, bytes)) else json.dumps(frame))

    def recv(self, timeout: float = 30) -> dict:
        return json.loads(self._recv_text(timeout))

    def until(self, kind: str, timeout: float = 60, id: str | None = None) -> tuple[dict, list[dict]]:
        """Frames up to and including the first of ``kind`` (for ``id`` when given). A reply's error ends it in
        place of its ``done``: waiting on would only time out, so it fails at once with the error."""
        seen, deadline = [], time.monotonic() + timeout
        while True:
            frame = self.recv(timeout=max(0.1, deadline - time.monotonic()))
            seen.append(frame)
            if frame["type"] == kind and (id is None or frame.get("id") == id):
                return frame, seen
            if kind == "done" and id is not None and frame["type"] == "error" and frame.get("id") == id:
                raise AssertionError(f"{id} ended with an error, not done: {frame}")

    def chat(self, id: str, text: str = "hello", timeout: float = 120,
             images: list[str] | None = None) -> tuple[dict, list[dict]]:
        self.send({"type": "chat", "id": id, "text": text, **({"images": images} if images else {})})
        return self.until("done", timeout=timeout, id=id)

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Client(Client):
    def handshake(self):
        # simple-websocket's Host header leaves out the port, and specchat answers only its own host:port.
        self.host = f"{self.host}:{self.port}"
        super().handshake()


class WsClient(FrameClient):
    """A FrameClient on simple-websocket's client."""

    def __init__(self, url: str, headers: dict | None = None):
        self.ws = _Client.connect(url, headers=headers)
        self.hello = self.recv()

    def _send_raw(self, data: str | bytes) -> None:
        self.ws.send(data)

    def _recv_text(self, timeout: float) -> str:
        text = self.ws.receive(timeout=timeout)
        if text is None:
            raise TimeoutError(f"no frame within {timeout:.1f} s")
        return text

    def close(self) -> None:
        if self.ws.connected:
            self.ws.close()
        self.ws.thread.join(timeout=5)
