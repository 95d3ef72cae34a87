"""The chat page, with static URLs that change when a file's content does."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from flask import Blueprint, current_app, render_template, url_for

bp = Blueprint("pages", __name__)


@lru_cache(maxsize=256)
def _digest(path: Path, mtime: float) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def asset(filename: str) -> str:
    path = Path(current_app.static_folder) / filename
    return url_for("static", filename=filename, v=_digest(path, path.stat().st_mtime))


@bp.get("/")
def index():
    return render_template("chat.html", asset=asset, title="specchat")
