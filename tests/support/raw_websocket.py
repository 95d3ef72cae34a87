"""A bare websocket client on a raw socket, to see exactly which bytes the server sends and to stop reading."""

from __future__ import annotations

import base64
import os
import socket
import struct

TIMEOUT = 5  # seconds; for any single socket operation


class RawWebSocket:
    """A bare client, to see exactly which bytes the server sends."""

    def __init__(self, host: str, port: int, path: str, receive_buffer: int | None = None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:  # set before connecting, so the window stays that small
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect((host, port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self._recv()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101 "), head

    def _recv(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError
        self.buf += chunk

    def _take(self, n):
        while len(self.buf) < n:
            self._recv()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def frame(self):
        """-> (first byte, payload) of the next server frame."""
        b0, b1 = self._take(2)
        assert not b1 & 0x80, "server frames must not be masked"
        size = b1 & 0x7F
        if size == 126:
            (size,) = struct.unpack("!H", self._take(2))
        elif size == 127:
            (size,) = struct.unpack("!Q", self._take(8))
        return b0, self._take(size)

    def send_close(self, code=1000):
        mask = os.urandom(4)
        payload = struct.pack("!H", code)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(bytes([0x88, 0x80 | len(payload)]) + mask + masked)

    def still_open(self):
        """True unless the server has ended the connection (EOF waiting)."""
        self.sock.setblocking(False)
        try:
            return self.sock.recv(1, socket.MSG_PEEK) != b""
        except BlockingIOError:
            return True
        finally:
            self.sock.settimeout(TIMEOUT)

    def rest_until_eof(self):
        """Every byte left until the server ends the TCP connection."""
        data, self.buf = self.buf, b""
        while chunk := self.sock.recv(65536):
            data += chunk
        return data

    def close(self):
        self.sock.close()

