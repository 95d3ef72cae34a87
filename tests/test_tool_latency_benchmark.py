"""The tool-latency benchmark end to end on the scripted tool checkpoint, one run per mode: a row per mode whose
numbers parse, the next step prefilling only the result, and the acceptance inside the call apart."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a whole benchmark run: with the long model runs, not the edit-test loop

ROOT = Path(__file__).resolve().parent.parent
NUMBER = r"[\d.]+"
ROW = re.compile(rf"^(off|block 4|auto(?: \(\w+\))?) \| ({NUMBER}) \({NUMBER}-{NUMBER}\) \| (yes|NO) \| {NUMBER} \| "
                 rf"-?{NUMBER} \| {NUMBER}: {NUMBER} \+ {NUMBER} \((\d+) new of (\d+)\) \+ -?{NUMBER} \| -?{NUMBER} \| "
                 rf"{NUMBER}$", re.MULTILINE)


def test_tool_latency_benchmark_prints_a_row_per_mode_and_the_acceptance_inside_calls():
    out = subprocess.run([sys.executable, "-m", "benchmarks.tool_latency", "--runs", "1"], cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=300).stdout
    rows = ROW.findall(out)
    assert [row[0].split(" (")[0] for row in rows] == ["off", "block 4", "auto"], out
    for _, latency, _, new, total in rows:
        assert float(latency) > 0
        assert 0 < int(new) < int(total) / 20, out  # the conversation's cache was reused: only the result is new
    assert re.search(rf"the call's own step, cold: prefilled (\d+) tokens in {NUMBER} ms", out), out
    # The scripted drafter knows the call's tokens only: inside the call every draft is kept, elsewhere none.
    assert re.search(r"^block 4 \| 1\.000 \(1\.000-1\.000\) \| 0\.000 \(0\.000-0\.000\) \| 0\.\d+ ", out,
                     re.MULTILINE), out
