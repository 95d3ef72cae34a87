"""Streaming benchmarks, printed as ratios measured side by side in one run.

1. Streaming overhead: decode tok/s a browser-like websocket client sees ÷ the
   engine's own rate (the engine iterated in-process, no server), same model
   and settings, runs interleaved.
2. Prompt cache: time to first token of the next turn of a long conversation
   (≥ 4k tokens of history) ÷ a cold prompt of the same length.

    python -m benchmarks.streaming [--model DIR] [--rounds N]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.harness import ServerProcess, WsClient

SETTINGS = {"reasoning_budget": 64, "max_tokens": 400, "temperature": 0.0, "speculative": False}


def engine_rate(engine, options, n: int) -> float:
    """Decode tok/s measured on the engine's own events, in this process."""
    from engines import Answer, Message, Thinking, Turn, guarded

    turn = Turn(f"e{n}", f"bench-{n}", [Message("user", "measure the engine")], options)
    first = last = None
    tokens = 0
    for event in guarded(engine.stream(turn)):
        if isinstance(event, (Thinking, Answer)):
            last = time.perf_counter()
            first = first or last
        tokens = getattr(event, "stats", {}).get("tokens", tokens)
    return (tokens - 1) / (last - first)


def websocket_rate(ws: WsClient, n: int) -> float:
    """Decode tok/s as the client receives it: tokens over first-to-last delta arrival."""
    ws.send({"type": "chat", "id": f"w{n}", "text": "measure the engine"})
    first = last = None
    while True:
        frame = ws.recv()
        if frame["type"] in ("thinking", "answer"):
            last = time.perf_counter()
            first = first or last
        elif frame["type"] == "done":
            ws.send({"type": "new_chat"})
            ws.until("new_chat")
            return (frame["stats"]["tokens"] - 1) / (last - first)


def ttft(ws: WsClient, id: str, text: str) -> tuple[float, dict]:
    start = time.perf_counter()
    ws.send({"type": "chat", "id": id, "text": text})
    first = None
    while True:
        frame = ws.recv(timeout=600)
        if first is None and frame["type"] in ("thinking", "answer"):
            first = time.perf_counter()
        if frame["type"] == "done":
            return (first - start) * 1000, frame["stats"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder (default: a freshly built tiny qwen3_5)")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    from webapp.blas import blas_in_use, ensure_fast_blas

    # The engine measured here runs under the same BLAS as the server's.
    ensure_fast_blas(None, sys.argv[1:], module="benchmarks.streaming")
    work = Path(tempfile.mkdtemp(prefix="specchat-bench-"))
    if args.model is None:
        from demo_model.tiny import build_tiny_checkpoint

        args.model = str(build_tiny_checkpoint(work / "tiny-qwen3_5"))
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                         capture_output=True, text=True).stdout.strip() or platform.processor()
    print(f"machine: {platform.system()} {platform.machine()}, {cpu}, {__import__('os').cpu_count()} cores")
    print(f"model: {args.model}; settings: {SETTINGS}")
    import mlx.core  # noqa: F401  (maps the BLAS library)

    print(f"BLAS: {blas_in_use()}")

    from engines import GenerationOptions
    from engines.mlx import MlxEngine

    options = GenerationOptions().updated(SETTINGS)
    engine = MlxEngine(args.model)
    engine.load(options)
    server = ServerProcess(["--model", args.model], work / "data")
    server.wait_ready()
    try:
        with WsClient(server.ws_url) as ws:
            ws.send({"type": "settings", "values": SETTINGS})
            ws.until("settings")
            websocket_rate(ws, -1)  # warm both sides once
            engine_rate(engine, options, -1)
            own, through = [], []
            for n in range(args.rounds):
                own.append(engine_rate(engine, options, n))
                through.append(websocket_rate(ws, n))
            o, t = statistics.median(own), statistics.median(through)
            # Each websocket run is divided by the engine run just before it, so slow
            # spells of a shared machine hit both sides of a ratio alike.
            ratio = statistics.median(b / a for a, b in zip(own, through))
            print(f"streaming overhead: engine {o:.1f} tok/s, through websocket {t:.1f} tok/s (medians); "
                  f"websocket ÷ engine: median of {args.rounds} interleaved pairs' ratios {ratio:.3f} "
                  f"(min {min(b / a for a, b in zip(own, through)):.3f}, max "
                  f"{max(b / a for a, b in zip(own, through)):.3f}); ratio of the medians {t / o:.3f}")

            history = "the quick brown fox jumps over the lazy dog " * 140  # about 4.6k tokens
            ws.send({"type": "settings", "values": {"reasoning_budget": 16, "max_tokens": 16, "prefix_cache": True}})
            ws.until("settings")
            long_ms, first = ttft(ws, "long1", history)
            next_ms, second = ttft(ws, "long2", "and now a short follow-up question")
            total = second["prompt_tokens"]
            ws.send({"type": "new_chat"})
            ws.until("new_chat")
            ws.send({"type": "reset_cache"})
            ws.until("cache_reset")
            # A cold prompt as long as the follow-up's whole prompt.
            words = history.split()
            cold_text = " ".join(words[: int(len(words) * total / first["prompt_tokens"])])
            cold_ms, cold = ttft(ws, "cold", cold_text)
            print(f"prompt cache: next turn after {total - second['cached_tokens']} new of {total} tokens: "
                  f"TTFT {next_ms:.0f} ms (cached {second['cached_tokens']}); cold {cold['prompt_tokens']}-token "
                  f"prompt: {cold_ms:.0f} ms; ratio {next_ms / cold_ms:.3f}")
    finally:
        server.stop()
        engine.unload()


if __name__ == "__main__":
    sys.exit(main())
