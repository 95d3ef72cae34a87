"""Faults of the engine behind specchat, through the real server and websocket: an OpenAI-compatible peer that
refuses, hangs, fails, closes mid-stream or sends junk, and an MTPLX daemon killed mid-reply. Each reply ends
with one done that says what went wrong (or, for a hang, with Stop), and the next turn works."""

import os
import signal
import time

import pytest
import requests

from tests.support.fake_mtplx import control, free_port, install_mtplx, pid_alive
from tests.support.fault_peer import FaultPeer
from tests.support.wsclient import WsClient, texts
from tests.support.poll import wait_until


@pytest.fixture
def peer():
    peer = FaultPeer()
    yield peer
    peer.stop()


def reply_works(ws: WsClient, id: str) -> None:
    done, frames = ws.chat(id, timeout=30)
    assert done["finish_reason"] == "stop" and texts(frames, "answer") == "Hello from the peer.", done


@pytest.mark.parametrize("fault, code, words", [
    ("500", "server_error", "500"),
    ("close", "connection_lost", ""),
    ("garbage", "not_openai", "OpenAI-compatible"),
    ("refuse", "unreachable", "Connection refused"),
])
def test_openai_peer_fault_ends_the_reply_with_an_error_and_the_next_turn_works(start_server, peer, fault, code,
                                                                                 words):
    server = start_server("--engine", "openai", "--base-url", peer.url)
    server.wait_ready(timeout=30)
    with WsClient(server.ws_url) as ws:
        reply_works(ws, "before")
        if fault == "refuse":
            peer.refuse()
        else:
            peer.fault = fault
        done, frames = ws.chat("faulty", timeout=30)
        assert done["finish_reason"] == "error", done
        error = done["error"]
        assert error["message"] and (words in error["message"]), error
        assert error["code"] == code, error
        if fault == "refuse":
            peer.accept()
        peer.fault = "ok"
        reply_works(ws, "after")
    assert server.stop() == 0
    assert not [line for line in server.lines if "Traceback" in line], "".join(server.lines[-40:])


def test_openai_peer_that_hangs_is_ended_by_stop_within_a_second(start_server, peer):
    server = start_server("--engine", "openai", "--base-url", peer.url)
    server.wait_ready(timeout=30)
    with WsClient(server.ws_url) as ws:
        peer.fault = "hang"
        ws.send({"type": "chat", "id": "hung", "text": "hello"})
        assert wait_until(lambda: peer.chats >= 1)
        time.sleep(0.3)
        start = time.monotonic()
        ws.send({"type": "stop", "id": "hung"})
        done, _ = ws.until("done", id="hung", timeout=10)
        assert time.monotonic() - start < 1.5 and done["finish_reason"] == "cancelled", done
        peer.fault = "ok"
        reply_works(ws, "after")
    assert server.stop() == 0


def test_mtplx_daemon_killed_mid_reply_ends_it_with_an_error_and_the_next_turn_works(start_server, tmp_path,
                                                                                      monkeypatch):
    bin_dir = tmp_path / "bin"
    install_mtplx(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MTPLX_READY_S", "0.2")
    url = f"http://127.0.0.1:{free_port()}"
    server = start_server("--engine", "mtplx", "--base-url", url, "--model", "org/Qwen3.8-9B-Distill-MTPLX-Q6G64")
    server.wait_ready(timeout=30)
    with WsClient(server.ws_url) as ws:
        assert ws.chat("before")[0]["finish_reason"] == "stop"
        pid = requests.get(url + "/health", timeout=5).json()["startup"]["pid"]
        control(url, "/fake/next", {"token_s": 0.2})  # slow enough to be killed mid-reply
        ws.send({"type": "chat", "id": "killed", "text": "hello"})
        ws.until("thinking", timeout=10)
        os.kill(pid, signal.SIGKILL)
        done, _ = ws.until("done", id="killed", timeout=15)
        assert done["finish_reason"] == "error" and done["error"]["code"] == "connection_lost", done
        assert "MTPLX stopped during the reply" in done["error"]["message"]
        done, frames = ws.chat("after", timeout=30)
        assert done["finish_reason"] == "stop" and texts(frames, "answer"), done
        assert requests.get(url + "/health", timeout=5).json()["startup"]["pid"] != pid
    assert server.stop() == 0
    assert not pid_alive(pid)
