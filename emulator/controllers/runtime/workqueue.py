"""client-go's work queue: ``util/workqueue/queue.go``, ``delaying_queue.go`` and ``rate_limiting_queue.go``.

:class:`WorkQueue` is the three layers in one class: a FIFO of keys with a
*dirty* set (a key added twice before it is processed is queued once) and a
*processing* set (a key being reconciled is never handed to a second worker;
re-added meanwhile, it is queued again when :meth:`WorkQueue.done` is called).
``add_after`` waits on the **cluster clock**; a key waiting twice keeps the
earlier time. ``add_rate_limited`` asks a rate limiter
(:mod:`~emulator.controllers.runtime.ratelimiters`) for the delay.

Metrics (``metrics.go``) use upstream's names with a ``name`` label
(``workqueue_depth``, ``workqueue_adds_total``,
``workqueue_queue_duration_seconds``, ``workqueue_work_duration_seconds``,
``workqueue_retries_total``, ``workqueue_unfinished_work_seconds``,
``workqueue_longest_running_processor_seconds``); :class:`LatencySamples` keeps
raw durations for benchmark percentiles.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Hashable

from prometheus_client import Counter, Gauge, Histogram

from emulator.clock import Clock
from emulator.controllers.runtime.ratelimiters import RateLimiter, default_controller_rate_limiter
from emulator.controllers.runtime.wait import POLL_SECONDS, wall_delay

# ----------------------------------------------------------------------------- work queue metrics

# client-go's defaults (k8s.io/component-base/metrics/prometheus/workqueue): ExponentialBuckets(10e-9, 10, 10).
_DURATION_BUCKETS = tuple(10e-9 * 10 ** i for i in range(10))

WORKQUEUE_DEPTH = Gauge("workqueue_depth", "Current depth of workqueue", ["name"])
WORKQUEUE_ADDS = Counter("workqueue_adds", "Total number of adds handled by workqueue", ["name"])
WORKQUEUE_QUEUE_DURATION = Histogram("workqueue_queue_duration_seconds",
                                     "How long in seconds an item stays in workqueue before being requested.",
                                     ["name"], buckets=_DURATION_BUCKETS)
WORKQUEUE_WORK_DURATION = Histogram("workqueue_work_duration_seconds",
                                    "How long in seconds processing an item from workqueue takes.",
                                    ["name"], buckets=_DURATION_BUCKETS)
WORKQUEUE_RETRIES = Counter("workqueue_retries", "Total number of retries handled by workqueue", ["name"])
WORKQUEUE_UNFINISHED = Gauge("workqueue_unfinished_work_seconds",
                             "How many seconds of work has been done that is in progress and hasn't been observed "
                             "by work_duration. Large values indicate stuck threads. One can deduce the number of "
                             "stuck threads by observing the rate at which this increases.", ["name"])
WORKQUEUE_LONGEST = Gauge("workqueue_longest_running_processor_seconds",
                          "How many seconds has the longest running processor for workqueue been running.", ["name"])


class LatencySamples:
    """The last ``size`` durations (seconds), for percentiles in benchmarks and tests (histograms are too coarse)."""

    def __init__(self, size: int = 100_000) -> None:
        self._samples: deque[float] = deque(maxlen=size)

    def add(self, seconds: float) -> None:
        self._samples.append(seconds)

    def clear(self) -> None:
        self._samples.clear()

    def __len__(self) -> int:
        return len(self._samples)

    def percentile(self, p: float) -> float:
        """The ``p``-th percentile (nearest rank), 0.0 when there are no samples."""
        data = sorted(self._samples)
        if not data:
            return 0.0
        rank = max(0, min(len(data) - 1, int(-(-p * len(data) // 100)) - 1))
        return data[rank]


# ----------------------------------------------------------------------------- work queue


class WorkQueue:
    """client-go's rate-limited delaying work queue (``TypedRateLimitingInterface``), for hashable keys.

    ``add`` / ``get`` / ``done`` keep upstream's guarantees: a key is at most once in the
    queue, never processed by two workers at once, and a key added while it is processed is
    processed again afterwards. ``add_after(key, d)`` adds it once ``d`` cluster seconds have
    passed; ``add_rate_limited`` asks the rate limiter for ``d``; ``forget`` ends the key's
    back-off. ``shutdown`` makes ``get`` return ``(None, True)`` once the queue is empty of
    ready keys (upstream ``ShutDown``: pending keys are dropped, delayed ones never fire).
    """

    def __init__(self, name: str, *, clock: Clock, rate_limiter: RateLimiter | None = None) -> None:
        self.name = name
        self.clock = clock
        self.rate_limiter: RateLimiter = rate_limiter or default_controller_rate_limiter(clock)
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._shutting_down = False
        # Metrics (wall clock: they measure our code, as upstream's real clock does).
        self._add_times: dict[Hashable, float] = {}
        self._start_times: dict[Hashable, float] = {}
        self.queue_latency = LatencySamples()
        self.work_latency = LatencySamples()
        self._m_depth = WORKQUEUE_DEPTH.labels(name)
        self._m_adds = WORKQUEUE_ADDS.labels(name)
        self._m_queue = WORKQUEUE_QUEUE_DURATION.labels(name)
        self._m_work = WORKQUEUE_WORK_DURATION.labels(name)
        self._m_retries = WORKQUEUE_RETRIES.labels(name)
        WORKQUEUE_UNFINISHED.labels(name).set_function(self.unfinished_work_seconds)
        WORKQUEUE_LONGEST.labels(name).set_function(self.longest_running_processor_seconds)
        # Delayed adds: heap of (ready_at, seq, key) plus key -> ready_at for de-duplication.
        self._waiting: list[tuple[float, int, Hashable]] = []
        self._waiting_at: dict[Hashable, float] = {}
        self._seq = itertools.count()
        self._waiter_cond = threading.Condition(threading.Lock())
        self._waiter: threading.Thread | None = None
        self._waiter_stop = threading.Event()

    # ----------------------------------------------------------------- basic queue
    def add(self, item: Hashable) -> None:
        with self._cond:
            if self._shutting_down or item in self._dirty:
                return
            self._m_adds.inc()
            self._m_depth.inc()
            self._add_times.setdefault(item, time.perf_counter())
            self._dirty.add(item)
            if item in self._processing:
                return  # done() queues it again
            self._queue.append(item)
            self._cond.notify()

    def get(self, timeout: float | None = None) -> tuple[Hashable | None, bool]:
        """The next key (marked processing) and whether the queue shut down; ``(None, False)`` on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._queue and not self._shutting_down:
                if deadline is None:
                    self._cond.wait()
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None, False
                    self._cond.wait(left)
            if not self._queue:
                return None, True
            item = self._queue.popleft()
            now = time.perf_counter()
            self._m_depth.dec()
            added = self._add_times.pop(item, None)
            if added is not None:
                self._m_queue.observe(now - added)
                self.queue_latency.add(now - added)
            self._start_times[item] = now
            self._processing.add(item)
            self._dirty.discard(item)
            return item, False

    def done(self, item: Hashable) -> None:
        with self._cond:
            started = self._start_times.pop(item, None)
            if started is not None:
                took = time.perf_counter() - started
                self._m_work.observe(took)
                self.work_latency.add(took)
            self._processing.discard(item)
            if item in self._dirty:
                self._queue.append(item)
                self._cond.notify()
            elif not self._processing:
                self._cond.notify_all()  # wakes a drain

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def shutdown(self) -> None:
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()
        self._waiter_stop.set()
        with self._waiter_cond:
            self._waiter_cond.notify_all()
        if self._waiter is not None and self._waiter is not threading.current_thread():
            self._waiter.join(5.0)

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down

    def is_idle(self) -> bool:
        """Nothing queued, nothing processing, nothing waiting to be added (tests and benchmarks)."""
        with self._cond, self._waiter_cond:
            return not self._queue and not self._processing and not self._waiting_at

    def unfinished_work_seconds(self) -> float:
        now = time.perf_counter()
        with self._cond:
            return sum(now - t for t in self._start_times.values())

    def longest_running_processor_seconds(self) -> float:
        now = time.perf_counter()
        with self._cond:
            return max((now - t for t in self._start_times.values()), default=0.0)

    # ---------------------------------------------------------------- delaying queue
    def add_after(self, item: Hashable, delay: float, *, since: float | None = None) -> None:
        """Add ``item`` after ``delay`` cluster seconds (at once if ``delay`` <= 0); counts a retry.

        The delay counts from ``since`` (cluster time) when given, else from now. A caller that
        computed ``delay`` as ``deadline - t`` passes ``since=t``: a clock stepped between its
        read and this call (a test's ManualClock, from another thread) must not push the key
        past ``deadline``.
        """
        if self.shutting_down:
            return
        self._m_retries.inc()
        start = self.clock.now() if since is None else since
        if delay <= 0 or start + delay <= self.clock.now():
            self.add(item)
            return
        ready = start + delay
        with self._waiter_cond:
            current = self._waiting_at.get(item)
            if current is not None and current <= ready:
                return  # already waiting, and for less long
            self._waiting_at[item] = ready
            heapq.heappush(self._waiting, (ready, next(self._seq), item))
            if self._waiter is None:
                self._waiter = threading.Thread(target=self._wait_loop, name=f"workqueue-{self.name}-delay",
                                                daemon=True)
                self._waiter.start()
            self._waiter_cond.notify()

    def _wait_loop(self) -> None:
        while not self._waiter_stop.is_set():
            ready: list[Hashable] = []
            with self._waiter_cond:
                now = self.clock.now()
                while self._waiting:
                    at, _, item = self._waiting[0]
                    if self._waiting_at.get(item) != at:
                        heapq.heappop(self._waiting)  # superseded by an earlier time
                        continue
                    if at > now:
                        break
                    heapq.heappop(self._waiting)
                    del self._waiting_at[item]
                    ready.append(item)
                if not ready:
                    if self._waiting:
                        wall = wall_delay(self.clock, self._waiting[0][0] - now)
                        self._waiter_cond.wait(POLL_SECONDS if wall is None else min(wall, 1.0))
                    else:
                        self._waiter_cond.wait(1.0)
            for item in ready:
                self.add(item)

    # ------------------------------------------------------------- rate limiting
    def add_rate_limited(self, item: Hashable) -> None:
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: Hashable) -> None:
        self.rate_limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.rate_limiter.num_requeues(item)
