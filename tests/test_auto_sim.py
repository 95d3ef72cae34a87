"""Auto on simulated rounds (benchmarks/auto_sim.py): the costs, the acceptance it draws, a trial, the command."""

import random
import re
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from benchmarks.auto_sim import Costs, Machine, trial

ROOT = Path(__file__).resolve().parent.parent
FLAT = Costs(acceptance=[1.0], draft=0.12, verify=[1.05], rejection=0.15)


def test_a_fixed_block_is_priced_from_its_tokens_its_steps_and_its_rejections():
    costs = Costs(acceptance=[0.8, 0.4], draft=0.1, verify=[1.2, 1.4], rejection=0.3)
    # Block 3: 1 + 0.8 + 0.4 tokens for 2 drafts, a verify of 3 and a rejection in 60% of rounds.
    assert costs.expected_speedup(3) == pytest.approx(2.2 / (0.2 + 1.4 + 0.6 * 0.3))
    # Deeper than given: the last verify holds, and each depth keeps after the one before as the last did.
    assert costs.round(5) == pytest.approx(0.4 + 1.4)
    assert costs.kept(4) == pytest.approx(0.4 * 0.5 * 0.5)
    assert costs.expected_speedup(2) == pytest.approx(1.8 / (0.1 + 1.2 + 0.2 * 0.3))


def test_the_rounds_keep_each_depth_as_often_as_asked():
    machine = Machine(Costs([0.8, 0.4], 0.1, [1.2, 1.4], 0.3), noise=0.0, drift=0.0, rng=random.Random(3))
    kept = [machine.round(3)[0] for _ in range(20000)]
    assert sum(k >= 1 for k in kept) / len(kept) == pytest.approx(0.8, abs=0.02)
    assert sum(k >= 2 for k in kept) / len(kept) == pytest.approx(0.4, abs=0.02)
    # Without noise a round costs exactly its parts, a rejection included.
    assert {round(machine.round(3)[1], 9) for _ in range(200)} == {round(0.2 + 1.4, 9), round(0.2 + 1.4 + 0.3, 9)}


def test_at_full_acceptance_on_a_flat_verify_auto_climbs_to_the_deepest_block():
    args = Namespace(noise=0.02, drift=0.0, runs=3, tokens=256)
    ratio, ran = trial(FLAT, args, random.Random(0))
    assert max(ran, key=ran.get) == 8, ran
    assert ratio > 0.85


def test_the_command_prints_each_block_and_auto_against_the_best():
    out = subprocess.run([sys.executable, "-m", "benchmarks.auto_sim", "--acceptance", "0.54,0.33,0.15,0.08,0.06",
                          "--trials", "3"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120).stdout
    assert re.search(r"expected speed-up: block 2 [\d.]+×, .*block 8 [\d.]+×; best 3\n", out), out
    assert re.search(r"auto ÷ best over 3 trials of 3 runs × 256 tokens \(noise 0.1, drift 0.15\): "
                     r"[\d.]+ \([\d.]+-[\d.]+\); within 5% in \d+%; rounds per block \{", out), out
