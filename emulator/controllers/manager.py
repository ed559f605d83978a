"""The controller manager: a group of controllers, one informer factory, leader election.

kemu's ``kube-controller-manager``. A :class:`ControllerManager` is given the
server core and a :class:`ManagerConfig`; it takes part in leader election
through the Lease ``kube-system/kube-controller-manager``
(:mod:`emulator.controllers.leaderelection`) and, while it holds the Lease:

1. creates one :class:`~emulator.informers.SharedInformerFactory` (on the
   process's one watch multiplexer) and an event recorder per controller;
2. builds every enabled controller from :data:`CONTROLLERS` — each controller
   registers the informers and handlers it needs;
3. starts the factory, waits until every informer has synced (a controller
   acting on a half-filled cache would create what already exists), then
   starts the controllers' workers.

When the Lease is lost (renewal failed for ``renew_deadline``) or the manager
stops, the controllers stop first, then their recorders flush, then the
factory shuts down; a manager that lost the Lease becomes a standby again.
With ``leader_elect=False`` the controllers simply run.

**Adding a controller** is one module under ``emulator/controllers/`` with a
``new_controller(ctx: ControllerContext)`` returning something with ``name``,
``start()`` and ``stop(timeout)`` (a :class:`~emulator.controllers.runtime.Controller`,
or a :class:`~emulator.controllers.loop.ControllerLoop`), plus one line in
:data:`CONTROLLERS`, plus its name in the import-linter independence contract.
Modules are imported lazily by name, so the manager depends on no controller
at import time and controllers never import each other.

**Choosing controllers** uses kube-controller-manager's ``--controllers``
syntax: ``*`` is every controller on by default, ``name`` turns one on,
``-name`` turns one off (``("*", "-garbagecollector")``).

Time: the Lease's durations and every controller delay are cluster time
(:class:`~emulator.clock.Clock`); cache-sync timeouts are wall time.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from emulator import gctune
from emulator.clock import Clock
from emulator.controllers.leaderelection import LeaderElectionConfig, LeaderElector, default_identity
from emulator.controllers.runtime import ControllerContext, EventRecorder, Runnable
from emulator.server.core import ServerCore

log = logging.getLogger(__name__)

# The watch linger the controllers ask of their process's multiplexer (emulator.informers.multiplexer):
# longer than a scheduler's, since a controller's reaction already goes through a work queue and its
# sync; batching a pod's events this way cuts the wake-ups of the ~15 handlers on the shared pod
# informer (docs/performance.md). 50 ms, as a kubelet shard's (it once broke test_cronjob_controller's
# Replace case, whose sync helper then counted a reconcile made on a cache behind the controller's own
# write; the helper now waits for the caches to hold the store's objects). A process that also hosts a
# scheduler keeps the scheduler's.
WATCH_LINGER_MS = 50.0


@dataclass(frozen=True)
class ControllerSpec:
    """Where a controller's constructor lives and whether ``*`` includes it."""

    module: str
    enabled_by_default: bool = True
    constructor: str = "new_controller"


# kube-controller-manager's controller names (the --controllers flag's vocabulary).
CONTROLLERS: dict[str, ControllerSpec] = {
    "garbagecollector": ControllerSpec("emulator.controllers.garbagecollector"),
    "disruption": ControllerSpec("emulator.controllers.disruption"),
    "replicaset": ControllerSpec("emulator.controllers.replicaset"),
    "deployment": ControllerSpec("emulator.controllers.deployment"),
    "job": ControllerSpec("emulator.controllers.job"),
    "ttl-after-finished": ControllerSpec("emulator.controllers.ttlafterfinished"),
    "daemonset": ControllerSpec("emulator.controllers.daemonset"),
    "nodelifecycle": ControllerSpec("emulator.controllers.nodelifecycle"),
    "taint-eviction-controller": ControllerSpec("emulator.controllers.tainteviction"),
    "namespace": ControllerSpec("emulator.controllers.namespace"),
    "resourcequota": ControllerSpec("emulator.controllers.resourcequota"),
    "endpointslice": ControllerSpec("emulator.controllers.endpointslice"),
    "endpoints": ControllerSpec("emulator.controllers.endpoints"),
    "statefulset": ControllerSpec("emulator.controllers.statefulset"),
    "cronjob": ControllerSpec("emulator.controllers.cronjob"),
    "horizontalpodautoscaling": ControllerSpec("emulator.controllers.podautoscaler.horizontal"),
    # The VPA's recommender and updater (separate binaries upstream, kubernetes/autoscaler).
    "vpa-recommender": ControllerSpec("emulator.controllers.vpa.recommender"),
    "vpa-updater": ControllerSpec("emulator.controllers.vpa.updater"),
    # KEDA's operator (kedacore/keda, its own Deployment upstream): ScaledObjects and ScaledJobs.
    "keda-operator": ControllerSpec("emulator.controllers.keda.scaledobject"),
    "keda-scaledjob": ControllerSpec("emulator.controllers.keda.scaledjob"),
    # Not kube-controller-manager's: kubernetes-sigs/descheduler, on only with a policy (kemu up --descheduler-policy).
    "descheduler": ControllerSpec("emulator.descheduler.controller", enabled_by_default=False),
    # Load-aware scheduling (crane-scheduler's annotator): opt in with --controllers=*,node-annotator.
    "node-annotator": ControllerSpec("emulator.controllers.nodeannotator", enabled_by_default=False),
    # The Cluster Autoscaler (its own binary upstream): on when node groups are declared (kemu up --node-groups).
    "cluster-autoscaler": ControllerSpec("emulator.clusterautoscaler.controller", enabled_by_default=False),
}


def enabled_controllers(selection: Iterable[str], known: Mapping[str, ControllerSpec] = CONTROLLERS) -> list[str]:
    """Resolve ``--controllers`` syntax (``*``, ``name``, ``-name``) to controller names, in table order."""
    selection = list(selection)
    unknown = [s.lstrip("-") for s in selection if s != "*" and s.lstrip("-") not in known]
    if unknown:
        raise ValueError(f"unknown controllers {sorted(unknown)}; known: {', '.join(sorted(known))}")
    out = []
    for name, spec in known.items():
        if f"-{name}" in selection:
            continue
        if name in selection or ("*" in selection and spec.enabled_by_default):
            out.append(name)
    return out


@dataclass(frozen=True)
class ManagerConfig:
    """Settings of one controller manager (YAML key ``controller_manager`` in kemu's config)."""

    controllers: tuple[str, ...] = ("*",)
    leader_elect: bool = True
    lease_name: str = "kube-controller-manager"
    lease_namespace: str = "kube-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = ""
    # Per-controller options (concurrent_replicaset_syncs, concurrent_deployment_syncs, gc_period ...).
    options: Mapping[str, Any] = field(default_factory=dict)
    cache_sync_timeout: float = 120.0
    events: bool = True
    # Export kemu_cluster_* (emulator.controllers.clusterstate) from the leader's node and pod caches.
    cluster_state_metrics: bool = True

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> ManagerConfig:
        known = set(cls.__dataclass_fields__)
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown controller manager settings {sorted(unknown)}; known: {sorted(known)}")
        data = dict(values)
        if "controllers" in data:
            raw = data["controllers"]
            data["controllers"] = tuple(raw.split(",")) if isinstance(raw, str) else tuple(raw)
        return cls(**data)


class ControllerManager:
    """Runs the enabled controllers while holding the Lease; see the module docstring."""

    def __init__(self, core: ServerCore, config: ManagerConfig | None = None, *, clock: Clock | None = None,
                 tune_gc: bool = False) -> None:
        # tune_gc: this process is the manager's own (emulator/gctune.py): raise the collector's thresholds now
        # and freeze the caches each time they have synced.
        self.tune_gc = tune_gc
        if tune_gc:
            gctune.tune_for_caches()
        self.core = core
        self.config = config or ManagerConfig()
        self.clock = clock or core.clock
        self.identity = self.config.identity or default_identity()
        self.enabled = enabled_controllers(self.config.controllers)
        self._lock = threading.Lock()
        self._running: dict[str, Runnable] = {}
        self._built: dict[str, Runnable] = {}
        self._recorders: list[EventRecorder] = []
        self._direct: tuple[threading.Thread, threading.Event] | None = None
        self._factory: Any = None
        self._state_informers: tuple[Any, Any] | None = None  # (nodes, pods) for the cluster-state metrics
        self._active = threading.Event()
        self._stopped = False
        self.elector: LeaderElector | None = None
        self.leaderships = 0  # times this manager started its controllers
        if self.config.leader_elect:
            self._elector_recorder = EventRecorder(core, "kube-controller-manager", clock=self.clock,
                                                   host=self.identity) if self.config.events else None
            self.elector = LeaderElector(
                core, LeaderElectionConfig(
                    lease_name=self.config.lease_name, lease_namespace=self.config.lease_namespace,
                    identity=self.identity, lease_duration=self.config.lease_duration,
                    renew_deadline=self.config.renew_deadline, retry_period=self.config.retry_period),
                clock=self.clock, on_started_leading=self._start_controllers,
                on_stopped_leading=self._stop_controllers, recorder=self._elector_recorder)

    # ------------------------------------------------------------ lifecycle
    def start(self) -> ControllerManager:
        if self.elector is not None:
            if self._elector_recorder is not None:
                self._elector_recorder.start()
            self.elector.start()
        else:
            cancelled = threading.Event()
            thread = threading.Thread(target=self._start_controllers, args=(cancelled,),
                                      name=f"controller-manager-{self.identity}", daemon=True)
            self._direct = (thread, cancelled)
            thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop cleanly: controllers stop, then the Lease is released so a standby takes over at once."""
        self._shutdown(timeout, release=True)

    def crash(self, timeout: float = 10.0) -> None:
        """Stop as a killed process would look to the others: the Lease is left to expire."""
        self._shutdown(timeout, release=False)

    def _shutdown(self, timeout: float, *, release: bool) -> None:
        with self._lock:
            self._stopped = True
        if self.elector is not None:
            self.elector.stop(timeout, release=release)
            if self._elector_recorder is not None:
                self._elector_recorder.stop()
        else:
            if self._direct is not None:
                thread, cancelled = self._direct
                cancelled.set()
                thread.join(timeout)
                self._direct = None
            self._stop_controllers()

    @property
    def is_leader(self) -> bool:
        return self.elector.leading if self.elector is not None else not self._stopped

    @property
    def active(self) -> bool:
        """Controllers are running (caches synced, workers started)."""
        return self._active.is_set()

    def wait_active(self, timeout: float) -> bool:
        return self._active.wait(timeout)

    def controllers(self) -> dict[str, Runnable]:
        with self._lock:
            return dict(self._running)

    def status(self) -> dict[str, Any]:
        return {"identity": self.identity, "leader": self.is_leader, "active": self.active,
                "controllers": sorted(self.controllers()), "enabled": list(self.enabled),
                "leaderships": self.leaderships,
                "leaseHolder": self.elector.get_leader() if self.elector is not None else self.identity}

    def cluster_objects(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        """The leader's cached nodes and pods for :mod:`emulator.controllers.clusterstate` (None: not leading)."""
        with self._lock:
            state = self._state_informers
        if state is None or not self._active.is_set() or not all(i.has_synced() for i in state):
            return None
        nodes, pods = state
        return nodes.get_store().list(), pods.get_store().list()

    # ------------------------------------------------------------ leading
    def _start_controllers(self, cancelled: threading.Event) -> None:
        """``OnStartedLeading``: build the controllers, sync their caches, start them (unless cancelled)."""
        from emulator.informers import SharedInformerFactory

        with self._lock:
            if self._stopped and self.elector is None:
                return
            # The controllers' handlers only enqueue keys: each informer runs them all on one thread.
            factory = SharedInformerFactory(self.core.store, clock=self.clock, linger_ms=WATCH_LINGER_MS,
                                            shared_handler_threads=True)
            self._factory = factory
            built = self._built = {}
            recorders = self._recorders = []
        for name in self.enabled:
            spec = CONTROLLERS[name]
            recorder = EventRecorder(self.core, f"{name}-controller", clock=self.clock, host=self.identity) \
                if self.config.events else None
            ctx = ControllerContext(self.core, factory, self.clock, recorder, dict(self.config.options))
            constructor = getattr(importlib.import_module(spec.module), spec.constructor)
            built[name] = constructor(ctx)
            if recorder is not None:
                recorders.append(recorder.start())
        if self.config.cluster_state_metrics:
            from emulator.api.kinds import NODE, POD
            from emulator.controllers import clusterstate

            # The same informers the controllers share (created here if no enabled controller wants them).
            with self._lock:
                self._state_informers = (factory.informer_for(NODE), factory.informer_for(POD))
            clusterstate.collector().add(self)
        factory.start()
        deadline = time.monotonic() + self.config.cache_sync_timeout
        while not all(getattr(c, "has_synced", lambda: True)() for c in built.values()):
            if cancelled.wait(0.01):
                return  # on_stopped_leading tears down what was built
            if time.monotonic() > deadline:
                log.error("controller manager %s: caches did not sync in %.0f s; not starting controllers",
                          self.identity, self.config.cache_sync_timeout)
                return
        if self.tune_gc:
            gctune.freeze_synced_caches()
        with self._lock:
            if cancelled.is_set():
                return
            for controller in built.values():
                controller.start()
            self._running = dict(built)
            self.leaderships += 1
        self._active.set()
        log.info("controller manager %s: started %s", self.identity, ", ".join(built))

    def _stop_controllers(self) -> None:
        """``OnStoppedLeading``: controllers, then recorders (final flush), then the informers."""
        with self._lock:
            self._active.clear()
            built, self._built = self._built, {}
            self._running = {}
            recorders, self._recorders = self._recorders, []
            factory, self._factory = self._factory, None
            state, self._state_informers = self._state_informers, None
        if state is not None:
            from emulator.controllers import clusterstate

            clusterstate.collector().remove(self)
        for controller in reversed(list(built.values())):
            try:
                controller.stop(10.0)
            except Exception:
                log.exception("controller manager: stopping %s failed", controller.name)
        for recorder in recorders:
            recorder.stop()
        if factory is not None:
            factory.shutdown()
