"""The model specchat runs when no --model is given, made locally (no download)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_NAME = "tiny-qwen3_5"


def default_model(data_dir: Path) -> Path:
    """The bundled default checkpoint, built into ``data_dir`` on first use."""
    path = Path(data_dir) / "models" / DEFAULT_NAME
    if not (path / "config.json").is_file():
        from .tiny import build_tiny_checkpoint

        build_tiny_checkpoint(path)
    return path
