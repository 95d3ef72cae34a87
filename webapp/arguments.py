"""What specchat's commands (cli.py, drafter_command.py) share: the data folder's default and the hub id argument."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def default_data_dir() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "specchat"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "specchat"


def hub_id(text: str) -> str:
    from engines.registry import HUB_ID

    if not HUB_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a hub id: pass ORG/NAME, e.g. Qwen/Qwen3.5-9B")
    return text
