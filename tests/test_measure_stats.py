"""Paired speed-ups judged (pairs.py): wins, the sign test's interval for the median, the verdict, and when
runs "auto" has enough pairs; every expected value below is worked out by hand."""

import pytest

from webapp.measurement.pairs import coverage, judged, median_interval, settled


def test_coverage_of_the_order_statistic_interval():
    # 1 − 2·P(Binomial(n, ½) ≤ k−1)
    assert coverage(1, 1) == 0.0
    assert coverage(3, 1) == 0.75
    assert coverage(4, 1) == 0.875
    assert coverage(5, 1) == 0.9375
    assert coverage(8, 2) == pytest.approx(1 - 2 * 9 / 256)
    assert coverage(9, 2) == pytest.approx(1 - 2 * 10 / 512)
    assert coverage(9, 3) == pytest.approx(1 - 2 * 46 / 512)


@pytest.mark.parametrize("values, interval", [
    ([], None),
    ([1.5], {"low": 1.5, "high": 1.5, "coverage": 0.0}),
    ([1.2, 0.9, 1.1], {"low": 0.9, "high": 1.2, "coverage": 0.75}),  # min–max: no k reaches 90%
    ([2.1, 2.3, 2.2, 2.4, 2.0], {"low": 2.0, "high": 2.4, "coverage": 0.9375}),
    ([1.1, 1.3, 1.2, 1.0, 1.5, 1.4, 0.9], {"low": 0.9, "high": 1.5, "coverage": 0.9844}),  # k=2 is 87.5%
    ([1.3, 1.1, 0.9, 1.2, 1.4, 1.25, 1.15, 1.05], {"low": 1.05, "high": 1.3, "coverage": 0.9297}),  # k=2
    ([5, 1, 4, 2, 3, 9, 8, 7, 6], {"low": 2, "high": 8, "coverage": 0.9609}),  # k=2; k=3 is 82%
])
def test_median_interval(values, interval):
    assert median_interval(values) == interval


@pytest.mark.parametrize("values, wins, confidence, verdict", [
    ([], 0, None, "unclear"),
    ([None, 1.7], 1, {"low": 1.7, "high": 1.7, "coverage": 0.0}, "unclear"),  # one pair says nothing
    ([2.4, 2.2, 2.3, 2.5], 4, {"low": 2.2, "high": 2.5, "coverage": 0.875}, "unclear"),  # 4 of 4: not yet 90%
    ([2.1234, 2.3, 2.2, 2.4, 2.0], 5, {"low": 2.0, "high": 2.4, "coverage": 0.9375}, "faster"),
    ([0.8, 0.9, 0.85, 0.95, 0.7], 0, {"low": 0.7, "high": 0.95, "coverage": 0.9375}, "slower"),
    ([1.5, 0.9, 1.4, 1.3, 1.6], 4, {"low": 0.9, "high": 1.6, "coverage": 0.9375}, "unclear"),  # one loss in 5
    ([1.3, 1.1, 0.9, 1.2, 1.4, 1.25, 1.15, 1.05], 7, {"low": 1.05, "high": 1.3, "coverage": 0.9297}, "faster"),
    ([0.97, 0.99, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7], 7, {"low": 0.99, "high": 1.6, "coverage": 0.9609},
     "unclear"),
    ([1.0, 1.0, 1.0, 1.0, 1.0], 0, {"low": 1.0, "high": 1.0, "coverage": 0.9375}, "unclear"),  # a tie is no win
])
def test_wins_confidence_and_verdict(values, wins, confidence, verdict):
    assert judged(values) == {"wins": wins, "confidence": confidence, "verdict": verdict}


@pytest.mark.parametrize("values, enough", [
    ([2.0, 2.0, 2.0, 2.0], False),  # four pairs cannot reach 90%, however alike
    ([2.0, 2.1, 2.05, 1.95, 2.02], True),  # faster, settled
    ([0.5, 0.6, 0.55, 0.7, 0.52], True),  # slower, settled
    ([1.0, 1.02, 0.98, 1.01, 0.99], True),  # unclear but within ±10% of the median 1.0: no gain to find
    ([1.0, 1.09, 0.95, 1.01, 0.99], True),
    ([1.0, 1.11, 0.95, 1.01, 0.99], False),  # 1.11 is past +10%
    ([0.6, 1.4, 0.9, 1.2, 1.05], False),
    ([0.6, 1.4, 0.95, 1.05, 1.0, 1.02, 0.99, 1.01, 0.98], True),  # at 9, k=2 leaves out one each side
    ([0.6, 1.4, 0.9, 1.2, 1.05, 1.0, 1.02, 0.99, 1.01], False),  # 0.9–1.2 around 1.01
])
def test_settled(values, enough):
    assert settled(values) is enough
