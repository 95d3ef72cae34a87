"""A tab that stops reading never holds up the others: its frames queue on its own, and when it falls too far
behind it is closed with 1008 (or, reading nothing at all, cut off), its writer thread gone."""

from __future__ import annotations

import struct
import threading
from types import SimpleNamespace

import requests

from tests.support.poll import wait_until
from tests.support.raw_websocket import RawWebSocket
from tests.support.wsclient import WsClient
from webapp.web import chat
from webapp.web.chat import ChatSession

PROMPT = "x" * 32000  # each settings broadcast carries it: about 32 KB a frame
# While the silent tab is connected, has read nothing and cannot be cut off, nothing but the silent tab could ever
# release a change that waited for it: a change that comes back at all was not held up by it. This bound only ends
# a test that hangs.
HELD_UP_S = 120


class HangUp:
    """The timer a tab that fell behind starts to cut it off: here it goes off when the test says so."""

    armed: list[HangUp] = []

    def __init__(self, interval: float, function):
        self.interval, self.function, self.daemon = interval, function, False
        HangUp.armed.append(self)

    def start(self) -> None:
        pass

    def cancel(self) -> None:
        HangUp.armed.remove(self)


def hang_up_by_hand(monkeypatch) -> None:
    HangUp.armed = []
    monkeypatch.setattr(chat, "threading", SimpleNamespace(Timer=HangUp, Thread=threading.Thread,
                                                           Condition=threading.Condition))


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
    hang_up_by_hand(monkeypatch)  # never: the silent tab reads its close at last
    before = writers()
    silent = SilentTab(fake_server)
    try:
        assert wait_until(lambda: sessions(fake_server) == 1)
        with WsClient(fake_server.ws_url) as tab:
            for i in range(300):  # about 9.6 MB of broadcasts: past the bound and any socket buffers
                tab.send({"type": "settings", "values": {"system_prompt": f"{i} {PROMPT}"}})
                seen = tab.until("settings", timeout=HELD_UP_S)[0]  # a change held up would never come back
                assert seen["values"]["system_prompt"].startswith(f"{i} ")
                if i % 25 == 0:
                    reply = requests.post(fake_server.url + "/api/settings", json={"max_tokens": 100 + i},
                                          timeout=HELD_UP_S)
                    assert reply.status_code == 200
                    tab.until("settings", timeout=HELD_UP_S)
            assert sessions(fake_server) == 2 and len(HangUp.armed) == 1  # the silent tab, behind, still there
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
    hang_up_by_hand(monkeypatch)
    before = writers()
    silent = SilentTab(fake_server)
    try:
        assert wait_until(lambda: sessions(fake_server) == 1)
        for i in range(200):  # about 6.4 MB: past the bound and any socket buffers
            reply = requests.post(fake_server.url + "/api/settings", json={"system_prompt": f"{i} {PROMPT}"},
                                  timeout=HELD_UP_S)  # a POST held up would never come back
            assert reply.status_code == 200
        assert sessions(fake_server) == 1 and writers() == before + 1  # behind, never cut off meanwhile
        [hang_up] = HangUp.armed
        assert hang_up.interval == ChatSession.hang_up_after
        hang_up.function()  # its time is up
        assert wait_until(lambda: sessions(fake_server) == 0 and writers() == before)
        assert requests.get(fake_server.url + "/api/health", timeout=5).status_code == 200
    finally:
        silent.close()
