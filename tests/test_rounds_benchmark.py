"""The rounds benchmark end to end on the tiny model: step costs, launch shares and the table per block."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_rounds_benchmark_prints_step_costs_launch_shares_and_every_block(tiny_model):
    out = subprocess.run([sys.executable, "-m", "benchmarks.rounds", str(tiny_model), "--blocks", "2,3", "--runs", "2",
                          "--reps", "2", "--tokens", "12"],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=300).stdout
    assert re.search(r"plain step [\d.]+ ms; draft step c = [\d.]+ of it; verify 2: [\d.]+; verify 3: [\d.]+", out)
    shares = re.search(r"launch returned after \(share of the step\): plain ([\d.]+); draft ([\d.]+); "
                       r"verify 2 ([\d.]+); verify 3 ([\d.]+)", out)
    assert shares and all(0 < float(s) <= 1 for s in shares.groups()), out
    rows = re.findall(r"^(\d) \| [\d.]+ \([\d.]+-[\d.]+\) \| [\d.]+ \(", out, re.MULTILINE)
    assert rows == ["2", "3"], out
