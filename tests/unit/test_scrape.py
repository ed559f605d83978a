"""Histogram quantiles as Prometheus's histogram_quantile computes them (the attached run's attempt latency)."""

from __future__ import annotations

import math

import pytest

from loadgen.scrape import histogram_quantile

BUCKETS = [(0.001, 0.0), (0.002, 50.0), (0.004, 90.0), (0.008, 100.0), (math.inf, 100.0)]


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        (0.5, BUCKETS, 0.002),  # rank 50 is the top of the (1, 2] ms bucket
        (0.25, BUCKETS, 0.0015),  # halfway through the 50 observations of (1, 2] ms
        (0.9, BUCKETS, 0.004),
        (0.99, BUCKETS, 0.0076),  # 9 of the last bucket's 10: 4 ms + 0.9 x 4 ms
        (0.99, [(0.1, 1.0), (math.inf, 10.0)], 0.1),  # in +Inf: the highest finite bound
        (0.5, [(0.1, 0.0), (math.inf, 0.0)], None),  # nothing observed
        (0.5, [], None),
    ],
    ids=["median-at-bound", "interpolated", "p90", "p99", "inf-bucket", "empty", "no-buckets"],
)
def test_histogram_quantile(q: float, buckets: list[tuple[float, float]], expected: float | None) -> None:
    got = histogram_quantile(q, buckets)
    assert got == (None if expected is None else pytest.approx(expected))
