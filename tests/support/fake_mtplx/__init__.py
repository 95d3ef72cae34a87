"""Helpers around the fake MTPLX daemon: a fake ``mtplx`` executable, and the daemon run directly."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from tests.support.harness import end_process

DAEMON = Path(__file__).resolve().parent / "daemon.py"


PORTS_PER_WORKER = 1000
_turn = itertools.count()


def free_port() -> int:
    """A free port for a server that is started later by its number. Not one the kernel picked for port 0: every
    other server in the run binds port 0, and one could take it in between. These come from below the kernel's
    range for port 0 (32768 up on Linux, 49152 up on macOS), a block for each pytest-xdist worker."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    first = 20000 + PORTS_PER_WORKER * worker
    for _ in range(PORTS_PER_WORKER):
        port = first + next(_turn) % PORTS_PER_WORKER
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {first}-{first + PORTS_PER_WORKER - 1}")


def install_mtplx(bin_dir: Path) -> Path:
    """An ``mtplx`` on PATH that execs the fake daemon, so its pid is the daemon's (as the real one's is)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "mtplx"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{DAEMON}" "$@"\n')
    exe.chmod(0o755)
    return exe


def control(url: str, path: str, body: dict | None = None) -> dict:
    if body is None:
        return requests.get(url + path, timeout=5).json()
    return requests.post(url + path, json=body, timeout=5).json()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class FakeDaemon:
    """The fake daemon started directly (as if a user had started MTPLX), stopped at teardown."""

    def __init__(self, *args: str, env: dict | None = None, port: int | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, str(DAEMON), "serve", "--port", str(self.port), *args],
            # The parent watch ends it with the test run, whatever happens to the test.
            env={**os.environ, "FAKE_MTPLX_READY_S": "0", "MTPLX_APP_PARENT_PID": str(os.getpid()), **(env or {})},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                if requests.get(self.url + "/health", timeout=1, headers=self._auth(env)).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("the fake MTPLX daemon did not start")
            time.sleep(0.05)

    @staticmethod
    def _auth(env: dict | None) -> dict:
        key = (env or {}).get("MTPLX_API_KEY")
        return {"Authorization": f"Bearer {key}"} if key else {}

    def state(self) -> dict:
        return control(self.url, "/fake/state")

    def next(self, **fault) -> None:
        control(self.url, "/fake/next", fault)

    def stop(self) -> None:
        end_process(self.proc, 10)
