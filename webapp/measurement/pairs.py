"""What paired speed-ups say: how many pairs the drafter won, an interval for the median speed-up, a verdict.

Each pair is one run of both lanes (drafter on ÷ drafter off, the same run).
The interval is the sign test's, distribution-free: for n pairs sorted
x(1) ≤ … ≤ x(n), [x(k), x(n+1−k)] holds the median speed-up with probability
1 − 2·P(Binomial(n, ½) ≤ k−1), whatever the pairs' distribution. k is the
largest with that coverage at least ``COVERAGE``; below 5 pairs no k reaches
it, and the interval is the pairs' min–max at its own, lower, coverage.
"""

from __future__ import annotations

import statistics
from math import comb

COVERAGE = 0.90  # the coverage the interval aims at; a verdict needs at least this
SETTLED_WIDTH = 0.10  # runs "auto" stops once the interval lies within ±10% of the median
AUTO_MAX_PAIRS = 9


def coverage(n: int, k: int) -> float:
    """Probability that [x(k), x(n+1−k)] of n pairs holds their median (the sign test's)."""
    return 1.0 - 2.0 * sum(comb(n, i) for i in range(k)) / 2**n


def median_interval(values: list[float]) -> dict | None:
    """``{low, high, coverage}`` for the median of ``values``; None when there are none."""
    xs = sorted(values)
    n = len(xs)
    if not n:
        return None
    k = 1
    while 2 * (k + 1) <= n + 1 and coverage(n, k + 1) >= COVERAGE:
        k += 1
    return {"low": xs[k - 1], "high": xs[n - k], "coverage": round(coverage(n, k), 4)}


def judged(values: list[float | None], digits: int = 3) -> dict:
    """``wins``, ``confidence`` and ``verdict`` of the known speed-ups in ``values``.

    The verdict is ``faster`` or ``slower`` only when the interval reaches ``COVERAGE`` and lies wholly
    above or below 1 (the sign test at 10%), else ``unclear``.
    """
    known = [v for v in values if v is not None]
    interval = median_interval(known)
    verdict = "unclear"
    if interval is not None and interval["coverage"] >= COVERAGE:
        if interval["low"] > 1.0:
            verdict = "faster"
        elif interval["high"] < 1.0:
            verdict = "slower"
    confidence = interval and {"low": round(interval["low"], digits), "high": round(interval["high"], digits),
                               "coverage": interval["coverage"]}
    return {"wins": sum(v > 1.0 for v in known), "confidence": confidence, "verdict": verdict}


def settled(values: list[float | None]) -> bool:
    """Whether more pairs are not needed: a verdict, or an interval (at ``COVERAGE``) within ±10% of the median."""
    known = [v for v in values if v is not None]
    interval = median_interval(known)
    if interval is None or interval["coverage"] < COVERAGE:
        return False
    if judged(known)["verdict"] != "unclear":
        return True
    median = statistics.median(known)
    return interval["low"] >= (1 - SETTLED_WIDTH) * median and interval["high"] <= (1 + SETTLED_WIDTH) * median
