"""The OpenAI-compatible API's cost, printed as ratios measured side by side in one run: the decode rate a client
reads from ``POST /v1/chat/completions`` (streamed) ÷ the engine's own, and the time to first token through the
API minus the engine's; same model and settings, runs interleaved, each API run paired with the engine run just
before it.

    python -m benchmarks.api [--model DIR] [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import orjson
import requests

from benchmarks.figures import spread
from tests.support.harness import ServerProcess

PROMPT = "What is 4821 + 3977?"
SETTINGS = {"reasoning_budget": 512, "max_tokens": 256, "temperature": 0.0, "speculative": True,
            "draft_block_size": 4}


def engine_run(engine, options, n: int) -> tuple[float, float]:
    """(time to first token in ms, decode tok/s) on the engine's own events, in this process."""
    from engines import Answer, Message, Thinking, Turn, guarded

    turn = Turn(f"e{n}", f"bench-{n}", [Message("user", PROMPT)], options)
    start, first, last, tokens = time.perf_counter(), None, None, 0
    for event in guarded(engine.stream(turn)):
        if isinstance(event, (Thinking, Answer)):
            last = time.perf_counter()
            first = first or last
        tokens = getattr(event, "stats", {}).get("tokens", tokens)
    engine.forget(turn.conversation_id)
    return (first - start) * 1000, (tokens - 1) / (last - first)


def api_run(url: str, model: str, system: str) -> tuple[float, float]:
    """(time to first token in ms, decode tok/s) as a streaming client reads them."""
    body = {"model": model, "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": PROMPT}],
            "temperature": SETTINGS["temperature"], "max_tokens": SETTINGS["max_tokens"],
            "reasoning_budget": SETTINGS["reasoning_budget"], "speculative": SETTINGS["speculative"],
            "draft_block_size": SETTINGS["draft_block_size"]}
    start, first, last, tokens = time.perf_counter(), None, None, 0
    with requests.post(url + "/v1/chat/completions", json=body, stream=True, timeout=300) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith(b"data: {"):
                continue
            chunk = orjson.loads(line[6:])
            delta = chunk["choices"][0]["delta"] if chunk["choices"] else {}
            if delta.get("content") or delta.get("reasoning_content"):
                last = time.perf_counter()
                first = first or last
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    return (first - start) * 1000, (tokens - 1) / (last - first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder (default: the bundled demo model)")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    from webapp.blas import blas_in_use, ensure_fast_blas

    ensure_fast_blas(None, sys.argv[1:], module="benchmarks.api")  # the engine here runs on the server's BLAS
    from demo_model import DEFAULT_MODEL
    from engines import GenerationOptions
    from engines.mlx import MlxEngine
    from webapp.measurement.machine import machine

    model = args.model or str(DEFAULT_MODEL)
    print(f"machine: {machine()}")
    import mlx.core  # noqa: F401  (maps the BLAS library)

    print(f"model: {model}; BLAS: {blas_in_use()}; settings: {SETTINGS}; prompt: {PROMPT!r}")
    options = GenerationOptions().updated(SETTINGS)
    engine = MlxEngine(model)
    engine.load(options)
    server = ServerProcess(["--model", model], Path(tempfile.mkdtemp(prefix="specchat-bench-")) / "data")
    server.wait_ready()
    try:
        served = requests.get(server.url + "/v1/models", timeout=10).json()["data"][0]["id"]
        engine_run(engine, options, -1)  # warm both sides once
        api_run(server.url, served, options.system_prompt)
        rates, ttfts = [], []
        for n in range(args.rounds):
            own = engine_run(engine, options, n)
            through = api_run(server.url, served, options.system_prompt)
            rates.append(through[1] / own[1])
            ttfts.append(through[0] - own[0])
        print(f"decode rate through the API ÷ the engine's: {spread(rates, 3)} (median, min-max of {args.rounds} "
              "interleaved pairs)")
        print(f"time to first token through the API − the engine's: {spread(ttfts, 1)} ms")
    finally:
        server.stop()
        engine.unload()


if __name__ == "__main__":
    sys.exit(main())
