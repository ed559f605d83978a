"""The binding cycle and the bind threads: Permit waits, PreBind, Bind (the store's atomic bind), PostBind.

Upstream ``pkg/scheduler/schedule_one.go`` -- ``bindingCycle``
(``WaitOnPermit``, ``RunPreBindPlugins``, ``bind``, ``RunPostBindPlugins``)
and ``handleBindingCycleError`` (unreserve, forget the assumed pod, requeue);
our own Python. The store is the arbiter: a 409 from the bind means the
optimistic race was lost (see :mod:`emulator.scheduler.scheduler`). Binds
go in batches, one pipelined store round trip each, on bind threads or
(``bind_workers=0``) on the scheduling thread itself; every batch goes
through :meth:`BindingCycle._bind_and_recover`, the one place a batch that
failed outright is recovered.
"""

from __future__ import annotations

import logging
import queue as queue_mod
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from emulator.api.errors import StatusError
from emulator.clock import Clock
from emulator.scheduler import effectiveness, metrics
from emulator.scheduler.api_writer import ApiWriter, pod_event
from emulator.scheduler.cache import Cache, PodState
from emulator.scheduler.framework.interface import BINDING_ANNOTATIONS_KEY, Code, CycleState, Status, is_success
from emulator.scheduler.framework.types import SchedulingError
from emulator.scheduler.queue import ASSIGNED_POD_DELETE, QueuedPod, SchedulingQueue
from emulator.scheduler.timed_framework import TimedFramework
from emulator.scheduler.waiting_pods import WaitingPod

if TYPE_CHECKING:
    from emulator.scheduler.schedule_one import SchedulerStats
    from emulator.scheduler.scheduler import SchedulerClient, SchedulerOptions

__all__ = ["BIND_BATCH_INLINE", "BindOutcome", "BindTask", "BindingCycle"]

log = logging.getLogger(__name__)

_BIND_BATCH = 128
BIND_BATCH_INLINE = 64  # bind_workers=0: the scheduling thread binds once this many pods are waiting


@dataclass
class BindOutcome:
    """What happened to one bind (kept in :attr:`Scheduler.recent_outcomes` when ``keep_samples``)."""

    key: str
    node: str
    ok: bool
    conflict: bool = False
    message: str = ""


@dataclass
class BindTask:
    """A pod the scheduling cycle assumed on ``node``, on its way through the binding cycle."""

    qp: QueuedPod
    fwk: TimedFramework
    state: CycleState
    node: str
    start: float
    cycle: int


class BindingCycle:
    """The binding cycle of :class:`~emulator.scheduler.scheduler.Scheduler` (a part of it).

    Reports failures through the scheduling cycle's ``_failed`` (upstream
    ``handleSchedulingFailure``) and undoes placements with its
    ``_unreserve_and_forget``.
    """

    name: str
    client: SchedulerClient
    clock: Clock
    options: SchedulerOptions
    queue: SchedulingQueue
    cache: Cache
    api: ApiWriter
    stats: SchedulerStats
    effectiveness: dict[str, effectiveness.Effectiveness]
    recent_outcomes: list[BindOutcome]
    _stats_lock: threading.Lock
    _stop: threading.Event
    _threads: list[threading.Thread]
    _bind_q: queue_mod.SimpleQueue[BindTask | None]
    _inline: list[BindTask]
    _waiting: dict[str, WaitingPod]
    _waiting_lock: threading.Lock
    _in_bind: int
    _inflight_cond: threading.Condition
    _failed: Callable[..., None]
    _undo: Callable[[TimedFramework, CycleState, Any, str], None]
    _unreserve_and_forget: Callable[[TimedFramework, CycleState, Any, str], None]
    _forgotten: Callable[[str], None]
    _child: Callable[..., Any]
    # Hands a bound pod, as the store returned it, to the process's watch reader so that the bind's own
    # watch event is not decoded again (Multiplexer.remember; set by Scheduler.attach when the client
    # writes to the store its informers read).
    _remember_write: Callable[[Any], None] = staticmethod(lambda obj: None)  # type: ignore[assignment]

    # ------------------------------------------------------------------ from the scheduling cycle
    def _submit(self, task: BindTask) -> None:
        """Hand a placement that passed Permit to a bind thread (or, ``bind_workers=0``, the inline batch)."""
        with self._inflight_cond:
            self._in_bind += 1
        if self._threads and self.options.bind_workers == 0:
            self._inline.append(task)
        else:
            self._bind_q.put(task)

    # ------------------------------------------------------------------ Permit waits (upstream WaitOnPermit)
    def _park(self, task: BindTask, timeouts: Mapping[str, float]) -> None:
        """Hold a pod some Permit plugin answered Wait: bind it once allowed, fail it once rejected or timed out."""

        def done(wp: WaitingPod, status: Status | None) -> None:
            with self._waiting_lock:
                self._waiting.pop(wp.uid, None)
            if status is None:
                with self._inflight_cond:
                    self._in_bind += 1
                self._bind_q.put(task)
            else:
                self._undo(task.fwk, task.state, task.qp.pod_info, task.node)
                self._failed(task.qp, task.fwk, status, task.start, task.cycle)

        waiting = WaitingPod(task.qp.pod_info, timeouts, done)
        with self._waiting_lock:
            self._waiting[waiting.uid] = waiting
        waiting.start()

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        with self._waiting_lock:
            return self._waiting.get(uid)

    def waiting_pods(self) -> list[WaitingPod]:
        with self._waiting_lock:
            return list(self._waiting.values())

    # ------------------------------------------------------------------ bind threads
    def _bind_worker(self) -> None:
        while True:
            task = self._bind_q.get()
            if task is None:
                return
            # Let a few more arrive and take them all: the store binds a batch in one round trip, and one
            # wake-up per batch instead of per pod keeps this thread off the scheduling thread's GIL.
            if self.options.bind_linger > 0:
                self._stop.wait(self.options.bind_linger)
            batch = [task]
            stop = False
            while len(batch) < _BIND_BATCH:
                try:
                    more = self._bind_q.get_nowait()
                except queue_mod.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            self._bind_and_recover(batch)
            if stop:
                return

    def _flush_inline(self) -> None:
        """Bind what the scheduling thread collected (``bind_workers=0``): one store round trip, this thread."""
        batch = self._inline[:]
        self._inline.clear()
        if not batch:
            return
        self._bind_and_recover(batch)

    def _bind_and_recover(self, batch: list[BindTask]) -> None:
        """Bind ``batch``; should that fail outright, forget every assumption and requeue every pod with backoff.

        Either way the batch leaves the in-bind count (what :meth:`Scheduler.wait_for_idle` waits on). Both
        binding paths -- bind threads and the scheduling thread's inline batches -- go through here.
        """
        try:
            self._bind_batch(batch)
        except Exception:
            log.exception("%s: binding %d pods failed unexpectedly", self.name, len(batch))
            for t in batch:
                self.cache.forget(t.qp.key, t.node)
                self.queue.add_unschedulable_if_not_present(t.qp, t.cycle)
        finally:
            with self._inflight_cond:
                self._in_bind -= len(batch)
                self._inflight_cond.notify_all()

    def _bind_batch(self, tasks: list[BindTask]) -> None:
        """upstream ``bindingCycle`` for each task: PreBind, Bind, PostBind.

        Bind is the first bind plugin that does not Skip; when none takes the
        pod (the default: DefaultBinder's job), the store's atomic bind does,
        for the whole batch in one round trip when the client offers
        ``bind_many``.
        """
        bind_start = time.perf_counter()
        to_store: list[BindTask] = []
        for task in tasks:
            fwk, state, info, node = task.fwk, task.state, task.qp.pod_info, task.node
            status = fwk.timed("PreBind", lambda f=fwk, s=state, i=info, n=node: f.run_pre_bind_plugins(s, i, n)) \
                if fwk.has["preBind"] else None
            if is_success(status) and fwk.has["bind"]:
                status = fwk.timed("Bind", lambda f=fwk, s=state, i=info, n=node: f.run_bind_plugins(s, i, n))
                if status.is_skip():
                    to_store.append(task)
                    continue
            elif is_success(status):
                to_store.append(task)
                continue
            self._bind_outcome(task, status, None)
        if to_store:
            start = time.perf_counter()
            results = self._store_bind(to_store)
            seconds = time.perf_counter() - start
            for task, result in zip(to_store, results, strict=True):
                task.fwk._observe("Bind", None if not isinstance(result, StatusError) else Status(Code.ERROR),
                                  seconds)
                if isinstance(result, StatusError):
                    self._bind_outcome(task, Status(Code.ERROR, result.message, plugin="DefaultBinder"), result)
                else:
                    self._remember_write(result)
                    self._bind_outcome(task, None, None)
        with self._stats_lock:
            self.stats.bind_seconds += time.perf_counter() - bind_start

    def _store_bind(self, tasks: list[BindTask]) -> list[Any]:
        """Bind through the store: one pipelined ``bind_many`` if the client has it, else one ``bind`` each."""
        bind_many = getattr(self.client, "bind_many", None)
        # Bindings that carry annotations (a plugin's device choice) go one by one: bind_many has no room for them.
        annotated = [t.state.get(BINDING_ANNOTATIONS_KEY) for t in tasks]
        if bind_many is not None and not any(annotated):
            return list(bind_many([(t.qp.pod, t.node) for t in tasks]))
        out: list[Any] = []
        for t, extra in zip(tasks, annotated, strict=True):
            info = t.qp.pod_info
            try:
                out.append(self.client.bind(info.namespace, info.name, t.node, uid=info.uid,
                                            annotations=extra or None))
            except StatusError as e:
                out.append(e)
        return out

    def _bind_outcome(self, task: BindTask, status: Status | None, error: StatusError | None) -> None:
        if is_success(status):
            self._bound(task)
            return
        self._unreserve_and_forget(task.fwk, task.state, task.qp.pod_info, task.node)
        if error is not None and error.code == 409:
            self._conflict(task, error)
            return
        if error is not None and error.code == 404:
            self._drop(task, error.message)  # deleted meanwhile
            return
        reason = status if status is not None and status.is_rejected() else SchedulingError(
            status if status is not None else Status.error("bind failed"))
        self._failed(task.qp, task.fwk, reason, task.start, task.cycle)

    def _bound(self, task: BindTask) -> None:
        qp, fwk, node = task.qp, task.fwk, task.node
        self.cache.finish_binding(qp.key)
        if fwk.has["postBind"]:
            fwk.timed("PostBind", lambda: fwk.run_post_bind_plugins(task.state, qp.pod_info, node))
        now = time.perf_counter()
        attempt = now - task.start
        sli = now - (qp.initial_attempt_wall or task.start)
        profile = fwk.profile_name
        self._child(metrics.SCHEDULE_ATTEMPTS, "scheduled", profile, self.name).inc()
        self._child(metrics.SCHEDULING_ATTEMPT_DURATION, "scheduled", profile, self.name).observe(attempt)
        self._child(metrics.POD_SCHEDULING_SLI_DURATION, metrics.attempts_label(qp.attempts), self.name).observe(sli)
        self._child(metrics.POD_SCHEDULING_ATTEMPTS, self.name).observe(qp.attempts)
        self.effectiveness[profile].observe(task.state.get(effectiveness.SAMPLE_KEY))
        with self._stats_lock:
            self.stats.attempts += 1
            self.stats.scheduled += 1
            self.stats.recent_attempts.append(attempt)
            if self.options.keep_samples:
                self.stats.attempt_seconds.append(attempt)
                self.stats.sli_seconds.append(sli)
                self.recent_outcomes.append(BindOutcome(qp.key, node, True))
        self.queue.done(qp)
        if self.options.record_events:
            self.api.event(pod_event(qp.pod_info, "Normal", "Scheduled", "Binding",
                                     f"Successfully assigned {qp.key} to {node}", component=profile,
                                     instance=self.name, now=self.clock.now()))

    def _conflict(self, task: BindTask, error: StatusError) -> None:
        """The store refused the bind: the optimistic race was lost (or the pod is no longer ours to bind)."""
        qp = task.qp
        self._child(metrics.BIND_CONFLICTS, self.name).inc()
        self._forgotten("bind_conflict")
        with self._stats_lock:
            self.stats.conflicts += 1
            if self.options.keep_samples:
                self.recent_outcomes.append(BindOutcome(qp.key, task.node, False, True, error.message))
        if "already assigned" in error.message or "being deleted" in error.message:
            self._drop(task, error.message)
            return
        # The room we assumed is gone; pods that failed for lack of it may fit elsewhere now: upstream moves
        # them on the forget (AssignedPodDelete) before requeueing this one with backoff.
        self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
        self._failed(qp, task.fwk, SchedulingError(Status.error(
            f'running Bind plugin "DefaultBinder": {error.message}', "DefaultBinder")), task.start, task.cycle)

    def _drop(self, task: BindTask, why: str) -> None:
        with self._stats_lock:
            self.stats.dropped += 1
        log.debug("%s: dropping %s: %s", self.name, task.qp.key, why)
        task.qp.deleted = True
        self.queue.done(task.qp)

    def _expired(self, state: PodState) -> None:
        self._forgotten("expired")
        log.warning("%s: assumed pod %s on %s expired without the informer confirming its bind", self.name,
                    state.info.key, state.node)
