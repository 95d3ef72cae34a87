"""Soak: many turns, many connections and many tabs against one real server on the MLX engine.

1. Turns: ``--turns`` short replies (a new conversation every 10 turns) on the demo model. After a warm-up
   of 50 turns: the server's RSS growth (bar < 5%), its open files and threads (bar: flat), and the time to
   first token's p95 over the first and the last 100 turns (bar: flat, the last within 1.5× of the first).
2. Connections: 500 websocket connects and disconnects; the server's threads and open files before and after.
3. Tabs: 20 open tabs, one of them a slow reader (a small receive buffer, never read); how long a settings
   change takes to reach the 19 others, with the slow reader and without it, rounds interleaved.

    python -m benchmarks.soak [--turns N] [--model DIR]
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.support.harness import ServerProcess, WsClient

SETTINGS = {"max_tokens": 8, "reasoning_budget": 0, "temperature": 0.0}
WARM_UP = 50
QUESTIONS = ("What is 2 + 3?", "Which day comes after Monday?", "Spell cat backwards.", "Convert 2 km to m.")


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def turn(ws: WsClient, n: int) -> float:
    """One short reply; its time to first token in ms."""
    start = time.perf_counter()
    ws.send({"type": "chat", "id": f"t{n}", "text": QUESTIONS[n % len(QUESTIONS)]})
    first = None
    while True:
        frame = ws.recv(timeout=120)
        if first is None and frame["type"] in ("thinking", "answer"):
            first = time.perf_counter()
        if frame["type"] == "done" and frame.get("id") == f"t{n}":
            assert frame["finish_reason"] in ("stop", "length"), frame
            return ((first or time.perf_counter()) - start) * 1000
        if frame["type"] == "error":
            raise RuntimeError(frame)


def resources(server: ServerProcess) -> tuple[float, int, int]:
    return server.rss_mib(), server.fds(), server.threads()


def settle(server: ServerProcess, seconds: float = 1.0) -> None:
    time.sleep(seconds)  # sockets closing and their threads ending


def turns(server: ServerProcess, count: int) -> None:
    ttft: list[float] = []
    with WsClient(server.ws_url) as ws:
        ws.send({"type": "settings", "values": SETTINGS})
        ws.until("settings")
        start = time.perf_counter()
        for n in range(count):
            if n % 10 == 0:
                ws.send({"type": "new_chat"})
                ws.until("new_chat")
            ttft.append(turn(ws, n))
            if n + 1 == WARM_UP:
                settle(server)
                warm = resources(server)
        seconds = time.perf_counter() - start
        settle(server)
        end = resources(server)
    growth = (end[0] - warm[0]) / warm[0] * 100
    first, last = p95(ttft[WARM_UP:WARM_UP + 100]), p95(ttft[-100:])
    print(f"turns: {count} in {seconds:.0f} s ({seconds / count * 1000:.0f} ms a turn); after {WARM_UP} warm-up "
          f"turns RSS {warm[0]:.0f} → {end[0]:.0f} MiB ({growth:+.1f}%, bar < 5%: {'ok' if growth < 5 else 'FAILED'}), "
          f"open files {warm[1]} → {end[1]}, threads {warm[2]} → {end[2]} "
          f"({'flat' if (warm[1], warm[2]) == (end[1], end[2]) else 'NOT flat'})")
    print(f"  TTFT p95: turns {WARM_UP + 1}-{WARM_UP + 100} {first:.0f} ms, last 100 {last:.0f} ms "
          f"(ratio {last / first:.2f}, bar ≤ 1.5: {'ok' if last / first <= 1.5 else 'FAILED'}); "
          f"median over all {statistics.median(ttft):.0f} ms")


def connections(server: ServerProcess, count: int = 500) -> None:
    settle(server)
    before = resources(server)
    start = time.perf_counter()
    for _ in range(count):
        WsClient(server.ws_url).close()
    seconds = time.perf_counter() - start
    settle(server, 2)
    after = resources(server)
    same = (before[1], before[2]) == (after[1], after[2])
    print(f"connections: {count} connects and disconnects in {seconds:.0f} s; open files {before[1]} → {after[1]}, "
          f"threads {before[2]} → {after[2]} ({'nothing left behind' if same else 'LEFT BEHIND'})")


def silent_tab(port: int) -> socket.socket:
    """A tab that opens its socket with a 4 KiB receive buffer and never reads it."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    return sock


def broadcast_ms(sender: WsClient, watchers: list[WsClient], n: int) -> float:
    """A settings change from one tab until every watcher has it (a 4 KiB system prompt, to fill slow sockets)."""
    prompt = f"You are a helpful assistant ({n}). " + "x" * 4096
    start = time.perf_counter()
    sender.send({"type": "settings", "values": {"system_prompt": prompt}})
    for ws in (sender, *watchers):
        while True:
            frame, _ = ws.until("settings", timeout=30)
            if frame["values"]["system_prompt"] == prompt:
                break
    return (time.perf_counter() - start) * 1000


def tabs(server: ServerProcess, rounds: int = 30) -> None:
    clients = [WsClient(server.ws_url) for _ in range(19)]
    with_slow, without = [], []
    try:
        for n in range(rounds):
            if n % 2 == 0:
                slow = silent_tab(server.port)
                time.sleep(0.2)
                with_slow += [broadcast_ms(clients[0], clients[1:], 2 * n + k) for k in range(5)]
                slow.close()
                settle(server, 0.3)
            else:
                without += [broadcast_ms(clients[0], clients[1:], 2 * n + k) for k in range(5)]
    finally:
        for ws in clients:
            ws.close()
    a, b = statistics.median(with_slow), statistics.median(without)
    print(f"tabs: a settings change reaches 19 tabs in {a:.1f} ms (median, max {max(with_slow):.0f}) with a tab that "
          f"never reads, {b:.1f} ms (max {max(without):.0f}) without; ratio {a / b:.2f} "
          f"({len(with_slow)} and {len(without)} changes, rounds interleaved)")
    reset = WsClient(server.ws_url)
    reset.send({"type": "settings", "values": {"system_prompt": "You are a helpful assistant."}})
    reset.until("settings")
    reset.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--model", help="model folder (default: the bundled demo model)")
    args = parser.parse_args()
    if args.turns < WARM_UP + 100:
        parser.error(f"--turns must be at least {WARM_UP + 100}")
    work = Path(tempfile.mkdtemp(prefix="specchat-soak-"))
    server = ServerProcess(["--model", args.model] if args.model else [], work / "data")
    info = server.wait_ready(timeout=300)
    print(f"model: {info['model']}; settings: {SETTINGS}; {os.cpu_count()} cores")
    try:
        turns(server, args.turns)
        connections(server)
        tabs(server)
    finally:
        code = server.stop()
    failures = [line for line in server.lines if "Traceback" in line]
    print(f"server: exit status {code}, tracebacks in the log: {len(failures)}")
    return 0 if code == 0 and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
