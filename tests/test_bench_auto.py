"""``specchat bench --runs auto``: runs are added, up to 9, until every drafting block's speed-up is settled
(pairs.py), with stopping rules a reader can check by hand."""

import json

from engines import GenerationOptions
from tests.support.harness import bench
from webapp.measurement.bench import enough_runs, loop_lane
from webapp.measurement.lanes import LaneRun
from webapp.measurement.pairs import AUTO_MAX_PAIRS

OPTIONS = GenerationOptions()


def lanes(blocks=(1, 2), loops=("specchat",)):
    return [loop_lane(block, OPTIONS, loop) for loop in loops for block in blocks]


def runs(all_lanes, rates: dict, n: int) -> list[LaneRun]:
    """``n`` complete runs, each lane at ``rates[(loop, block)][run]`` tok/s (cycled)."""
    return [LaneRun(lane, run, 0, "same", finish_reason="stop",
                    stats={"tok_s": rates[lane.tag["loop"], lane.key][run % len(rates[lane.tag["loop"], lane.key])]})
            for run in range(n) for lane in all_lanes]


def first_enough(all_lanes, rates) -> int | None:
    """The number of runs after which --runs auto stops (None: it runs all 9)."""
    enough = enough_runs(all_lanes, sorted({lane.tag["loop"] for lane in all_lanes}))
    return next((n for n in range(1, AUTO_MAX_PAIRS + 1) if enough(runs(all_lanes, rates, n))), None)


def test_a_clear_speed_up_stops_at_five_pairs_the_fewest_with_90_percent_coverage():
    # 5 pairs of 2.0x: the sign test's interval [x(1), x(5)] covers 1 - 2/32 = 93.75% and lies above 1.
    assert first_enough(lanes(), {("specchat", 1): [10.0], ("specchat", 2): [20.0]}) == 5


def test_no_difference_stops_once_the_interval_is_within_ten_percent_of_the_median():
    # 1.0x in every pair: no verdict, but [1.0, 1.0] is within ±10% of the median 1.0.
    assert first_enough(lanes(), {("specchat", 1): [10.0], ("specchat", 2): [10.0]}) == 5


def test_pairs_that_swing_either_way_run_all_nine():
    # 0.5x, 2.0x, 0.5x, …: the interval straddles 1 and spans 0.5-2.0 at every count.
    assert first_enough(lanes(), {("specchat", 1): [10.0], ("specchat", 2): [5.0, 20.0]}) is None


def test_every_block_and_loop_must_be_settled():
    settled_and_not = {("specchat", 1): [10.0], ("specchat", 2): [20.0], ("specchat", 3): [5.0, 20.0]}
    assert first_enough(lanes(blocks=(1, 2, 3)), settled_and_not) is None
    two_loops = {("specchat", 1): [10.0], ("specchat", 2): [20.0], ("mlx-vlm", 1): [10.0], ("mlx-vlm", 2): [5.0, 20.0]}
    assert first_enough(lanes(loops=("specchat", "mlx-vlm")), two_loops) is None
    two_loops[("mlx-vlm", 2)] = [30.0]
    assert first_enough(lanes(loops=("specchat", "mlx-vlm")), two_loops) == 5


def test_bench_runs_auto_on_the_fake_engine_reports_the_runs_it_did(tmp_path):
    out = tmp_path / "auto.json"
    done = bench("--engine", "fake", "--runs", "auto", "--blocks", "1,2", "--max-tokens", "8", "--budget", "0",
                 "--json", str(out), timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["runs_auto"] is True and 1 <= report["runs"] <= AUTO_MAX_PAIRS
    assert f"{report['runs']} runs (auto)" in done.stdout
    assert {row["block"]: row["runs"] for row in report["rows"]} == {1: report["runs"], 2: report["runs"]}


def test_runs_must_be_a_count_or_auto():
    done = bench("--runs", "often", timeout=60)
    assert done.returncode == 2 and "or auto" in done.stderr


def test_runs_are_auto_unless_given():
    from webapp.measurement.bench import parse_args

    assert parse_args([]).runs == "auto" and parse_args(["--runs", "4"]).runs == 4


def test_bench_runs_block_auto_and_names_what_it_chose(tmp_path):
    out = tmp_path / "block-auto.json"
    done = bench("--engine", "fake", "--runs", "2", "--blocks", "1,3,auto", "--max-tokens", "12", "--budget", "0",
                 "--json", str(out), timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {row["block"]: row for row in json.loads(out.read_text())["rows"]}
    assert list(rows) == [1, 3, "auto"]
    auto = rows["auto"]
    assert auto["chose"].startswith("auto (") and auto["identical"] is True and auto["runs"] == 2
    assert sum(auto["block_history"].values()) > 0 and all(key.isdigit() for key in auto["block_history"])
    assert rows[3]["chose"] == "3" and set(rows[3]["block_history"]) == {"3"}
    assert rows[1]["block_history"] == {"1": rows[1]["block_history"]["1"]}
    lines = done.stdout.splitlines()
    assert any(line.startswith(auto["chose"] + " ") for line in lines)  # the table names the row by it


def test_blocks_take_auto_once():
    from webapp.measurement.bench import parse_args

    assert parse_args([]).blocks == [1, 2, 3, 4, "auto"]
    assert parse_args(["--blocks", "1,auto"]).blocks == [1, "auto"]
    done = bench("--blocks", "1,auto,auto", timeout=60)
    assert done.returncode == 2 and "each listed once" in done.stderr
