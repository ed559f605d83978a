"""Decaying exponential histograms, many at once: the VPA recommender's memory of usage.

Upstream (kubernetes/autoscaler ``vertical-pod-autoscaler/pkg/recommender/util``:
``histogram_options.go``, ``histogram.go``, ``decaying_histogram.go``) keeps one
Go object per aggregated container. Bucket ``n >= 1`` of an exponential scheme
starts at ``first * (ratio**n - 1) / (ratio - 1)``; a sample's weight is
multiplied by ``2 ** ((t - reference) / half_life)`` so a sample loses half its
importance every half-life; a percentile is the *end* of the first bucket at
which the cumulative weight reaches ``p * total`` (the start of the last
bucket, which has no end); buckets lighter than ``epsilon`` count as empty.

kemu holds every histogram of one kind as a row of one numpy matrix
(:class:`HistogramBank`), so adding a batch of samples is one ``np.add.at``
and the percentiles of 10,000 containers are one ``cumsum`` over the matrix.
All rows share one reference timestamp: only relative weights inside a row
matter for percentiles, so shifting it (to keep ``2**x`` finite, as upstream
renormalises after 100 half-lives) scales every row alike and changes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MAX_DECAY_EXPONENT = 100  # decaying_histogram.go maxDecayExponent


@dataclass(frozen=True)
class ExponentialOptions:
    """``NewExponentialHistogramOptions(maxValue, firstBucketSize, ratio, epsilon)``."""

    max_value: float
    first_bucket: float
    ratio: float
    epsilon: float

    @property
    def num_buckets(self) -> int:
        return math.ceil(math.log(self.max_value * (self.ratio - 1) / self.first_bucket + 1)
                             / math.log(self.ratio)) + 1

    def bucket_starts(self) -> np.ndarray:
        n = np.arange(self.num_buckets, dtype=np.float64)
        return self.first_bucket * (self.ratio ** n - 1) / (self.ratio - 1)

    def find_buckets(self, values: np.ndarray) -> np.ndarray:
        """The bucket of each value (values below the first bucket's end go to 0, above the last to the last)."""
        v = np.maximum(np.asarray(values, dtype=np.float64), 0.0)
        b = np.floor(np.log(v * (self.ratio - 1) / self.first_bucket + 1) / math.log(self.ratio)).astype(np.int64)
        b[v < self.first_bucket] = 0
        return np.clip(b, 0, self.num_buckets - 1)


class HistogramBank:
    """Rows of decaying histograms sharing options, half-life and reference time (see the module docstring)."""

    def __init__(self, options: ExponentialOptions, half_life: float, capacity: int = 64) -> None:
        self.options = options
        self.half_life = half_life
        self.reference = 0.0  # an integer multiple of half_life, as upstream keeps it
        self.weights = np.zeros((capacity, options.num_buckets), dtype=np.float64)
        self.totals = np.zeros(capacity, dtype=np.float64)
        self._starts = options.bucket_starts()

    @property
    def capacity(self) -> int:
        return self.weights.shape[0]

    def grow(self, rows: int) -> None:
        """Make room for at least ``rows`` rows (new rows are empty)."""
        if rows <= self.capacity:
            return
        extra = max(rows, 2 * self.capacity) - self.capacity
        self.weights = np.vstack([self.weights, np.zeros((extra, self.weights.shape[1]))])
        self.totals = np.concatenate([self.totals, np.zeros(extra)])

    def clear(self, rows: np.ndarray) -> None:
        self.weights[rows] = 0.0
        self.totals[rows] = 0.0

    def _decay(self, times: np.ndarray) -> np.ndarray:
        times = np.asarray(times, dtype=np.float64)
        if times.size and times.max() > self.reference + self.half_life * MAX_DECAY_EXPONENT:
            self._shift_reference(float(times.max()))
        return np.exp2((times - self.reference) / self.half_life)

    def _shift_reference(self, to: float) -> None:
        new_ref = round(to / self.half_life) * self.half_life
        exponent = round((self.reference - new_ref) / self.half_life)
        self.weights *= math.ldexp(1.0, exponent)
        self.totals *= math.ldexp(1.0, exponent)
        self.weights[self.weights < self.options.epsilon] = 0.0
        self.reference = new_ref

    def add(self, rows: np.ndarray, values: np.ndarray, weights: np.ndarray, times: np.ndarray) -> None:
        """``AddSample`` for each (row, value, weight, time)."""
        if len(rows) == 0:
            return
        w = np.asarray(weights, dtype=np.float64) * self._decay(times)
        np.add.at(self.weights, (rows, self.options.find_buckets(values)), w)
        np.add.at(self.totals, rows, w)

    def subtract(self, rows: np.ndarray, values: np.ndarray, weights: np.ndarray, times: np.ndarray) -> None:
        """``SubtractSample``: never below zero (a weight within epsilon of the bucket's empties it)."""
        if len(rows) == 0:
            return
        w = np.asarray(weights, dtype=np.float64) * self._decay(times)
        buckets = self.options.find_buckets(values)
        for r, b, x in zip(rows.tolist(), buckets.tolist(), w.tolist(), strict=True):  # rare: memory peaks only
            have = self.weights[r, b]
            take = have if x > have - self.options.epsilon else x
            self.weights[r, b] = have - take
            self.totals[r] -= take

    def percentiles(self, rows: np.ndarray, p: float) -> np.ndarray:
        """``Percentile(p)`` of each row (0.0 for an empty row)."""
        if len(rows) == 0:
            return np.zeros(0)
        w = np.where(self.weights[rows] >= self.options.epsilon, self.weights[rows], 0.0)
        nonempty = w.any(axis=1)
        cum = np.cumsum(w, axis=1)
        threshold = p * self.totals[rows]
        # Upstream walks from the first non-empty bucket up to (not past) the last non-empty one.
        last = w.shape[1] - 1 - np.argmax(w[:, ::-1] > 0, axis=1)
        reached = cum >= threshold[:, None]
        bucket = np.where(reached.any(axis=1), np.argmax(reached, axis=1), last)
        bucket = np.minimum(bucket, last)
        n = self.options.num_buckets
        ends = np.where(bucket < n - 1, self._starts[np.minimum(bucket + 1, n - 1)], self._starts[bucket])
        return np.where(nonempty, ends, 0.0)
