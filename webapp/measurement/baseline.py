"""The drafter-off decode rate of each engine and model on this machine: what drafting has to beat.

It comes from the last race's drafter-off lane, or from a short calibration
reply; the UI compares a drafter-on reply's rate with it.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import orjson

from engines import Engine, EngineInfo, GenerationOptions, Message
from engines.cancel import Relay

from ..atomic import write_json
from .lanes import Lane, LaneReply, LaneRun

log = logging.getLogger(__name__)
CALIBRATION_PROMPT = "What can you do?"
CALIBRATION_TOKENS = 64


class Baselines:
    """Kept in ``baselines.json`` in the data dir, by engine and model."""

    def __init__(self, data_dir: Path | None):
        self._path = Path(data_dir) / "baselines.json" if data_dir else None
        self._lock = threading.Lock()
        self._all = self._read()

    def _read(self) -> dict:
        if self._path is None or not self._path.exists():
            return {}
        try:
            saved = orjson.loads(self._path.read_bytes())
            return saved if isinstance(saved, dict) else {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable baselines in %s (%s)", self._path, exc)
            return {}

    @staticmethod
    def _key(info: EngineInfo) -> str:
        return f"{info.name}:{info.model}"

    def get(self, info: EngineInfo) -> dict | None:
        with self._lock:
            return self._all.get(self._key(info))

    def put(self, info: EngineInfo, tok_s: float, source: str, *, spread: dict | None = None,
            prompt_tokens: int | None = None, busy: dict | None = None) -> dict:
        """Remember ``tok_s`` (``source``: "race" or "calibration") for this engine and model, with what
        judging a reply against it needs: the runs' ``spread`` (its noise), the ``prompt_tokens`` it was
        measured at and whether the machine was ``busy``."""
        baseline = {"tok_s": tok_s, "source": source, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "spread": spread, "prompt_tokens": prompt_tokens, "busy": busy}
        with self._lock:
            self._all[self._key(info)] = baseline
            if self._path is not None:
                try:
                    write_json(self._path, self._all)
                except OSError as exc:  # it still holds until a restart
                    log.warning("could not save baselines in %s: %s", self._path, exc)
        return baseline


def calibrate(engine: Engine, options: GenerationOptions, cancel: Relay) -> LaneRun:
    """A short greedy reply with the drafter and thinking off, on a fixed prompt, that ``cancel`` ends
    (raises EngineError when the engine cannot start it)."""
    lane = Lane("off", {"lane": "off"}, options.updated(
        {"speculative": False, "temperature": 0.0, "reasoning_budget": 0, "max_tokens": CALIBRATION_TOKENS}))
    reply = LaneReply(engine, "calibration", lane, 0, 0, [Message("user", CALIBRATION_PROMPT)])
    reply.open(cancel)
    # Played even when a message cancelled it already: the opened stream then ends at once and frees the
    # engine, where skipping it left no result and the engine held until the stream was collected.
    return reply.play(lambda frame: None)
