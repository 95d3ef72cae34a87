"""A frame over the transport's 16 MiB cap, or a deflate bomb inflating past it: the socket is closed with 1009,
its handler ends (no thread left waiting) and shutdown is not delayed. Raw sockets, to send what no client would."""

import base64
import os
import socket
import struct
import time
import zlib

import pytest

from tests.support.wsclient import WsClient
from tests.support.poll import wait_until

CAP = 16 << 20


def handshake(port: int, deflate: bool) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    offer = "Sec-WebSocket-Extensions: permessage-deflate\r\n" if deflate else ""
    sock.sendall(f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{offer}\r\n".encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    head, rest = buf.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101 ") and (b"permessage-deflate" in head) == deflate, head
    return sock, rest


def client_frame(payload: bytes, compressed: bool = False) -> bytes:
    """One masked text frame; the all-zero mask leaves the payload as it is (any key is valid)."""
    size = len(payload)
    head = bytes([0x80 | (0x40 if compressed else 0) | 0x1])
    if size < 126:
        head += bytes([0x80 | size])
    elif size < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", size)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", size)
    return head + b"\0\0\0\0" + payload


def close_code(sock: socket.socket, buf: bytes, timeout: float = 10) -> int:
    """Read server frames until its close frame; its status code."""
    deadline = time.monotonic() + timeout
    while True:
        while len(buf) < 4 and time.monotonic() < deadline:
            buf += sock.recv(65536)
        b0, b1 = buf[0], buf[1]
        size, at = b1 & 0x7F, 2
        if size == 126:
            size, at = struct.unpack("!H", buf[2:4])[0], 4
        elif size == 127:
            while len(buf) < 10:
                buf += sock.recv(65536)
            size, at = struct.unpack("!Q", buf[2:10])[0], 10
        while len(buf) < at + size:
            assert time.monotonic() < deadline, "no close frame in time"
            buf += sock.recv(65536)
        payload, buf = buf[at:at + size], buf[at + size:]
        if b0 & 0x0F == 0x8:
            return struct.unpack("!H", payload[:2])[0]


def bomb() -> bytes:
    """64 MiB of text deflated to about 64 KiB (permessage-deflate drops the flush's last 4 bytes)."""
    deflate = zlib.compressobj(wbits=-15)
    data = deflate.compress(b'{"type":"chat","id":"b","text":"' + b"a" * (64 << 20)) + deflate.flush(zlib.Z_SYNC_FLUSH)
    return data[:-4]


@pytest.mark.parametrize("kind", ["over the cap", "deflate bomb"])
def test_oversized_frame_closes_1009_and_leaves_nothing_waiting(fake_server, kind):
    with WsClient(fake_server.ws_url) as other:
        if kind == "over the cap":
            sock, buf = handshake(fake_server.port, deflate=False)
            frame = client_frame(b"x" * (CAP + 1024))
        else:
            sock, buf = handshake(fake_server.port, deflate=True)
            frame = client_frame(bomb(), compressed=True)
        try:
            try:
                sock.sendall(frame)
            except OSError:
                pass  # the server may close before it has read the whole frame
            assert close_code(sock, buf) == 1009
            # Only `other` stays.
            assert wait_until(lambda: fake_server.server.open_websockets() <= 1, timeout=5), \
                "the oversized frame's handler still waits"
        finally:
            sock.close()
        assert other.chat("after")[0]["finish_reason"] == "stop"
    start = time.monotonic()
    fake_server.stop()
    assert time.monotonic() - start < 2
