"""Draft block auto on simulated rounds: its rules (engines/block_policy.py) judged apart from a machine's noise.

    python -m benchmarks.auto_sim --acceptance 0.82,0.75,0.64,0.51,0.43 [--draft 0.124] [--verify 1.07,1.08,1.06]
                                  [--rejection 0.15] [--noise 0.1] [--drift 0.15] [--runs 3] [--tokens 256]
                                  [--trials 30] [--seed 0]

Costs are in plain steps, as ``benchmarks.acceptance`` prints them: a round at block k costs (k − 1)·draft +
verify(k) (``--verify``: blocks 2, 3, …; deeper blocks as the last given), plus ``--rejection`` when it rejected a
draft. ``--acceptance`` is the acceptance by depth as that benchmark prints it (the share of rounds keeping depth
d; past those given, each depth keeps after the one before as often as the last given did). Every step's time is
scaled by noise (lognormal, ``--noise``) and by the machine's drift (a slow random walk of standard deviation
``--drift``: on a GPU machine drafter off moved 16-40% between runs of one process).

A trial is what the benchmark does: ``--runs`` replies of ``--tokens`` tokens in each lane, lanes interleaved
(drafter off, the best fixed block, auto through one ``Memory``, each run a new conversation); auto ÷ best is the
median of auto's per-run speed-ups over the median of the best block's. Printed: the expected speed-up of each
fixed block, and over the trials auto ÷ best as median (min-max), the share of trials within 5%, and the rounds
auto ran at each block. The spread is what one measurement of that many runs can show on such a machine.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from dataclasses import dataclass

from benchmarks.figures import spread
from engines.block_policy import BLOCKS, Memory

DRIFT_KEEP = 0.995  # per step: the drift's level keeps this much of itself (about 200 steps to forget)


@dataclass(frozen=True)
class Costs:
    acceptance: list[float]  # the share of rounds keeping depth 1, 2, …
    draft: float
    verify: list[float]  # blocks 2, 3, …
    rejection: float

    def kept(self, depth: int) -> float:
        """The share of rounds keeping depth ``depth``; past those given, each depth keeps when the one before
        was as often as the last given did."""
        given = self.acceptance
        if depth <= len(given):
            return given[depth - 1]
        last = given[-1] / given[-2] if len(given) > 1 else given[-1]
        return given[-1] * last ** (depth - len(given))

    def keep_chance(self, depth: int) -> float:
        """The chance depth ``depth`` is kept when the one before it was."""
        return self.kept(depth) / (self.kept(depth - 1) if depth > 1 else 1.0)

    def round(self, block: int) -> float:
        return (block - 1) * self.draft + self.verify[min(block, len(self.verify) + 1) - 2]

    def expected_speedup(self, block: int) -> float:
        tokens = 1 + sum(self.kept(d) for d in range(1, block))
        rejects = 1 - self.kept(block - 1)
        return tokens / (self.round(block) + rejects * self.rejection)


class Machine:
    """Step times with noise and a drifting rate."""

    def __init__(self, costs: Costs, noise: float, drift: float, rng: random.Random):
        self.costs, self.noise, self.drift, self.rng = costs, noise, drift, rng
        self.level = 0.0

    def _scale(self) -> float:
        step = math.sqrt(1 - DRIFT_KEEP ** 2) * self.drift
        self.level = DRIFT_KEEP * self.level + self.rng.gauss(0, step)
        return math.exp(self.level) * self.rng.lognormvariate(0, self.noise)

    def plain(self) -> float:
        return self._scale()

    def round(self, block: int) -> tuple[int, float]:
        """Drafts kept and seconds of a round at ``block``."""
        kept = 0
        while kept < block - 1 and self.rng.random() < self.costs.keep_chance(kept + 1):
            kept += 1
        seconds = self.costs.round(block) + (self.costs.rejection if kept < block - 1 else 0.0)
        return kept, seconds * self._scale()


def reply(machine: Machine, tokens: int, block: int = 1, policy=None, ran: dict | None = None) -> float:
    """Tokens per second of one reply at a fixed ``block`` (1: drafter off) or as ``policy`` chooses (the rounds
    it ran per block added to ``ran``)."""
    made, seconds = 0, 0.0
    while made < tokens:
        at = policy.block() if policy else block
        if at == 1:
            took, kept = machine.plain(), None
            made += 1
        else:
            kept, took = machine.round(at)
            made += kept + 1
        seconds += took
        if policy:
            policy.observe(at, kept, took)
            if ran is not None:
                ran[at] = ran.get(at, 0) + 1
    return made / seconds


def trial(costs: Costs, args, rng: random.Random) -> tuple[float, dict[int, int]]:
    machine = Machine(costs, args.noise, args.drift, rng)
    best = max(BLOCKS, key=costs.expected_speedup)
    memory, ran = Memory(), {}
    auto, fixed = [], []
    for run in range(args.runs):
        off = reply(machine, args.tokens, 1)
        fixed.append(reply(machine, args.tokens, best) / off)
        auto.append(reply(machine, args.tokens, policy=memory.policy(f"run {run}"), ran=ran) / off)
    return statistics.median(auto) / statistics.median(fixed), ran


def floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acceptance", type=floats, required=True)
    parser.add_argument("--draft", type=float, default=0.124)
    parser.add_argument("--verify", type=floats, default=[1.07, 1.08, 1.06, 1.07, 0.99])
    parser.add_argument("--rejection", type=float, default=0.15)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--drift", type=float, default=0.15)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    costs = Costs(args.acceptance, args.draft, args.verify, args.rejection)
    expected = {k: costs.expected_speedup(k) for k in BLOCKS}
    best = max(expected, key=expected.get)
    print("expected speed-up: " + ", ".join(f"block {k} {s:.2f}×" for k, s in expected.items()) + f"; best {best}")
    rng = random.Random(args.seed)
    ratios, ran = [], {}
    for _ in range(args.trials):
        ratio, rounds = trial(costs, args, rng)
        ratios.append(ratio)
        for block, n in rounds.items():
            ran[block] = ran.get(block, 0) + n
    within = sum(r >= 0.95 for r in ratios) / len(ratios)
    print(f"auto ÷ best over {args.trials} trials of {args.runs} runs × {args.tokens} tokens (noise {args.noise}, "
          f"drift {args.drift}): {spread(ratios)}; within 5% in {within:.0%}; rounds per block "
          f"{dict(sorted(ran.items()))}")


if __name__ == "__main__":
    sys.exit(main())
