"""The scheduling queue: activeQ, backoffQ, unschedulable pods and the nominator.

Upstream ``pkg/scheduler/backend/queue/scheduling_queue.go`` (``PriorityQueue``),
``backoff_queue.go``, ``unschedulable_pods.go`` and ``nominator.go``; our own
Python. The behaviour kept:

* **activeQ** is a heap ordered by the profile's QueueSort plugin
  (``less(a, b)``). For PrioritySort -- the default, and what every profile of
  one scheduler must share -- the order is a plain tuple key
  ``(-priority, timestamp, arrival)`` compared in C; any other QueueSort gets
  a generic key object calling its ``less``. Ties fall back to arrival order,
  so runs are repeatable.
* **PreEnqueue** plugins (SchedulingGates) run before a pod enters activeQ; a
  gated pod waits in the unschedulable pool, counted as ``gated``.
* **Pop** hands out the head, counts an attempt, and remembers the pod as *in
  flight* until the scheduler reports back (:meth:`done` or
  :meth:`add_unschedulable_if_not_present`). Events about an in-flight pod
  (it was updated, deleted or bound meanwhile) are recorded on it instead of
  queueing a second copy -- what upstream's QueueingHints do for in-flight
  pods.
* **Failures**: a pod some plugins rejected goes to the unschedulable pool,
  unless a cluster event arrived while it was being scheduled
  (``moveRequestCycle`` >= its cycle), in which case it goes to backoffQ; a pod
  that failed for another reason (an error, a lost bind race) always goes to
  backoffQ.
* **backoffQ** is a heap by backoff expiry; the backoff is
  ``initial * 2^(attempts-1)`` capped at ``max`` (1 s doubling to 10 s by
  default, upstream ``calculateBackoffDuration``). Completed backoffs move to
  activeQ whenever the queue is popped or flushed.
* **Cluster events** move unschedulable pods back: each in-tree plugin
  declares which events can make a pod it rejected schedulable
  (:data:`PLUGIN_EVENTS`, the ``EventsToRegister`` of each upstream plugin),
  and :meth:`move_all_to_active_or_backoff` moves exactly the pods one of
  whose rejecting plugins cares about the event -- to backoffQ if still
  backing off, else to activeQ. A plugin the table does not know (a custom
  one) is interested in every event unless it implements
  ``events_to_register()``. Upstream's QueueingHint functions (which can also
  say "this particular node add does not help") are not modelled.
* **Flush**: pods left in the unschedulable pool longer than
  ``podMaxInUnschedulablePodsDuration`` (5 minutes) are moved back
  (``UnschedulableTimeout``), checked every 30 s.
* **Nominator**: pods nominated to a node by preemption, by node.

Time: every timestamp, backoff and timeout reads the injected cluster
:class:`~emulator.clock.Clock` (tests use ``ManualClock``); the SLI start of
each pod is also stamped with ``time.perf_counter`` because scheduler
latencies are wall-clock measurements of our own code.

Thread-safety: one lock (a Condition) guards everything; :meth:`pop` blocks
on it with a timeout.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from emulator.clock import Clock, SystemClock
from emulator.scheduler import metrics
from emulator.scheduler.framework.interface import Status
from emulator.scheduler.framework.types import PodInfo, QueuedPodInfo

__all__ = [
    "ACTIVE",
    "ASSIGNED_POD_ADD",
    "ASSIGNED_POD_DELETE",
    "ASSIGNED_POD_UPDATE",
    "BACKOFF",
    "BACKOFF_COMPLETE",
    "DEFAULT_POD_INITIAL_BACKOFF",
    "DEFAULT_POD_MAX_BACKOFF",
    "DEFAULT_POD_MAX_IN_UNSCHEDULABLE",
    "FORCE_ACTIVATE",
    "GATED",
    "NODE_ADD",
    "NODE_ALLOCATABLE_CHANGE",
    "NODE_ANNOTATION_CHANGE",
    "NODE_CONDITION_CHANGE",
    "NODE_DELETE",
    "NODE_LABEL_CHANGE",
    "NODE_TAINT_CHANGE",
    "PLUGIN_EVENTS",
    "SCHEDULE_ATTEMPT_FAILURE",
    "UNSCHEDULABLE",
    "UNSCHEDULABLE_TIMEOUT",
    "UNSCHEDULED_POD_ADD",
    "UNSCHEDULED_POD_UPDATE",
    "WILDCARD_EVENTS",
    "QueuedPod",
    "SchedulingQueue",
    "is_pod_updated",
    "node_change_events",
    "pod_key",
]

# Queue names, as the ``queue`` label of scheduler_pending_pods / scheduler_queue_incoming_pods_total.
ACTIVE, BACKOFF, UNSCHEDULABLE, GATED = "active", "backoff", "unschedulable", "gated"

# Cluster events (upstream framework/events.go labels).
NODE_ADD = "NodeAdd"
NODE_DELETE = "NodeDelete"
NODE_ALLOCATABLE_CHANGE = "NodeAllocatableChange"
NODE_LABEL_CHANGE = "NodeLabelChange"
NODE_TAINT_CHANGE = "NodeTaintChange"  # also spec.unschedulable turning false, as upstream
NODE_CONDITION_CHANGE = "NodeConditionChange"
NODE_ANNOTATION_CHANGE = "NodeAnnotationChange"
ASSIGNED_POD_ADD = "AssignedPodAdd"
ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
ASSIGNED_POD_DELETE = "AssignedPodDelete"
UNSCHEDULED_POD_ADD = "UnscheduledPodAdd"
UNSCHEDULED_POD_UPDATE = "UnscheduledPodUpdate"
# Queue-internal events.
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
FORCE_ACTIVATE = "ForceActivate"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
# Events that move every unschedulable pod, whatever rejected it.
WILDCARD_EVENTS = frozenset({FORCE_ACTIVATE, UNSCHEDULABLE_TIMEOUT})

_NODE_SHAPE = frozenset({NODE_ADD, NODE_ALLOCATABLE_CHANGE, NODE_LABEL_CHANGE, NODE_TAINT_CHANGE})

# Plugin -> the events that may make a pod it rejected schedulable: each plugin's EventsToRegister upstream
# (pkg/scheduler/framework/plugins/*). Plugins missing here are interested in everything.
PLUGIN_EVENTS: Mapping[str, frozenset[str]] = {
    "SchedulingGates": frozenset({UNSCHEDULED_POD_UPDATE}),
    "NodeUnschedulable": frozenset({NODE_ADD, NODE_TAINT_CHANGE, UNSCHEDULED_POD_UPDATE}),
    "NodeName": frozenset({NODE_ADD, UNSCHEDULED_POD_UPDATE}),
    "NodePorts": frozenset({NODE_ADD, ASSIGNED_POD_DELETE, UNSCHEDULED_POD_UPDATE}),
    "NodeResourcesFit": _NODE_SHAPE | {ASSIGNED_POD_DELETE, ASSIGNED_POD_UPDATE, UNSCHEDULED_POD_UPDATE},
    "NodeAffinity": frozenset({NODE_ADD, NODE_LABEL_CHANGE, UNSCHEDULED_POD_UPDATE}),
    "TaintToleration": frozenset({NODE_ADD, NODE_TAINT_CHANGE, UNSCHEDULED_POD_UPDATE}),
    "PodTopologySpread": _NODE_SHAPE | {NODE_DELETE, ASSIGNED_POD_ADD, ASSIGNED_POD_UPDATE, ASSIGNED_POD_DELETE,
                                        UNSCHEDULED_POD_UPDATE},
    "InterPodAffinity": frozenset({NODE_ADD, NODE_LABEL_CHANGE, ASSIGNED_POD_ADD, ASSIGNED_POD_UPDATE,
                                   ASSIGNED_POD_DELETE, UNSCHEDULED_POD_UPDATE}),
    "VolumeZone": frozenset({NODE_ADD, NODE_LABEL_CHANGE, UNSCHEDULED_POD_UPDATE}),
}

DEFAULT_POD_INITIAL_BACKOFF = 1.0
DEFAULT_POD_MAX_BACKOFF = 10.0
DEFAULT_POD_MAX_IN_UNSCHEDULABLE = 300.0  # upstream DefaultPodMaxInUnschedulablePodsDuration
_LEFTOVER_FLUSH_PERIOD = 30.0  # upstream flushes the unschedulable pool every 30 s

Obj = Mapping[str, Any]


def pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _strip_for_update(pod: Obj) -> dict[str, Any]:
    meta = {k: v for k, v in (pod.get("metadata") or {}).items()
            if k not in ("resourceVersion", "generation", "managedFields", "finalizers")}
    return {**{k: v for k, v in pod.items() if k != "status"}, "metadata": meta}


def is_pod_updated(old: Obj, new: Obj) -> bool:
    """upstream ``isPodUpdated``: did anything change but status, resourceVersion, generation, managedFields
    or finalizers?"""
    return _strip_for_update(old) != _strip_for_update(new)


def _conditions(node: Obj) -> dict[str, str]:
    return {c.get("type") or "": c.get("status") or "" for c in (node.get("status") or {}).get("conditions") or ()}


def node_change_events(old: Obj, new: Obj) -> list[str]:
    """upstream ``NodeSchedulingPropertiesChange``: the events a node update amounts to (possibly none)."""
    events = []
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if bool(old_spec.get("unschedulable")) != bool(new_spec.get("unschedulable")) and not new_spec.get("unschedulable"):
        events.append(NODE_TAINT_CHANGE)
    if (old.get("status") or {}).get("allocatable") != (new.get("status") or {}).get("allocatable"):
        events.append(NODE_ALLOCATABLE_CHANGE)
    if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
        events.append(NODE_LABEL_CHANGE)
    if old_spec.get("taints") != new_spec.get("taints") and NODE_TAINT_CHANGE not in events:
        events.append(NODE_TAINT_CHANGE)
    if _conditions(old) != _conditions(new):
        events.append(NODE_CONDITION_CHANGE)
    if (old.get("metadata") or {}).get("annotations") != (new.get("metadata") or {}).get("annotations"):
        events.append(NODE_ANNOTATION_CHANGE)
    return events


@dataclass(eq=False)
class QueuedPod(QueuedPodInfo):
    """A queued pod (upstream ``QueuedPodInfo``) with the bookkeeping the queue needs.

    ``attempts`` counts pops; ``unschedulable_count`` / ``consecutive_errors``
    count failures by kind; ``initial_attempt_timestamp`` (cluster clock) and
    ``initial_attempt_wall`` (``perf_counter``) are set when the pod first
    enters activeQ -- the start of its SLI duration.
    """

    unschedulable_count: int = 0
    consecutive_errors: int = 0
    backoff_expiration: float | None = None
    initial_attempt_wall: float | None = None
    seq: int = 0
    deleted: bool = False  # deleted (or bound elsewhere) while in flight: do not requeue
    moved_while_in_flight: bool = False  # an update arrived while in flight
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pod(self) -> Obj:
        return self.pod_info.pod

    @property
    def key(self) -> str:
        return self.pod_info.key

    @property
    def gated(self) -> bool:
        return bool(self.gating_plugin)


class _Entry:
    """A heap slot; deleted entries stay in the heap with ``alive=False`` until they surface."""

    __slots__ = ("alive", "key", "qp")

    def __init__(self, key: Any, qp: QueuedPod) -> None:
        self.key = key
        self.qp = qp
        self.alive = True

    def __lt__(self, other: _Entry) -> bool:
        return self.key < other.key


class _LessKey:
    """Orders by a QueueSort ``less``; arrival order breaks ties."""

    __slots__ = ("less", "qp")

    def __init__(self, qp: QueuedPod, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool]) -> None:
        self.qp = qp
        self.less = less

    def __lt__(self, other: _LessKey) -> bool:
        if self.less(self.qp, other.qp):
            return True
        if self.less(other.qp, self.qp):
            return False
        return self.qp.seq < other.qp.seq


class _Heap:
    """A heap with lookup and removal by pod key (lazy deletion)."""

    def __init__(self, key_of: Callable[[QueuedPod], Any]) -> None:
        self._heap: list[_Entry] = []
        self._by_key: dict[str, _Entry] = {}
        self._key_of = key_of

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def get(self, key: str) -> QueuedPod | None:
        entry = self._by_key.get(key)
        return entry.qp if entry is not None else None

    def push(self, qp: QueuedPod) -> None:
        old = self._by_key.get(qp.key)
        if old is not None:
            old.alive = False
        entry = _Entry(self._key_of(qp), qp)
        self._by_key[qp.key] = entry
        heapq.heappush(self._heap, entry)
        if len(self._heap) > 64 and len(self._heap) > 2 * len(self._by_key):
            self._compact()

    def remove(self, key: str) -> QueuedPod | None:
        entry = self._by_key.pop(key, None)
        if entry is None:
            return None
        entry.alive = False
        return entry.qp

    def peek(self) -> QueuedPod | None:
        heap = self._heap
        while heap and not heap[0].alive:
            heapq.heappop(heap)
        return heap[0].qp if heap else None

    def pop(self) -> QueuedPod | None:
        heap = self._heap
        while heap:
            entry = heapq.heappop(heap)
            if entry.alive:
                del self._by_key[entry.qp.key]
                return entry.qp
        return None

    def values(self) -> list[QueuedPod]:
        return [entry.qp for entry in self._by_key.values()]

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if entry.alive]
        heapq.heapify(self._heap)


def _priority_key(qp: QueuedPod) -> tuple[int, float, int]:
    """PrioritySort's order as a tuple: higher priority first, then earlier timestamp, then arrival."""
    return (-qp.pod_info.priority, qp.timestamp, qp.seq)


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
                 pre_enqueue: Callable[[Obj], Status | None] | None = None,
                 pod_initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF,
                 pod_max_backoff: float = DEFAULT_POD_MAX_BACKOFF,
                 pod_max_in_unschedulable: float = DEFAULT_POD_MAX_IN_UNSCHEDULABLE,
                 plugin_events: Mapping[str, Iterable[str]] | None = None, name: str = "kemu-scheduler",
                 poll_interval: float = 0.05) -> None:
        if pod_initial_backoff <= 0 or pod_max_backoff < pod_initial_backoff:
            raise ValueError("backoff durations must satisfy 0 < initial <= max")
        self.clock = clock or SystemClock()
        self.name = name
        fast = priority_sort if priority_sort is not None else less is None
        if fast or less is None:
            key_of: Callable[[QueuedPod], Any] = _priority_key
        else:
            sort = less

            def key_of(qp: QueuedPod) -> Any:
                return _LessKey(qp, sort)
        self._pre_enqueue = pre_enqueue
        self.pod_initial_backoff = pod_initial_backoff
        self.pod_max_backoff = pod_max_backoff
        self.pod_max_in_unschedulable = pod_max_in_unschedulable
        self.plugin_events: dict[str, frozenset[str]] = dict(PLUGIN_EVENTS)
        for plugin, events in (plugin_events or {}).items():
            self.plugin_events[plugin] = frozenset(events)
        self.poll_interval = poll_interval
        self._cond = threading.Condition(threading.Lock())
        self._active = _Heap(key_of)
        self._backoff = _Heap(lambda qp: (qp.backoff_expiration or 0.0, qp.seq))
        self._unschedulable: dict[str, QueuedPod] = {}
        self._rejectors: Counter[str] = Counter()  # rejecting plugin -> pods in the pool it rejected
        self._in_flight: dict[str, QueuedPod] = {}
        self._seq = itertools.count()
        self._cycle = 0
        self._move_request_cycle = -1
        self._closed = False
        # Nominator: node -> pod key -> PodInfo, and pod key -> node.
        self._nominated: dict[str, dict[str, PodInfo]] = {}
        self._nominated_node: dict[str, str] = {}
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
    def _pool_add(self, qp: QueuedPod) -> None:
        """Into the unschedulable pool, counting its rejecting plugins (see :meth:`_anyone_interested`)."""
        self._pool_remove(qp.key)
        rejectors = frozenset(qp.unschedulable_plugins | qp.pending_plugins)
        qp.extra["rejectors"] = rejectors
        self._rejectors.update(rejectors)
        self._unschedulable[qp.key] = qp

    def _pool_remove(self, key: str) -> QueuedPod | None:
        qp = self._unschedulable.pop(key, None)
        if qp is not None:
            self._rejectors.subtract(qp.extra.pop("rejectors", ()))
        return qp

    def _anyone_interested(self, event: str) -> bool:
        """Whether some pod in the pool was rejected by a plugin that cares about ``event``.

        Bound-pod events arrive at the scheduling rate; without this check each one would walk the whole
        unschedulable pool (upstream pre-filters the same way, by plugin and cross-topology terms).
        """
        if event in WILDCARD_EVENTS:
            return bool(self._unschedulable)
        for plugin, n in self._rejectors.items():
            if n > 0:
                events = self.plugin_events.get(plugin)
                if events is None or event in events:
                    return True
        return False

    def _new(self, pod: Obj, info: PodInfo | None = None) -> QueuedPod:
        return QueuedPod(info if info is not None else PodInfo(pod), timestamp=self.clock.now(), seq=next(self._seq))

    def _backoff_duration(self, qp: QueuedPod) -> float:
        if qp.attempts == 0:
            return 0.0
        duration = self.pod_initial_backoff
        for _ in range(1, qp.attempts):
            if duration > self.pod_max_backoff - duration:
                return self.pod_max_backoff
            duration += duration
        return duration

    def backoff_expiration(self, qp: QueuedPod) -> float:
        """When ``qp``'s backoff ends (cluster time): its timestamp plus its backoff duration."""
        if qp.backoff_expiration is None:
            qp.backoff_expiration = qp.timestamp + self._backoff_duration(qp)
        return qp.backoff_expiration

    def _backing_off(self, qp: QueuedPod, now: float | None = None) -> bool:
        return self.backoff_expiration(qp) > (self.clock.now() if now is None else now)

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
            self._pool_add(qp)
            self._count(GATED, event)
            return False
        if qp.initial_attempt_timestamp is None:
            qp.initial_attempt_timestamp = self.clock.now()
            qp.initial_attempt_wall = time.perf_counter()
        self._pool_remove(key)
        self._backoff.remove(key)
        self._active.push(qp)
        self._count(ACTIVE, event)
        if event in (UNSCHEDULED_POD_ADD, UNSCHEDULED_POD_UPDATE):
            self._add_nominated(qp.pod_info, None)
        return True

    def _move_to_backoff(self, qp: QueuedPod, event: str) -> None:
        self._pool_remove(qp.key)
        self.backoff_expiration(qp)
        self._backoff.push(qp)
        self._count(BACKOFF, event)

    def _requeue(self, qp: QueuedPod, event: str) -> bool:
        """Back to backoffQ if still backing off, else activeQ; True when it is now in activeQ."""
        if self._backing_off(qp):
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

    def _flush_backoff_locked(self, now: float) -> bool:
        moved = False
        while True:
            head = self._backoff.peek()
            if head is None or self.backoff_expiration(head) > now:
                return moved
            self._backoff.pop()
            moved = self._move_to_active(head, BACKOFF_COMPLETE) or moved

    # ------------------------------------------------------------------ the informer side
    def add(self, pod: Obj, info: PodInfo | None = None) -> None:
        """A new unscheduled pod (upstream ``Add``)."""
        key = pod_key(pod)
        with self._cond:
            if key in self._in_flight or key in self._active or key in self._backoff or key in self._unschedulable:
                self._update_locked(None, pod)
                return
            if self._move_to_active(self._new(pod, info), UNSCHEDULED_POD_ADD):
                self._cond.notify()

    def update(self, old: Obj | None, new: Obj) -> None:
        """An unscheduled pod changed (upstream ``Update``)."""
        with self._cond:
            self._update_locked(old, new)

    def _update_locked(self, old: Obj | None, new: Obj) -> None:
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
                self._update_nominated(qp.pod_info)
                return
        qp = self._unschedulable.get(key)
        if qp is not None:
            changed = old is None or is_pod_updated(old, new)
            qp.pod_info = PodInfo(new)
            self._update_nominated(qp.pod_info)
            if changed:
                # The update may have made it schedulable (or removed its gates): retry, after its backoff.
                self._pool_remove(key)
                if self._backing_off(qp):
                    self._move_to_backoff(qp, UNSCHEDULED_POD_UPDATE)
                elif self._move_to_active(qp, UNSCHEDULED_POD_UPDATE):
                    self._cond.notify()
            return
        if self._move_to_active(self._new(new), UNSCHEDULED_POD_UPDATE):
            self._cond.notify()

    def delete(self, pod: Obj) -> None:
        """An unscheduled pod was deleted, or got bound (upstream ``Delete``)."""
        key = pod_key(pod)
        with self._cond:
            self._delete_nominated(key)
            if self._active.remove(key) is not None or self._backoff.remove(key) is not None:
                return
            if self._pool_remove(key) is not None:
                return
            flying = self._in_flight.get(key)
            if flying is not None:
                flying.deleted = True

    def activate(self, pods: Iterable[Obj]) -> None:
        """Move these pods to activeQ now, skipping any backoff (upstream ``Activate``)."""
        with self._cond:
            moved = False
            for pod in pods:
                key = pod_key(pod)
                qp = self._pool_remove(key) or self._backoff.remove(key)
                if qp is not None:
                    moved = self._move_to_active(qp, FORCE_ACTIVATE) or moved
                elif key in self._in_flight:
                    self._in_flight[key].moved_while_in_flight = True
                    self._move_request_cycle = self._cycle
            if moved:
                self._cond.notify_all()

    def move_all_to_active_or_backoff(self, event: str, pre_check: Callable[[Obj], bool] | None = None) -> int:
        """Move the unschedulable pods ``event`` may help (``MoveAllToActiveOrBackoffQueue``); how many moved."""
        with self._cond:
            if not self._anyone_interested(event):
                self._move_request_cycle = self._cycle
                return 0
            return self._move_locked(event, list(self._unschedulable.values()), pre_check)

    def _move_locked(self, event: str, candidates: list[QueuedPod], pre_check: Callable[[Obj], bool] | None) -> int:
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
            self._pool_remove(qp.key)
            moved += 1
            activated = self._requeue(qp, event) or activated
        self._move_request_cycle = self._cycle
        if activated:
            self._cond.notify_all()
        return moved

    def assigned_pod_added(self, pod: Obj) -> int:
        """A bound pod appeared: it may satisfy affinity / spread constraints of unschedulable pods."""
        return self.move_all_to_active_or_backoff(ASSIGNED_POD_ADD)

    def assigned_pod_updated(self, old: Obj, new: Obj) -> int:
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

        Rejected by plugins: the unschedulable pool, or backoffQ if an event
        arrived since its cycle began. Failed otherwise (error, lost bind
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
            if not rejectors or qp.moved_while_in_flight or self._move_request_cycle >= cycle:
                self._move_to_backoff(qp, SCHEDULE_ATTEMPT_FAILURE)
                return BACKOFF
            self._pool_add(qp)
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
    def _add_nominated(self, info: PodInfo, node: str | None) -> None:
        node = node if node is not None else info.nominated_node_name
        self._delete_nominated(info.key)
        if not node:
            return
        self._nominated.setdefault(node, {})[info.key] = info
        self._nominated_node[info.key] = node

    def _delete_nominated(self, key: str) -> None:
        node = self._nominated_node.pop(key, None)
        if node is not None:
            pods = self._nominated.get(node)
            if pods is not None:
                pods.pop(key, None)
                if not pods:
                    del self._nominated[node]

    def _update_nominated(self, info: PodInfo) -> None:
        # A pod keeps the nomination preemption gave it until its own status says otherwise.
        if info.nominated_node_name or info.key not in self._nominated_node:
            self._add_nominated(info, None)

    def add_nominated_pod(self, info: PodInfo, node: str) -> None:
        """Record that ``info`` is nominated to ``node`` (after preemption); an empty node clears it."""
        with self._cond:
            self._add_nominated(info, node)

    def nominated_pods_for_node(self, node: str) -> list[PodInfo]:
        with self._cond:
            return list(self._nominated.get(node, {}).values())

    def nominated_node(self, pod: Obj) -> str | None:
        with self._cond:
            return self._nominated_node.get(pod_key(pod))

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

    def pending_pods(self) -> tuple[list[Obj], str]:
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
