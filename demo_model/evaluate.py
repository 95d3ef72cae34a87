"""Measure the demo checkpoint against its bars, on held-out prompts, on this CPU.

Prints: exact-match accuracy on held-out 2-3 digit add/subtract questions with
thinking on; whether every thinking block closed; whether thinking-off replies
hold no reasoning; whether greedy output is identical with and without the MTP
drafter; MTP acceptance per draft block size; and decode tok/s with the drafter
divided by without it, measured side by side in this one process.

On Linux the mlx-cpu wheel's reference BLAS makes a k-token verify cost about k
single steps, so speculative decoding cannot pay; the script re-runs itself with
the system's OpenBLAS preloaded when one is installed, as specchat does
(``--blas bundled`` keeps the wheel's BLAS), and says which BLAS it measured with.

    python -m demo_model.evaluate demo_model/specchat-demo
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from webapp.blas import blas_in_use, ensure_fast_blas

from . import corpus

ANSWER_NUMBER = re.compile(r"-?\d+")
BARS = {"accuracy": 0.90, "acceptance_2": 0.70, "acceptance_3": 0.55, "speedup": 1.3}


@dataclass
class Reply:
    text: str
    tokens: list[int]
    decode_s: float  # first token to last token


class Runner:
    def __init__(self, checkpoint: str):
        import json

        from mlx_vlm import load
        from mlx_vlm.speculative.drafters import load_drafter

        self.model, self.processor = load(checkpoint)[:2]
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.config = json.loads((Path(checkpoint) / "config.json").read_text())
        self.drafter, self.kind = load_drafter(checkpoint)

    def prompt_ids(self, messages: list[dict], thinking: bool) -> list[int]:
        from mlx_vlm.prompt_utils import apply_chat_template

        text = apply_chat_template(self.processor, self.config, messages, enable_thinking=thinking)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(self, ids: list[int], block: int | None, max_tokens: int = 400) -> Reply:
        import mlx.core as mx
        from mlx_vlm import stream_generate

        kwargs = {}
        if block is not None:
            kwargs = {"draft_model": self.drafter, "draft_kind": self.kind, "draft_block_size": block}
        text, tokens, first, last = "", [], None, None
        for chunk in stream_generate(
            self.model, self.processor, "", input_ids=mx.array([ids]), max_tokens=max_tokens, temperature=0.0, **kwargs
        ):
            text += chunk.text
            if chunk.finish_reason is None:  # the final chunk repeats the last token
                tokens.append(int(chunk.token))
                last = time.perf_counter()
                first = first or last
        return Reply(text, tokens, (last - first) if first else 0.0)

    def stats(self):
        from mlx_vlm.speculative.common import speculative_stats_snapshot

        return speculative_stats_snapshot(self.drafter)

    def since(self, snapshot) -> tuple[int, int]:
        from mlx_vlm.speculative.common import speculative_stats_since

        _, accepted, drafted = speculative_stats_since(self.drafter, snapshot)
        return accepted or 0, drafted or 0


def messages(user: str) -> list[dict]:
    return [{"role": "system", "content": corpus.DEFAULT_SYSTEM}, {"role": "user", "content": user}]


def answer_number(text: str) -> int | None:
    answer = text.split("</think>")[-1]
    numbers = ANSWER_NUMBER.findall(answer)
    return int(numbers[-1]) if numbers else None


def other_prompts(seed: int, count: int) -> list[corpus.Exchange]:
    """Questions from every skill but add/subtract, with their reference reasoning and answers."""
    rng = random.Random(seed)
    skills = [t[0] for t in corpus.TASKS if t[0] is not corpus.add_sub]
    return [skills[i % len(skills)](rng) for i in range(count)]


def pct(x: float) -> str:
    return f"{x:.1%}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--questions", type=int, default=200, help="held-out arithmetic questions")
    parser.add_argument("--prompts", type=int, default=24, help="held-out prompts for identity and acceptance")
    parser.add_argument("--blocks", default="2,3,4", help="draft block sizes to measure")
    parser.add_argument("--speed-rounds", type=int, default=3, help="side-by-side speed passes")
    parser.add_argument("--blas", default="auto", help="auto (OpenBLAS when installed), bundled, or a library path")
    args = parser.parse_args()
    ensure_fast_blas(args.blas, sys.argv[1:], module="demo_model.evaluate")
    blocks = [int(b) for b in args.blocks.split(",")]
    import mlx.core as mx
    import mlx_vlm

    runner = Runner(args.checkpoint)
    print(f"checkpoint {args.checkpoint}; mlx {mx.__version__}, mlx-vlm {mlx_vlm.__version__}, "
          f"device {mx.default_device()}, {os.cpu_count()} CPUs; BLAS: {blas_in_use()}; drafter kind {runner.kind}")
    failures = []

    # 1. Held-out arithmetic, thinking on, no drafter.
    t0 = time.time()
    questions = [(ex.user, expected) for ex, expected in corpus.held_out_arithmetic(args.questions)]
    correct = closed = 0
    plain: dict[tuple[str, bool], Reply] = {}
    for question, expected in questions:
        reply = runner.generate(runner.prompt_ids(messages(question), True), None)
        plain[(question, True)] = reply
        closed += "</think>" in reply.text
        correct += answer_number(reply.text) == expected
        if answer_number(reply.text) != expected and len(failures) < 5:
            failures.append(f"{question} expected {expected}, got {reply.text.split('</think>')[-1].strip()!r}")
    accuracy = correct / len(questions)
    print(f"\narithmetic (held-out 2-3 digit add/subtract, thinking on, {len(questions)} questions, "
          f"{time.time() - t0:.0f}s): exact match {correct}/{len(questions)} = {pct(accuracy)} "
          f"(bar >= {pct(BARS['accuracy'])}) {verdict(accuracy >= BARS['accuracy'])}")
    for f in failures:
        print(f"  wrong: {f}")
    print(f"thinking blocks closed: {closed}/{len(questions)} {verdict(closed == len(questions))}")

    # 2. Thinking off: an answer straight away, with no reasoning in it.
    others = other_prompts(4242, args.prompts)
    arithmetic_off = questions[: args.prompts // 2]
    off_prompts = [(q, None) for q, _ in arithmetic_off] + [(ex.user, ex) for ex in others]
    clean = 0
    for user, ex in off_prompts:
        reply = runner.generate(runner.prompt_ids(messages(user), False), None)
        plain[(user, False)] = reply
        first_reasoning_line = ex.reasoning.splitlines()[0] if ex else "column by column"
        clean += "<think>" not in reply.text and "</think>" not in reply.text and first_reasoning_line not in reply.text
    print(f"thinking off: {clean}/{len(off_prompts)} replies hold no reasoning "
          f"{verdict(clean == len(off_prompts))}")

    # 3. Held-out prompts with the drafter: identical greedy output, and acceptance per block size.
    on_prompts = [(q, True) for q, _ in questions[: args.prompts // 2]] + [(ex.user, True) for ex in others]
    on_prompts += [(user, False) for user, _ in off_prompts[: args.prompts // 2]]
    for user, thinking in on_prompts:
        if (user, thinking) not in plain:
            plain[(user, thinking)] = runner.generate(runner.prompt_ids(messages(user), thinking), None)
    acceptance = {}
    identical = True
    for block in blocks:
        snapshot = runner.stats()
        same = 0
        for user, thinking in on_prompts:
            reply = runner.generate(runner.prompt_ids(messages(user), thinking), block)
            same += reply.tokens == plain[(user, thinking)].tokens
        accepted, drafted = runner.since(snapshot)
        acceptance[block] = accepted / drafted if drafted else 0.0
        identical &= same == len(on_prompts)
        bar = BARS.get(f"acceptance_{block}")
        print(f"draft_block_size {block}: greedy output identical on {same}/{len(on_prompts)} prompts; "
              f"acceptance {accepted}/{drafted} = {pct(acceptance[block])}"
              + (f" (bar >= {pct(bar)}) {verdict(acceptance[block] >= bar)}" if bar else ""))
    print(f"greedy output identical with and without the drafter: {verdict(identical)}")

    # 4. Decode speed, side by side: each prompt runs without and with the drafter in turn.
    speed_prompts = [p for p in on_prompts if p[1]][: max(4, args.prompts // 3)]
    modes = [None, *blocks]
    tokens = {m: 0 for m in modes}
    seconds = {m: 0.0 for m in modes}
    for r in range(args.speed_rounds):
        for user, thinking in speed_prompts:
            ids = runner.prompt_ids(messages(user), thinking)
            for mode in modes[r % len(modes) :] + modes[: r % len(modes)]:
                reply = runner.generate(ids, mode)
                tokens[mode] += len(reply.tokens) - 1
                seconds[mode] += reply.decode_s
    base = tokens[None] / seconds[None]
    print(f"\ndecode speed ({len(speed_prompts)} prompts x {args.speed_rounds} passes, interleaved; "
          f"BLAS: {blas_in_use()}): no drafter {base:.1f} tok/s")
    ratios = {}
    for block in blocks:
        tps = tokens[block] / seconds[block]
        ratios[block] = tps / base
        print(f"  MTP drafter, draft_block_size {block}: {tps:.1f} tok/s = {ratios[block]:.2f}x")
    best = max(ratios, key=ratios.get)
    print(f"best: draft_block_size {best}, {ratios[best]:.2f}x (bar >= {BARS['speedup']}) "
          f"{verdict(ratios[best] >= BARS['speedup'])}")


if __name__ == "__main__":
    main()
