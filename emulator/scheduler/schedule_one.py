"""The scheduling cycle: from a popped pod to an assumed placement handed to the binder, or a failure handled.

Upstream ``pkg/scheduler/schedule_one.go`` -- ``ScheduleOne`` /
``schedulingCycle`` (snapshot, the framework's ``SchedulePod``, PostFilter,
assume, Reserve, Permit) and ``handleSchedulingFailure`` (metrics, requeue,
then PodScheduled=False, the nomination and a FailedScheduling event, which
the :class:`~emulator.scheduler.api_writer.ApiWriter` writes
asynchronously); our own Python. The binding cycle is in
:mod:`emulator.scheduler.binder`.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from emulator.scheduler import effectiveness, metrics
from emulator.scheduler.api_writer import ApiWriter
from emulator.scheduler.binder import BindTask
from emulator.scheduler.cache import Cache
from emulator.scheduler.framework.interface import CycleState, NominatingInfo, Status, is_success
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import FitError, PodInfo, ScheduleResult, SchedulingError
from emulator.scheduler.queue import QueuedPod, SchedulingQueue
from emulator.scheduler.timed_framework import TimedFramework

if TYPE_CHECKING:
    from emulator.scheduler.scheduler import SchedulerOptions

__all__ = ["SchedulerStats", "SchedulingCycle"]

_UNSCHEDULABLE = "Unschedulable"
_SCHEDULER_ERROR = "SchedulerError"


@dataclass
class SchedulerStats:
    """Counters and latencies since start (:meth:`Scheduler.snapshot_stats` reads them), under ``_stats_lock``."""

    attempts: int = 0
    scheduled: int = 0
    unschedulable: int = 0
    errors: int = 0
    conflicts: int = 0
    forgotten: int = 0
    dropped: int = 0
    preemptions: int = 0
    # PostFilter skipped because the pod's earlier preemption is still being carried out / its victims (or
    # another preemption's on its nominated node) are not shown going in the cache yet.
    held_preempting: int = 0
    held_victims: int = 0
    busy_seconds: float = 0.0
    bind_seconds: float = 0.0
    attempt_seconds: list[float] = field(default_factory=list)
    sli_seconds: list[float] = field(default_factory=list)
    # The latest successful attempts' latencies, always kept (bounded) for the run summary's quantiles.
    recent_attempts: deque[float] = field(default_factory=lambda: deque(maxlen=50_000))


class SchedulingCycle:
    """The scheduling cycle of :class:`~emulator.scheduler.scheduler.Scheduler` (a part of it).

    Hands a placement that passed Permit to the binder (``_submit``) or parks
    it (``_park``), both :class:`~emulator.scheduler.binder.BindingCycle`'s.
    """

    name: str
    options: SchedulerOptions
    rng: random.Random
    queue: SchedulingQueue
    cache: Cache
    api: ApiWriter
    stats: SchedulerStats
    _stats_lock: threading.Lock
    _children: dict[tuple[Any, ...], Any]
    profile_for: Callable[[Any], TimedFramework | None]
    _submit: Callable[[BindTask], None]
    _park: Callable[[BindTask, Any], None]

    def schedule_one(self, qp: QueuedPod) -> None:
        """upstream ``ScheduleOne``: the scheduling cycle on this thread, the binding cycle on the bind pool."""
        pod = qp.pod
        fwk = self.profile_for(pod)
        if fwk is None or (pod.get("metadata") or {}).get("deletionTimestamp") or qp.deleted:
            self.queue.done(qp)
            return
        start = time.perf_counter()
        cycle = self.queue.scheduling_cycle
        state = CycleState()
        state.record_plugin_metrics = self.rng.random() * 100 < self.options.plugin_metrics_sample_percent
        info = qp.pod_info
        victims: Sequence[Any] = ()
        nominating: NominatingInfo | None = None
        with self.cache.cycle() as snapshot:
            if info.key in self.cache:
                # Already assumed or bound (a stale queue entry): nothing to do (upstream skipPodSchedule).
                self.queue.done(qp)
                return
            try:
                result = fwk.schedule_pod(state, info, snapshot)
                if isinstance(result, FitError):
                    nominating, victims = self._post_filter(fwk, state, info, snapshot, result)
            except SchedulingError as e:
                result = e
            if isinstance(result, ScheduleResult):
                self.cache.assume(info, result.node)
                self.queue.delete_nominated_pod(info.key)  # upstream assume: DeleteNominatedPodIfExists
                self.api.victims_seen(info.key)
                # What the chosen node and all nodes looked like now; counted once the bind succeeds.
                state.write(effectiveness.SAMPLE_KEY, effectiveness.sample(snapshot, result.node))
        with self._stats_lock:
            self.stats.busy_seconds += time.perf_counter() - start
        if isinstance(result, FitError):
            self._failed(qp, fwk, result, start, cycle, nominating=nominating, victims=victims)
            return
        if isinstance(result, SchedulingError):
            self._failed(qp, fwk, result, start, cycle)
            return
        node = result.node
        status = fwk.timed("Reserve", lambda: fwk.run_reserve_plugins_reserve(state, info, node)) \
            if fwk.has["reserve"] else None
        if not is_success(status):
            self._undo(fwk, state, info, node)
            self._failed(qp, fwk, status if status.is_rejected() else SchedulingError(status),  # type: ignore[union-attr,arg-type]
                         start, cycle)
            return
        status = fwk.timed("Permit", lambda: fwk.run_permit_plugins(state, info, node)) \
            if fwk.has["permit"] else None
        task = BindTask(qp, fwk, state, node, start, cycle)
        if status is not None and status.is_wait():
            self._park(task, state.get("permit/timeouts") or {})
            return
        if not is_success(status):
            self._undo(fwk, state, info, node)
            self._failed(qp, fwk, status if status.is_rejected() else SchedulingError(status),  # type: ignore[union-attr,arg-type]
                         start, cycle)
            return
        self._submit(task)

    def _post_filter(self, fwk: TimedFramework, state: CycleState, info: PodInfo, snapshot: Snapshot,
                     fit: FitError) -> tuple[NominatingInfo | None, Sequence[Any]]:
        """Run PostFilter (preemption) on a FitError: (where to nominate the pod, which pods to evict)."""
        if not fwk.has_post_filter_plugins() or type(fit).__name__ == "NoNodesAvailable":
            return None, ()
        held = "preempting" if self.api.is_preempting(info.key) else \
            "victims" if self._victims_running(info, snapshot) else ""
        if held:
            with self._stats_lock:
                if held == "preempting":
                    self.stats.held_preempting += 1
                else:
                    self.stats.held_victims += 1
            # Its victims are still being evicted (the API writer lags under load), or evicted but not yet
            # terminating in our cache (the pod informer lags behind the writes): as upstream's async preemption,
            # a pod running preemption does not preempt again; it waits for its victims to go.
            return None, ()
        post, status = fwk.run_post_filter_plugins(state, info, snapshot, fit.diagnosis.node_to_status)
        metrics.PREEMPTION_ATTEMPTS.labels(self.name).inc()
        fit.diagnosis.post_filter_msg = status.message
        if post is None or post.nominating_info is None:
            return None, ()
        fit.nominating_info = post.nominating_info
        victims = tuple(getattr(post, "victims", None) or ())
        if status.is_success() and post.nominating_info.nominated_node_name:
            metrics.PREEMPTION_VICTIMS.labels(self.name).observe(len(victims))
        return post.nominating_info, victims

    def _victims_running(self, info: PodInfo, snapshot: Snapshot) -> bool:
        """Whether a victim of the pod's last preemption is still on its node in ``snapshot`` without a
        deletionTimestamp, or (upstream ``PodEligibleToPreemptOthers``' terminating-victim rule, for victims our
        cache does not show terminating yet) a lower-priority victim of another preemption is on the pod's
        nominated node. Once neither holds, upstream's rule as written takes over."""
        awaited = self.api.awaited_victims(info.key)
        if awaited is not None:
            if self._running(snapshot, *awaited):
                return True
            self.api.victims_seen(info.key)
        nominated = info.nominated_node_name or self.queue.nominated_node(info.pod)
        if nominated:
            victims = self.api.awaited_on(nominated)
            return bool(victims) and self._running(snapshot, nominated, victims, below=info.priority)
        return False

    @staticmethod
    def _running(snapshot: Snapshot, node: str, victims: frozenset[str] | set[str], below: int | None = None) -> bool:
        index = snapshot.index_of(node)
        return index is not None and any(
            p.key in victims and not (p.pod.get("metadata") or {}).get("deletionTimestamp")
            and (below is None or p.priority < below) for p in snapshot.pods_on(index))

    def _unreserve_and_forget(self, fwk: TimedFramework, state: CycleState, info: PodInfo, node: str) -> None:
        """Undo a placement: the Reserve plugins' Unreserve, then the cache forgets the assumed pod."""
        if fwk.has["reserve"]:
            fwk.timed("Unreserve", lambda: fwk.run_reserve_plugins_unreserve(state, info, node))
        self.cache.forget(info.key, node)

    def _undo(self, fwk: TimedFramework, state: CycleState, info: PodInfo, node: str) -> None:
        """Unreserve and forget an assumption made this cycle (counted as ``unreserved``)."""
        self._unreserve_and_forget(fwk, state, info, node)
        self._forgotten("unreserved")

    def _forgotten(self, reason: str) -> None:
        with self._stats_lock:
            self.stats.forgotten += 1
        self._child(metrics.ASSUMED_FORGOTTEN, self.name, reason).inc()

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    # ------------------------------------------------------------------ failures
    def _failed(self, qp: QueuedPod, fwk: TimedFramework, err: FitError | SchedulingError | Status, start: float,
                cycle: int, *, nominating: NominatingInfo | None = None, victims: Sequence[Any] = ()) -> None:
        """upstream ``handleSchedulingFailure``: metrics, requeue, then (asynchronously) condition, event, victims."""
        profile = fwk.profile_name
        if isinstance(err, FitError):
            result, reason, message = "unschedulable", _UNSCHEDULABLE, err.message
            qp.unschedulable_plugins = set(err.diagnosis.unschedulable_plugins)
            qp.pending_plugins = set(err.diagnosis.pending_plugins)
        elif isinstance(err, Status):  # rejected at Reserve/Permit
            result, reason, message = "unschedulable", _UNSCHEDULABLE, err.message
            qp.unschedulable_plugins = {err.plugin} if err.plugin else set()
            qp.pending_plugins = set()
        else:
            result, reason, message = "error", _SCHEDULER_ERROR, str(err)
            qp.unschedulable_plugins = set()
            qp.pending_plugins = set()
        seconds = time.perf_counter() - start
        self._child(metrics.SCHEDULE_ATTEMPTS, result, profile, self.name).inc()
        self._child(metrics.SCHEDULING_ATTEMPT_DURATION, result, profile, self.name).observe(seconds)
        with self._stats_lock:
            self.stats.attempts += 1
            if result == "error":
                self.stats.errors += 1
            else:
                self.stats.unschedulable += 1
        nominated = ""
        if nominating is not None and nominating.nominated_node_name:
            nominated = nominating.nominated_node_name
            self.queue.add_nominated_pod(qp.pod_info, nominated)
            with self._stats_lock:
                self.stats.preemptions += 1
        elif nominating is not None and nominating.override:
            self.queue.add_nominated_pod(qp.pod_info, "")
        self.queue.add_unschedulable_if_not_present(qp, cycle)
        clear = nominating is not None and nominating.override and not nominated
        self.api.failure(qp.pod_info, profile, reason, message, nominated=nominated or None, clear_nominated=clear)
        if victims:
            # After the nomination is written (as async preemption orders them): a competing replica then learns
            # of the nomination before it sees the victims' room free, and its Filter keeps out of that room.
            self.api.preemption(qp.pod_info, nominated, tuple(victims), profile)
