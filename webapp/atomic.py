"""Writing a JSON file so that a reader, or a crash midway, never sees half of it."""

from __future__ import annotations

import os
from pathlib import Path

import orjson


def write_json(path: Path, data) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it, then swap it in (raises OSError)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
        os.replace(tmp, path)
    finally:
        if tmp.is_file():
            tmp.unlink()
