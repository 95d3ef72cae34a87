"""How much of the machine's CPU went to other work while specchat measured: numbers taken on a busy machine
are not representative, and summaries say so.

Linux: the machine's busy CPU time from /proc/stat (steal included: time the
hypervisor gave to other machines) less this process's own (``os.times``, every
thread), over all the CPU time there was. macOS: the load average less this
process's own CPU rate, over the cores. An engine served by another process on
this machine (mtplx, openai) counts as other work.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

THRESHOLD = 0.25  # a measurement is busy when more than this share of all cores' time went to other work


@dataclass(frozen=True)
class _Reading:
    wall: float  # seconds, monotonic
    own: float  # this process's CPU seconds
    busy: float | None  # the machine's non-idle CPU seconds since boot (Linux)
    total: float | None  # all its CPU seconds since boot, idle included (Linux)
    load: float | None  # 1-minute load average (elsewhere)


def _proc_stat() -> tuple[float, float] | None:
    """(busy, total) CPU seconds of all cores from /proc/stat's first line; None where there is none."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 5:
        return None
    ticks = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal (guest is in user)
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(ticks) - idle) / hz, sum(ticks) / hz


def _read() -> _Reading:
    times = os.times()
    stat = _proc_stat() if sys.platform.startswith("linux") else None
    load = None
    if stat is None and hasattr(os, "getloadavg"):
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = None
    return _Reading(time.monotonic(), times.user + times.system, *(stat or (None, None)), load)


class CpuWatch:
    """Started where a measurement starts; ``result()`` where it ends."""

    def __init__(self) -> None:
        self._start = _read()

    def result(self) -> dict | None:
        """``{percent, flagged, threshold}``: the share of the CPU (all cores) that went to other work, and
        whether that is over ``THRESHOLD``; None where the platform cannot tell or too little time passed."""
        end, start = _read(), self._start
        own = end.own - start.own
        if start.total is not None and end.total is not None:
            total = end.total - start.total
            if total <= 0:
                return None
            share = (end.busy - start.busy - own) / total
        elif start.load is not None and end.load is not None:
            wall, cores = end.wall - start.wall, os.cpu_count() or 1
            if wall <= 0:
                return None
            share = ((start.load + end.load) / 2 - own / wall) / cores
        else:
            return None
        return summary(min(max(share, 0.0), 1.0))


def summary(share: float) -> dict:
    """``{percent, flagged, threshold}`` for a share of the CPU, flagged by the percentage it reports, so that a share
    shown as exactly the threshold (0.2504 as 25.0%) is never flagged as over it."""
    shown = round(share * 100, 1)
    return {"percent": shown, "flagged": shown > THRESHOLD * 100, "threshold": round(THRESHOLD * 100)}


def describe(busy: dict | None) -> str | None:
    """The warning for a busy measurement, or None when it was not (or is not known to be)."""
    if not busy or not busy.get("flagged"):
        return None
    return (f"The machine was busy: {percent(busy)}% of the CPU went to other work, so these numbers "
            f"are not representative.")


def percent(busy: dict) -> int:
    """The busy share as a whole percentage, rounded half up as the page rounds it."""
    return math.floor(busy["percent"] + 0.5)
