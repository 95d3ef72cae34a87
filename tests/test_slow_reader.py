"""A tab that stops reading never holds up the others: its frames queue on its own, and when it falls too far
behind it is closed with 1008 (or, reading nothing at all, cut off), its writer thread gone."""

import struct
import threading
import time

import requests

from tests.support.poll import wait_until
from tests.support.raw_websocket import RawWebSocket
from tests.support.wsclient import WsClient
from webapp.web.chat import ChatSession

PROMPT = "x" * 32000  # each settings broadcast carries it: about 32 KB a frame
ROUND_TRIP_S = 2.0  # a settings change seen back by its own tab, or a POST /api/settings, within this


class SilentTab(RawWebSocket):
    """A websocket that never reads until told to: a raw socket with a tiny receive buffer."""

    def __init__(self, server):
        super().__init__("127.0.0.1", server.port, "/ws", receive_buffer=4096)

    def close_code(self, limit=100_000):
        """Read everything the server sent, up to its close frame: that frame's code."""
        for _ in range(limit):
            first, payload = self.frame()
            if first & 0x0F == 0x8:
                return struct.unpack("!H", payload[:2])[0]
        raise AssertionError("no close frame")


def writers():
    return sum(thread.name == "ws-writer" for thread in threading.enumerate())


def sessions(server):
    return len(server.host._sessions)


def test_a_tab_that_stops_reading_holds_up_no_one_and_is_closed_1008(fake_server, monkeypatch):
    monkeypatch.setattr(ChatSession, "max_queued", 1024 * 1024)
    before = writers()
    silent = SilentTab(fake_server)
    try:
        assert wait_until(lambda: sessions(fake_server) == 1)
        with WsClient(fake_server.ws_url) as tab:
            for i in range(300):  # about 9.6 MB of broadcasts: past the bound and any socket buffers
                started = time.monotonic()
                tab.send({"type": "settings", "values": {"system_prompt": f"{i} {PROMPT}"}})
                assert tab.until("settings", timeout=5)[0]["values"]["system_prompt"].startswith(f"{i} ")
                assert time.monotonic() - started < ROUND_TRIP_S, f"settings change {i} was held up"
                if i % 25 == 0:
                    started = time.monotonic()
                    reply = requests.post(fake_server.url + "/api/settings", json={"max_tokens": 100 + i}, timeout=5)
                    assert reply.status_code == 200
                    assert time.monotonic() - started < ROUND_TRIP_S, f"POST /api/settings {i} was held up"
                    tab.until("settings", timeout=5)
            # The silent tab reads at last: what it was sent, then its close.
            assert silent.close_code() == 1008
            silent.send_close()
            assert wait_until(lambda: sessions(fake_server) == 1)
            assert wait_until(lambda: writers() == before + 1)  # the silent tab's writer is gone, the reading tab's not
            assert tab.chat("after")[0]["finish_reason"] in ("stop", "length")
        assert wait_until(lambda: writers() == before and sessions(fake_server) == 0)
    finally:
        silent.close()


def test_a_tab_that_never_reads_is_cut_off_and_leaves_no_thread(fake_server, monkeypatch):
    monkeypatch.setattr(ChatSession, "max_queued", 256 * 1024)
    monkeypatch.setattr(ChatSession, "hang_up_after", 0.5)
    before = writers()
    silent = SilentTab(fake_server)
    try:
        assert wait_until(lambda: sessions(fake_server) == 1)
        for i in range(200):  # about 6.4 MB: past the bound and any socket buffers
            started = time.monotonic()
            reply = requests.post(fake_server.url + "/api/settings", json={"system_prompt": f"{i} {PROMPT}"},
                                  timeout=5)
            assert reply.status_code == 200
            assert time.monotonic() - started < ROUND_TRIP_S, f"POST /api/settings {i} was held up"
        assert wait_until(lambda: sessions(fake_server) == 0 and writers() == before)
        assert requests.get(fake_server.url + "/api/health", timeout=5).status_code == 200
    finally:
        silent.close()
