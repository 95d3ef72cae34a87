"""A reply's first text: how soon each streaming detokenizer lets it out, on the same replies.

    python -m benchmarks.first_text [--model PATH] [--runs 5] [--block off|4|auto]

mlx-vlm's detokenizer for byte-level BPE ("library") holds a word until a token starting the next one arrives;
specchat's (engines/mlx/detokenizer.py, "eager") lets each token's text out with it. For each example prompt the
model ships (its examples.json; the demo model's by default), in the thinking mode the example names, replies in new
conversations alternate between the two (the order swapped each run), and the time from the reply's start to the
engine's first thinking or answer text is taken. Printed per prompt: each detokenizer's median (min-max) and the
median of eager ÷ library per run, and over all prompts the median ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from benchmarks.figures import spread

MODES = ("library", "eager")


def use_detokenizer(mode: str) -> None:
    """Both loops make their detokenizer with ``mode``'s factory from now on."""
    from mlx_vlm.tokenizer_utils import make_streaming_detokenizer

    from engines.mlx import detokenizer, own_loop, vlm_loop

    factory = make_streaming_detokenizer if mode == "library" else detokenizer.streaming_detokenizer
    own_loop.streaming_detokenizer = vlm_loop.streaming_detokenizer = factory


def first_text_ms(engine, text: str, thinking: bool, block, n: int) -> float:
    from engines import Answer, GenerationOptions, Message, Thinking, Turn, guarded

    options = GenerationOptions(reasoning_budget=512 if thinking else 0, temperature=0.0, max_tokens=16,
                                speculative=block != "off", **({} if block == "off" else {"draft_block_size": block}))
    turn = Turn(id=f"r{n}", conversation_id=f"c{n}", messages=[Message("user", text)], options=options)
    started, first = time.perf_counter(), None
    for event in guarded(engine.stream(turn)):
        if first is None and isinstance(event, (Thinking, Answer)) and event.text:
            first = time.perf_counter()
    return (first - started) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a checkpoint folder with examples.json (default: the demo model)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--block", default="off", help='"off" (drafting off), a block size, or "auto"')
    args = parser.parse_args()
    from webapp.blas import blas_in_use, ensure_fast_blas

    ensure_fast_blas(None, sys.argv[1:], module="benchmarks.first_text")
    from demo_model import DEFAULT_MODEL
    from engines import GenerationOptions
    from engines.base import read_examples
    from engines.mlx.engine import MlxEngine
    from webapp.measurement.machine import machine

    model = args.model or str(DEFAULT_MODEL)
    block = args.block if args.block in ("off", "auto") else int(args.block)
    engine = MlxEngine(model)
    engine.load(GenerationOptions())
    examples = read_examples(Path(model))
    if not examples:
        sys.exit(f"{model} has no examples.json to ask")
    print(f"machine: {machine()}; BLAS: {blas_in_use()}; model: {model}; block: {args.block}; {args.runs} runs")
    print("prompt | library: first text (ms) | eager | eager ÷ library")
    ratios, n = [], 0
    try:
        for example in examples:
            times = {mode: [] for mode in MODES}
            for run in range(args.runs):
                for mode in (MODES if run % 2 == 0 else MODES[::-1]):
                    use_detokenizer(mode)
                    times[mode].append(first_text_ms(engine, example.text, example.thinking, block, n))
                    n += 1
            per_run = [e / lib for e, lib in zip(times["eager"], times["library"])]
            ratios.append(statistics.median(per_run))
            print(f"{example.text[:40]!r} | {spread(times['library'], 1)} | {spread(times['eager'], 1)} | "
                  f"{spread(per_run)}")
    finally:
        use_detokenizer("eager")
        engine.unload()
    print(f"every prompt: eager ÷ library {spread(ratios)}")


if __name__ == "__main__":
    sys.exit(main())
