"""The cluster clock.

One clock with a speed factor drives every period, delay, timeout and age in
the emulated cluster (heartbeats, lease expiry, HPA sync, pod ages...).
Components receive a :class:`Clock` instead of calling ``time`` so tests can
drive time by hand (:class:`ManualClock`) and runs can go faster than real
time (``speed`` > 1). Scheduler latencies are *not* cluster time: they measure
our own code and use ``time.perf_counter`` directly.
"""

from __future__ import annotations

import functools
import threading
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Cluster time, seconds since the epoch."""
        ...


class SystemClock:
    """Cluster time = a start instant + (wall time elapsed since) * speed."""

    def __init__(self, speed: float = 1.0, start: float | None = None) -> None:
        if speed <= 0:
            raise ValueError("clock speed must be positive")
        self.speed = speed
        self._wall0 = time.time()
        self._mono0 = time.monotonic()
        self._start = self._wall0 if start is None else start

    def now(self) -> float:
        return self._start + (time.monotonic() - self._mono0) * self.speed


class ManualClock:
    """A clock tests move by hand."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


def rfc3339(ts: float) -> str:
    """Kubernetes ``metav1.Time`` wire form: second precision, UTC, ``Z`` suffix."""
    return _rfc3339_second(int(ts))


@functools.lru_cache(maxsize=256)
def _rfc3339_second(second: int) -> str:
    # Memoised by whole second: a kubelet shard or scheduler stamps thousands of conditions, events
    # and metadata per second with the same few values, and strftime costs ~3 us a call.
    return datetime.fromtimestamp(second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
