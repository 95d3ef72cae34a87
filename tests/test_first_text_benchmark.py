"""The first-text benchmark end to end on the demo model, one run: a row per example prompt whose numbers parse, and
both loops back on specchat's detokenizer after it."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from demo_model import DEFAULT_MODEL

pytestmark = pytest.mark.slow  # a whole benchmark run: with the long model runs, not the edit-test loop

ROOT = Path(__file__).resolve().parent.parent
SPREAD = r"[\d.]+ \([\d.]+-[\d.]+\)"


def test_first_text_benchmark_prints_each_prompt_with_both_detokenizers():
    out = subprocess.run([sys.executable, "-m", "benchmarks.first_text", "--runs", "1"], cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=300).stdout
    rows = re.findall(rf"^('.*'|\".*\") \| ({SPREAD}) \| ({SPREAD}) \| ({SPREAD})$", out, re.MULTILINE)
    shipped = json.loads((DEFAULT_MODEL / "examples.json").read_text())
    assert len(rows) == len(shipped), out
    assert all(float(library.split()[0]) > 0 and float(eager.split()[0]) > 0 for _, library, eager, _ in rows)
    assert re.search(rf"^every prompt: eager ÷ library {SPREAD}$", out, re.MULTILINE), out


def test_the_benchmark_puts_back_the_detokenizer_it_swapped():
    from mlx_vlm.tokenizer_utils import make_streaming_detokenizer

    from benchmarks.first_text import use_detokenizer
    from engines.mlx import detokenizer, own_loop, vlm_loop

    use_detokenizer("library")
    assert own_loop.streaming_detokenizer is vlm_loop.streaming_detokenizer is make_streaming_detokenizer
    use_detokenizer("eager")
    assert own_loop.streaming_detokenizer is vlm_loop.streaming_detokenizer is detokenizer.streaming_detokenizer
