"""Serve the Flask app and its flask-sock websockets from one waitress server.

waitress gives a WSGI app no socket (and its maintainers have declined
websocket support), while flask-sock/simple-websocket need one: in "werkzeug"
mode they read ``environ["werkzeug.socket"]``. So for an ``Upgrade: websocket``
request we put a small socket proxy there. On its first use (the 101 reply)
the connection is handed off: waitress's event loop stops polling it and the
worker thread and simple-websocket's reader thread use it as a plain blocking
socket. When the route returns we drop the dummy response flask-sock produces,
end the websocket ourselves, and give the connection back to waitress, which
closes the fd (once, from its main thread).

This leans on waitress internals that are not a public API (pin
``waitress==3.0.*``; tests/test_serving.py exercises the hand-off):
``TcpWSGIServer.channel_class``, ``HTTPChannel.task_class/readable/writable``,
``WSGITask.get_environment/execute/write/finish``, ``close_on_finish``,
``task_dispatcher.set_thread_count/shutdown``, ``pull_trigger`` and the
``wasyncore`` loop that ``BaseWSGIServer.run`` runs.

No signal handlers are installed here: a CLI installs them and calls
``WebServer.stop()``.
"""

import socket
import struct
import threading

from simple_websocket import ConnectionClosed
from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import WSGITask

# Server-initiated close frames must never block: the peer may have stopped
# reading. (Windows lacks the flag; a tiny frame practically never blocks.)
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
_CLOSE_OPCODE = b"\x88"  # FIN + close; server frames are unmasked


class _Closed(ConnectionClosed, OSError):
    """Raised by sends after a close frame went out, so nothing follows it.

    A route (and flask-sock) sees the usual ConnectionClosed and unwinds;
    simple-websocket's reader thread only catches OSError, so it also ends
    quietly instead of dying with a traceback.
    """


class _SocketProxy:
    """What simple-websocket takes for the connection's socket."""

    def __init__(self, task):
        self._task = task
        self._sock = task.channel.socket
        self._web = task.channel.server.web
        # The handler thread and simple-websocket's reader thread (pongs,
        # close replies) both send; frames must not interleave.
        self._lock = threading.Lock()
        self._closed = False  # a close frame has been sent
        self.taken_over = False
        # simple-websocket calls close() when its reader thread ends: the
        # client answered our close, closed, or the connection died.
        self.reader_done = threading.Event()

    def send(self, data):
        with self._lock:
            if self._closed:
                raise _Closed()
            if not self.taken_over:
                self._take_over()
            self._sock.sendall(data)  # simple-websocket ignores short sends
            if data[:1] == _CLOSE_OPCODE:  # each send starts on a frame
                self._closed = True
        return len(data)

    def recv(self, size):
        return self._sock.recv(size)

    def fileno(self):  # simple-websocket's ping_interval uses a selector
        return self._sock.fileno()

    def close(self):
        # Only a signal: waitress owns the fd and closes it exactly once.
        self.reader_done.set()

    def _take_over(self):
        self.taken_over = True
        self._task.channel.handed_off = True  # out of waitress's poll set
        self._sock.setblocking(True)
        self._web._track(self, opened=True)

    def send_close(self, code, reason=""):
        """Send our own close frame, unless one was sent or the peer is gone.

        Built by hand since simple-websocket's object is out of our reach.
        Bounded in time, so stop() stays safe in a signal handler: a send
        stuck on a client that stopped reading is left to shutdown().
        """
        if not self._lock.acquire(timeout=self._web.ws_close_timeout):
            return
        try:
            if not self._closed and not self.reader_done.is_set():
                self._closed = True
                payload = struct.pack("!H", code) + reason.encode()[:123]
                frame = _CLOSE_OPCODE + bytes([len(payload)]) + payload
                self._sock.send(frame, _DONTWAIT)
        except OSError:
            pass
        finally:
            self._lock.release()

    def shutdown(self, how=socket.SHUT_RDWR):
        # Ends the TCP connection now, instead of when waitress gets round to
        # closing the fd, and wakes a reader thread blocked in recv().
        try:
            self._sock.shutdown(how)
        except OSError:
            pass

    def end(self, failed):
        """After the route returned: finish the websocket, release the socket."""
        if failed:  # flask-sock only closes after a route that returned
            self.send_close(1011, "internal error")
        self.reader_done.wait(self._web.ws_close_timeout)  # client's close reply
        self.shutdown()
        # Let the reader leave recv() before waitress closes the fd.
        self.reader_done.wait(self._web.ws_close_timeout)
        self._task.channel.handed_off = False
        self._web._track(self, opened=False)


class ReaderThread(threading.Thread):
    """simple-websocket's reader thread (its ``thread_class``), which wakes the route when it ends.

    Over ``max_message_size`` (or a deflate bomb inflating past it) the reader wakes the route before
    it marks the socket closed: the route sees it still open, waits again, and would wait forever.
    """

    def __init__(self, target):
        super().__init__(target=target, daemon=True)
        self._ws = target.__self__  # the simple-websocket Server whose _thread this runs

    def run(self):
        try:
            super().run()
        finally:
            self._ws.connected = False
            self._ws.event.set()


class _Task(WSGITask):
    ws = None  # the _SocketProxy of a websocket upgrade request

    def get_environment(self):
        environ = super().get_environment()
        if self.ws is None and "websocket" in environ.get("HTTP_UPGRADE", "").lower():
            self.ws = environ["werkzeug.socket"] = _SocketProxy(self)
        environ["specchat.client_gone"] = self.client_gone
        return environ

    def client_gone(self):
        """Whether the client has closed its end, so that a long reply it will never read can stop. A peek
        that reads end-of-file says so; nothing else reads the socket meanwhile (waitress does not read a
        channel whose request runs), and bytes a client sent ahead stay where waitress will read them."""
        if not _DONTWAIT:  # a peek would wait for the client: this platform cannot tell
            return False
        try:
            return self.channel.socket.recv(1, socket.MSG_PEEK | _DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def execute(self):
        failed = False
        try:
            super().execute()
        except Exception:
            if not self._handed_off():
                raise  # plain HTTP: waitress's usual 500 handling
            self.logger.exception("websocket route %s failed", self.request.path)
            failed = True
        if self._handed_off():
            # Flask turns a route's exception into a 500 response.
            self.ws.end(failed or self.status.startswith("5"))
            # waitress's main thread closes the fd once the task is done.
            self.close_on_finish = True

    # After a hand-off, the response flask-sock returns must not reach the
    # socket: the client would read it as bytes after the close frame.
    def write(self, data):
        if not self._handed_off():
            super().write(data)
        else:  # count it as sent, or waitress warns about a short body
            self.content_bytes_written += len(data)

    def finish(self):
        if not self._handed_off():
            super().finish()

    def _handed_off(self):
        return self.ws is not None and self.ws.taken_over


class _Channel(HTTPChannel):
    # While handed off, waitress's loop must neither read (it would eat
    # websocket frames) nor write/close. waitress already skips a channel
    # whose request is running (with channel_request_lookahead=0, the
    # default); saying it here keeps the hand-off independent of that.
    task_class = _Task
    handed_off = False

    def readable(self):
        return not self.handed_off and super().readable()

    def writable(self):
        return not self.handed_off and super().writable()


class _WaitressServer(TcpWSGIServer):
    channel_class = _Channel
    web = None  # the WebServer, for the channels' tasks


class WebServer:
    """A waitress server for a Flask app with flask-sock websockets."""

    def __init__(self, app, host, port, *, threads, ws_close_timeout):
        self.ws_close_timeout = ws_close_timeout
        self._threads = threads
        self._map = {}
        self._waitress = _WaitressServer(
            app, map=self._map, host=host, port=port, threads=threads
        )
        self._waitress.web = self
        self.host = self._waitress.effective_host
        self.port = int(self._waitress.effective_port)
        self._live = set()  # _SocketProxy of each open websocket
        self._cond = threading.Condition()
        self._pool_closed = False
        # Plain flags, no locks: stop() may run in a signal handler that
        # interrupted a thread holding a lock.
        self._stopping = False
        self._loop_done = False

    @property
    def url(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def open_websockets(self):
        return len(self._live)

    def _track(self, ws, opened):
        with self._cond:
            (self._live.add if opened else self._live.discard)(ws)
            # Each open websocket holds a worker thread until it closes: grow
            # the pool by one per websocket, or a few idle browser tabs would
            # block every plain HTTP request.
            if not self._pool_closed:
                self._waitress.task_dispatcher.set_thread_count(
                    self._threads + len(self._live)
                )
            self._cond.notify_all()

    def run(self):
        """Serve until stop() is called (or the loop raises, e.g. Ctrl-C)."""
        adj = self._waitress.adj
        try:
            # BaseWSGIServer.run's loop, one poll at a time so stop() can end it.
            while not self._loop_done:
                wasyncore.loop(
                    timeout=adj.asyncore_loop_timeout,
                    use_poll=adj.asyncore_use_poll,
                    map=self._map,
                    count=1,
                )
        finally:
            self.stop()  # no-op after a stop(); sends 1001 after a Ctrl-C
            with self._cond:  # give routes a moment to see the close
                self._cond.wait_for(lambda: not self._live, self.ws_close_timeout)
                stragglers = list(self._live)
                self._pool_closed = True
            for ws in stragglers:
                ws.shutdown()  # wakes the route; end() finishes it
            self._waitress.task_dispatcher.shutdown()
            wasyncore.close_all(self._map)

    def stop(self):
        """Send close 1001 "going away" to every websocket, then end run().

        Thread-safe, idempotent, and safe in a signal handler.
        """
        if self._stopping:
            return
        self._stopping = True
        for ws in self._live.copy():  # set.copy() is atomic under the GIL
            ws.send_close(1001, "going away")
        self._loop_done = True
        try:
            self._waitress.pull_trigger()  # wake the loop from its poll
        except OSError:
            pass  # run() already over: the trigger is closed


def make_server(app, host="127.0.0.1", port=0, *, threads=4, ws_close_timeout=1.0):
    """Build (bind, not yet serve) a WebServer; port 0 picks a free port."""
    return WebServer(
        app, host, port, threads=threads, ws_close_timeout=ws_close_timeout
    )
