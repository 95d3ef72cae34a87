"""What a race's pairs should have done, worked out apart from the code that does it."""

from __future__ import annotations

from webapp.measurement.pairs import settled


def stopped_by_the_rule(ratios: list[float]) -> bool:
    """Runs "auto" went on while the pairs so far did not settle it (from 5 on), and stopped once they did, or
    at 9."""
    n = len(ratios)
    return 5 <= n <= 9 and not any(settled(ratios[:k]) for k in range(5, n)) and (settled(ratios) or n == 9)
