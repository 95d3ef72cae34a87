"""How the benchmarks print a measurement: its median, then its min-max."""

from __future__ import annotations

import statistics


def spread(values: list[float | None], digits: int = 2, unit: str = "") -> str:
    """"median (min-max)" of the known ``values`` ("-" when none is known)."""
    known = [v for v in values if v is not None]
    if not known:
        return "-"
    return (f"{statistics.median(known):.{digits}f}{unit} ({min(known):.{digits}f}-{max(known):.{digits}f}"
            f"{unit})")
