"""Drafting after an image, printed as ratios measured side by side in one run: the rig that sees (every draft
accepted, ``python -m demo_model.rig --vision``) answers one prompt with a 1024×1024 image, without it, and as text
as long as the image's prompt (which tells the image's own cost from a longer context's), drafter off and at each
block, all interleaved through the MLX engine. Per mode: the vision tower's time, the prefill,
the decode rates and each block's speed-up (median of per-run ratios, min-max); then the speed-up with the
image ÷ the speed-up on text; and a follow-up about the same image, whose time to first token (the image
served from the conversation's cache, not encoded again) ÷ the first turn's.

    python -m benchmarks.images [--model RIG] [--size cpu|4b] [--blocks 2,4] [--runs 5] [--tokens 256]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.figures import spread

PROMPT = "Describe what you see, word by word."


def picture(side: int) -> bytes:
    """A photo-like image (noise: nothing compresses it away) of ``side``² pixels, as PNG."""
    from PIL import Image

    out = io.BytesIO()
    Image.effect_noise((side, side), 48).convert("RGB").save(out, format="PNG")
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a rig built with --vision (default: a fresh one of --size)")
    parser.add_argument("--size", default="cpu", help="the rig to build when --model is not given")
    parser.add_argument("--blocks", default="2,4")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--side", type=int, default=1024, help="the image's width and height in pixels")
    args = parser.parse_args()
    from webapp.blas import blas_in_use, ensure_fast_blas
    from webapp.precision import keep_float32_exact

    keep_float32_exact()
    ensure_fast_blas(None, sys.argv[1:], module="benchmarks.images")
    from demo_model.rig import SIZES, build_rig
    from engines import GenerationOptions, Message, Turn, guarded
    from engines.mlx import MlxEngine
    from webapp.conversations.images import read_image
    from webapp.measurement.machine import machine

    model = args.model
    if model is None:
        shape = SIZES[args.size]
        model = str(build_rig(Path(tempfile.mkdtemp(prefix="specchat-rig-")) / f"rig-{args.size}-vision",
                              hidden=shape.hidden, layers=shape.layers, intermediate=shape.intermediate,
                              vocab=shape.vocab, dtype=shape.dtype, vision=True))
    image = read_image(picture(args.side)).as_image()
    blocks = [1] + [int(b) for b in args.blocks.split(",")]
    base = GenerationOptions(reasoning_budget=0, max_tokens=args.tokens, temperature=0.0)
    engine = MlxEngine(model)
    engine.load(base)
    import mlx.core as mx

    print(f"machine: {machine()}; MLX on {mx.default_device()}; BLAS: {blas_in_use()}")
    print(f"model: {model}; image {args.side}×{args.side}; {args.tokens} tokens; {args.runs} runs; blocks {blocks}")
    print("engine ready after " + ", ".join(f"{step} {seconds:.1f} s" for step, seconds in engine.load_phases))
    long_text = same_length_text(engine, base, image)
    modes = {"text": (PROMPT, ()), "image": (PROMPT, (image,)), "long text": (long_text, ())}
    results: dict[tuple[str, int], list[dict]] = {(m, b): [] for m in modes for b in blocks}
    order = [(m, b) for m in modes for b in blocks]
    follow_ups: list[tuple[dict, dict]] = []
    try:
        for run in range(-1, args.runs):  # run -1 warms every mode and block once, unrecorded
            turned = order[run % len(order):] + order[:run % len(order)] if run >= 0 else order
            for mode, block in turned:
                options = base.updated({"speculative": block > 1, "draft_block_size": max(block, 2)})
                turn = Turn(f"{mode}{block}-{run}", f"bench-{mode}-{block}-{run}",
                            [Message("user", modes[mode][0], images=modes[mode][1])], options)
                done = None
                for event in guarded(engine.stream(turn)):
                    done = event
                engine.forget(turn.conversation_id)
                if done.finish_reason == "error":
                    raise SystemExit(f"{mode}, block {block}: {done.error_message}")
                if run >= 0:
                    results[(mode, block)].append(done.stats)
            if run >= 0:
                follow_ups.append(follow_up(engine, base, image, run))
    finally:
        engine.unload()
    speedups = {}
    for mode in modes:
        off = results[(mode, 1)]
        stats = off[0]
        print(f"\n{mode}: prompt {stats['prompt_tokens']} tokens ({stats['image_tokens']} image tokens); "
              f"vision {spread([s['vision_ms'] for s in off], 1, ' ms')}; prefill "
              f"{spread([s['prefill_ms'] for s in off], 1, ' ms')}; time to first token "
              f"{spread([s['ttft_ms'] for s in off], 1, ' ms')}")
        print(f"  block 1 (drafter off): {spread([s['tok_s'] for s in off], 1, ' tok/s')}")
        for block in blocks[1:]:
            on = results[(mode, block)]
            ratios = [b["tok_s"] / a["tok_s"] for a, b in zip(off, on)]
            speedups[(mode, block)] = ratios
            acceptance = statistics.median(s["acceptance"] or 0 for s in on)
            print(f"  block {block}: {spread([s['tok_s'] for s in on], 1, ' tok/s')}, speed-up "
                  f"{spread(ratios, 2, '×')}, acceptance {acceptance:.1%}")
    print()
    for block in blocks[1:]:
        for other in ("text", "long text"):
            ratio = [i / t for i, t in zip(speedups[("image", block)], speedups[(other, block)])]
            print(f"block {block}: speed-up after the image ÷ speed-up on {other}: {spread(ratio, 3)}")
    first, then = zip(*follow_ups)
    print(f"follow-up about the same image: time to first token {spread([s['ttft_ms'] for s in then], 1, ' ms')} "
          f"÷ the first turn's {spread([s['ttft_ms'] for s in first], 1, ' ms')}: "
          f"{spread([b['ttft_ms'] / a['ttft_ms'] for a, b in follow_ups], 3)}; cached "
          f"{spread([s['cached_tokens'] for s in then], 0)} of {then[0]['prompt_tokens']} tokens; vision ms "
          f"{[s['vision_ms'] for s in then]}")


def same_length_text(engine, options, image) -> str:
    """The prompt lengthened with words until it takes as many tokens as the prompt with ``image`` does."""
    from engines import Message

    def size(text: str, images=()) -> int:
        return engine.prompt_size([Message("user", text, images=images)], options)[0]

    base, target = size(PROMPT), size(PROMPT, (image,))
    per_word = (size(PROMPT + " word" * 100) - base) / 100
    return PROMPT + " word" * round((target - base) / per_word)


def follow_up(engine, base, image, run: int) -> tuple[dict, dict]:
    """(the first turn's stats, a follow-up's about the same image in the same conversation), drafter on."""
    from engines import Answer, Message, Turn, guarded

    options = base.updated({"speculative": True, "draft_block_size": 4, "max_tokens": 32})
    said, stats = [Message("user", PROMPT, images=(image,))], []
    for n, text in enumerate(("", "And what comes after that?")):
        if text:
            said.append(Message("user", text))
        turn = Turn(f"f{run}-{n}", f"follow-{run}", list(said), options)
        answer = []
        for event in guarded(engine.stream(turn)):
            if isinstance(event, Answer):
                answer.append(event.text)
            done = event
        said.append(Message("assistant", "".join(answer)))
        stats.append(done.stats)
    engine.forget(f"follow-{run}")
    return stats[0], stats[1]


if __name__ == "__main__":
    sys.exit(main())
