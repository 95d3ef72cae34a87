"""The model specchat runs when no --model is given: made by this project (see README.md here)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_MODEL = Path(__file__).resolve().parent / "specchat-demo"
