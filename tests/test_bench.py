"""``specchat bench`` end to end, as a subprocess on the tiny model."""

import json

import pytest

from tests.support.harness import bench
from webapp.blas import find_openblas


def test_bench_prints_a_table_and_writes_json(tiny_model, tmp_path):
    out = tmp_path / "bench.json"
    done = bench("--model", str(tiny_model), "--prompt", "first prompt", "--prompt", "second prompt",
                 "--blocks", "1,2,3", "--runs", "2", "--max-tokens", "12", "--budget", "6", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "12/12" in done.stderr and "[" in done.stderr  # the progress bar: 2 runs × 2 prompts × 3 blocks
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("block"))
    assert "tok/s median (min-max)" in lines[header] and "identical" in lines[header]
    assert [line.split()[0] for line in lines[header + 1:]] == ["1", "2", "3"]

    report = json.loads(out.read_text())
    assert set(report) >= {"machine", "model", "drafter", "runs", "rows"}
    assert report["model"] == str(tiny_model) and report["runs"] == 2 and report["drafter"]
    assert set(report["machine"]) == {"cpu", "cores", "os", "accelerator", "blas"}
    # The same BLAS as the server: OpenBLAS preloaded where the system has it.
    assert report["machine"]["blas"].startswith("OpenBLAS") == bool(find_openblas("auto"))
    rows = report["rows"]
    assert [row["block"] for row in rows] == [1, 2, 3]
    for row in rows:
        assert set(row) >= {"block", "tok_s", "speedup", "acceptance", "mean_accepted", "identical"}
        assert row["tok_s"]["min"] <= row["tok_s"]["median"] <= row["tok_s"]["max"]
        assert row["identical"] is True  # greedy: drafting never changes the output
        assert row["speedup_range"]["min"] <= row["speedup"] <= row["speedup_range"]["max"]
        assert row["runs"] == 4
    assert rows[0]["speedup"] == 1.0 and rows[0]["acceptance"] is None
    assert 0 <= rows[2]["acceptance"] <= 1
    table_row = next(line for line in lines if line.startswith("2 "))
    assert f"{rows[1]['tok_s']['median']} ({rows[1]['tok_s']['min']}-{rows[1]['tok_s']['max']})" in table_row
    # Each block's 4 pairs (2 runs × 2 prompts) judged: min–max holds the median with 87.5%, too little to call.
    for row in rows[1:]:
        ratios = row["ratios"]
        assert len(ratios) == 4 and row["wins"] == sum(r > 1 for r in ratios) and row["verdict"] == "unclear"
        assert row["confidence"] == {"low": min(ratios), "high": max(ratios), "coverage": 0.875}
    assert "verdict, pairs won (interval)" in lines[header]
    assert f"unclear {rows[1]['wins']}/4 (88%: {min(rows[1]['ratios'])}-{max(rows[1]['ratios'])}x)" in table_row
    assert set(report["busy"]) == {"percent", "flagged", "threshold"}
    assert ("The machine was busy" in done.stdout) is report["busy"]["flagged"]


def test_bench_runs_both_decode_loops_side_by_side(tiny_model, tmp_path):
    out = tmp_path / "loops.json"
    done = bench("--model", str(tiny_model), "--prompt", "a prompt", "--blocks", "1,3", "--runs", "2",
                 "--max-tokens", "10", "--budget", "0", "--loop", "both", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "specchat loop" in done.stdout and "mlx-vlm loop" in done.stdout
    assert "specchat loop ÷ mlx-vlm loop" in done.stdout
    report = json.loads(out.read_text())
    assert [(row["loop"], row["block"]) for row in report["rows"]] == [
        ("specchat", 1), ("specchat", 3), ("mlx-vlm", 1), ("mlx-vlm", 3)]
    assert [c["block"] for c in report["loops"]] == [1, 3]
    for compared in report["loops"]:
        assert compared["identical"] is True  # greedy: both loops say the same
        assert compared["ratio"]["min"] <= compared["ratio"]["median"] <= compared["ratio"]["max"]


@pytest.mark.parametrize("args, says", [
    (["--blocks", "2,3"], "block 1"),
    (["--blocks", "1,x"], "comma-separated"),
    (["--runs", "0"], "1 to 99"),
    (["--max-tokens", "0"], "max_tokens"),
    (["--model", "/nonexistent/model"], "does not exist"),
    (["--prompts", "/nonexistent/prompts.txt"], "cannot read"),
    (["--drafter", "none", "--blocks", "1,2"], "--drafter none"),
    (["--json", "/nonexistent/dir/out.json"], "does not exist"),
    (["--frobnicate"], "unrecognized"),
    (["--loop", "fastest"], "invalid choice"),
    (["--image", "/nonexistent/picture.png"], "cannot read --image"),
    (["--image", __file__], "not an image"),
])
def test_bad_arguments_exit_2_with_one_line(args, says):
    done = bench(*args, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("specchat bench: ") and says in done.stderr and "Traceback" not in done.stderr


def test_bench_with_an_image_gives_the_first_token_parts(tmp_path):
    from PIL import Image

    Image.new("RGB", (40, 30), (1, 2, 3)).save(tmp_path / "a.png")
    out = tmp_path / "bench.json"
    done = bench("--engine", "fake", "--image", str(tmp_path / "a.png"), "--image", str(tmp_path / "a.png"),
                 "--blocks", "1,2", "--runs", "2", "--max-tokens", "8", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "2 image(s) each" in done.stdout
    parts = done.stdout.split("time to first token ms")[1].splitlines()
    assert [line.split()[0] for line in parts[1:3]] == ["1", "2"] and parts[1].split()[-1] == "32"
    report = json.loads(out.read_text())
    assert report["images"] == [{"sha256": report["images"][0]["sha256"], "mime": "image/png", "width": 40,
                                 "height": 30}] * 2
    assert [row["image_tokens"] for row in report["rows"]] == [32, 32]
