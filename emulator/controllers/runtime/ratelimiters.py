"""Rate limiters of client-go ``util/workqueue/default_rate_limiters.go``.

:class:`ItemExponentialFailureRateLimiter` (per item, ``base * 2**failures``
capped at ``max``), :class:`BucketRateLimiter` (one token bucket for the whole
queue, ``golang.org/x/time/rate`` semantics), :class:`MaxOfRateLimiter`, and
:func:`default_controller_rate_limiter` = max(5 ms doubling to 1000 s, 10 qps
with a burst of 100) — upstream's ``DefaultControllerRateLimiter``. Delays are
cluster seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable
from typing import Protocol

from emulator.clock import Clock


class RateLimiter(Protocol):
    """client-go ``workqueue.TypedRateLimiter``."""

    def when(self, item: Hashable) -> float:
        """Seconds (cluster time) the item should wait before it is processed again; counts a retry."""
        ...

    def forget(self, item: Hashable) -> None: ...

    def num_requeues(self, item: Hashable) -> int: ...


class ItemExponentialFailureRateLimiter:
    """``base * 2**failures`` per item, capped at ``max_delay``; ``forget`` resets the item."""

    def __init__(self, base: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base = base
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            exp = self._failures.get(item, 0)
            self._failures[item] = exp + 1
        # Upstream computes in float and caps (it also guards overflow past 2**62 ns).
        if exp > 1023:
            return self.max_delay
        return min(self.base * 2.0 ** exp, self.max_delay)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)


class BucketRateLimiter:
    """One token bucket for every item (``rate.Limiter(qps, burst)``): ``when`` reserves a token.

    The bucket starts full. A reservation takes a token even if that makes the count negative;
    the delay is the time the refill needs to bring it back to zero — so a burst of ``burst``
    items passes at once and the ones after it are spaced ``1/qps`` apart.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last: float | None = None
        self._lock = threading.Lock()

    def _now(self) -> float:
        return self._clock.now() if self._clock is not None else time.monotonic()

    def when(self, item: Hashable) -> float:
        del item
        with self._lock:
            now = self._now()
            if self._last is not None and now > self._last:
                self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now if self._last is None else max(now, self._last)
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def num_requeues(self, item: Hashable) -> int:
        del item
        return 0

    def forget(self, item: Hashable) -> None:
        del item


class MaxOfRateLimiter:
    """The longest delay any of its limiters asks for (every limiter is consulted, so each one counts)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter:
    """client-go ``DefaultTypedControllerRateLimiter``: 5 ms doubling to 1000 s per item; 10 qps, burst 100 overall."""
    return MaxOfRateLimiter(ItemExponentialFailureRateLimiter(0.005, 1000.0), BucketRateLimiter(10.0, 100, clock))
