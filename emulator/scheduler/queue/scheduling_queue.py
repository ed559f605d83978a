"""The scheduling queue (upstream ``PriorityQueue``): activeQ, backoffQ, the unschedulable pool, in-flight pods.

Upstream ``pkg/scheduler/backend/queue/scheduling_queue.go``; our own
Python. The parts live beside it as upstream splits them:
:mod:`~emulator.scheduler.queue.active_queue`,
:mod:`~emulator.scheduler.queue.backoff_queue`,
:mod:`~emulator.scheduler.queue.unschedulable_pods`,
:mod:`~emulator.scheduler.queue.nominator`, and the cluster events in
:mod:`~emulator.scheduler.queue.events`. The behaviour kept:

* **PreEnqueue** plugins (SchedulingGates) run before a pod enters activeQ; a
  gated pod waits in the unschedulable pool, counted as ``gated``.
* **Pop** hands out the head, counts an attempt, and remembers the pod as *in
  flight* until the scheduler reports back (:meth:`SchedulingQueue.done` or
  :meth:`SchedulingQueue.add_unschedulable_if_not_present`). Events about an
  in-flight pod (it was updated, deleted or bound meanwhile) are recorded on
  it instead of queueing a second copy -- what upstream's QueueingHints do
  for in-flight pods.
* **Failures**: a pod some plugins rejected goes to the unschedulable pool,
  unless a cluster event that one of its rejecting plugins cares about arrived
  while it was being scheduled, in which case it goes to backoffQ (upstream's
  queueing hints for in-flight pods, ``determineSchedulingHintForInFlightPod``:
  the events received since the pod was popped, each checked against the
  rejecting plugins; kemu keeps, per event, the scheduling cycle it last arrived
  in); a pod that failed for another reason (an error, a lost bind race) always
  goes to backoffQ. Completed backoffs move to activeQ whenever the queue is popped
  or flushed. When activeQ is empty, pop takes the pod whose backoff ends
  first from backoffQ early (upstream's ``SchedulerPopFromBackoffQ``, beta and
  on by default since 1.33: an idle scheduling cycle is better spent than
  waited out), unless it is backing off after an error rather than a
  rejection (upstream's podErrorBackoffQ); ``pop_from_backoff=False`` turns
  this off.
* **Cluster events** move unschedulable pods back: each in-tree plugin
  declares which events can make a pod it rejected schedulable
  (:data:`~emulator.scheduler.queue.events.PLUGIN_EVENTS`), and
  :meth:`SchedulingQueue.move_all_to_active_or_backoff` moves exactly the
  pods one of whose rejecting plugins cares about the event -- to backoffQ if
  still backing off, else to activeQ. A plugin the table does not know (a
  custom one) is interested in every event unless it implements
  ``events_to_register()``. Upstream's QueueingHint functions (which can also
  say "this particular node add does not help") are not modelled.
* **Flush**: pods left in the unschedulable pool longer than
  ``podMaxInUnschedulablePodsDuration`` (5 minutes) are moved back
  (``UnschedulableTimeout``), checked every 30 s.

Time: every timestamp, backoff and timeout reads the injected cluster
:class:`~emulator.clock.Clock` (tests use ``ManualClock``); the SLI start of
each pod is also stamped with ``time.perf_counter`` because scheduler
latencies are wall-clock measurements of our own code.

Thread-safety: one lock (a Condition) guards everything, the parts included;
:meth:`SchedulingQueue.pop` blocks on it with a timeout.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from emulator.api.types import ObjView
from emulator.clock import Clock, SystemClock
from emulator.scheduler import metrics
from emulator.scheduler.framework.interface import Status
from emulator.scheduler.framework.types import PodInfo, QueuedPodInfo
from emulator.scheduler.queue.active_queue import ActiveQueue
from emulator.scheduler.queue.backoff_queue import DEFAULT_POD_INITIAL_BACKOFF, DEFAULT_POD_MAX_BACKOFF, BackoffQueue
from emulator.scheduler.queue.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_UPDATE,
    BACKOFF_COMPLETE,
    FORCE_ACTIVATE,
    PLUGIN_EVENTS,
    POP_FROM_BACKOFF_Q,
    SCHEDULE_ATTEMPT_FAILURE,
    UNSCHEDULABLE_TIMEOUT,
    UNSCHEDULED_POD_ADD,
    UNSCHEDULED_POD_UPDATE,
    WILDCARD_EVENTS,
)
from emulator.scheduler.queue.nominator import Nominator
from emulator.scheduler.queue.queued_pod import QueuedPod, pod_key
from emulator.scheduler.queue.unschedulable_pods import UnschedulablePods

__all__ = [
    "ACTIVE",
    "BACKOFF",
    "DEFAULT_POD_MAX_IN_UNSCHEDULABLE",
    "GATED",
    "UNSCHEDULABLE",
    "SchedulingQueue",
    "is_pod_updated",
]

# Queue names, as the ``queue`` label of scheduler_pending_pods / scheduler_queue_incoming_pods_total.
ACTIVE, BACKOFF, UNSCHEDULABLE, GATED = "active", "backoff", "unschedulable", "gated"

DEFAULT_POD_MAX_IN_UNSCHEDULABLE = 300.0  # upstream DefaultPodMaxInUnschedulablePodsDuration
_LEFTOVER_FLUSH_PERIOD = 30.0  # upstream flushes the unschedulable pool every 30 s


def _strip_for_update(pod: ObjView) -> dict[str, Any]:
    meta = {k: v for k, v in (pod.get("metadata") or {}).items()
            if k not in ("resourceVersion", "generation", "managedFields", "finalizers")}
    return {**{k: v for k, v in pod.items() if k != "status"}, "metadata": meta}


def is_pod_updated(old: ObjView, new: ObjView) -> bool:
    """upstream ``isPodUpdated``: did anything change but status, resourceVersion, generation, managedFields
    or finalizers?"""
    return _strip_for_update(old) != _strip_for_update(new)


class SchedulingQueue:
    """The scheduling queue of one scheduler (all its profiles). See the module docstring.

    ``less`` is the QueueSort plugin's ordering (None or ``priority_sort=True``
    selects PrioritySort's fast path); ``pre_enqueue(pod)`` runs the pod's
    profile's PreEnqueue plugins and returns the first failing status (None
    to admit). ``plugin_events`` extends/overrides :data:`PLUGIN_EVENTS`.
    ``name`` labels the queue's metrics (the scheduler instance).
    """

    def __init__(self, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool] | None = None, *,
                 priority_sort: bool | None = None, clock: Clock | None = None,
                 pre_enqueue: Callable[[ObjView], Status | None] | None = None,
                 pod_initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF,
                 pod_max_backoff: float = DEFAULT_POD_MAX_BACKOFF,
                 pod_max_in_unschedulable: float = DEFAULT_POD_MAX_IN_UNSCHEDULABLE,
                 plugin_events: Mapping[str, Iterable[str]] | None = None, name: str = "kemu-scheduler",
                 poll_interval: float = 0.05, pop_from_backoff: bool = True) -> None:
        self.clock = clock or SystemClock()
        self.pop_from_backoff = pop_from_backoff
        self.name = name
        self._pre_enqueue = pre_enqueue
        self.pod_max_in_unschedulable = pod_max_in_unschedulable
        self.plugin_events: dict[str, frozenset[str]] = dict(PLUGIN_EVENTS)
        for plugin, events in (plugin_events or {}).items():
            self.plugin_events[plugin] = frozenset(events)
        self.poll_interval = poll_interval
        self._cond = threading.Condition(threading.Lock())
        self._active = ActiveQueue(less, priority_sort=priority_sort)
        self._backoff = BackoffQueue(self.clock, pod_initial_backoff, pod_max_backoff)
        self._unschedulable = UnschedulablePods()
        self._in_flight: dict[str, QueuedPod] = {}
        self._seq = itertools.count()
        self._cycle = 0
        # Cluster event -> the scheduling cycle it last arrived in (upstream's inFlightEvents, as far as the
        # plugins' event tables can tell them apart): a pod popped in cycle c saw the event if that is >= c.
        self._event_cycles: dict[str, int] = {}
        self._last_event_cycle = -1  # of any event
        self._closed = False
        self._nominator = Nominator()
        self._incoming: dict[tuple[str, str], Any] = {}
        self._flusher: threading.Thread | None = None
        self._stop = threading.Event()

    # ------------------------------------------------------------------ metrics
    def _count(self, queue: str, event: str) -> None:
        child = self._incoming.get((queue, event))
        if child is None:
            child = self._incoming[(queue, event)] = metrics.QUEUE_INCOMING_PODS.labels(queue, event, self.name)
        child.inc()

    def counts(self) -> dict[str, int]:
        """Pods per queue: active, backoff, unschedulable (attempted), gated (never attempted)."""
        with self._cond:
            gated = sum(1 for qp in self._unschedulable.values() if qp.gated)
            return {ACTIVE: len(self._active), BACKOFF: len(self._backoff),
                    UNSCHEDULABLE: len(self._unschedulable) - gated, GATED: gated}

    # ------------------------------------------------------------------ helpers (lock held)
    def _new(self, pod: ObjView, info: PodInfo | None = None) -> QueuedPod:
        return QueuedPod(info if info is not None else PodInfo(pod), timestamp=self.clock.now(), seq=next(self._seq))

    def _run_pre_enqueue(self, qp: QueuedPod) -> None:
        if self._pre_enqueue is None:
            qp.gating_plugin = ""
            return
        status = self._pre_enqueue(qp.pod)
        if status is None or status.is_success():
            qp.gating_plugin = ""
            return
        qp.gating_plugin = status.plugin or "PreEnqueue"
        qp.unschedulable_plugins.add(qp.gating_plugin)

    def _move_to_active(self, qp: QueuedPod, event: str) -> bool:
        """PreEnqueue, then activeQ -- or the unschedulable pool if gated. True when it entered activeQ."""
        self._run_pre_enqueue(qp)
        key = qp.key
        if qp.gated:
            if key in self._active or key in self._backoff or key in self._unschedulable:
                return False
            self._unschedulable.add(qp)
            self._count(GATED, event)
            return False
        if qp.initial_attempt_timestamp is None:
            qp.initial_attempt_timestamp = self.clock.now()
            qp.initial_attempt_wall = time.perf_counter()
        self._unschedulable.remove(key)
        self._backoff.remove(key)
        self._active.push(qp)
        self._count(ACTIVE, event)
        if event in (UNSCHEDULED_POD_ADD, UNSCHEDULED_POD_UPDATE):
            self._nominator.add(qp.pod_info, None)
        return True

    def _move_to_backoff(self, qp: QueuedPod, event: str) -> None:
        self._unschedulable.remove(qp.key)
        self._backoff.add(qp)
        self._count(BACKOFF, event)

    def _requeue(self, qp: QueuedPod, event: str) -> bool:
        """Back to backoffQ if still backing off, else activeQ; True when it is now in activeQ."""
        if self._backoff.backing_off(qp):
            self._move_to_backoff(qp, event)
            return False
        return self._move_to_active(qp, event)

    def _worth_requeuing(self, qp: QueuedPod, event: str) -> bool:
        rejectors = qp.unschedulable_plugins | qp.pending_plugins
        if not rejectors or event in WILDCARD_EVENTS:
            return True
        for plugin in rejectors:
            events = self.plugin_events.get(plugin)
            if events is None or event in events:
                return True
        return False

    def _record_event(self, event: str) -> None:
        """A cluster event arrived: pods in flight now will see it when they fail (upstream
        ``addEventIfAnyInFlight``)."""
        self._event_cycles[event] = self._cycle
        self._last_event_cycle = self._cycle

    def _event_in_flight(self, rejectors: set[str], cycle: int) -> bool:
        """Whether an event one of ``rejectors`` cares about (or a wildcard event) arrived since the pod was popped
        in ``cycle`` (upstream ``determineSchedulingHintForInFlightPod`` without per-object hints: an event a
        rejecting plugin registers for queues the pod after its backoff, any other event skips it)."""
        if self._last_event_cycle < cycle:
            return False  # the usual case: nothing at all since then
        seen = self._event_cycles
        if any(seen.get(event, -1) >= cycle for event in WILDCARD_EVENTS):
            return True
        for plugin in rejectors:
            events = self.plugin_events.get(plugin)
            if events is None:
                return True  # a plugin without a table cares about every event
            if any(seen.get(event, -1) >= cycle for event in events):
                return True
        return False

    def _flush_backoff_locked(self, now: float) -> bool:
        moved = False
        while (qp := self._backoff.pop_completed(now)) is not None:
            moved = self._move_to_active(qp, BACKOFF_COMPLETE) or moved
        return moved

    # ------------------------------------------------------------------ the informer side
    def add(self, pod: ObjView, info: PodInfo | None = None) -> None:
        """A new unscheduled pod (upstream ``Add``)."""
        key = pod_key(pod)
        with self._cond:
            if key in self._in_flight or key in self._active or key in self._backoff or key in self._unschedulable:
                self._update_locked(None, pod)
                return
            if self._move_to_active(self._new(pod, info), UNSCHEDULED_POD_ADD):
                self._cond.notify()

    def update(self, old: ObjView | None, new: ObjView) -> None:
        """An unscheduled pod changed (upstream ``Update``)."""
        with self._cond:
            self._update_locked(old, new)

    def _update_locked(self, old: ObjView | None, new: ObjView) -> None:
        key = pod_key(new)
        flying = self._in_flight.get(key)
        if flying is not None:
            # Being scheduled right now: the newest object is what it is requeued with, and the update
            # counts as a move request so that a rejection sends it to backoffQ, not the unschedulable pool.
            if old is None or is_pod_updated(old, new):
                flying.moved_while_in_flight = True
            flying.pod_info = PodInfo(new)
            return
        for heap in (self._active, self._backoff):
            qp = heap.get(key)
            if qp is not None:
                qp.pod_info = PodInfo(new)
                heap.push(qp)  # its order may have changed
                self._nominator.update(qp.pod_info)
                return
        qp = self._unschedulable.get(key)
        if qp is not None:
            changed = old is None or is_pod_updated(old, new)
            qp.pod_info = PodInfo(new)
            self._nominator.update(qp.pod_info)
            if changed:
                # The update may have made it schedulable (or removed its gates): retry, after its backoff.
                self._unschedulable.remove(key)
                if self._backoff.backing_off(qp):
                    self._move_to_backoff(qp, UNSCHEDULED_POD_UPDATE)
                elif self._move_to_active(qp, UNSCHEDULED_POD_UPDATE):
                    self._cond.notify()
            return
        if self._move_to_active(self._new(new), UNSCHEDULED_POD_UPDATE):
            self._cond.notify()

    def delete(self, pod: ObjView) -> None:
        """An unscheduled pod was deleted, or got bound (upstream ``Delete``)."""
        key = pod_key(pod)
        with self._cond:
            self._nominator.delete(key)
            if self._active.remove(key) is not None or self._backoff.remove(key) is not None:
                return
            if self._unschedulable.remove(key) is not None:
                return
            flying = self._in_flight.get(key)
            if flying is not None:
                flying.deleted = True

    def activate(self, pods: Iterable[ObjView]) -> None:
        """Move these pods to activeQ now, skipping any backoff (upstream ``Activate``)."""
        with self._cond:
            moved = False
            for pod in pods:
                key = pod_key(pod)
                qp = self._unschedulable.remove(key) or self._backoff.remove(key)
                if qp is not None:
                    moved = self._move_to_active(qp, FORCE_ACTIVATE) or moved
                elif key in self._in_flight:
                    # Upstream's ForceActivate for an in-flight pod is a wildcard event naming that pod: it
                    # requeues that pod, not the others in flight.
                    self._in_flight[key].moved_while_in_flight = True
            if moved:
                self._cond.notify_all()

    def move_all_to_active_or_backoff(self, event: str, pre_check: Callable[[ObjView], bool] | None = None) -> int:
        """Move the unschedulable pods ``event`` may help (``MoveAllToActiveOrBackoffQueue``); how many moved."""
        with self._cond:
            self._record_event(event)
            if not self._unschedulable.anyone_interested(event, self.plugin_events):
                return 0
            return self._move_locked(event, list(self._unschedulable.values()), pre_check)

    def _move_locked(self, event: str, candidates: list[QueuedPod], pre_check: Callable[[ObjView], bool] | None) -> int:
        moved = 0
        activated = False
        for qp in candidates:
            if pre_check is not None and not pre_check(qp.pod):
                continue
            if qp.gated:
                events = self.plugin_events.get(qp.gating_plugin)
                if events is not None and event not in events and event not in WILDCARD_EVENTS:
                    continue
            if not self._worth_requeuing(qp, event):
                continue
            self._unschedulable.remove(qp.key)
            moved += 1
            activated = self._requeue(qp, event) or activated
        self._record_event(event)
        if activated:
            self._cond.notify_all()
        return moved

    def assigned_pod_added(self, pod: ObjView) -> int:
        """A bound pod appeared: it may satisfy affinity / spread constraints of unschedulable pods."""
        return self.move_all_to_active_or_backoff(ASSIGNED_POD_ADD)

    def assigned_pod_updated(self, old: ObjView, new: ObjView) -> int:
        return self.move_all_to_active_or_backoff(ASSIGNED_POD_UPDATE)

    # ------------------------------------------------------------------ the scheduling side
    @property
    def scheduling_cycle(self) -> int:
        return self._cycle

    def pop(self, timeout: float | None = None) -> QueuedPod | None:
        """The head of activeQ (moving completed backoffs first); None on timeout or when closed.

        Blocks until a pod is available, waking at least every ``poll_interval``
        seconds while pods are backing off to check the clock.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._closed:
                self._flush_backoff_locked(self.clock.now())
                qp = self._active.pop()
                if qp is None and self.pop_from_backoff and len(self._backoff):
                    qp = self._backoff.pop_early()
                    if qp is not None:
                        self._run_pre_enqueue(qp)  # it skips activeQ, not PreEnqueue
                        if qp.gated:
                            self._unschedulable.add(qp)
                            self._count(GATED, POP_FROM_BACKOFF_Q)
                            continue
                        self._count(ACTIVE, POP_FROM_BACKOFF_Q)
                if qp is not None:
                    qp.attempts += 1
                    self._cycle += 1
                    qp.moved_while_in_flight = False
                    self._in_flight[qp.key] = qp
                    return qp
                wait = self.poll_interval if len(self._backoff) else None
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)
            return None

    def done(self, qp: QueuedPod) -> None:
        """The scheduler is finished with ``qp`` (bound, or dropped)."""
        with self._cond:
            if self._in_flight.get(qp.key) is qp:
                del self._in_flight[qp.key]

    def add_unschedulable_if_not_present(self, qp: QueuedPod, cycle: int) -> str:
        """Requeue a pod whose attempt failed (upstream ``AddUnschedulableIfNotPresent``); the queue it went to.

        Rejected by plugins: the unschedulable pool, or backoffQ if an event one
        of them cares about arrived since its cycle began (or the pod itself
        changed meanwhile). Failed otherwise (error, lost bind
        race): backoffQ. A pod deleted or bound meanwhile is dropped (``""``).
        """
        key = qp.key
        with self._cond:
            if self._in_flight.get(key) is qp:
                del self._in_flight[key]
            if qp.deleted or self._closed:
                return ""
            if key in self._active or key in self._backoff or key in self._unschedulable:
                return ""
            rejectors = qp.unschedulable_plugins | qp.pending_plugins
            if rejectors:
                qp.unschedulable_count += 1
                qp.consecutive_errors = 0
            else:
                qp.consecutive_errors += 1
            qp.timestamp = self.clock.now()
            qp.backoff_expiration = None
            if not rejectors or qp.moved_while_in_flight or self._event_in_flight(rejectors, cycle):
                self._move_to_backoff(qp, SCHEDULE_ATTEMPT_FAILURE)
                return BACKOFF
            self._unschedulable.add(qp)
            self._count(UNSCHEDULABLE, SCHEDULE_ATTEMPT_FAILURE)
            return UNSCHEDULABLE

    # ------------------------------------------------------------------ flushing
    def flush_backoff_completed(self) -> int:
        """Move every pod whose backoff is over to activeQ (upstream ``flushBackoffQCompleted``)."""
        with self._cond:
            before = len(self._active)
            if self._flush_backoff_locked(self.clock.now()):
                self._cond.notify_all()
            return len(self._active) - before

    def flush_unschedulable_leftover(self) -> int:
        """Move pods unschedulable for longer than ``pod_max_in_unschedulable`` back (``UnschedulableTimeout``)."""
        with self._cond:
            now = self.clock.now()
            stale = [qp for qp in self._unschedulable.values()
                     if now - qp.timestamp > self.pod_max_in_unschedulable]
            if not stale:
                return 0
            return self._move_locked(UNSCHEDULABLE_TIMEOUT, stale, None)

    def start(self, backoff_period: float = 1.0, leftover_period: float = _LEFTOVER_FLUSH_PERIOD) -> SchedulingQueue:
        """Flush in a background thread: backoffQ every ``backoff_period`` s, leftovers every ``leftover_period`` s
        (wall-clock periods; what is due is decided by the cluster clock)."""
        if self._flusher is not None:
            return self

        def run() -> None:
            last_leftover = time.monotonic()
            while not self._stop.wait(backoff_period):
                self.flush_backoff_completed()
                if time.monotonic() - last_leftover >= leftover_period:
                    last_leftover = time.monotonic()
                    self.flush_unschedulable_leftover()

        self._flusher = threading.Thread(target=run, name=f"{self.name}-queue-flush", daemon=True)
        self._flusher.start()
        return self

    def close(self) -> None:
        """Wake every pop (they return None) and stop the flusher."""
        self._stop.set()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._flusher is not None:
            self._flusher.join(5.0)
            self._flusher = None

    # ------------------------------------------------------------------ nominator
    def add_nominated_pod(self, info: PodInfo, node: str, *, foreign: bool = False) -> None:
        """Record that ``info`` is nominated to ``node`` (after preemption); an empty node clears it.
        ``foreign``: a competing replica's pod, whose nomination the informer showed."""
        with self._cond:
            self._nominator.add(info, node, foreign=foreign)

    def is_foreign_nomination(self, key: str) -> bool:
        """Whether nominated pod ``key`` is a competing replica's (see :func:`.nominated.nominated_on`)."""
        with self._cond:
            return key in self._nominator.foreign

    def delete_nominated_pod(self, key: str) -> None:
        """``DeleteNominatedPodIfExists``: the pod was assumed on a node, its nomination has served."""
        with self._cond:
            self._nominator.delete(key)

    def nominated_pods_by_node(self) -> dict[str, tuple[PodInfo, ...]]:
        """Node -> pods nominated there (upstream ``PodNominator``, for Filter); do not modify."""
        with self._cond:
            return self._nominator.by_node()

    def nominated_since(self, version: int) -> tuple[int, dict[str, tuple[PodInfo, ...]], bool]:
        """(the nominator's version now, node -> its nominated pods, complete): the nodes whose nominated pods
        changed since ``version`` (-1: never read) or, when ``complete``, every node with nominated pods --
        for indexes over the nominations kept up to date per change (:class:`.nominated.NominatedColumns`)."""
        with self._cond:
            nominator = self._nominator
            changed = nominator.changes_since(version) if version >= 0 else None
            if changed is None:
                return nominator.version, nominator.by_node(), True
            return nominator.version, changed, False

    def nominated_pods_for_node(self, node: str) -> list[PodInfo]:
        with self._cond:
            return self._nominator.pods_for_node(node)

    def nominated_node(self, pod: ObjView) -> str | None:
        with self._cond:
            return self._nominator.node_of(pod_key(pod))

    # ------------------------------------------------------------------ introspection
    def get(self, key: str) -> tuple[str, QueuedPod] | None:
        """Where pod ``namespace/name`` is: (queue name or ``"in-flight"``, entry), or None."""
        with self._cond:
            for name, heap in ((ACTIVE, self._active), (BACKOFF, self._backoff)):
                qp = heap.get(key)
                if qp is not None:
                    return name, qp
            qp = self._unschedulable.get(key)
            if qp is not None:
                return (GATED if qp.gated else UNSCHEDULABLE), qp
            qp = self._in_flight.get(key)
            return ("in-flight", qp) if qp is not None else None

    def pending_pods(self) -> tuple[list[ObjView], str]:
        """Every pod the queue holds (in flight included) and upstream's summary line."""
        with self._cond:
            active = [qp.pod for qp in self._active.values()]
            backoff = [qp.pod for qp in self._backoff.values()]
            unschedulable = [qp.pod for qp in self._unschedulable.values()]
            flying = [qp.pod for qp in self._in_flight.values()]
        summary = f"activeQ:{len(active)}; backoffQ:{len(backoff)}; unschedulablePods:{len(unschedulable)}"
        return active + backoff + unschedulable + flying, summary

    @property
    def in_flight(self) -> int:
        """Pods popped and not yet reported back."""
        with self._cond:
            return len(self._in_flight)

    def __len__(self) -> int:
        with self._cond:
            return len(self._active) + len(self._backoff) + len(self._unschedulable) + len(self._in_flight)
