"""The Cluster Autoscaler as a controller of kemu's controller manager (``--controllers cluster-autoscaler``).

Upstream runs it as its own binary with its own leader election; kemu runs it
in the leader-elected controller manager (so exactly one instance scans), as
one more controller: informers for Nodes, Pods and PodDisruptionBudgets, one
work-queue key that requeues itself every ``--scan-interval`` of cluster time
(the VPA recommender's pattern), and :class:`~.core.autoscaler.StaticAutoscaler`
doing the scan. Its settings are the ``cluster_autoscaler`` controller option
(upstream flag names, :mod:`.config`); its node groups are the emulated cloud's
(:mod:`emulator.cloud`), declared by ``kemu up --node-groups``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from emulator.api import errors
from emulator.api.kinds import CONFIGMAP, NODE, PDB, POD, Kind
from emulator.api.meta import resource_version
from emulator.api.types import Obj
from emulator.cloud.provider import Cloud
from emulator.clusterautoscaler import expander as expanders
from emulator.clusterautoscaler.cloudprovider.kemu import KemuCloudProvider
from emulator.clusterautoscaler.config import AutoscalingOptions
from emulator.clusterautoscaler.core.autoscaler import ScanResult, StaticAutoscaler
from emulator.clusterautoscaler.expander.priority import CONFIG_MAP_NAME, parse_priorities
from emulator.controllers.runtime import Controller, ControllerContext, EventRecorder
from emulator.informers import ResourceEventHandlerFuncs
from emulator.scheduler.cache import Cache

log = logging.getLogger(__name__)

__all__ = ["ClusterAutoscaler", "new_controller"]

KEY = "scan"
COMPONENT = "cluster-autoscaler"


class ClusterAutoscaler(Controller):
    """See the module docstring."""

    def __init__(self, ctx: ControllerContext, *, options: AutoscalingOptions | None = None,
                 rng: random.Random | None = None) -> None:
        super().__init__(COMPONENT, ctx)
        self.options = options or AutoscalingOptions.from_dict(ctx.option("cluster_autoscaler", {}) or {})
        self.nodes = self.watch(ctx.informers.informer_for(NODE))
        self.pods = self.watch(ctx.informers.informer_for(POD))
        self.pdbs = self.watch(ctx.informers.informer_for(PDB))
        self.cache = Cache(clock=ctx.clock, assumed_ttl=0)
        self._seen: dict[str, int] = {}  # kind -> newest resourceVersion handed to our handlers (sync())
        self._seen_lock = threading.Lock()
        self.nodes.add_event_handler(self._noting(NODE, ResourceEventHandlerFuncs(
            add=lambda o, _i=False: self.cache.on_node_add(o), update=self.cache.on_node_update,
            delete=lambda o: self.cache.on_node_delete(getattr(o, "obj", o)))))
        self.pods.add_event_handler(self._noting(POD, ResourceEventHandlerFuncs(
            add=self._pod_add, update=self._pod_update, delete=self._pod_delete)))
        self.pdbs.add_event_handler(self._noting(PDB, ResourceEventHandlerFuncs()))
        # Events from "cluster-autoscaler", as upstream's (the manager's recorder would say "...-controller").
        self.events = EventRecorder(self.core, COMPONENT, clock=ctx.clock) if ctx.recorder is not None else None
        store = self.core.store
        self.provider = KemuCloudProvider(Cloud(store.redis, store.config.prefix), ctx.clock)
        chain = expanders.build(self.options.expander, rng=rng, priorities=self._priorities)
        self.autoscaler = StaticAutoscaler(
            self.core, self.options, self.provider, self.cache,
            list_nodes=self.nodes.indexer.list, list_pods=self.pods.indexer.list, list_pdbs=self.pdbs.indexer.list,
            expander=chain, event=self._event)
        self.last: ScanResult | None = None

    # ------------------------------------------------------------------ cache feed (as the scheduler's)
    def _noting(self, kind: Kind, inner: ResourceEventHandlerFuncs) -> ResourceEventHandlerFuncs:
        def note(obj: Any) -> None:
            rv = int(resource_version(getattr(obj, "obj", obj) or {}) or 0)
            with self._seen_lock:
                if rv > self._seen.get(kind.resource, 0):
                    self._seen[kind.resource] = rv

        def add(obj: Obj, initial: bool) -> None:
            if inner.add is not None:
                inner.add(obj, initial)
            note(obj)

        def update(old: Obj, new: Obj) -> None:
            if inner.update is not None:
                inner.update(old, new)
            note(new)

        def delete(obj: Any) -> None:
            if inner.delete is not None:
                inner.delete(obj)
            note(obj)

        return ResourceEventHandlerFuncs(add=add, update=update, delete=delete)

    def sync(self, timeout: float = 10.0) -> bool:
        """Wait until our handlers have seen every Node, Pod and PDB write made so far (tests, benchmarks)."""
        store = self.core.store
        targets: dict[str, int] = {}
        for kind in (NODE, POD, PDB):
            reply = store.redis.xrevrange(store.stream_key(kind), count=1)
            if reply:
                entry = reply[0][0]
                targets[kind.resource] = int((entry.decode() if isinstance(entry, bytes) else entry).split("-")[0])
        deadline = time.monotonic() + timeout
        while True:
            with self._seen_lock:
                if all(self._seen.get(k, 0) >= rv for k, rv in targets.items()):
                    return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)

    @staticmethod
    def _assigned(pod: Mapping[str, Any]) -> bool:
        return bool((pod.get("spec") or {}).get("nodeName"))

    @staticmethod
    def _terminal(pod: Mapping[str, Any]) -> bool:
        return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    def _pod_add(self, pod: Obj, _initial: bool = False) -> None:
        if self._assigned(pod) and not self._terminal(pod):
            self.cache.on_pod_add(pod)

    def _pod_update(self, old: Obj, new: Obj) -> None:
        if self._assigned(new):
            if self._terminal(new):
                self.cache.on_pod_delete(new)
            else:
                self.cache.on_pod_update(old, new)

    def _pod_delete(self, obj: Any) -> None:
        pod = getattr(obj, "obj", obj)
        if isinstance(pod, Mapping) and self._assigned(pod):
            self.cache.on_pod_delete(pod)

    # ------------------------------------------------------------------ loop
    def _event(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events.event(obj, event_type, reason, message)

    def _priorities(self) -> Mapping[int, Sequence[str]] | None:
        try:
            cm = self.core.get(CONFIGMAP, self.options.namespace, CONFIG_MAP_NAME)
        except errors.StatusError as e:
            if e.code != 404:
                raise
            return None
        return parse_priorities(cm)

    def start(self) -> ClusterAutoscaler:
        self.cache.apply_pending()  # the informers' initial lists, once, before the first scan
        if self.events is not None:
            self.events.start()
        self.enqueue_key(KEY)
        super().start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        if self.events is not None:
            self.events.stop()

    def reconcile(self, key: str) -> float | None:
        if key != KEY:
            return None
        try:
            self.last = self.autoscaler.run_once(self.clock.now())
        except Exception:
            log.exception("cluster-autoscaler: scan failed")
        return self.options.scan_interval

    def run_once(self) -> ScanResult:
        """One scan now (tests and benchmarks drive it by hand)."""
        self.last = self.autoscaler.run_once(self.clock.now())
        if self.events is not None:
            self.events.flush()
        return self.last


def new_controller(ctx: ControllerContext) -> ClusterAutoscaler:
    return ClusterAutoscaler(ctx)
