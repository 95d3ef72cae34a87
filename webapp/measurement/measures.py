"""Summaries shared by races, receipts and ``specchat bench``: spread of a sample, where two texts part,
acceptance by draft depth over several runs."""

from __future__ import annotations

import statistics

EXCERPT_CHARS = 24


def spread(values: list[float | None], digits: int = 1) -> dict | None:
    """``{median, min, max}`` of the known values; None when there are none."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    return {"median": round(statistics.median(known), digits), "min": round(min(known), digits),
            "max": round(max(known), digits)}


def ratios(tops: list[float | None], bottoms: list[float | None]) -> list[float | None]:
    """``top ÷ bottom`` pair by pair; None where either is missing or the bottom is 0."""
    return [t / b if t is not None and b else None for t, b in zip(tops, bottoms)]


def divergence(a: str, b: str) -> tuple[int, str, str] | None:
    """Where two texts first differ, with a short excerpt of each from there; None when equal."""
    if a == b:
        return None
    index = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return index, a[index: index + EXCERPT_CHARS], b[index: index + EXCERPT_CHARS]


def pooled_depths(runs: list[tuple[list[float | None] | None, int | None]]) -> list[float | None] | None:
    """Acceptance at each draft depth over several runs, from each run's ``(acceptance_by_depth, rounds)``:
    each run's share weighs as many rounds as it verified (runs weigh the same where an engine does not
    count rounds). None when no run has shares."""
    known = [(shares, 1 if rounds is None else rounds) for shares, rounds in runs if shares and rounds != 0]
    if not known:
        return None
    pooled = []
    for k in range(max(len(shares) for shares, _ in known)):
        at = [(shares[k], rounds) for shares, rounds in known if k < len(shares) and shares[k] is not None]
        total = sum(rounds for _, rounds in at)
        pooled.append(round(sum(share * rounds for share, rounds in at) / total, 4) if total else None)
    return pooled
