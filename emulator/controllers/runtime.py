"""The controller runtime: work queues, expectations, controller references, events, the reconcile loop.

Every workload controller (ReplicaSet, Deployment, and later DaemonSet, Job,
node lifecycle, quotas) is built from the pieces here, which follow client-go
and ``kube-controller-manager``'s shared code (our own Python, checked against
the Go):

* **Rate limiters** (client-go ``util/workqueue/default_rate_limiters.go``):
  :class:`ItemExponentialFailureRateLimiter` (per item, ``base * 2**failures``
  capped at ``max``), :class:`BucketRateLimiter` (one token bucket for the whole
  queue, ``golang.org/x/time/rate`` semantics), :class:`MaxOfRateLimiter`, and
  :func:`default_controller_rate_limiter` = max(5 ms doubling to 1000 s,
  10 qps with a burst of 100) — upstream's ``DefaultControllerRateLimiter``.
* **Work queue** (``queue.go``, ``delaying_queue.go``,
  ``rate_limiting_queue.go`` in one class, :class:`WorkQueue`): a FIFO of keys
  with a *dirty* set (a key added twice before it is processed is queued once)
  and a *processing* set (a key being reconciled is never handed to a second
  worker; re-added meanwhile, it is queued again when :meth:`WorkQueue.done` is
  called). ``add_after`` waits on the **cluster clock**; a key waiting twice keeps
  the earlier time. Metrics use upstream's names with a ``name`` label
  (``workqueue_depth``, ``workqueue_adds_total``,
  ``workqueue_queue_duration_seconds``, ``workqueue_work_duration_seconds``,
  ``workqueue_retries_total``, ``workqueue_unfinished_work_seconds``,
  ``workqueue_longest_running_processor_seconds``).
* **Expectations** (``pkg/controller/controller_utils.go``):
  :class:`ControllerExpectations` counts the creates/deletes a controller has
  issued but not yet seen through its informer; a controller whose expectations
  are neither fulfilled nor expired (5 minutes of cluster time) does not
  create or delete again, so a slow watch never leads to a double create.
  :class:`UIDTrackingControllerExpectations` remembers *which* pods it deletes,
  so a graceful deletion (an update with ``deletionTimestamp``) and the final
  delete are counted once.
* **Controller references** (``apimachinery/pkg/apis/meta/v1/controller_ref.go``
  and ``pkg/controller/controller_ref_manager.go``): :func:`get_controller_of`,
  :func:`new_controller_ref`, and :class:`ControllerRefManager.claim`, which
  keeps what the controller owns and still matches, adopts orphans matching the
  selector (after a fresh read proves the controller is not being deleted) and
  releases owned objects that no longer match. Objects being deleted are never
  adopted. Adoption and release are metadata writes with a uid precondition.
* **Events** (:class:`EventRecorder`): ``core/v1`` Events in upstream's shape,
  buffered and written in batches (one ``create_many`` per flush); repeats of
  the same (object, type, reason, message) are aggregated into ``count`` as
  upstream's ``EventCorrelator`` does.
* **Controller** (:class:`Controller`): informer handlers put keys on the queue;
  ``workers`` threads take keys and call :meth:`Controller.reconcile`. A
  reconcile that raises is retried with the rate limiter (and given up after
  ``max_retries`` when set, as the Deployment controller's 15); one that returns
  a number is requeued after that many cluster seconds. Each reconcile is timed
  (``controller_runtime_reconcile_time_seconds``, the name controller-runtime
  uses; and an in-process sample buffer for benchmarks).

Nothing here imports a concrete controller; controllers import this module
(import-linter keeps them independent of each other).

Time: every delay a controller asks for (back-off, ``add_after``,
expectations expiry) is cluster time from the injected clock. With a
:class:`~emulator.clock.SystemClock` the waits are converted to wall time by
its speed; with any other clock (a test's ``ManualClock``) they poll it every
few milliseconds, so a test moves time and the queue follows.
"""

from __future__ import annotations

import abc
import contextlib
import heapq
import itertools
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import Counter, Gauge, Histogram

from emulator.api import errors
from emulator.api.kinds import EVENT, Kind
from emulator.api.selectors import LabelSelector
from emulator.clock import Clock, rfc3339
from emulator.server.core import ServerCore

log = logging.getLogger(__name__)

Obj = dict[str, Any]

# ----------------------------------------------------------------------------- cluster-time waiting

# How often a wait polls a clock that cannot say how fast it runs (a test's ManualClock).
_POLL_SECONDS = 0.005


def wall_delay(clock: Clock, cluster_seconds: float) -> float | None:
    """Wall seconds for ``cluster_seconds`` on ``clock``, or None if the clock's pace is unknown (poll it)."""
    speed = getattr(clock, "speed", None)
    if isinstance(speed, int | float) and speed > 0:
        return max(0.0, cluster_seconds / speed)
    return None


def wait_until(clock: Clock, deadline: float, stop: threading.Event) -> bool:
    """Block until cluster time reaches ``deadline`` (True) or ``stop`` is set (False)."""
    while True:
        if stop.is_set():
            return False
        remaining = deadline - clock.now()
        if remaining <= 0:
            return True
        wall = wall_delay(clock, remaining)
        if stop.wait(_POLL_SECONDS if wall is None else min(wall, 1.0)):
            return False


def wait_for(clock: Clock, cluster_seconds: float, stop: threading.Event) -> bool:
    """Wait ``cluster_seconds`` of cluster time; False if ``stop`` was set first."""
    return wait_until(clock, clock.now() + cluster_seconds, stop)


# ----------------------------------------------------------------------------- rate limiters


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
RECONCILE_TIME = Histogram("controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per "
                           "controller", ["controller"],
                           buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
RECONCILE_TOTAL = Counter("controller_runtime_reconcile", "Total number of reconciliations per controller",
                          ["controller", "result"])


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
    def add_after(self, item: Hashable, delay: float) -> None:
        """Add ``item`` after ``delay`` cluster seconds (at once if ``delay`` <= 0); counts a retry."""
        if self.shutting_down:
            return
        self._m_retries.inc()
        if delay <= 0:
            self.add(item)
            return
        ready = self.clock.now() + delay
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
                        self._waiter_cond.wait(_POLL_SECONDS if wall is None else min(wall, 1.0))
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


# ----------------------------------------------------------------------------- expectations

# pkg/controller/controller_utils.go ExpectationsTimeout.
EXPECTATIONS_TIMEOUT = 300.0


@dataclass
class ControlleeExpectations:
    """Creates and deletes a controller still waits to observe (may go negative: more observed than expected)."""

    add: int
    delete: int
    key: str
    timestamp: float

    def fulfilled(self) -> bool:
        return self.add <= 0 and self.delete <= 0


class ControllerExpectations:
    """``ControllerExpectations``: per controller key, the creates/deletes issued but not yet observed.

    * no record → satisfied (a new controller, or one whose record was deleted);
    * a record is satisfied once both counts are <= 0, or once it is older than
      :data:`EXPECTATIONS_TIMEOUT` cluster seconds (a lost watch event must not
      stall the controller forever);
    * ``set_expectations`` replaces the record; observations only lower it.
    """

    def __init__(self, clock: Clock, ttl: float = EXPECTATIONS_TIMEOUT) -> None:
        self.clock = clock
        self.ttl = ttl
        self._records: dict[str, ControlleeExpectations] = {}
        self._lock = threading.Lock()

    def get_expectations(self, key: str) -> ControlleeExpectations | None:
        with self._lock:
            record = self._records.get(key)
            return None if record is None else ControlleeExpectations(record.add, record.delete, record.key,
                                                                      record.timestamp)

    def satisfied_expectations(self, key: str) -> bool:
        with self._lock:
            record = self._records.get(key)
            if record is None:
                return True
            return record.fulfilled() or self.clock.now() - record.timestamp > self.ttl

    def delete_expectations(self, key: str) -> None:
        with self._lock:
            self._records.pop(key, None)

    def set_expectations(self, key: str, add: int, delete: int) -> None:
        with self._lock:
            self._records[key] = ControlleeExpectations(add, delete, key, self.clock.now())

    def expect_creations(self, key: str, adds: int) -> None:
        self.set_expectations(key, adds, 0)

    def expect_deletions(self, key: str, dels: int) -> None:
        self.set_expectations(key, 0, dels)

    def lower_expectations(self, key: str, add: int, delete: int) -> None:
        with self._lock:
            record = self._records.get(key)
            if record is not None:
                record.add -= add
                record.delete -= delete

    def raise_expectations(self, key: str, add: int, delete: int) -> None:
        with self._lock:
            record = self._records.get(key)
            if record is not None:
                record.add += add
                record.delete += delete

    def creation_observed(self, key: str) -> None:
        self.lower_expectations(key, 1, 0)

    def deletion_observed(self, key: str) -> None:
        self.lower_expectations(key, 0, 1)


class UIDTrackingControllerExpectations(ControllerExpectations):
    """``UIDTrackingControllerExpectations``: deletions are tracked by the deleted objects' keys.

    Upstream tracks pod keys (``namespace/name``) under the name "UIDs". A pod's deletion is
    observed once — whether the informer first shows it with ``deletionTimestamp`` (graceful) or
    only as gone — because the key is removed from the set on the first observation.
    """

    def __init__(self, clock: Clock, ttl: float = EXPECTATIONS_TIMEOUT) -> None:
        super().__init__(clock, ttl)
        self._uids: dict[str, set[str]] = {}
        self._uid_lock = threading.Lock()

    def get_uids(self, key: str) -> set[str] | None:
        with self._uid_lock:
            uids = self._uids.get(key)
            return None if uids is None else set(uids)

    def expect_deletions(self, key: str, dels: int | Iterable[str]) -> None:  # type: ignore[override]
        """Expect the deletion of these object keys (an int is accepted for the base-class contract)."""
        keys = set() if isinstance(dels, int) else set(dels)
        with self._uid_lock:
            if self._uids.get(key):
                log.warning("expectations %s: clobbering existing delete keys %s", key, sorted(self._uids[key]))
            self._uids[key] = keys
            super().expect_deletions(key, len(keys) if not isinstance(dels, int) else dels)

    def deletion_observed(self, key: str, delete_key: str = "") -> None:  # type: ignore[override]
        with self._uid_lock:
            uids = self._uids.get(key)
            if uids is not None and delete_key in uids:
                uids.discard(delete_key)
                super().deletion_observed(key)

    def delete_expectations(self, key: str) -> None:
        with self._uid_lock:
            super().delete_expectations(key)
            self._uids.pop(key, None)


# ----------------------------------------------------------------------------- controller references


def get_controller_of(obj: Mapping[str, Any]) -> Obj | None:
    """``metav1.GetControllerOf``: the ownerReference with ``controller: true``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return ref
    return None


def new_controller_ref(owner: Mapping[str, Any], kind: Kind) -> Obj:
    """``metav1.NewControllerRef``: controller and blockOwnerDeletion both true."""
    meta = owner.get("metadata") or {}
    return {"apiVersion": kind.api_version, "kind": kind.kind, "name": meta.get("name", ""),
            "uid": meta.get("uid", ""), "controller": True, "blockOwnerDeletion": True}


def is_controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    ref = get_controller_of(obj)
    return ref is not None and ref.get("uid") == (owner.get("metadata") or {}).get("uid")


def meta_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` (or ``name``), the key controllers queue (``cache.MetaNamespaceKeyFunc``)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


def split_key(key: str) -> tuple[str | None, str]:
    ns, _, name = key.rpartition("/")
    return ns or None, name


def controller_index_func(obj: Obj) -> list[str]:
    """Index objects by their controller's uid, and orphans by ``orphan/<namespace>``.

    One index answers both questions a ``ControllerRefManager`` asks: "what do I own?"
    (``controller_uid``) and "which orphans could I adopt?" (``orphan/ns``) without scanning
    the namespace.
    """
    ref = get_controller_of(obj)
    if ref is not None and ref.get("uid"):
        return [str(ref["uid"])]
    return [f"orphan/{(obj.get('metadata') or {}).get('namespace') or ''}"]


CONTROLLER_INDEX = "controller"


def resolve_controller_ref(indexer: Any, namespace: str, ref: Mapping[str, Any], kind: str,
                           group: str | None = None) -> Obj | None:
    """``resolveControllerRef``: the cached object a controller ownerReference names, if any.

    The reference must name ``kind`` (and, when ``group`` is given, an ``apiVersion`` of that
    API group, e.g. ``"apps"``); the object is looked up in ``indexer`` as
    ``<namespace>/<ref.name>`` and returned only if its uid is the reference's uid — a
    reference to an object since deleted and re-created under the same name resolves to None.
    """
    if ref.get("kind") != kind:
        return None
    if group is not None and str(ref.get("apiVersion") or "").rpartition("/")[0] != group:
        return None
    obj = indexer.get_by_key(f"{namespace}/{ref.get('name', '')}")
    if obj is None or obj["metadata"].get("uid") != ref.get("uid"):
        return None
    return obj


class SelectorCache:
    """Parsed ``spec.selector`` of controller objects, cached per uid and generation.

    A workload's selector is immutable in apps/v1 (and a new generation re-parses it anyway),
    so parsing it once per (uid, generation) is safe. The cache is cleared wholesale when it
    grows past ``max_size`` entries. Parse errors (:class:`~emulator.api.errors.StatusError`)
    propagate and are not cached.
    """

    def __init__(self, max_size: int = 100_000) -> None:
        self.max_size = max_size
        self._selectors: dict[tuple[str, int], LabelSelector] = {}

    def selector_of(self, obj: Mapping[str, Any]) -> LabelSelector:
        """The parsed ``spec.selector`` of ``obj``."""
        meta = obj["metadata"]
        key = (meta.get("uid") or "", int(meta.get("generation") or 0))
        selector = self._selectors.get(key)
        if selector is None:
            selector = LabelSelector.from_dict((obj.get("spec") or {}).get("selector"), "spec.selector")
            if len(self._selectors) > self.max_size:
                self._selectors.clear()
            self._selectors[key] = selector
        return selector

    def matching(self, candidates: Iterable[Obj], labels: Mapping[str, str]) -> list[Obj]:
        """The candidates whose selector is valid, non-empty and matches ``labels``.

        What ``GetPodReplicaSets`` / ``getDeploymentsForReplicaSet`` do for an orphan: the
        controllers that could adopt it. A candidate with an invalid selector is skipped.
        """
        out = []
        for obj in candidates:
            try:
                selector = self.selector_of(obj)
            except errors.StatusError:
                continue
            if not selector.empty and selector.matches(labels):
                out.append(obj)
        return out


class ControllerRefManager:
    """``BaseControllerRefManager.ClaimObject`` over a list of candidates (pods or ReplicaSets).

    ``claim`` returns the objects the controller owns after the pass:

    * owned by another controller: ignored;
    * owned by us and matching: kept (even while we are being deleted: it costs no write);
    * owned by us and not matching: released, unless we are being deleted;
    * orphan, matching, not being deleted, same namespace, and we are not being deleted:
      adopted — once ``can_adopt`` (a fresh read of the controller) has passed.

    Errors of individual adopt/release writes are collected (a NotFound means the object is
    gone and is not an error); the caller raises them after using what was claimed.
    """

    def __init__(self, core: ServerCore, controller: Obj, controller_kind: Kind, selector: LabelSelector,
                 can_adopt: Callable[[], None] | None = None) -> None:
        self.core = core
        self.controller = controller
        self.controller_kind = controller_kind
        self.selector = selector
        meta = controller.get("metadata") or {}
        self.uid = meta.get("uid", "")
        self.namespace = meta.get("namespace") or ""
        self.deleting = bool(meta.get("deletionTimestamp"))
        self._can_adopt = can_adopt
        self._can_adopt_done: Exception | bool | None = False
        self.errors: list[Exception] = []

    def _check_can_adopt(self) -> None:
        if self._can_adopt_done is False:
            try:
                if self._can_adopt is not None:
                    self._can_adopt()
                self._can_adopt_done = None
            except Exception as e:
                self._can_adopt_done = e
        if isinstance(self._can_adopt_done, Exception):
            raise self._can_adopt_done

    def claim(self, kind: Kind, candidates: Iterable[Obj],
              extra_match: Callable[[Obj], bool] | None = None) -> list[Obj]:
        claimed: list[Obj] = []
        uid, matches = self.uid, self.selector.matches
        for obj in candidates:
            # Fast path for the common case — ours and still matching — which needs no write.
            meta = obj.get("metadata") or {}
            for ref in meta.get("ownerReferences") or ():
                if ref.get("controller") is True:
                    if ref.get("uid") == uid and extra_match is None and matches(meta.get("labels")):
                        claimed.append(obj)
                        meta = None
                    break
            if meta is None:
                continue
            try:
                if self._claim_one(kind, obj, extra_match):
                    claimed.append(obj)
            except errors.StatusError as e:
                if e.code != 404:
                    self.errors.append(e)
            except Exception as e:
                self.errors.append(e)
        return claimed

    def _matches(self, obj: Obj, extra_match: Callable[[Obj], bool] | None) -> bool:
        if not self.selector.matches((obj.get("metadata") or {}).get("labels")):
            return False
        return extra_match is None or extra_match(obj)

    def _claim_one(self, kind: Kind, obj: Obj, extra_match: Callable[[Obj], bool] | None) -> bool:
        meta = obj.get("metadata") or {}
        ref = get_controller_of(obj)
        if ref is not None:
            if ref.get("uid") != self.uid:
                return False
            if self._matches(obj, extra_match):
                return True
            if self.deleting:
                return False
            self._release(kind, obj)
            return False
        if self.deleting or not self._matches(obj, extra_match):
            return False
        if meta.get("deletionTimestamp"):
            return False
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        self._check_can_adopt()
        self._adopt(kind, obj)
        return True

    def _adopt(self, kind: Kind, obj: Obj) -> None:
        meta = obj["metadata"]
        ref = new_controller_ref(self.controller, self.controller_kind)

        def add_ref(m: Obj) -> Obj | None:
            refs = list(m.get("ownerReferences") or [])
            current = next((r for r in refs if r.get("controller") is True), None)
            if current is not None:
                if current.get("uid") == self.uid:
                    return None
                # Someone else adopted it first: upstream's patch fails validation the same way.
                raise errors.conflict(kind.plural, meta["name"], "Only one reference can have Controller set to "
                                      "true", kind.group)
            refs = [r for r in refs if r.get("uid") != self.uid] + [ref]
            m["ownerReferences"] = refs
            return m

        self.core.update_metadata(kind, meta.get("namespace"), meta["name"], add_ref, uid=meta.get("uid", ""))

    def _release(self, kind: Kind, obj: Obj) -> None:
        meta = obj["metadata"]

        def drop_ref(m: Obj) -> Obj | None:
            refs = m.get("ownerReferences") or []
            kept = [r for r in refs if r.get("uid") != self.uid]
            if len(kept) == len(refs):
                return None
            if kept:
                m["ownerReferences"] = kept
            else:
                m.pop("ownerReferences", None)
            return m

        self.core.update_metadata(kind, meta.get("namespace"), meta["name"], drop_ref, uid=meta.get("uid", ""))


def recheck_deletion_timestamp(core: ServerCore, kind: Kind, obj: Obj) -> Callable[[], None]:
    """``controller.RecheckDeletionTimestamp``: a fresh read proves the controller is the same and not being deleted."""
    meta = obj["metadata"]

    def check() -> None:
        fresh = core.get(kind, meta.get("namespace"), meta["name"])
        fmeta = fresh["metadata"]
        if fmeta.get("uid") != meta.get("uid"):
            raise errors.conflict(kind.plural, meta["name"], f"original {kind.kind} {meta.get('namespace')}/"
                                  f"{meta['name']} is gone: got uid {fmeta.get('uid')}, wanted {meta.get('uid')}",
                                  kind.group)
        if fmeta.get("deletionTimestamp"):
            raise errors.conflict(kind.plural, meta["name"], f"{meta.get('namespace')}/{meta['name']} has just been "
                                  f"deleted at {fmeta['deletionTimestamp']}", kind.group)

    return check


# ----------------------------------------------------------------------------- events

EVENT_NORMAL = "Normal"
EVENT_WARNING = "Warning"


class EventRecorder:
    """Buffers Events and writes them in batches (``client-go/tools/record`` in kemu's shape).

    ``event(obj, type, reason, message)`` never blocks on the store. :meth:`flush` (called by
    the recorder's thread every ``flush_interval`` wall seconds, on ``stop``, or by hand)
    aggregates repeats — same involved object, type, reason and message — into one Event with
    a ``count``, creates new Events in one ``create_many``, and bumps the ``count`` and
    ``lastTimestamp`` of Events it wrote before (kept in a bounded LRU), as upstream's
    ``EventCorrelator`` does. Upstream's per-object spam filter is not modelled.
    """

    def __init__(self, core: ServerCore, component: str, *, clock: Clock | None = None, host: str = "",
                 flush_interval: float = 1.0, max_buffer: int = 100_000, cache_size: int = 4096) -> None:
        self.core = core
        self.component = component
        self.clock = clock or core.clock
        self.host = host
        self.flush_interval = flush_interval
        self.max_buffer = max_buffer
        self.cache_size = cache_size
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._buffer: OrderedDict[tuple[str, ...], Obj] = OrderedDict()
        self._written: OrderedDict[tuple[str, ...], Obj] = OrderedDict()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # A random start: recorders of different controllers writing events for objects of the same name at the
        # same cluster instant (a ManualClock) must not produce the same Event name.
        self._seq = itertools.count(int.from_bytes(os.urandom(4)))
        self.dropped = 0
        self.written = 0

    def event(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        involved = {"kind": obj.get("kind", ""), "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
                    "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion", ""),
                    "resourceVersion": meta.get("resourceVersion", "")}
        key = (involved["kind"], involved["namespace"], involved["name"], involved["uid"], event_type, reason, message)
        now = rfc3339(self.clock.now())
        with self._lock:
            pending = self._buffer.get(key)
            if pending is not None:
                pending["count"] += 1
                pending["lastTimestamp"] = now
                return
            if len(self._buffer) >= self.max_buffer:
                self.dropped += 1
                return
            self._buffer[key] = {"involvedObject": involved, "type": event_type, "reason": reason,
                                 "message": message, "firstTimestamp": now, "lastTimestamp": now, "count": 1}

    def eventf(self, obj: Mapping[str, Any], event_type: str, reason: str, fmt: str, *args: Any) -> None:
        self.event(obj, event_type, reason, fmt % args if args else fmt)

    def _body(self, pending: Obj) -> Obj:
        involved = pending["involvedObject"]
        # Upstream names Events "<object>.<hex nanoseconds>"; a sequence number keeps ours unique in a batch.
        stamp = int(self.clock.now() * 1e9) + next(self._seq)
        return {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{involved['name']}.{stamp:x}",
                             "namespace": involved["namespace"] or "default"},
                "involvedObject": {k: v for k, v in involved.items() if v},
                "reason": pending["reason"], "message": pending["message"],
                "source": {"component": self.component, **({"host": self.host} if self.host else {})},
                "firstTimestamp": pending["firstTimestamp"], "lastTimestamp": pending["lastTimestamp"],
                "count": pending["count"], "type": pending["type"], "eventTime": None,
                "reportingComponent": self.component, "reportingInstance": self.host}

    def flush(self) -> int:
        """Write what is buffered; returns how many Events were created or updated."""
        with self._flush_lock:
            with self._lock:
                batch, self._buffer = self._buffer, OrderedDict()
            if not batch:
                return 0
            creates: list[tuple[tuple[str, ...], Obj]] = []
            done = 0
            for key, pending in batch.items():
                previous = self._written.get(key)
                if previous is not None:
                    body = {**previous, "count": previous["count"] + pending["count"],
                            "lastTimestamp": pending["lastTimestamp"]}
                    body["metadata"] = {k: v for k, v in previous["metadata"].items() if k != "resourceVersion"}
                    try:
                        self._remember(key, self.core.update(EVENT, body))
                        done += 1
                        continue
                    except errors.StatusError as e:
                        if e.code != 404:
                            log.warning("event recorder: updating %s: %s", body["metadata"]["name"], e.message)
                            continue
                        # The Event is gone (deleted by hand or by TTL): write a fresh one.
                        creates.append((key, self._body({**pending, "count": body["count"]})))
                        continue
                creates.append((key, self._body(pending)))
            if creates:
                try:
                    results = self.core.create_many(EVENT, [b for _, b in creates])
                except Exception as e:  # the store is down: events are best-effort, as upstream's
                    log.warning("event recorder: writing %d events failed: %s", len(creates), e)
                    return done
                for (key, _), result in zip(creates, results, strict=True):
                    if isinstance(result, errors.StatusError):
                        log.debug("event recorder: %s", result.message)
                        continue
                    self._remember(key, result)
                    done += 1
            self.written += done
            return done

    def _remember(self, key: tuple[str, ...], event: Obj) -> None:
        self._written[key] = event
        self._written.move_to_end(key)
        while len(self._written) > self.cache_size:
            self._written.popitem(last=False)

    def start(self) -> EventRecorder:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"events-{self.component}", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.flush_interval):
            try:
                self.flush()
            except Exception:
                log.exception("event recorder: flush failed")

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        try:
            self.flush()
        except Exception:
            log.exception("event recorder: final flush failed")


# ----------------------------------------------------------------------------- the controller base


@dataclass
class ControllerContext:
    """What a controller is built from: the server core, the process's informer factory, the clock, events.

    ``options`` holds per-controller settings (``concurrent_replicaset_syncs`` ...) from the
    controller manager's configuration.
    """

    core: ServerCore
    informers: Any  # emulator.informers.SharedInformerFactory (Any: keeps this module import-light)
    clock: Clock
    recorder: EventRecorder | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def option(self, name: str, default: Any) -> Any:
        return self.options.get(name, default)


class Runnable(Protocol):
    """What the controller manager starts and stops."""

    name: str

    def start(self) -> Any: ...

    def stop(self, timeout: float = 10.0) -> None: ...


class Controller(abc.ABC):
    """Informer handlers → :class:`WorkQueue` → ``workers`` threads calling :meth:`reconcile`.

    Subclasses register their informers and handlers in ``__init__`` (through
    ``ctx.informers``), call :meth:`watch` for each informer whose sync they need before
    working, and implement :meth:`reconcile`. ``start`` is called by the controller manager
    after the factory has started and every informer has synced.
    """

    #: retries after which a failing key is dropped (None: retry forever, as the ReplicaSet controller does).
    max_retries: int | None = None

    def __init__(self, name: str, ctx: ControllerContext, *, workers: int = 1,
                 rate_limiter: RateLimiter | None = None) -> None:
        self.name = name
        self.ctx = ctx
        self.core = ctx.core
        self.clock = ctx.clock
        self.workers = workers
        self.recorder = ctx.recorder
        self.queue = WorkQueue(name, clock=ctx.clock, rate_limiter=rate_limiter)
        self.reconcile_latency = LatencySamples()
        self._m_reconcile = RECONCILE_TIME.labels(name)
        self._synced: list[Callable[[], bool]] = []
        self._threads: list[threading.Thread] = []
        self.reconciles = 0
        self.errors = 0

    # ------------------------------------------------------------------ wiring
    def watch(self, informer: Any) -> Any:
        """Remember that ``informer`` must have synced before the workers start; returns it."""
        self._synced.append(informer.has_synced)
        return informer

    def has_synced(self) -> bool:
        return all(fn() for fn in self._synced)

    def enqueue(self, obj: Mapping[str, Any]) -> None:
        self.queue.add(meta_key(obj))

    def enqueue_key(self, key: str) -> None:
        self.queue.add(key)

    def enqueue_after(self, key: str, delay: float) -> None:
        self.queue.add_after(key, delay)

    def event(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event(obj, event_type, reason, message)

    # ------------------------------------------------------------------ running
    def start(self) -> Controller:
        if self._threads:
            return self
        for i in range(self.workers):
            t = threading.Thread(target=self._worker, name=f"{self.name}-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.queue.shutdown()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._threads = []

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def _worker(self) -> None:
        while self.process_next_item():
            pass

    def process_next_item(self, timeout: float | None = None) -> bool:
        """Take one key and reconcile it; False once the queue shut down (or on ``timeout``)."""
        key, shutdown = self.queue.get(timeout)
        if shutdown:
            return False
        if key is None:
            return False
        try:
            self._process(str(key))
        finally:
            self.queue.done(key)
        return True

    def _process(self, key: str) -> None:
        started = time.perf_counter()
        result = "success"
        try:
            requeue_after = self.reconcile(key)
        except Exception as e:
            result = "error"
            self.errors += 1
            self._handle_error(key, e)
        else:
            self.queue.forget(key)
            if requeue_after is not None:
                result = "requeue_after"
                self.queue.add_after(key, requeue_after)
        finally:
            took = time.perf_counter() - started
            self.reconciles += 1
            self._m_reconcile.observe(took)
            self.reconcile_latency.add(took)
            RECONCILE_TOTAL.labels(self.name, result).inc()

    def _handle_error(self, key: str, error: Exception) -> None:
        if isinstance(error, errors.StatusError) and any(
                c.reason == "NamespaceTerminating" for c in error.causes or []):
            self.queue.forget(key)  # nothing can be created there any more: upstream drops the key
            return
        if self.max_retries is None or self.queue.num_requeues(key) < self.max_retries:
            level = logging.DEBUG if isinstance(error, errors.StatusError) and error.reason == "Conflict" \
                else logging.INFO
            log.log(level, "%s: error syncing %r, requeuing: %s", self.name, key, error,
                    exc_info=not isinstance(error, errors.StatusError))
            self.queue.add_rate_limited(key)
            return
        log.warning("%s: dropping %r out of the queue after %d retries: %s", self.name, key, self.max_retries, error)
        self.queue.forget(key)

    @abc.abstractmethod
    def reconcile(self, key: str) -> float | None:
        """Bring the object of ``key`` to its desired state; return cluster seconds to requeue after, or None."""


class PodOwnerController(Controller):
    """A :class:`Controller` that creates pods under its own controller reference and counts them.

    The pod and owner delete handlers the DaemonSet and Job controllers share (upstream's
    ``addPod`` / ``updatePod`` / ``deletePod`` with plain :class:`ControllerExpectations`):
    a pod event wakes the owner its controller reference resolves to (:meth:`owner_key_of`),
    a new pod counts as an observed creation, and a pod that starts or finishes being
    deleted as an observed deletion (once: a graceful deletion is counted when its
    ``deletionTimestamp`` appears, not again when the pod goes). Subclasses set
    ``self.expectations``, implement :meth:`owner_key_of` and register these handlers.
    """

    expectations: ControllerExpectations

    @abc.abstractmethod
    def owner_key_of(self, pod: Obj) -> str | None:
        """The queue key of the (cached) owner that ``pod``'s controller reference names, or None."""

    def _delete_owner(self, obj: Any) -> None:
        """An owner went away: forget its expectations."""
        owner = object_of(obj)
        key = getattr(obj, "key", None) or (meta_key(owner) if owner is not None else None)
        if key is not None:
            self.expectations.delete_expectations(key)

    def _add_pod(self, pod: Obj, _initial: bool) -> None:
        key = self.owner_key_of(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.enqueue_key(key)

    def _update_pod(self, old: Obj, new: Obj) -> str | None:
        """Returns the key of the owner it woke (None: a resync, or no owner)."""
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return None
        key = self.owner_key_of(new)
        if key is None:
            return None
        if new["metadata"].get("deletionTimestamp") and not old["metadata"].get("deletionTimestamp"):
            self.expectations.deletion_observed(key)
        self.enqueue_key(key)
        return key

    def _delete_pod(self, obj: Any) -> None:
        pod = object_of(obj)
        if pod is None:
            return
        key = self.owner_key_of(pod)
        if key is not None:
            if not pod["metadata"].get("deletionTimestamp"):
                self.expectations.deletion_observed(key)
            self.enqueue_key(key)


def ensure_indexers(informer: Any, indexers: Mapping[str, Callable[[Obj], Iterable[str]]]) -> None:
    """Add the index functions ``informer`` lacks (several controllers share one informer)."""
    existing = informer.indexer.indexers
    missing = {name: fn for name, fn in indexers.items() if name not in existing}
    if missing:
        # Another controller may add it in between: same name, same function.
        with contextlib.suppress(ValueError):
            informer.indexer.add_indexers(missing)


def object_of(obj: Any) -> Obj | None:
    """The object of a delete notification, unwrapping a ``DeletedFinalStateUnknown`` tombstone (None if empty)."""
    if isinstance(obj, dict):
        return obj
    inner = getattr(obj, "obj", None)
    return inner if isinstance(inner, dict) else None
