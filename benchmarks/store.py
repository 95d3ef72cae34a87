"""The conversation store's costs, printed as figures measured in one run.

1. Search: p95 latency of ``GET /api/conversations?q=`` queries (whole words and
   prefixes) on a store of 1,000 conversations of 10 messages (bar: < 50 ms).
2. Streaming with the store on: decode tok/s a websocket client sees ÷ the
   engine's own rate, with replies stored as they stream and with storing
   skipped, runs interleaved (bar: ≥ 0.97 with the store on). The rates are
   measured as benchmarks/streaming.py measures them.

    python -m benchmarks.store [--model DIR] [--rounds N] [--queries N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.streaming import SETTINGS, engine_rate, websocket_rate

CONVERSATIONS = 1000
WORDS = ("speculative decoding drafter verify block budget thinking answer cache prefix token model weights "
         "arithmetic weekday convert units letters compare numbers kettle garden river planet violin orbit "
         "harbor lantern meadow quartz saffron tundra velvet walnut zephyr glacier canyon falcon").split()


def fill(store, conversations: int, exchanges: int, rng: random.Random) -> None:
    from webapp.conversations.conversation import new_message

    for n in range(conversations):
        parent, messages = None, []
        for _ in range(exchanges):
            user = new_message("user", parent, " ".join(rng.choices(WORDS, k=12)))
            reply = new_message("assistant", user["id"], " ".join(rng.choices(WORDS, k=60)))
            reply.update(finish_reason="stop", thinking=" ".join(rng.choices(WORDS, k=30)), stats={"tokens": 90})
            messages += [user, reply]
            parent = reply["id"]
        store.add(f"bench-{n}", messages, current=parent)


def search_p95(data_dir: Path, queries: int) -> tuple[float, float]:
    """(search p95 ms, list p95 ms) over the REST route, on a filled store."""
    from engines.fake import FakeEngine
    from webapp import create_app

    rng = random.Random(7)
    app = create_app(FakeEngine(), data_dir=data_dir)
    fill(app.extensions["specchat"].store, CONVERSATIONS, 5, rng)
    client = app.test_client()
    terms = [rng.choice(WORDS) for _ in range(queries // 2)]
    terms += [rng.choice(WORDS)[:3] for _ in range(queries // 4)]  # prefixes
    terms += [" ".join(rng.sample(WORDS, 2)) for _ in range(queries - len(terms))]  # two words
    searched, listed = [], []
    for term in terms:
        start = time.perf_counter()
        body = client.get("/api/conversations", query_string={"q": term}).get_json()
        searched.append((time.perf_counter() - start) * 1000)
        assert body["ok"], body
        start = time.perf_counter()
        client.get("/api/conversations")
        listed.append((time.perf_counter() - start) * 1000)
    return p95(searched), p95(listed)


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


class Served:
    """The app on a loopback port in this process, around an engine shared with the other measurements."""

    def __init__(self, engine, data_dir: Path, store_on: bool):
        from webapp import create_app
        from webapp.web.serving import make_server

        self.app = create_app(engine, data_dir=data_dir)
        if not store_on:
            store = self.app.extensions["specchat"].store
            store.add = store.save_reply = store.finish_reply = lambda *args, **kwargs: None
        self.server = make_server(self.app, "127.0.0.1", 0)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        self.ws_url = f"ws://127.0.0.1:{self.server.port}/ws"

    def stop(self) -> None:
        self.app.extensions["specchat"].cancel_all()
        self.server.stop()
        self.thread.join(timeout=10)


def streaming(model: str, work: Path, rounds: int) -> dict[str, list[float]]:
    """Per round: the engine's own rate, then the websocket's with the store on and off; ratios to the engine."""
    from engines import GenerationOptions
    from engines.mlx import MlxEngine
    from tests.support.harness import WsClient

    options = GenerationOptions().updated(SETTINGS)
    engine = MlxEngine(model)
    engine.load(options)
    served = {"on": Served(engine, work / "on", True), "off": Served(engine, work / "off", False)}
    clients = {key: WsClient(s.ws_url) for key, s in served.items()}
    try:
        for ws in clients.values():
            ws.send({"type": "settings", "values": SETTINGS})
            ws.until("settings")
            websocket_rate(ws, -1)  # warm up
        ratios: dict[str, list[float]] = {"on": [], "off": []}
        for n in range(rounds):
            for key in ("on", "off") if n % 2 == 0 else ("off", "on"):
                own = engine_rate(engine, options, n)
                ratios[key].append(websocket_rate(clients[key], n) / own)
        return ratios
    finally:
        for ws in clients.values():
            ws.close()
        for s in served.values():
            s.stop()
        engine.unload()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder for the streaming ratio (default: a freshly built tiny qwen3_5)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--queries", type=int, default=400)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="specchat-bench-store-"))
    searched, listed = search_p95(work / "search", args.queries)
    print(f"search: p95 {searched:.1f} ms over {args.queries} queries (words, prefixes, word pairs); list p95 "
          f"{listed:.1f} ms; store of {CONVERSATIONS:,} conversations of 10 messages "
          f"(bar < 50 ms: {'ok' if searched < 50 else 'FAILED'})")
    if args.model is None:
        from demo_model.tiny import build_tiny_checkpoint

        args.model = str(build_tiny_checkpoint(work / "tiny-qwen3_5"))
    ratios = streaming(args.model, work, args.rounds)
    on, off = statistics.median(ratios["on"]), statistics.median(ratios["off"])
    print(f"streaming: websocket ÷ engine tok/s, store on {on:.3f} ({min(ratios['on']):.3f}-{max(ratios['on']):.3f}), "
          f"store off {off:.3f} ({min(ratios['off']):.3f}-{max(ratios['off']):.3f}); medians (min-max) of "
          f"{args.rounds} interleaved runs (bar ≥ 0.97 with the store on: {'ok' if on >= 0.97 else 'FAILED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
