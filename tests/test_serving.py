"""webapp.web.serving: a real server on 127.0.0.1 (port 0) in a thread, real clients.

Every client call has a timeout and every server is stopped (its run() thread
joined) by the fixture, so a regression fails a test instead of hanging it.
"""

import contextlib
import os
import signal
import socket
import struct
import threading
import time

import pytest
import requests
import simple_websocket
from flask import Flask
from flask_sock import Sock
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.support.poll import wait_until
from tests.support.raw_websocket import RawWebSocket
from webapp.web.serving import make_server

TIMEOUT = 5  # seconds; for any single client operation

app = Flask(__name__)
sock = Sock(app)


@app.get("/hello")
def hello():
    return "hello"


@sock.route("/echo")
def echo(ws):
    while True:
        ws.send(ws.receive())


@sock.route("/boom")
def boom(ws):
    raise RuntimeError("route failed on purpose")


@sock.route("/stream/<int:n>")
def stream(ws, n):
    for i in range(n):
        ws.send(f"msg {i}")


@sock.route("/ticker")
def ticker(ws):  # never returns by itself: only a send failing ends it
    while True:
        ws.send("tick")
        time.sleep(0.01)


@pytest.fixture
def serve():
    """start(**make_server_kwargs) -> a running WebServer, stopped at teardown."""
    running = {}

    def start(**kwargs):
        server = make_server(app, **kwargs)
        running[server] = threading.Thread(target=server.run, daemon=True)
        running[server].start()
        return server

    start.thread_of = running.__getitem__
    yield start
    for server, thread in running.items():
        server.stop()
        thread.join(10)
        assert not thread.is_alive(), "run() did not return after stop()"


def ws_url(server, path):
    return server.url.replace("http://", "ws://", 1) + path


def open_ws(stack, server, path):
    """A `websockets` client (permessage-deflate, like a browser), closed by stack."""
    return stack.enter_context(connect(ws_url(server, path), open_timeout=TIMEOUT))


def test_http_get(serve):
    server = serve()
    assert server.url == f"http://127.0.0.1:{server.port}" and server.port > 0
    response = requests.get(server.url + "/hello", timeout=TIMEOUT)
    assert response.status_code == 200
    assert response.text == "hello"


def test_upgrade_request_to_plain_route_gets_http_response(serve):
    # No route takes the socket, so waitress writes the app's response as
    # usual (Werkzeug's routing answers 400 to a websocket request for a
    # non-websocket route), and the server keeps serving.
    server = serve()
    response = requests.get(
        server.url + "/hello",
        headers={"Upgrade": "websocket", "Connection": "Upgrade"},
        timeout=TIMEOUT,
    )
    assert response.status_code == 400
    assert "<html" in response.text.lower()
    assert server.open_websockets() == 0
    assert requests.get(server.url + "/hello", timeout=TIMEOUT).text == "hello"


def test_websocket_echo(serve):
    server = serve()
    with connect(ws_url(server, "/echo"), open_timeout=TIMEOUT) as ws:
        ws.send("hi there")
        assert ws.recv(timeout=TIMEOUT) == "hi there"
        ws.send(b"\x00\x01bytes")
        assert ws.recv(timeout=TIMEOUT) == b"\x00\x01bytes"
        ws.send("x" * 200_000)  # several frames and TCP segments
        assert ws.recv(timeout=TIMEOUT) == "x" * 200_000
        assert server.open_websockets() == 1
    # simple-websocket's own client (no compression) works as well
    client = simple_websocket.Client.connect(ws_url(server, "/echo"))
    try:
        client.send("again")
        assert client.receive(timeout=TIMEOUT) == "again"
    finally:
        client.close()
    assert wait_until(lambda: server.open_websockets() == 0)


def test_six_websockets_and_http_with_four_threads(serve):
    server = serve(threads=4)
    with contextlib.ExitStack() as stack:
        sockets = [open_ws(stack, server, "/echo") for _ in range(6)]
        for i, ws in enumerate(sockets):
            ws.send(f"hello {i}")
            assert ws.recv(timeout=TIMEOUT) == f"hello {i}"
        assert server.open_websockets() == 6
        for _ in range(8):
            response = requests.get(server.url + "/hello", timeout=TIMEOUT)
            assert response.text == "hello"
        for i, ws in enumerate(sockets):  # still served after the HTTP traffic
            ws.send(f"again {i}")
            assert ws.recv(timeout=TIMEOUT) == f"again {i}"
    assert wait_until(lambda: server.open_websockets() == 0)


@pytest.mark.parametrize(
    "path, messages, code",
    [("/stream/3", 3, 1000), ("/boom", 0, 1011)],
    ids=["route-returned", "route-raised"],
)
@pytest.mark.parametrize("client_replies", [True, False], ids=["reply", "no-reply"])
def test_server_close_is_prompt_and_last(serve, path, messages, code, client_replies):
    # Waited for, the client's reply ends it well within a long close timeout; without one, the short one runs out.
    close_timeout = 5.0 if client_replies else 0.5
    server = serve(ws_close_timeout=close_timeout)
    raw = RawWebSocket(server.host, server.port, path)
    try:
        for i in range(messages):
            assert raw.frame() == (0x81, f"msg {i}".encode())  # FIN + text
        first_byte, payload = raw.frame()
        assert first_byte == 0x88, "expected a close frame"
        assert struct.unpack("!H", payload[:2]) == (code,)
        if client_replies:
            # The server waits (up to ws_close_timeout) for the client's
            # close reply before it ends the TCP connection...
            time.sleep(0.2)
            assert raw.still_open()
            raw.send_close()
        since = time.monotonic()
        # Nothing may follow the close frame: no HTTP response, no 500 page,
        # no second close frame; and the server ends the TCP connection.
        assert raw.rest_until_eof() == b""
        elapsed = time.monotonic() - since
        # ...at once after the reply (a tenth of the timeout it did not wait out); without one, once the timeout
        # ran out (within ten times it).
        assert elapsed < (close_timeout / 10 if client_replies else close_timeout * 10), elapsed
    finally:
        raw.close()
    assert wait_until(lambda: server.open_websockets() == 0)


def test_ping_interval_drops_silent_client(serve, monkeypatch):
    # simple-websocket's ping_interval polls the socket proxy with a selector.
    interval = 0.2
    monkeypatch.setitem(app.config, "SOCK_SERVER_OPTIONS", {"ping_interval": interval})
    server = serve()
    raw = RawWebSocket(server.host, server.port, "/echo")  # never answers pings
    try:
        started = time.monotonic()
        assert raw.frame()[0] == 0x89  # FIN + ping
        first_byte, payload = raw.frame()
        assert (first_byte, struct.unpack("!H", payload[:2])) == (0x88, (1008,))
        assert raw.rest_until_eof() == b""
        assert time.monotonic() - started < 10 * 2 * interval  # closed when a second ping falls due, ten times over
    finally:
        raw.close()
    assert wait_until(lambda: server.open_websockets() == 0)


@pytest.mark.parametrize("propagate", [False, True], ids=["flask-500", "propagated"])
def test_route_that_raised_gets_1011(serve, monkeypatch, propagate):
    # Flask normally turns the exception into a 500 response; in debug or
    # testing mode it propagates out of the app instead.
    monkeypatch.setitem(app.config, "PROPAGATE_EXCEPTIONS", propagate)
    server = serve()
    with connect(ws_url(server, "/boom"), open_timeout=TIMEOUT) as ws:
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(timeout=TIMEOUT)
    assert info.value.rcvd is not None and info.value.rcvd.code == 1011


def test_stop_sends_1001_and_run_returns(serve):
    server = serve()
    thread = serve.thread_of(server)
    with contextlib.ExitStack() as stack:
        echoes = [open_ws(stack, server, "/echo") for _ in range(3)]
        tickers = [open_ws(stack, server, "/ticker") for _ in range(2)]
        for ws in echoes:
            ws.send("ping")
            assert ws.recv(timeout=TIMEOUT) == "ping"
        for ws in tickers:
            assert ws.recv(timeout=TIMEOUT) == "tick"
        assert server.open_websockets() == 5
        started = time.monotonic()
        server.stop()
        server.stop()  # idempotent
        for ws in echoes + tickers:
            with pytest.raises(ConnectionClosed) as info:
                while True:  # the tickers may have ticks in flight
                    ws.recv(timeout=TIMEOUT)
            assert info.value.rcvd is not None
            assert (info.value.rcvd.code, info.value.rcvd.reason) == (1001, "going away")
        thread.join(TIMEOUT)
        assert not thread.is_alive()
        # Routes ended promptly (no waiting out the worker pool's 5 s shutdown).
        assert time.monotonic() - started < 2.5
        assert server.open_websockets() == 0
        with pytest.raises(OSError):  # no longer listening
            socket.create_connection((server.host, server.port), 1).close()
        server.stop()  # still harmless after run() returned


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs POSIX signals")
def test_stop_from_signal_handler_with_run_in_main_thread():
    # The way a CLI uses it: run() in the main thread, stop() in a handler.
    assert threading.current_thread() is threading.main_thread()
    server = make_server(app)
    result = {}

    def client():
        try:
            with connect(ws_url(server, "/echo"), open_timeout=TIMEOUT) as ws:
                ws.send("before")
                result["echo"] = ws.recv(timeout=TIMEOUT)
                os.kill(os.getpid(), signal.SIGUSR1)
                try:
                    ws.recv(timeout=TIMEOUT)
                except ConnectionClosed as exc:
                    result["code"] = exc.rcvd and exc.rcvd.code
        finally:
            result.setdefault("code", None)

    def watchdog(signum, frame):
        raise TimeoutError("run() did not return after stop()")

    old_usr1 = signal.signal(signal.SIGUSR1, lambda signum, frame: server.stop())
    old_alrm = signal.signal(signal.SIGALRM, watchdog)
    signal.setitimer(signal.ITIMER_REAL, 10)
    thread = threading.Thread(target=client, daemon=True)
    try:
        thread.start()
        server.run()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_alrm)
        signal.signal(signal.SIGUSR1, old_usr1)
        server.stop()
    thread.join(TIMEOUT)
    assert result == {"echo": "before", "code": 1001}


def fd_count():
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


def test_sequential_connections_leave_no_threads_or_fds(serve):
    server = serve()
    requests.get(server.url + "/hello", timeout=TIMEOUT).close()
    time.sleep(0.1)
    threads, fds = threading.active_count(), fd_count()
    for i in range(20):
        path = "/echo" if i % 2 else "/stream/2"
        with connect(ws_url(server, path), open_timeout=TIMEOUT) as ws:
            if path == "/echo":
                ws.send("x")
            assert ws.recv(timeout=TIMEOUT) in ("x", "msg 0")
        if i == 0:  # one websocket's worth of extra threads came and went
            assert wait_until(lambda: server.open_websockets() == 0)
    assert wait_until(lambda: server.open_websockets() == 0)
    # The pool shrinks back and simple-websocket's reader threads end.
    assert wait_until(lambda: threading.active_count() == threads), (
        threading.active_count(), threads, [t.name for t in threading.enumerate()])
    assert wait_until(lambda: fd_count() == fds), (fd_count(), fds)
