"""The scheduler: informer handlers, the scheduling loop, asynchronous binding, failure handling.

Upstream ``pkg/scheduler/scheduler.go``, ``schedule_one.go`` (``ScheduleOne``,
``schedulingCycle``, ``bindingCycle``, ``handleSchedulingFailure``) and
``eventhandlers.go``; our own Python, plain threads, no Ray (an actor shell in
``actors/`` only decides where a :class:`Scheduler` runs).

Data path::

    pod / node informers ──handlers──► SchedulingQueue (unbound pods this scheduler owns)
                                   └─► Cache deque (nodes, bound pods)
    scheduling thread: pop ─► cache.cycle() (apply the deque, hold the snapshot)
                          ─► Framework.schedule_pod ─► assume ─► Reserve ─► Permit
                          ─► hand over to a bind thread  (Permit Wait: parked until allowed)
    bind thread(s): a batch ─► PreBind ─► Bind (store, atomic; one pipelined round trip) ─► PostBind
                          409 Conflict ─► forget the assumption, requeue with backoff
    API writer thread: pod conditions, FailedScheduling / Scheduled events (batched), preemption victims

**The store is the arbiter.** ``client.bind`` (``ServerCore.bind``; ``bind_many`` for a batch) is one atomic
store transaction that fails with 409 if the pod is already bound or the node
no longer has room for its requests or host ports. So several schedulers can
place pods from their own, slightly stale caches, Omega-style: the loser of a
race finds out in the bind's round trip, forgets its assumption (the cache
then stops counting the pod on that node), counts a conflict
(``scheduler_bind_conflicts_total``) and requeues the pod with backoff; a pod
someone else already bound is dropped -- the informer will show it bound.

**Competing replicas.** ``replicas`` schedulers of the same profiles split
the pending pods: replica ``i`` queues only the pods with
``crc32(uid) mod replicas == i`` (stable across processes, no coordination,
every pod owned by exactly one replica while the replica count is fixed),
and every replica places onto every node from its own cache. A replica that
dies leaves its share pending until it is restarted (a lease-based handover
is not modelled). Schedulers with *different* profiles (scheduler names) are
independent, the multi-scheduler case; pods naming a scheduler no running
scheduler serves stay pending untouched.

**Binding in batches, off the scheduling thread.** Right after the assume
the pod goes to a bind thread (upstream's binding-cycle goroutine), which
waits ``bind_linger`` (5 ms) for company and binds the whole batch in one
pipelined store round trip when the client offers ``bind_many``
(``ServerCore.bind_many``): ~40 us of Python per pod in
batches against ~120 us for one ``bind`` (read, then compare-and-set), and one
thread wake-up per batch instead of per pod. Each binding in the batch is
still the store's own atomic, room-checked bind. ``bind_workers=0`` makes
the scheduling thread bind its batches itself (whenever the queue runs dry,
64 pods are waiting, or the oldest has waited ``bind_linger``): lower
attempt latency, slightly more CPU on the hot thread.

**PostFilter (preemption).** When no node fits and the profile has PostFilter
plugins, they run on the cycle's snapshot. A result whose
``nominating_info`` names a node makes the loop *execute* the preemption:
delete the result's ``victims`` (a sequence of pods or PodInfos -- the field
the preemption plugin returns besides ``nominating_info``) with
``client.delete``, record a ``Preempted`` event on each, and set the
preemptor's ``status.nominatedNodeName``. Plugins stay pure; the loop does
the I/O.

**Permit Wait.** A pod some Permit plugin holds waits, off the bind pool,
until every waiting plugin allows it (:meth:`Scheduler.get_waiting_pod`
``.allow(plugin)``), one rejects it, or its timeout passes.

**Metrics** (:mod:`emulator.scheduler.metrics`): attempts, attempt and SLI
durations, attempts per pod, extension-point durations every cycle, plugin
durations in a sampled 10% of cycles (upstream's default
``pluginMetricsSamplePercent``), preemption, conflicts, forgotten
assumptions, queue sizes and cache staleness -- every series labelled with
this scheduler's ``name``.

The client is any object with ``ServerCore``'s ``bind``, ``get``, ``list``,
``update_status``, ``create_many`` and ``delete`` (see :class:`SchedulerClient`);
informers come from anything with ``informer_for(kind)`` returning informers
with ``add_event_handler`` (a ``SharedInformerFactory``). The scheduler package
never imports the store, the server or the informers itself, so it stays
importable and testable without them.
"""

from __future__ import annotations

import logging
import queue as queue_mod
import random
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from emulator.api.errors import StatusError
from emulator.api.kinds import EVENT, NODE, POD, Kind, by_resource
from emulator.clock import Clock, SystemClock, rfc3339
from emulator.scheduler import metrics
from emulator.scheduler.cache import DEFAULT_ASSUMED_POD_TTL, Cache, CacheDiff, PodState, compare_with_store
from emulator.scheduler.config import SchedulerConfiguration, build_frameworks, default_configuration
from emulator.scheduler.extender import Transport
from emulator.scheduler.framework.interface import (
    Code,
    CycleState,
    NominatingInfo,
    Status,
    is_success,
)
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import (
    FitError,
    NodeToStatus,
    PodInfo,
    ScheduleResult,
    SchedulingError,
)
from emulator.scheduler.queue import (
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    QueuedPod,
    SchedulingQueue,
    node_change_events,
    pod_key,
)

log = logging.getLogger(__name__)

__all__ = [
    "LISTER_RESOURCES",
    "BindOutcome",
    "InformerLister",
    "InformerSource",
    "Scheduler",
    "SchedulerClient",
    "SchedulerOptions",
    "WaitingPod",
    "owner_replica",
]

Obj = Mapping[str, Any]

_UNSCHEDULABLE = "Unschedulable"
_SCHEDULER_ERROR = "SchedulerError"
_MAX_EVENT_MESSAGE = 1024  # upstream truncates event notes at 1 KiB
_EVENT_BATCH = 256
_EVENT_FLUSH_SECONDS = 0.05  # events wait at most this long for company: one store round trip per batch
_BIND_BATCH = 128
_BIND_BATCH_INLINE = 64


class SchedulerClient(Protocol):
    """The API the scheduler needs (``ServerCore`` has it): bind, read, status, events, deletes."""

    def bind(self, namespace: str, name: str, node_name: str, *, annotations: dict[str, str] | None = None,
             uid: str = "") -> dict[str, Any]: ...

    # Optional: ``bind_many([(pod, node), ...])`` -> per binding the bound pod or its StatusError, in one round
    # trip (ServerCore.bind_many); without it each pod is bound with ``bind``.

    def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]: ...

    def list(self, kind: Kind, namespace: str | None = None) -> Any: ...

    def update_status(self, kind: Kind, body: Any) -> dict[str, Any]: ...

    def create_many(self, kind: Kind, bodies: list[Any]) -> list[Any]: ...

    def delete(self, kind: Kind, namespace: str | None, name: str, **options: Any) -> dict[str, Any]: ...


class InformerSource(Protocol):
    """Where informers come from (``SharedInformerFactory``)."""

    def informer_for(self, kind: Kind) -> Any: ...


def owner_replica(pod: Obj, replicas: int) -> int:
    """Which of ``replicas`` competing schedulers owns ``pod``: crc32 of its uid (its ``ns/name`` if none) mod N."""
    if replicas <= 1:
        return 0
    meta = pod.get("metadata") or {}
    ident = meta.get("uid") or f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
    return zlib.crc32(ident.encode()) % replicas


@dataclass
class SchedulerOptions:
    """How one scheduler instance runs (the profiles come from a :class:`SchedulerConfiguration`).

    ``name`` labels every metric and is this instance's ``reportingInstance``;
    ``replica``/``replicas`` split pending pods between competing schedulers
    (see the module docstring); ``bind_workers`` threads bind, each a batch
    per store round trip (0: the scheduling thread binds its own batches --
    lower latency, slightly more CPU on that thread);
    ``assumed_pod_ttl`` (cluster seconds, 0 = never) expires assumptions the
    informer never confirms; ``record_events`` writes Scheduled /
    FailedScheduling / Preempted events; ``plugin_metrics_sample_percent`` of
    cycles record per-plugin durations; ``seed`` seeds tie-breaking;
    ``keep_samples`` keeps every attempt's latency (for benchmarks);
    ``bind_linger`` (wall seconds) is how long a bind thread waits after the
    first pod for more to bind in the same round trip.
    """

    name: str = "kemu-scheduler"
    replica: int = 0
    replicas: int = 1
    bind_workers: int = 1
    assumed_pod_ttl: float = DEFAULT_ASSUMED_POD_TTL
    pod_max_in_unschedulable: float = 300.0
    record_events: bool = True
    plugin_metrics_sample_percent: int = 10
    seed: int | None = None
    keep_samples: bool = False
    bind_linger: float = 0.005

    def __post_init__(self) -> None:
        if self.replicas < 1 or not 0 <= self.replica < self.replicas:
            raise ValueError(f"replica {self.replica} of {self.replicas}: need 0 <= replica < replicas")
        if self.bind_workers < 0:
            raise ValueError("bind_workers must not be negative (0: the scheduling thread binds)")


# -- timed plugins and framework ---------------------------------------------------------------------------------

_POINT_LABEL = {
    "pre_filter": "PreFilter", "filter": "Filter", "filter_all": "Filter", "post_filter": "PostFilter",
    "pre_score": "PreScore", "score": "Score", "score_all": "Score", "normalize_score": "ScoreExtensionNormalize",
    "reserve": "Reserve", "unreserve": "Unreserve", "permit": "Permit", "pre_bind": "PreBind", "bind": "Bind",
    "post_bind": "PostBind",
}


def _status_label(result: Any) -> str:
    """The status code a plugin call answered, for the ``status`` label."""
    if result is None:
        return "Success"
    if isinstance(result, Status):
        return str(result.code)
    if isinstance(result, tuple) and len(result) == 2 and (result[1] is None or isinstance(result[1], Status)):
        return "Success" if result[1] is None else str(result[1].code)
    return "Success"


class _TimedPlugin:
    """A plugin whose extension-point methods record ``scheduler_plugin_execution_duration_seconds``.

    Only in sampled cycles (``state.record_plugin_metrics``); otherwise the
    call goes straight through. Attributes the plugin does not have stay
    absent, so the runtime discovers the same extension points.
    """

    def __init__(self, plugin: Any, scheduler: str) -> None:
        self._plugin = plugin
        self.name = plugin.name  # read on every cycle: keep it off the __getattr__ path
        self._children: dict[tuple[str, str], Any] = {}
        for method, point in _POINT_LABEL.items():
            fn = getattr(plugin, method, None)
            if callable(fn):
                setattr(self, method, self._wrap(fn, plugin.name, point, scheduler))

    def _wrap(self, fn: Callable[..., Any], name: str, point: str, scheduler: str) -> Callable[..., Any]:
        children = self._children

        def timed(state: CycleState, *args: Any) -> Any:
            if not state.record_plugin_metrics:
                return fn(state, *args)
            start = time.perf_counter()
            result = fn(state, *args)
            label = _status_label(result)
            child = children.get((point, label))
            if child is None:
                child = children[(point, label)] = metrics.PLUGIN_EXECUTION_DURATION.labels(
                    name, point, label, scheduler)
            child.observe(time.perf_counter() - start)
            return result

        return timed

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._plugin, attr)


def _timed_registry(registry: Mapping[str, Callable[..., Any]], scheduler: str) -> dict[str, Callable[..., Any]]:
    def timed_factory(factory: Callable[..., Any]) -> Callable[..., Any]:
        return lambda args, handle: _TimedPlugin(factory(args, handle), scheduler)

    return {name: timed_factory(factory) for name, factory in registry.items()}


class _Framework(Framework):
    """The runtime's framework, recording ``scheduler_framework_extension_point_duration_seconds`` per point
    and offering the waiting-pods part of upstream's framework handle."""

    def __init__(self, *args: Any, scheduler: Scheduler, **kwargs: Any) -> None:
        # Plugins read cluster objects through ``handle.listers`` while they are constructed, so it comes first.
        self.listers = scheduler.listers
        super().__init__(*args, **kwargs)
        self._scheduler = scheduler
        self._metric_name = scheduler.name
        self._children: dict[tuple[str, str], Any] = {}
        self._pre_filter_seconds = 0.0
        # Which binding-side points have plugins, looked up per pod: skip the empty ones outright.
        self.has = {point: bool(self.plugins_at(point)) for point in ("reserve", "permit", "preBind", "bind",
                                                                      "postBind")}

    def _observe(self, point: str, status: Status | None, seconds: float) -> None:
        label = "Success" if status is None else str(status.code)
        child = self._children.get((point, label))
        if child is None:
            child = self._children[(point, label)] = metrics.EXTENSION_POINT_DURATION.labels(
                point, label, self.profile_name, self._metric_name)
        child.observe(seconds)

    def run_pre_filter_plugins(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Any:
        start = time.perf_counter()
        out = super().run_pre_filter_plugins(state, pod, snapshot)
        self._pre_filter_seconds = time.perf_counter() - start
        self._observe("PreFilter", out[1], self._pre_filter_seconds)
        return out

    def find_nodes_that_fit(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Any:
        start = time.perf_counter()
        self._pre_filter_seconds = 0.0
        feasible, diagnosis = super().find_nodes_that_fit(state, pod, snapshot)
        status = None if len(feasible) else Status(Code.UNSCHEDULABLE)
        self._observe("Filter", status, time.perf_counter() - start - self._pre_filter_seconds)
        return feasible, diagnosis

    def run_post_filter_plugins(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                                node_to_status: NodeToStatus) -> Any:
        start = time.perf_counter()
        out = super().run_post_filter_plugins(state, pod, snapshot, node_to_status)
        self._observe("PostFilter", out[1], time.perf_counter() - start)
        return out

    def run_pre_score_plugins(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: Any) -> Any:
        start = time.perf_counter()
        out = super().run_pre_score_plugins(state, pod, snapshot, nodes)
        self._observe("PreScore", out, time.perf_counter() - start)
        return out

    def run_score_plugins(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: Any) -> Any:
        start = time.perf_counter()
        out = super().run_score_plugins(state, pod, snapshot, nodes)
        self._observe("Score", None, time.perf_counter() - start)
        return out

    def timed(self, point: str, fn: Callable[[], Any]) -> Any:
        """Run one binding-side extension point (Reserve, Permit, PreBind, Bind, PostBind) and record it."""
        start = time.perf_counter()
        out = fn()
        self._observe(point, out if isinstance(out, Status) else None, time.perf_counter() - start)
        return out

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        """upstream ``Handle.GetWaitingPod``."""
        return self._scheduler.get_waiting_pod(uid)

    def iterate_over_waiting_pods(self, fn: Callable[[WaitingPod], None]) -> None:
        """upstream ``Handle.IterateOverWaitingPods``."""
        for waiting in self._scheduler.waiting_pods():
            fn(waiting)

    def reject_waiting_pod(self, uid: str) -> bool:
        waiting = self._scheduler.get_waiting_pod(uid)
        if waiting is None:
            return False
        waiting.reject("", "removed")
        return True


# -- listers over informers -------------------------------------------------------------------------------------

# What plugins read besides nodes and pods (emulator.scheduler.plugins.listers' resource names).
LISTER_RESOURCES = ("services", "replicationcontrollers", "replicasets.apps", "statefulsets.apps", "namespaces",
                    "poddisruptionbudgets.policy", "persistentvolumes", "persistentvolumeclaims",
                    "storageclasses.storage.k8s.io")


class InformerLister:
    """The plugins' ``ObjectLister`` over informer caches: one informer per resource kemu serves.

    Empty until :meth:`bind` (the scheduler binds it in :meth:`Scheduler.attach`); resources kemu has no kind
    for list nothing, as upstream plugins see a cluster without such objects.
    """

    def __init__(self) -> None:
        self._informers: dict[str, Any] = {}

    def bind(self, informers: InformerSource, resources: Sequence[str] = LISTER_RESOURCES) -> None:
        for resource in resources:
            try:
                kind = by_resource(resource)
            except StatusError:
                continue
            self._informers[resource] = informers.informer_for(kind)

    def list(self, resource: str, namespace: str | None = None) -> Sequence[Obj]:
        informer = self._informers.get(resource)
        if informer is None:
            return ()
        items = informer.indexer.by_index("namespace", namespace) if namespace else informer.indexer.list()
        return sorted(items, key=pod_key)

    def get(self, resource: str, name: str, namespace: str | None = None) -> Obj | None:
        informer = self._informers.get(resource)
        if informer is None:
            return None
        return informer.indexer.get_by_key(f"{namespace}/{name}" if namespace else name)

    def has_synced(self) -> bool:
        return all(informer.has_synced() for informer in self._informers.values())


# -- permit waiting --------------------------------------------------------------------------------------------


class WaitingPod:
    """A pod held at Permit (upstream ``waitingPod``): allowed once every waiting plugin allows it."""

    def __init__(self, info: PodInfo, timeouts: Mapping[str, float],
                 on_done: Callable[[WaitingPod, Status | None], None]) -> None:
        self.info = info
        self.pending = dict(timeouts)
        self._on_done = on_done
        self._lock = threading.Lock()
        self._done = False
        self._timers = []
        for plugin, timeout in timeouts.items():
            timer = threading.Timer(timeout, self.reject, (plugin, f"rejected due to timeout after waiting "
                                                                   f"{timeout:g}s at plugin {plugin}"))
            timer.daemon = True
            self._timers.append(timer)

    @property
    def uid(self) -> str:
        return self.info.uid

    @property
    def pod(self) -> Obj:
        return self.info.pod

    def start(self) -> None:
        for timer in self._timers:
            timer.start()

    def _finish(self, status: Status | None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        for timer in self._timers:
            timer.cancel()
        self._on_done(self, status)

    def allow(self, plugin: str) -> None:
        with self._lock:
            self.pending.pop(plugin, None)
            done = not self.pending
        if done:
            self._finish(None)

    def reject(self, plugin: str, message: str) -> None:
        self._finish(Status(Code.UNSCHEDULABLE, message, plugin=plugin))


# -- the scheduler ---------------------------------------------------------------------------------------------


@dataclass
class BindOutcome:
    """What happened to one bind (kept in :attr:`Scheduler.recent_outcomes` when ``keep_samples``)."""

    key: str
    node: str
    ok: bool
    conflict: bool = False
    message: str = ""


@dataclass
class _BindTask:
    qp: QueuedPod
    fwk: _Framework
    state: CycleState
    node: str
    start: float
    cycle: int


@dataclass
class _Stats:
    attempts: int = 0
    scheduled: int = 0
    unschedulable: int = 0
    errors: int = 0
    conflicts: int = 0
    forgotten: int = 0
    dropped: int = 0
    preemptions: int = 0
    busy_seconds: float = 0.0
    bind_seconds: float = 0.0
    attempt_seconds: list[float] = field(default_factory=list)
    sli_seconds: list[float] = field(default_factory=list)
    # The latest successful attempts' latencies, always kept (bounded) for the run summary's quantiles.
    recent_attempts: deque[float] = field(default_factory=lambda: deque(maxlen=50_000))


class _Handler:
    """An informer handler (``on_add(obj, is_in_initial_list)``, ``on_update``, ``on_delete``) over three functions."""

    def __init__(self, add: Callable[[Obj], None], update: Callable[[Obj, Obj], None],
                 delete: Callable[[Obj], None]) -> None:
        self._add, self._update, self._delete = add, update, delete

    def on_add(self, obj: Obj, is_in_initial_list: bool = False) -> None:
        self._add(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._update(old, new)

    def on_delete(self, obj: Any) -> None:
        # A tombstone (DeletedFinalStateUnknown) carries the last known object in ``obj``.
        inner = obj if isinstance(obj, Mapping) else getattr(obj, "obj", None)
        if inner is not None:
            self._delete(inner)


class Scheduler:
    """One scheduler instance: queue, cache, one framework per profile, the loop and its workers.

    ``client`` is the API (``ServerCore``); ``config`` the profiles (default:
    upstream's default profile over ``registry``, the in-tree plugins by
    default). Plugins the configuration names that ``registry`` lacks are
    loaded by entry point or import path; its ``extenders`` are called over
    ``extender_transport`` (required when there are any; this package
    imports no HTTP client -- ``emulator.extender_http.HttpxTransport``).
    Wire informers with :meth:`attach` (or feed the ``on_*`` handlers
    yourself), then :meth:`start`; :meth:`schedule_one` runs a
    single cycle synchronously instead, for tests.
    """

    def __init__(self, client: SchedulerClient, config: SchedulerConfiguration | None = None, *,
                 registry: Mapping[str, Callable[..., Any]] | None = None, clock: Clock | None = None,
                 options: SchedulerOptions | None = None, extender_transport: Transport | None = None) -> None:
        if registry is None:
            from emulator.scheduler import in_tree_registry

            registry = in_tree_registry()
        self.client = client
        self.options = options or SchedulerOptions()
        self.name = self.options.name
        self.clock = clock or SystemClock()
        self.config = config if config is not None else default_configuration(list(registry))
        self.rng = random.Random(self.options.seed)
        self.listers = InformerLister()
        self.frameworks: dict[str, _Framework] = build_frameworks(  # type: ignore[assignment]
            self.config, registry, rng=self.rng, framework_class=_Framework, transport=extender_transport,
            wrap=lambda complete: _timed_registry(complete, self.name), scheduler=self)
        first = next(iter(self.frameworks.values()))
        sorts = first.plugins_at("queueSort")
        self.queue = SchedulingQueue(
            first.queue_sort_less(), priority_sort=(not sorts or sorts[0].name == "PrioritySort"), clock=self.clock,
            pre_enqueue=self._pre_enqueue, pod_initial_backoff=self.config.pod_initial_backoff_seconds,
            pod_max_backoff=self.config.pod_max_backoff_seconds,
            pod_max_in_unschedulable=self.options.pod_max_in_unschedulable,
            plugin_events=self._plugin_events(), name=self.name)
        self.cache = Cache(clock=self.clock, assumed_ttl=self.options.assumed_pod_ttl, on_expired=self._expired)
        self.stats = _Stats()
        self.recent_outcomes: list[BindOutcome] = []
        self._stats_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._bind_q: queue_mod.SimpleQueue[_BindTask | None] = queue_mod.SimpleQueue()
        self._api_q: queue_mod.SimpleQueue[tuple[str, Any] | None] = queue_mod.SimpleQueue()
        self._waiting: dict[str, WaitingPod] = {}
        self._inline: list[_BindTask] = []  # bind_workers=0: binds the scheduling thread does itself
        self._waiting_lock = threading.Lock()
        self._in_bind = 0
        self._inflight_cond = threading.Condition()
        self._children: dict[tuple[Any, ...], Any] = {}
        metrics.preinitialise(self.name, list(self.frameworks))
        self._unregister_metrics = metrics.register_state_source(self)
        self.started_at: float | None = None
        self.pod_handler = _Handler(self.on_pod_add, self.on_pod_update, self.on_pod_delete)
        self.node_handler = _Handler(self.on_node_add, self.on_node_update, self.on_node_delete)
        self._registrations: list[Any] = []

    # ------------------------------------------------------------------ set-up
    def _plugin_events(self) -> dict[str, list[str]]:
        """Events declared by plugins that implement ``events_to_register()`` (custom plugins)."""
        out: dict[str, list[str]] = {}
        for fwk in self.frameworks.values():
            for name, plugin in fwk.plugins.items():
                fn = getattr(plugin, "events_to_register", None)
                if callable(fn):
                    out[name] = list(fn())
        return out

    def _pre_enqueue(self, pod: Obj) -> Status | None:
        fwk = self.frameworks.get((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")
        return fwk.run_pre_enqueue_plugins(pod) if fwk is not None else None

    def attach(self, informers: InformerSource) -> Scheduler:
        """Register this scheduler's handlers on the pod and node informers of ``informers`` (and the plugins'
        listers on the informers of the other kinds they read)."""
        self.listers.bind(informers)
        self._registrations.append(informers.informer_for(NODE).add_event_handler(self.node_handler))
        self._registrations.append(informers.informer_for(POD).add_event_handler(self.pod_handler))
        return self

    def has_synced(self) -> bool:
        """Whether every handler registration has seen its informer's initial list."""
        return all(r.has_synced() for r in self._registrations) and self.listers.has_synced()

    # ------------------------------------------------------------------ ownership
    def profile_for(self, pod: Obj) -> _Framework | None:
        return self.frameworks.get((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")

    def responsible(self, pod: Obj) -> bool:
        """This scheduler serves the pod's schedulerName and, among replicas, owns the pod."""
        if self.profile_for(pod) is None:
            return False
        replicas = self.options.replicas
        return replicas == 1 or owner_replica(pod, replicas) == self.options.replica

    # ------------------------------------------------------------------ informer handlers (eventhandlers.go)
    @staticmethod
    def _assigned(pod: Obj) -> bool:
        return bool((pod.get("spec") or {}).get("nodeName"))

    @staticmethod
    def _terminal(pod: Obj) -> bool:
        return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    def on_pod_add(self, pod: Obj) -> None:
        if self._assigned(pod):
            if not self._terminal(pod):
                self.cache.on_pod_add(pod)
                self.queue.assigned_pod_added(pod)
        elif self.responsible(pod) and not self._terminal(pod):
            self.queue.add(pod)

    def on_pod_update(self, old: Obj, new: Obj) -> None:
        if self._assigned(new):
            if self._terminal(new):
                self.cache.on_pod_delete(new)
                self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
                return
            self.cache.on_pod_update(old, new)
            if not self._assigned(old):
                self.queue.delete(new)  # it got bound: no longer pending (in flight: marked)
                self.queue.assigned_pod_added(new)
            elif (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
                self.queue.assigned_pod_updated(old, new)
            return
        if self.responsible(new) and not self._terminal(new):
            self.queue.update(old, new)
        else:
            self.queue.delete(new)

    def on_pod_delete(self, pod: Obj) -> None:
        if self._assigned(pod):
            self.cache.on_pod_delete(pod)
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
        else:
            self.queue.delete(pod)

    def on_node_add(self, node: Obj) -> None:
        self.cache.on_node_add(node)
        self.queue.move_all_to_active_or_backoff(NODE_ADD)

    def on_node_update(self, old: Obj, new: Obj) -> None:
        self.cache.on_node_update(old, new)
        for event in node_change_events(old, new):
            self.queue.move_all_to_active_or_backoff(event)

    def on_node_delete(self, node: Obj) -> None:
        self.cache.on_node_delete(node)

    # ------------------------------------------------------------------ running
    def start(self) -> Scheduler:
        """Start the scheduling thread, the bind pool, the API writer and the queue flusher."""
        if self._threads:
            return self
        self._stop.clear()
        self.started_at = time.perf_counter()
        self.queue.start()
        specs = [(f"{self.name}-loop", self._run)]
        # One bind thread at least for pods released from Permit later, even when binding is inline.
        specs += [(f"{self.name}-bind-{i}", self._bind_worker) for i in range(max(1, self.options.bind_workers))]
        specs.append((f"{self.name}-api", self._api_writer))
        for name, target in specs:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every thread (binds in progress finish; queued ones are dropped) and flush pending writes."""
        self._stop.set()
        self.queue.close()
        for _ in range(max(1, self.options.bind_workers)):
            self._bind_q.put(None)
        self._api_q.put(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = []
        with self._waiting_lock:
            waiting = list(self._waiting.values())
        for wp in waiting:
            wp.reject("", "scheduler stopped")
        self._unregister_metrics()

    def _run(self) -> None:
        inline = self._inline
        while not self._stop.is_set():
            qp = self.queue.pop(timeout=0 if inline else 0.1)
            if qp is None:
                if inline:
                    self._flush_inline()
                    qp = self.queue.pop(timeout=0.1)
                if qp is None:
                    self.cache.apply_pending()  # keep the cache current (and expire assumptions) while idle
                    continue
            try:
                self.schedule_one(qp)
            except Exception:
                log.exception("%s: scheduling %s failed unexpectedly", self.name, qp.key)
                self.queue.add_unschedulable_if_not_present(qp, self.queue.scheduling_cycle)
            if inline and (len(inline) >= _BIND_BATCH_INLINE
                           or time.perf_counter() - inline[0].start >= self.options.bind_linger):
                self._flush_inline()
        if inline:
            self._flush_inline()

    def _flush_inline(self) -> None:
        """Bind what the scheduling thread collected (``bind_workers=0``): one store round trip, this thread."""
        batch = self._inline[:]
        self._inline.clear()
        if not batch:
            return
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

    def schedule_next(self, timeout: float = 0.0) -> bool:
        """Pop one pod and run its scheduling cycle on this thread (tests); False when none was ready."""
        qp = self.queue.pop(timeout=timeout)
        if qp is None:
            return False
        self.schedule_one(qp)
        return True

    # ------------------------------------------------------------------ the scheduling cycle
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
        task = _BindTask(qp, fwk, state, node, start, cycle)
        if status is not None and status.is_wait():
            self._park(task, state.get("permit/timeouts") or {})
            return
        if not is_success(status):
            self._undo(fwk, state, info, node)
            self._failed(qp, fwk, status if status.is_rejected() else SchedulingError(status),  # type: ignore[union-attr,arg-type]
                         start, cycle)
            return
        with self._inflight_cond:
            self._in_bind += 1
        if self._threads and self.options.bind_workers == 0:
            self._inline.append(task)
        else:
            self._bind_q.put(task)

    def _post_filter(self, fwk: _Framework, state: CycleState, info: PodInfo, snapshot: Snapshot,
                     fit: FitError) -> tuple[NominatingInfo | None, Sequence[Any]]:
        """Run PostFilter (preemption) on a FitError: (where to nominate the pod, which pods to evict)."""
        if not fwk.has_post_filter_plugins() or type(fit).__name__ == "NoNodesAvailable":
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

    def _undo(self, fwk: _Framework, state: CycleState, info: PodInfo, node: str) -> None:
        """Unreserve and forget an assumption made this cycle."""
        if fwk.has["reserve"]:
            fwk.timed("Unreserve", lambda: fwk.run_reserve_plugins_unreserve(state, info, node))
        self.cache.forget(info.key, node)
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
    def _failed(self, qp: QueuedPod, fwk: _Framework, err: FitError | SchedulingError | Status, start: float,
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
        if victims:
            self._api_q.put(("preempt", (qp.pod_info, nominated, tuple(victims), profile)))
        self.queue.add_unschedulable_if_not_present(qp, cycle)
        clear = nominating is not None and nominating.override and not nominated
        self._api_q.put(("failed", (qp.pod_info, profile, reason, message, nominated or None, clear)))

    # ------------------------------------------------------------------ binding
    def _park(self, task: _BindTask, timeouts: Mapping[str, float]) -> None:
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
            if stop:
                return

    def _bind_batch(self, tasks: list[_BindTask]) -> None:
        """upstream ``bindingCycle`` for each task: PreBind, Bind, PostBind.

        Bind is the first bind plugin that does not Skip; when none takes the
        pod (the default: DefaultBinder's job), the store's atomic bind does,
        for the whole batch in one round trip when the client offers
        ``bind_many``.
        """
        bind_start = time.perf_counter()
        to_store: list[_BindTask] = []
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
                    self._bind_outcome(task, None, None)
        with self._stats_lock:
            self.stats.bind_seconds += time.perf_counter() - bind_start

    def _store_bind(self, tasks: list[_BindTask]) -> list[Any]:
        """Bind through the store: one pipelined ``bind_many`` if the client has it, else one ``bind`` each."""
        bind_many = getattr(self.client, "bind_many", None)
        if bind_many is not None:
            return list(bind_many([(t.qp.pod, t.node) for t in tasks]))
        out: list[Any] = []
        for t in tasks:
            info = t.qp.pod_info
            try:
                out.append(self.client.bind(info.namespace, info.name, t.node, uid=info.uid))
            except StatusError as e:
                out.append(e)
        return out

    def _bind_outcome(self, task: _BindTask, status: Status | None, error: StatusError | None) -> None:
        if is_success(status):
            self._bound(task)
            return
        self._undo_bind(task)
        if error is not None and error.code == 409:
            self._conflict(task, error)
            return
        if error is not None and error.code == 404:
            self._drop(task, error.message)  # deleted meanwhile
            return
        reason = status if status is not None and status.is_rejected() else SchedulingError(
            status if status is not None else Status.error("bind failed"))
        self._failed(task.qp, task.fwk, reason, task.start, task.cycle)

    def _undo_bind(self, task: _BindTask) -> None:
        qp, fwk = task.qp, task.fwk
        if fwk.has["reserve"]:
            fwk.timed("Unreserve", lambda: fwk.run_reserve_plugins_unreserve(task.state, qp.pod_info, task.node))
        self.cache.forget(qp.key, task.node)

    def _bound(self, task: _BindTask) -> None:
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
            self._api_q.put(("event", _event(qp.pod_info, "Normal", "Scheduled", "Binding",
                                             f"Successfully assigned {qp.key} to {node}", component=profile,
                                             instance=self.name, now=self.clock.now())))

    def _conflict(self, task: _BindTask, error: StatusError) -> None:
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

    def _drop(self, task: _BindTask, why: str) -> None:
        with self._stats_lock:
            self.stats.dropped += 1
        log.debug("%s: dropping %s: %s", self.name, task.qp.key, why)
        task.qp.deleted = True
        self.queue.done(task.qp)

    def _expired(self, state: PodState) -> None:
        self._forgotten("expired")
        log.warning("%s: assumed pod %s on %s expired without the informer confirming its bind", self.name,
                    state.info.key, state.node)

    # ------------------------------------------------------------------ API writes (asynchronous)
    def _api_writer(self) -> None:
        """Write pod conditions, preemptions and events; events are batched (``_EVENT_BATCH``, or after
        ``_EVENT_FLUSH_SECONDS``) so that a thousand Scheduled events a second cost a few round trips."""
        events: list[dict[str, Any]] = []
        first = 0.0
        while True:
            wait = None if not events else first + _EVENT_FLUSH_SECONDS - time.monotonic()
            try:
                item = self._api_q.get(timeout=wait) if wait is None or wait > 0 else self._api_q.get_nowait()
            except queue_mod.Empty:
                item = ("flush", None)
            if item is None:
                if events:
                    self._flush_events(events)
                return
            kind, payload = item
            had = len(events)
            try:
                if kind == "event":
                    events.append(payload)
                elif kind == "failed":
                    info, profile, reason, message, nominated, clear = payload
                    events.extend(self._write_failure(info, profile, reason, message, nominated=nominated,
                                                      clear_nominated=clear))
                elif kind == "preempt":
                    events.extend(self._execute_preemption(*payload))
            except Exception:
                log.exception("%s: API write %s failed", self.name, kind)
            if events and not had:
                first = time.monotonic()
            if events and (kind == "flush" or len(events) >= _EVENT_BATCH
                           or time.monotonic() - first >= _EVENT_FLUSH_SECONDS):
                self._flush_events(events)
                events = []

    def _flush_events(self, events: list[dict[str, Any]]) -> None:
        try:
            results = self.client.create_many(EVENT, events)
        except Exception:
            log.exception("%s: writing %d events failed", self.name, len(events))
            return
        for res in results:
            if isinstance(res, StatusError) and res.code != 409:
                log.debug("%s: event not written: %s", self.name, res)

    def _write_failure(self, info: PodInfo, profile: str, reason: str, message: str, *, nominated: str | None,
                       clear_nominated: bool) -> list[dict[str, Any]]:
        """Set PodScheduled=False (reason, message) and the nomination, unless the pod got bound meanwhile;
        the FailedScheduling event to write."""
        if self._update_pod_condition(info, reason, message, nominated, clear_nominated) is None:
            return []  # bound or gone meanwhile: the failure is history
        if not self.options.record_events:
            return []
        note = message if len(message) <= _MAX_EVENT_MESSAGE else message[:_MAX_EVENT_MESSAGE - 3] + "..."
        return [_event(info, "Warning", "FailedScheduling", "Scheduling", note, component=profile, instance=self.name,
                       now=self.clock.now())]

    def _patch_pod_status(self, info: PodInfo, change: Callable[[dict[str, Any]], dict[str, Any] | None], *,
                          unbound_only: bool) -> bool | None:
        """Read-modify-write of a pod's status, guarded by its resourceVersion (upstream ``PatchPodStatus``).

        ``change`` gets a copy of the current status and returns the new one, or None for no change.
        Returns True when written, False when nothing changed, None when the pod is gone, was re-created,
        or (``unbound_only``) got bound meanwhile.
        """
        for _ in range(5):
            try:
                current = self.client.get(POD, info.namespace, info.name)
            except StatusError as e:
                if e.code == 404:
                    return None
                raise
            meta = current.get("metadata") or {}
            if meta.get("uid") != info.uid or (unbound_only and (current.get("spec") or {}).get("nodeName")):
                return None
            status = change({**(current.get("status") or {})})
            if status is None:
                return False
            body = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": info.name, "namespace": info.namespace,
                                 "resourceVersion": meta.get("resourceVersion")},
                    "status": status}
            try:
                self.client.update_status(POD, body)
                return True
            except StatusError as e:
                if e.code == 404:
                    return None
                if e.code != 409:
                    raise
        return False

    def _update_pod_condition(self, info: PodInfo, reason: str, message: str, nominated: str | None,
                              clear_nominated: bool) -> bool | None:
        """upstream ``updatePod``: PodScheduled=False with reason and message, and the nomination; written only
        when something changes (a pod failing the same way again costs no write); None if bound or gone."""
        now = rfc3339(self.clock.now())

        def change(status: dict[str, Any]) -> dict[str, Any] | None:
            conditions = [dict(c) for c in status.get("conditions") or ()]
            old = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
            transition = old.get("lastTransitionTime") if old and old.get("status") == "False" else now
            new = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                   "lastProbeTime": None, "lastTransitionTime": transition}
            want = nominated if nominated else ("" if clear_nominated else status.get("nominatedNodeName"))
            if (old is not None and all(old.get(k) == new[k] for k in ("status", "reason", "message"))
                    and (status.get("nominatedNodeName") or "") == (want or "")):
                return None
            status["conditions"] = [c for c in conditions if c.get("type") != "PodScheduled"] + [new]
            if want:
                status["nominatedNodeName"] = want
            else:
                status.pop("nominatedNodeName", None)
            return status

        return self._patch_pod_status(info, change, unbound_only=True)

    def _execute_preemption(self, preemptor: PodInfo, node: str, victims: Sequence[Any],
                            profile: str) -> list[dict[str, Any]]:
        """Carry out what PostFilter chose (upstream ``PrepareCandidate``); the Preempted events to write.

        Each victim gets ``DisruptionTarget=True`` (reason ``PreemptionByScheduler``) and is deleted, with its
        normal grace period; lower-priority pods nominated to the same node lose that nomination.
        """
        events = []
        message = f"{profile}: preempting to accommodate a higher priority pod"

        def disruption(status: dict[str, Any]) -> dict[str, Any] | None:
            conditions = [dict(c) for c in status.get("conditions") or ()]
            old = next((c for c in conditions if c.get("type") == "DisruptionTarget"), None)
            if old is not None and old.get("status") == "True" and old.get("reason") == "PreemptionByScheduler":
                return None
            status["conditions"] = [c for c in conditions if c.get("type") != "DisruptionTarget"] + [
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                 "message": message, "lastProbeTime": None, "lastTransitionTime": rfc3339(self.clock.now())}]
            return status

        for victim in victims:
            vinfo = victim if isinstance(victim, PodInfo) else PodInfo(victim)
            try:
                self._patch_pod_status(vinfo, disruption, unbound_only=False)
                self.client.delete(POD, vinfo.namespace, vinfo.name,
                                   preconditions={"uid": vinfo.uid} if vinfo.uid else None)
            except StatusError as e:
                if e.code not in (404, 409):
                    log.warning("%s: preempting %s failed: %s", self.name, vinfo.key, e)
                continue
            if self.options.record_events:
                events.append(_event(vinfo, "Normal", "Preempted", "Preempting",
                                     f"Preempted by pod {preemptor.uid} on node {node}", component=profile,
                                     instance=self.name, now=self.clock.now()))

        def clear(status: dict[str, Any]) -> dict[str, Any] | None:
            if status.get("nominatedNodeName") != node:
                return None
            status.pop("nominatedNodeName", None)
            return status

        for other in self.queue.nominated_pods_for_node(node):
            if other.priority < preemptor.priority and other.key != preemptor.key:
                self.queue.add_nominated_pod(other, "")
                self._patch_pod_status(other, clear, unbound_only=True)
        return events

    # ------------------------------------------------------------------ waiting, introspection
    def wait_for_idle(self, timeout: float) -> bool:
        """Block until nothing is queued as active, in flight, binding or waiting to be written (tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            counts = self.queue.counts()
            with self._inflight_cond:
                busy = self._in_bind
            if counts["active"] == 0 and busy == 0 and self.queue.in_flight == 0 and self._api_q.empty():
                return True
            time.sleep(0.005)  # polling several threads' state: there is no single condition to wait on
        return False

    def state_gauges(self) -> dict[str, dict[tuple[str, ...], float]]:
        """Gauges read at scrape time (see :func:`emulator.scheduler.metrics.register_state_source`)."""
        counts = self.queue.counts()
        cache = self.cache.counts()
        return {
            "scheduler_pending_pods": {(q,): float(n) for q, n in counts.items()},
            "scheduler_cache_size": {(t,): float(n) for t, n in cache.items()},
            "scheduler_cache_staleness_seconds": {(): self.cache.staleness},
            "scheduler_cache_pending_events": {(): float(self.cache.pending_events)},
        }

    def snapshot_stats(self) -> dict[str, Any]:
        """Counters and busy time (seconds the scheduling thread spent in cycles) since start."""
        with self._stats_lock:
            s = self.stats
            out = {"attempts": s.attempts, "scheduled": s.scheduled, "unschedulable": s.unschedulable,
                   "errors": s.errors, "conflicts": s.conflicts, "forgotten": s.forgotten, "dropped": s.dropped,
                   "preemptions": s.preemptions, "busy_seconds": s.busy_seconds, "bind_seconds": s.bind_seconds}
            recent = sorted(s.recent_attempts)
        for q in (50, 90, 99):  # of the latest (up to 50,000) scheduled attempts; None before any
            out[f"attempt_p{q}_ms"] = (round(recent[min(len(recent) - 1, len(recent) * q // 100)] * 1000, 2)
                                       if recent else None)
        if self.started_at is not None:
            out["uptime_seconds"] = time.perf_counter() - self.started_at
        out["process_cpu_seconds"] = time.process_time()  # the whole process's, shared with its other threads
        return out

    def check_consistency(self) -> CacheDiff:
        """Compare the cache and queue with a fresh list of nodes and pods from the store (the cache comparer)."""
        nodes = self.client.list(NODE).items
        pods = self.client.list(POD).items
        pending, _ = self.queue.pending_pods()
        return compare_with_store(self.cache, nodes, pods, pending, responsible=self.responsible)

    def dump(self) -> dict[str, Any]:
        """The cache dump plus the queue's pending pods (upstream's SIGUSR2 dumper)."""
        pending, summary = self.queue.pending_pods()
        return {"scheduler": self.name, "cache": self.cache.dump(), "queue": summary,
                "pendingPods": sorted(pod_key(p) for p in pending), "stats": self.snapshot_stats()}


def _event(info: PodInfo, type_: str, reason: str, action: str, note: str, *, component: str, instance: str,
           now: float) -> dict[str, Any]:
    """A core/v1 Event about a pod, as client-go's recorder writes it (name ``<pod>.<hex nanoseconds>``)."""
    stamp = rfc3339(now)
    micro = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int((now % 1) * 1e6):06d}Z"
    nanos = time.time_ns()
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{info.name}.{nanos:x}", "namespace": info.namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": info.namespace, "name": info.name,
                           "uid": info.uid},
        "reason": reason, "message": note, "type": type_, "action": action,
        "source": {"component": component}, "reportingComponent": component, "reportingInstance": instance,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "eventTime": micro, "count": 1,
    }

