"""One Cluster Autoscaler scan (upstream ``core/static_autoscaler.go`` ``RunOnce``).

Every ``--scan-interval`` (10 s of cluster time):

1. refresh the cloud provider; recount node groups (:mod:`..clusterstate`):
   instances that did not register within ``--max-node-provision-time`` are
   deleted and their group backed off (a timed-out scale-up);
2. carry on with drains in progress (:class:`..core.scaledown.Actuator`);
3. the pending pods: not bound, ``PodScheduled=False`` with reason
   ``Unschedulable``, no ``nominatedNodeName``, priority at or above
   ``--expendable-pods-priority-cutoff``, older than ``--new-pod-scale-up-delay``;
4. *filter out schedulable* (upstream ``FilterOutSchedulablePodListProcessor``):
   pods that fit an existing node, or a node still booting (upcoming: template
   copies added to the snapshot), are placed there in the scan's snapshot and
   need no new node - so one burst is not answered twice;
5. scale-up for the rest (:mod:`..core.scaleup`);
6. scale-down (:mod:`..core.scaledown`): recompute unneeded nodes; unless a
   scale-up happened this scan or scale-down is in cooldown, start deleting
   those unneeded long enough;
7. write the ``cluster-autoscaler-status`` ConfigMap and the metrics.

The cluster snapshot comes from the scheduler's own incremental cache
(:class:`emulator.scheduler.cache.Cache`, fed by this controller's informers),
forked per scan - copy-on-write, so a scan over 5,000 nodes does not rebuild
anything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import yaml

from emulator.api import errors
from emulator.api.kinds import CONFIGMAP
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339, rfc3339
from emulator.clusterautoscaler import metrics as m
from emulator.clusterautoscaler.cloudprovider import CloudProvider
from emulator.clusterautoscaler.clusterstate import ClusterState, status_document
from emulator.clusterautoscaler.config import AutoscalingOptions
from emulator.clusterautoscaler.core.scaledown import NOT_UNNEEDED_LONG_ENOUGH, Actuator, Planner, Unremovable
from emulator.clusterautoscaler.core.scaleup import ScaleUpper, ScaleUpResult
from emulator.clusterautoscaler.estimator.binpacking import new_node
from emulator.clusterautoscaler.expander import Chain
from emulator.clusterautoscaler.simulator.scheduling import FitCache, PodSimulator, equivalence_key
from emulator.scheduler.cache import Cache
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo
from emulator.server.core import ServerCore

log = logging.getLogger(__name__)

__all__ = ["ScanResult", "StaticAutoscaler", "unschedulable_pods"]


def unschedulable_pods(pods: Sequence[Obj], options: AutoscalingOptions, now: float) -> list[Obj]:
    """Step 3 of the module docstring."""
    out = []
    for pod in pods:
        spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
        if spec.get("nodeName") or meta.get("deletionTimestamp") or status.get("nominatedNodeName"):
            continue
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        cond = next((c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None)
        if cond is None or cond.get("status") != "False" or cond.get("reason") != "Unschedulable":
            continue
        if int(spec.get("priority") or 0) < options.expendable_pods_priority_cutoff:
            continue
        if options.new_pod_scale_up_delay and meta.get("creationTimestamp") and \
                now - parse_rfc3339(meta["creationTimestamp"]) < options.new_pod_scale_up_delay:
            continue
        out.append(pod)
    return out


class ScanResult:
    """What one scan saw and did (for tests, benchmarks and logs)."""

    def __init__(self) -> None:
        self.pending = 0
        self.schedulable = 0
        self.scale_up: ScaleUpResult | None = None
        self.deleted: list[str] = []
        self.unneeded: list[str] = []
        self.seconds: dict[str, float] = {}


class StaticAutoscaler:
    """The scan loop's body (see the module docstring); the controller calls :meth:`run_once`."""

    def __init__(self, core: ServerCore, options: AutoscalingOptions, provider: CloudProvider, cache: Cache,
                 *, list_nodes: Callable[[], list[Obj]], list_pods: Callable[[], list[Obj]],
                 list_pdbs: Callable[[], list[Obj]], expander: Chain,
                 event: Callable[[Obj, str, str, str], None]) -> None:
        self.core = core
        self.options = options
        self.provider = provider
        self.cache = cache
        self.list_nodes = list_nodes
        self.list_pods = list_pods
        self.list_pdbs = list_pdbs
        self.event = event
        self.simulator = PodSimulator()
        self.state = ClusterState(options)
        self.scale_upper = ScaleUpper(options, provider, self.state, expander=expander, simulator=self.simulator,
                                      event=event, log_event=self.log_event)
        self.planner = Planner(options, provider, self.simulator)
        self.actuator = Actuator(core, options, event, self.log_event)
        self.last_scale_up = float("-inf")
        self._started = False
        self.scans = 0

    def log_event(self, reason: str, message: str) -> None:
        """An event on the status ConfigMap (upstream's ``LogRecorder``)."""
        o = self.options
        self.event({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": o.status_config_map_name, "namespace": o.namespace}},
                   "Normal", reason, message)

    def run_once(self, now: float) -> ScanResult:
        o = self.options
        result = ScanResult()
        t0 = time.perf_counter()
        m.LAST_ACTIVITY.labels("main").set(now)
        self.provider.refresh()
        nodes = self.list_nodes()
        overdue = self.state.update(self.provider, nodes, now)
        groups = {g.id(): g for g in self.provider.node_groups()}
        for gid, names in overdue.items():
            log.warning("cluster-autoscaler: %d instance(s) of %s did not register in %.0f s; deleting them",
                        len(names), gid, o.max_node_provision_time)
            groups[gid].delete_nodes(names)
            m.FAILED_SCALE_UPS.labels("timeout").inc()
            self.state.register_failed_scale_up(gid, now, "timeout", self.state.timeout_message(gid))
        if not self._started:
            self.actuator.clean_taints(nodes, now)
            self._started = True
        snapshot = self.cache.snapshot().fork()
        result.seconds["snapshot"] = time.perf_counter() - t0

        def pods_on(name: str) -> list[Obj]:
            index = snapshot.index_of(name)
            return [] if index is None else [p.pod for p in snapshot.pods_on(index)]

        result.deleted.extend(self.actuator.progress(pods_on, now))

        pending = unschedulable_pods(self.list_pods(), o, now)
        result.pending = len(pending)
        m.UNSCHEDULABLE_PODS.labels("unschedulable").set(len(pending))
        t1 = time.perf_counter()
        still = self.filter_out_schedulable(pending, snapshot)
        result.schedulable = len(pending) - len(still)
        result.seconds["filterOutSchedulable"] = time.perf_counter() - t1
        scaled_up = False
        if still:
            t2 = time.perf_counter()
            m.LAST_ACTIVITY.labels("scaleUp").set(now)
            result.scale_up = self.scale_upper.scale_up(still, snapshot, nodes, now)
            scaled_up = bool(result.scale_up.increases)
            if scaled_up:
                self.last_scale_up = now
            took = time.perf_counter() - t2
            result.seconds["scaleUp"] = took
            m.FUNCTION_DURATION.labels("scaleUp").observe(took)
        if o.scale_down_enabled:
            t3 = time.perf_counter()
            by_name = {n["metadata"]["name"]: n for n in nodes}
            self.planner.update(snapshot, by_name, self.list_pdbs(), now, set(self.actuator.draining))
            took = time.perf_counter() - t3
            result.seconds["findUnneeded"] = took
            m.FUNCTION_DURATION.labels("findUnneeded").observe(took)
            result.unneeded = sorted(self.planner.unneeded)
            due = {c.name for c in self.planner.removable_now(now)}
            for name in self.planner.unneeded:
                if name not in due:
                    self.planner.unremovable[name] = Unremovable(name, NOT_UNNEEDED_LONG_ENOUGH)
            if not scaled_up and not self.actuator.in_cooldown(self.last_scale_up, now) and due:
                m.LAST_ACTIVITY.labels("scaleDown").set(now)
                sizes = {gid: (g.target_size(), g.min_size()) for gid, g in groups.items()}
                result.deleted.extend(self.actuator.start(
                    self.planner.removable_now(now), sizes, now,
                    self.planner.unremovable.__setitem__))
                m.FUNCTION_DURATION.labels("scaleDown").observe(time.perf_counter() - t3)
        self._publish(now)
        took = time.perf_counter() - t0
        result.seconds["main"] = took
        m.FUNCTION_DURATION.labels("main").observe(took)
        m.LAST_ACTIVITY.labels("autoscaling").set(now)
        self.scans += 1
        return result

    def filter_out_schedulable(self, pending: Sequence[Obj], snapshot: Snapshot) -> list[PodInfo]:
        """Pods that fit existing or upcoming nodes are placed there (in ``snapshot``); the rest are returned."""
        if not pending:
            return []
        work = snapshot
        for group in self.provider.node_groups():
            count = self.state.counts.get(group.id())
            if count is None or not count.upcoming:
                continue
            template = group.template_node_info()
            for k in range(count.upcoming):
                work = work.add_node(new_node(template, f"upcoming-{group.id()}-{k}"))
        if work is snapshot:
            work = snapshot.fork()
        # Priority first (upstream), then largest first as the binpacking estimator packs, so the pods the
        # estimator put on upcoming nodes are found room for there in the same order.
        infos = sorted((PodInfo.of(p) for p in pending),
                       key=lambda p: (-p.priority, -p.requests.get("cpu", 0), -p.requests.get("memory", 0)))
        failed: set[tuple[str, str]] = set()
        still: list[PodInfo] = []
        fits = FitCache(self.simulator, work)
        for info in infos:
            key = equivalence_key(info.pod)
            if key in failed:
                still.append(info)
                continue
            index = fits.first_fit(info, work)
            if index is None:
                failed.add(key)
                still.append(info)
                continue
            work.assume(info, index)
            fits.assumed(info)
        return still

    # ------------------------------------------------------------------ status and metrics
    def _publish(self, now: float) -> None:
        o = self.options
        candidates: dict[str, int] = {}
        for cand in self.planner.unneeded.values():
            candidates[cand.group.id()] = candidates.get(cand.group.id(), 0) + 1
        ready = unready = upcoming = long_unreg = 0
        for group in self.provider.node_groups():
            gid = group.id()
            c = self.state.counts.get(gid)
            if c is None:
                continue
            ready += c.ready
            unready += c.unready
            upcoming += c.upcoming
            long_unreg += len(c.long_unregistered)
            m.GROUP_TARGET.labels(gid).set(c.target)
            m.GROUP_MIN.labels(gid).set(group.min_size())
            m.GROUP_MAX.labels(gid).set(group.max_size())
            m.GROUP_COST.labels(gid).set(len(c.registered) * group.price_per_hour())
        for state, n in (("ready", ready), ("unready", unready), ("notStarted", 0), ("unregistered", upcoming),
                         ("longUnregistered", long_unreg)):
            m.NODES.labels(state).set(n)
        m.NODE_GROUPS.labels("autoscaled").set(len(self.provider.node_groups()))
        if not o.write_status_configmap:
            return
        doc = status_document(self.state, self.provider, now, candidates=candidates,
                              scale_up_in_progress=bool(self.state.requests))
        unremovable = [u.to_dict() for _, u in sorted(self.planner.unremovable.items())]
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        data = {"status": yaml.dump(doc, Dumper=dumper, sort_keys=False),
                "unremovableNodes": yaml.dump(unremovable, Dumper=dumper, sort_keys=False)}
        self._write_config_map(data, now)

    def _write_config_map(self, data: dict[str, str], now: float) -> None:
        o = self.options
        annotations = {"cluster-autoscaler.kubernetes.io/last-updated": rfc3339(now)}
        for _ in range(3):
            try:
                current: Any = self.core.get(CONFIGMAP, o.namespace, o.status_config_map_name)
            except errors.StatusError as e:
                if e.code != 404:
                    raise
                current = None
            try:
                if current is None:
                    self.core.create(CONFIGMAP, {"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": o.status_config_map_name,
                                                              "namespace": o.namespace, "annotations": annotations},
                                                 "data": data})
                else:
                    meta = {**current["metadata"],
                            "annotations": {**(current["metadata"].get("annotations") or {}), **annotations}}
                    self.core.update(CONFIGMAP, {**current, "metadata": meta, "data": data})
                return
            except errors.StatusError as e:
                if e.code not in (409,):
                    raise

