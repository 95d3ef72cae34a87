"""The acceptance benchmark end to end on the tiny model, and its chart: one rig's rows added to the record
(a rerun on the same rig replaces them) and the curve drawn from every rig in it."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from benchmarks.acceptance import auto_costs
from benchmarks.chart import COLOURS, add_run, draw, record_path

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # a whole benchmark run: with the long model runs, not the edit-test loop
def test_acceptance_benchmark_prints_every_block_and_auto_and_charts_them(tiny_model, tmp_path):
    chart = tmp_path / "curve.png"
    out = subprocess.run([sys.executable, "-m", "benchmarks.acceptance", str(tiny_model), "--blocks", "2,3,auto",
                          "--runs", "1", "--reps", "2", "--tokens", "12", "--chart", str(chart)],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=300).stdout
    assert re.search(r"start: model and drafter loaded [\d.]+ s, own loop checked [\d.]+ s", out), out
    assert re.findall(r"^(\d) \| [\d. ]+ \| [\d.]+ \| [\d.]+ \(", out, re.MULTILINE) == ["2", "3"], out
    assert re.search(r"^auto \(\w+\) \|", out, re.MULTILINE), out
    assert re.search(r"^auto: changes of block per run \d+ \(\d+-\d+\)", out, re.MULTILINE), out
    (run,) = json.loads(record_path(chart).read_text())
    assert run["model"] == str(tiny_model) and set(run["blocks"]) == {"2", "3", "auto"}
    assert 0 <= run["acceptance"] <= 1 and run["blocks"]["2"]["ideal"] > 0
    assert Image.open(chart).size == (1000, 640)


def rows(median: float) -> dict:
    return {"2": {"median": median, "min": median - 0.1, "max": median + 0.1, "ideal": median + 0.2},
            "auto": {"median": median, "min": median, "max": median}}


def test_a_rerun_on_a_rig_replaces_its_point_and_the_curve_spans_the_rigs(tmp_path):
    chart = tmp_path / "curve.png"
    add_run(chart, {"model": "rig-high", "acceptance": 0.95, "blocks": rows(2.0)})
    add_run(chart, {"model": "rig-low", "acceptance": 0.5, "blocks": rows(1.1)})
    runs = add_run(chart, {"model": "rig-high", "acceptance": 0.96, "blocks": rows(2.2)})
    assert [(r["model"], r["acceptance"]) for r in runs] == [("rig-low", 0.5), ("rig-high", 0.96)]
    draw(chart, runs, "title", "caption")
    image = Image.open(chart).convert("RGB")
    colours = {colour for _, colour in image.getcolors(1_000_000)}
    assert COLOURS[2] in colours and (0, 0, 0) in colours  # block 2's line and auto's
    assert COLOURS[3] not in colours  # no block 3 was measured: none is drawn


def test_auto_rounds_are_priced_at_the_fixed_lanes_means_for_the_same_blocks():
    fixed = {2: [(1, 1, 0.010), (0, 1, 0.014)], 4: [(3, 3, 0.020)], "auto": [(9, 9, 9.0)]}
    # Rounds at block 2 (1 drafted) and 4 (3 drafted) priced 0.012 and 0.020; block 5 has no lane.
    auto = [(1, 1, 0.018), (2, 3, 0.022), (4, 4, 0.5)]
    line = auto_costs(auto, fixed, [3, 1, 6])
    assert line == ("auto: changes of block per run 3 (1-6); its rounds at blocks with a fixed lane (2 of 3) took "
                    "1.25 of that lane's mean round")
    assert auto_costs([(4, 4, 0.5)], fixed, [0]) == "auto: changes of block per run 0 (0-0)"
