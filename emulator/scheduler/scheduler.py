"""The scheduler: the Scheduler object, its wiring and its threads.

Upstream ``pkg/scheduler/scheduler.go`` (``New``, ``Run``); our own Python,
plain threads, no Ray (an actor shell in ``actors/`` only decides where a
:class:`Scheduler` runs). Its parts, one module each, as upstream splits
them:

* :mod:`emulator.scheduler.eventhandlers` -- informer handlers and listers
  (upstream ``eventhandlers.go``);
* :mod:`emulator.scheduler.schedule_one` -- the scheduling cycle and
  failure handling (``schedule_one.go``: ``schedulingCycle``,
  ``handleSchedulingFailure``);
* :mod:`emulator.scheduler.binder` -- the binding cycle and the bind threads
  (``schedule_one.go``: ``bindingCycle``);
* :mod:`emulator.scheduler.api_writer` -- pod conditions, nominations,
  preemption victims and events, written asynchronously;
* :mod:`emulator.scheduler.timed_framework` and
  :mod:`emulator.scheduler.waiting_pods` -- the framework with its metrics
  and its Permit waits (``framework/runtime``).

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from emulator.api.kinds import NODE, POD, Kind
from emulator.api.types import ObjView
from emulator.clock import Clock, SystemClock
from emulator.scheduler import metrics
from emulator.scheduler.api_writer import ApiWriter
from emulator.scheduler.binder import BIND_BATCH_INLINE, BindingCycle, BindOutcome, BindTask
from emulator.scheduler.cache import DEFAULT_ASSUMED_POD_TTL, Cache, CacheDiff, compare_with_store
from emulator.scheduler.config import SchedulerConfiguration, build_frameworks, default_configuration
from emulator.scheduler.effectiveness import Effectiveness
from emulator.scheduler.eventhandlers import LISTER_RESOURCES, EventHandlers, Handler, InformerLister, InformerSource
from emulator.scheduler.extender import Transport
from emulator.scheduler.framework.interface import Status
from emulator.scheduler.gpu_metrics import gpu_gauges
from emulator.scheduler.queue import SchedulingQueue, pod_key
from emulator.scheduler.schedule_one import SchedulerStats, SchedulingCycle
from emulator.scheduler.timed_framework import TimedFramework, timed_registry
from emulator.scheduler.waiting_pods import WaitingPod

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


def owner_replica(pod: ObjView, replicas: int) -> int:
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
    first pod for more to bind in the same round trip; ``pop_from_backoff``
    is upstream's SchedulerPopFromBackoffQ feature gate (on by default since
    1.33: with activeQ empty, a pod backing off after a rejection is tried at
    once).
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
    pop_from_backoff: bool = True

    def __post_init__(self) -> None:
        if self.replicas < 1 or not 0 <= self.replica < self.replicas:
            raise ValueError(f"replica {self.replica} of {self.replicas}: need 0 <= replica < replicas")
        if self.bind_workers < 0:
            raise ValueError("bind_workers must not be negative (0: the scheduling thread binds)")


class Scheduler(EventHandlers, SchedulingCycle, BindingCycle):
    """One scheduler instance: queue, cache, one framework per profile, the loop and its workers.

    ``client`` is the API (``ServerCore``); ``config`` the profiles (default:
    upstream's default profile over ``registry``, the in-tree plugins by
    default). Plugins the configuration names that ``registry`` lacks are
    loaded by entry point or import path; its ``extenders`` are called over
    ``extender_transport`` (required when there are any; this package
    imports no HTTP client -- ``emulator.extender_http.HTTPTransport``).
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
        self.frameworks: dict[str, TimedFramework] = build_frameworks(  # type: ignore[assignment]
            self.config, registry, rng=self.rng, framework_class=TimedFramework, transport=extender_transport,
            wrap=lambda complete: timed_registry(complete, self.name), scheduler=self)
        first = next(iter(self.frameworks.values()))
        sorts = first.plugins_at("queueSort")
        self.queue = SchedulingQueue(
            first.queue_sort_less(), priority_sort=(not sorts or sorts[0].name == "PrioritySort"), clock=self.clock,
            pre_enqueue=self._pre_enqueue, pod_initial_backoff=self.config.pod_initial_backoff_seconds,
            pod_max_backoff=self.config.pod_max_backoff_seconds,
            pod_max_in_unschedulable=self.options.pod_max_in_unschedulable,
            plugin_events=self._plugin_events(), name=self.name, pop_from_backoff=self.options.pop_from_backoff)
        for fwk in self.frameworks.values():
            fwk.nominator = self.queue  # Filter reserves room for the queue's nominated pods (upstream PodNominator)
        self.cache = Cache(clock=self.clock, assumed_ttl=self.options.assumed_pod_ttl, on_expired=self._expired)
        self.stats = SchedulerStats()
        # Load-aware placement quality per profile (kemu_scheduler_effective_schedule_ratio ...).
        self.effectiveness = {name: Effectiveness(self.name, name) for name in self.frameworks}
        self.recent_outcomes: list[BindOutcome] = []
        self._stats_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._bind_q: queue_mod.SimpleQueue[BindTask | None] = queue_mod.SimpleQueue()
        self.api = ApiWriter(client, name=self.name, clock=self.clock, options=self.options, queue=self.queue)
        self._waiting: dict[str, WaitingPod] = {}
        self._inline: list[BindTask] = []  # bind_workers=0: binds the scheduling thread does itself
        self._waiting_lock = threading.Lock()
        self._in_bind = 0
        self._inflight_cond = threading.Condition()
        self._children: dict[tuple[Any, ...], Any] = {}
        metrics.preinitialise(self.name, list(self.frameworks))
        self._unregister_metrics = metrics.register_state_source(self)
        self.started_at: float | None = None
        self.pod_handler = Handler(self.on_pod_add, self.on_pod_update, self.on_pod_delete)
        self.node_handler = Handler(self.on_node_add, self.on_node_update, self.on_node_delete)
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

    def _pre_enqueue(self, pod: ObjView) -> Status | None:
        fwk = self.frameworks.get((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")
        return fwk.run_pre_enqueue_plugins(pod) if fwk is not None else None

    def attach(self, informers: InformerSource) -> Scheduler:
        """Register this scheduler's handlers on the pod and node informers of ``informers`` (and the plugins'
        listers on the informers of the other kinds they read)."""
        self.listers.bind(informers)
        mux = getattr(informers, "multiplexer", None)
        store = getattr(informers, "store", None)
        if mux is not None and store is not None and getattr(self.client, "store", None) is store:
            # The client writes to the very store the informers read (ServerCore), so a bind's result is
            # what its watch event decodes to: the reader takes it instead of decoding the entry.
            self._remember_write = mux.remember
            self.api.remember = mux.remember  # and so are its nominations' and victims' writes
        self._registrations.append(informers.informer_for(NODE).add_event_handler(self.node_handler))
        self._registrations.append(informers.informer_for(POD).add_event_handler(self.pod_handler))
        return self

    def has_synced(self) -> bool:
        """Whether every handler registration has seen its informer's initial list."""
        return all(r.has_synced() for r in self._registrations) and self.listers.has_synced()

    # ------------------------------------------------------------------ ownership
    def profile_for(self, pod: ObjView) -> TimedFramework | None:
        return self.frameworks.get((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")

    def responsible(self, pod: ObjView) -> bool:
        """This scheduler serves the pod's schedulerName and, among replicas, owns the pod."""
        if self.profile_for(pod) is None:
            return False
        replicas = self.options.replicas
        return replicas == 1 or owner_replica(pod, replicas) == self.options.replica

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
        specs.append((f"{self.name}-api", self.api.run))
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
        self.api.close()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = []
        with self._waiting_lock:
            waiting = list(self._waiting.values())
        for wp in waiting:
            wp.reject("", "scheduler stopped")
        self._unregister_metrics()

    # ------------------------------------------------------------------ the scheduling thread
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
            if inline and (len(inline) >= BIND_BATCH_INLINE
                           or time.perf_counter() - inline[0].start >= self.options.bind_linger):
                self._flush_inline()
        if inline:
            self._flush_inline()

    def schedule_next(self, timeout: float = 0.0) -> bool:
        """Pop one pod and run its scheduling cycle on this thread (tests); False when none was ready."""
        qp = self.queue.pop(timeout=timeout)
        if qp is None:
            return False
        self.schedule_one(qp)
        return True

    # ------------------------------------------------------------------ waiting, introspection
    def wait_for_idle(self, timeout: float) -> bool:
        """Block until nothing is queued as active, in flight, binding or waiting to be written (tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            counts = self.queue.counts()
            with self._inflight_cond:
                busy = self._in_bind
            if counts["active"] == 0 and busy == 0 and self.queue.in_flight == 0 and self.api.idle():
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
            **gpu_gauges(self.cache.snapshot()),
        }

    def snapshot_stats(self) -> dict[str, Any]:
        """Counters and busy time (seconds the scheduling thread spent in cycles) since start."""
        with self._stats_lock:
            s = self.stats
            out = {"attempts": s.attempts, "scheduled": s.scheduled, "unschedulable": s.unschedulable,
                   "errors": s.errors, "conflicts": s.conflicts, "forgotten": s.forgotten, "dropped": s.dropped,
                   "preemptions": s.preemptions, "held_preempting": s.held_preempting,
                   "held_victims": s.held_victims, "busy_seconds": s.busy_seconds, "bind_seconds": s.bind_seconds}
            recent = sorted(s.recent_attempts)
        for q in (50, 90, 99):  # of the latest (up to 50,000) scheduled attempts; None before any
            out[f"attempt_p{q}_ms"] = (round(recent[min(len(recent) - 1, len(recent) * q // 100)] * 1000, 2)
                                       if recent else None)
        if self.started_at is not None:
            out["uptime_seconds"] = time.perf_counter() - self.started_at
        out["process_cpu_seconds"] = time.process_time()  # the whole process's, shared with its other threads
        out["queue"] = self.queue.counts()
        out["api_writer"] = self.api.timings()
        out["effectiveness"] = {name: e.summary() for name, e in self.effectiveness.items()}
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
