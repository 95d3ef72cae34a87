"""The model specchat runs when no --model is given, made by this project (README.md here; the lab that made it is
the top-level training/), and the builders of the checkpoints tests and benchmarks run on (tiny.py, hf_layout.py,
rig.py). Imports nothing of specchat."""

from __future__ import annotations

from pathlib import Path

DEFAULT_MODEL = Path(__file__).resolve().parent / "specchat-demo"  # the one place its path is named
