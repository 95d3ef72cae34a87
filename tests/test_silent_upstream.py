"""Stop ends a reply within a second whatever a silent OpenAI-compatible server does, and a /models that
never answers is an error in seconds, not a minute of "loading"."""

import socket
import threading
import time

import pytest

from engines import Done, GenerationOptions, Message, Turn, guarded
from engines import openai_compat
from engines.openai_compat import OpenAICompatEngine

OPTIONS = GenerationOptions(reasoning_budget=0, max_tokens=16)
MODELS = b'{"object": "list", "data": [{"id": "quiet-model"}]}'


class QuietServer:
    """A loopback HTTP server that accepts every connection and answers only what it is told to:
    ``models`` (GET /models) and ``headers`` (the chat request's status line and headers, then silence).
    Everything it holds is closed at stop(); its loop ends by itself after ``lifetime_s``."""

    def __init__(self, models: bool, headers: bool, lifetime_s: float = 30.0):
        self.models, self.headers = models, headers
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        self.held: list[socket.socket] = []
        self.requests: list[str] = []
        self._stop = threading.Event()
        self._deadline = time.monotonic() + lifetime_s
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            self.held.append(conn)
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        try:
            head = conn.recv(65536).decode("latin-1")
        except OSError:
            return
        self.requests.append(head.split("\r\n", 1)[0])
        if head.startswith("GET ") and "/models" in head.split("\r\n", 1)[0] and self.models:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(MODELS)).encode() + b"\r\nConnection: close\r\n\r\n" + MODELS)
        elif head.startswith("POST ") and self.headers:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n")
        # otherwise: silence, with the connection held open

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for conn in self.held:
            conn.close()
        self.listener.close()


@pytest.fixture
def quiet():
    servers = []

    def start(**kwargs) -> QuietServer:
        servers.append(QuietServer(**kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def stop_after(engine, delay_s: float) -> tuple[Done, float]:
    """Stream a reply, press Stop after ``delay_s``; the reply's Done and the seconds from Stop to it."""
    turn = Turn(id="t1", conversation_id="c1", messages=[Message("user", "hi")], options=OPTIONS)
    timer = threading.Timer(delay_s, turn.cancel.set)
    timer.start()
    try:
        events = list(guarded(engine.stream(turn)))
    finally:
        timer.cancel()
    stopped_at = time.monotonic()
    return events[-1], stopped_at


@pytest.mark.parametrize("headers", [False, True], ids=["waiting-for-headers", "streaming"])
def test_stop_ends_a_reply_to_a_silent_server_within_a_second(quiet, headers):
    server = quiet(models=True, headers=headers)
    engine = OpenAICompatEngine(server.url)  # the default stall limit: a minute
    engine.load(OPTIONS)
    assert engine.info().state == "ready"
    started = time.monotonic()
    done, ended = stop_after(engine, 0.5)
    assert done.finish_reason == "cancelled", done
    assert ended - started < 1.5
    assert any(line.startswith("POST ") for line in server.requests)
    engine.unload()


def test_stop_while_checking_a_silent_server_again(quiet, monkeypatch):
    """A server that was down is checked again before the reply (GET /models): Stop ends that wait too."""
    monkeypatch.setattr(openai_compat, "MODELS_TIMEOUT_S", 0.5)
    server = quiet(models=False, headers=False)
    engine = OpenAICompatEngine(server.url)
    engine.load(OPTIONS)
    assert engine.info().state == "error"
    monkeypatch.setattr(openai_compat, "MODELS_TIMEOUT_S", 30.0)
    started = time.monotonic()
    done, ended = stop_after(engine, 0.3)
    assert done.finish_reason == "cancelled", done
    assert ended - started < 1.3
    engine.unload()


def test_models_that_never_answers_is_an_error_in_seconds(quiet, monkeypatch):
    monkeypatch.setattr(openai_compat, "MODELS_TIMEOUT_S", 0.3)
    server = quiet(models=False, headers=False)
    engine = OpenAICompatEngine(server.url)  # the default stall limit: a minute
    started = time.monotonic()
    engine.load(OPTIONS)
    assert time.monotonic() - started < 3  # ten times the timeout, a twentieth of the stall limit
    info = engine.info()
    assert info.state == "error" and "did not answer" in info.message and "/models" in info.message
    engine.unload()
