import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from engines.fake import FakeEngine
from tests.processes import end_process
from engines.registry import EngineSpec, create_engine
from webapp import create_app
from webapp.security import allowed_hosts
from webapp.serving import make_server

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A real qwen3_5 checkpoint with a bundled MTP head (random weights), built in about a second."""
    from demo_model.tiny import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("models") / "tiny-qwen3_5")


class Addresses:
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"


class LiveServer(Addresses):
    """The app on a loopback port in this process, stopped at teardown."""

    def __init__(self, engine, data_dir: Path):
        self.engine = engine
        self.app = create_app(engine, data_dir=data_dir, spec=EngineSpec(name="fake"),
                              engine_factory=create_engine)
        self.server = make_server(self.app, "127.0.0.1", 0)
        self.port = self.server.port
        self.app.config["ALLOWED_HOSTS"] = allowed_hosts("127.0.0.1", self.server.port)
        self.host = self.app.extensions["specchat"]
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        self.host.start_loading().join(timeout=30)

    def stop(self) -> None:
        self.host.cancel_all()
        self.server.stop()
        self.thread.join(timeout=10)


@pytest.fixture
def fake_server(tmp_path):
    server = LiveServer(FakeEngine(delay_s=0.01), tmp_path / "data")
    yield server
    server.stop()


class ServerProcess(Addresses):
    """``python -m webapp`` in a subprocess: the real CLI, signals and all."""

    def __init__(self, args: list[str], data_dir: Path):
        self.data_dir = data_dir
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "webapp", "--port", "0", "--data-dir", str(data_dir), *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
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
            engine = requests.get(self.url + "/api/health", timeout=5).json()["engine"]
            if engine["state"] == "ready":
                return engine
            if engine["state"] == "error":
                raise RuntimeError(f"engine failed: {engine['message']}")
            time.sleep(0.1)
        raise TimeoutError("engine not ready:\n" + "".join(self.lines))

    def stop(self) -> int:
        end_process(self.proc, 30)
        self._reader.join(timeout=5)
        return self.proc.returncode


@pytest.fixture
def start_server(tmp_path):
    """Start real servers on the CLI; each is stopped at teardown."""
    started: list[ServerProcess] = []

    def start(*args: str, data_dir: Path | None = None) -> ServerProcess:
        server = ServerProcess(list(args), data_dir or tmp_path / "data")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def mlx_server(tiny_model, tmp_path_factory):
    """One real server on the tiny model, shared by a module's tests."""
    server = ServerProcess(["--model", str(tiny_model)], tmp_path_factory.mktemp("data"))
    server.wait_ready()
    yield server
    server.stop()
