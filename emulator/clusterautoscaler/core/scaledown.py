"""Scale-down: find unneeded nodes, and remove the ones unneeded long enough (drain, then delete).

Upstream ``core/scaledown/planner`` (which nodes are unneeded), ``eligibility``
(which nodes may be considered), ``unneeded`` (since when), ``actuation``
(taint, drain, delete) - our own Python:

**Eligibility** (per node of a node group): not annotated
``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"``
(``ScaleDownDisabledAnnotation``), not already being deleted
(``CurrentlyBeingDeleted``), Ready (``NotUnreadyLongEnough``; kemu does not
remove unready nodes), and utilization below
``--scale-down-utilization-threshold`` (``NotUnderutilized``): utilization is
``max(cpu requested / allocatable, memory requested / allocatable)`` over the
node's pods (DaemonSet pods left out with ``--ignore-daemonsets-utilization``),
``simulator/utilization/info.go``.

**Removal simulation** (``simulator/cluster.go`` ``FindNodesToRemove``):
eligible nodes are taken in order (previously unneeded first, then least
utilized), their pods to move found by :mod:`..simulator.drain` (a blocking
pod: ``BlockedByPod``), and every pod placed on another node with the
scheduler's Filter plugins - never on a node already chosen for removal in this
pass (``NoPlaceToMovePods`` otherwise). As upstream (``SimulateNodeRemoval``
forks the snapshot and reverts it), each node is simulated against the cluster
as it is: the placements of one node's pods are not kept for the next, only the
removed nodes leave the destinations; nodes are then drained one at a time and
the next scans re-check with the real state. PDB allowances are spent as nodes
are chosen.

**Actuation**: a node unneeded for ``--scale-down-unneeded-time`` is removed
when scale-down is not in cooldown (``--scale-down-delay-after-add``,
``-after-delete``, ``-after-failure``) and its group stays at or above its min
size (``NodeGroupMinSizeReached``). Empty nodes go in bulk
(``--max-empty-bulk-delete``): tainted ``ToBeDeletedByClusterAutoscaler`` and
deleted from the cloud at once (``ScaleDownEmpty``). A node with pods is
tainted, then drained through the eviction API (PDBs enforced by the API
server; refused evictions are retried every scan up to
``--max-pod-eviction-time``), and deleted from the cloud once its pods are gone
(``ScaleDown``); a drain that does not finish is abandoned, the taint removed,
and scale-down waits ``--scale-down-delay-after-failure``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from emulator.api import errors
from emulator.api.kinds import NODE
from emulator.api.types import Obj
from emulator.clusterautoscaler import metrics as m
from emulator.clusterautoscaler.cloudprovider import CloudProvider, NodeGroup
from emulator.clusterautoscaler.clusterstate import is_node_ready
from emulator.clusterautoscaler.config import AutoscalingOptions
from emulator.clusterautoscaler.simulator.drain import BlockingPod, PdbTracker, is_daemonset_pod, pods_to_move
from emulator.clusterautoscaler.simulator.scheduling import FitCache, PodSimulator
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import CPU, MEMORY
from emulator.server.core import ServerCore
from emulator.server.eviction import evict

log = logging.getLogger(__name__)

__all__ = ["TO_BE_DELETED_TAINT", "Actuator", "Planner", "Unremovable", "utilization"]

TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

# Upstream simulator.UnremovableReason names.
SCALE_DOWN_DISABLED_ANNOTATION = "ScaleDownDisabledAnnotation"
CURRENTLY_BEING_DELETED = "CurrentlyBeingDeleted"
NOT_UNREADY_LONG_ENOUGH = "NotUnreadyLongEnough"
NOT_UNDERUTILIZED = "NotUnderutilized"
BLOCKED_BY_POD = "BlockedByPod"
NO_PLACE_TO_MOVE_PODS = "NoPlaceToMovePods"
NODE_GROUP_MIN_SIZE_REACHED = "NodeGroupMinSizeReached"
NOT_UNNEEDED_LONG_ENOUGH = "NotUnneededLongEnough"


@dataclass(frozen=True)
class Unremovable:
    """Why a node stays (upstream ``simulator.UnremovableNode``)."""

    node: str
    reason: str
    blocking_pod: BlockingPod | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node, "reason": self.reason}
        if self.blocking_pod is not None:
            out["blockingPod"] = {"name": self.blocking_pod.pod, "reason": self.blocking_pod.reason}
        return out


@dataclass
class Candidate:
    """A node the simulation found removable: its pods to move (empty: an empty node)."""

    name: str
    group: NodeGroup
    pods: list[Obj]
    utilization: float


def has_to_be_deleted_taint(node: Mapping[str, Any]) -> bool:
    return any(t.get("key") == TO_BE_DELETED_TAINT for t in (node.get("spec") or {}).get("taints") or ())


def utilization(snapshot: Snapshot, *, ignore_daemonsets: bool = False) -> np.ndarray:
    """Per node, ``max(cpu, memory)`` requested / allocatable (upstream ``utilization.Calculate``), from the
    snapshot's columns; a resource a node does not offer counts 0."""
    best = np.zeros(snapshot.num_nodes, dtype=np.float64)
    for r in (CPU, MEMORY):
        alloc = snapshot.allocatable(r).astype(np.float64)
        used = snapshot.requested(r).astype(np.float64)
        if ignore_daemonsets:
            used = used.copy()
            for i, pod in snapshot.iter_pods():
                if is_daemonset_pod(pod.pod):
                    used[i] -= pod.requests.get(r, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(alloc > 0, used / np.where(alloc > 0, alloc, 1.0), 0.0)
        best = np.maximum(best, ratio)
    return best


class Planner:
    """Unneeded nodes and since when (upstream ``planner`` + ``unneeded.Nodes``)."""

    def __init__(self, options: AutoscalingOptions, provider: CloudProvider, simulator: PodSimulator) -> None:
        self.options = options
        self.provider = provider
        self.simulator = simulator
        self.since: dict[str, float] = {}  # node -> first scan it was found unneeded
        self.unneeded: dict[str, Candidate] = {}
        self.unremovable: dict[str, Unremovable] = {}

    def update(self, snapshot: Snapshot, nodes: Mapping[str, Obj], pdbs: Sequence[Obj], now: float,
               exclude: set[str]) -> None:
        """Recompute the unneeded nodes over ``snapshot`` (cluster nodes only); ``exclude``: being deleted."""
        o = self.options
        unremovable: dict[str, Unremovable] = {}
        eligible: list[tuple[int, float, int, NodeGroup]] = []
        utils = utilization(snapshot, ignore_daemonsets=o.ignore_daemonsets_utilization)
        for name, node in nodes.items():
            group = self.provider.node_group_for_node(node)
            if group is None:
                continue
            index = snapshot.index_of(name)
            if index is None:
                continue
            annotations = (node.get("metadata") or {}).get("annotations") or {}
            if annotations.get(SCALE_DOWN_DISABLED) == "true":
                unremovable[name] = Unremovable(name, SCALE_DOWN_DISABLED_ANNOTATION)
                continue
            if name in exclude or has_to_be_deleted_taint(node):
                unremovable[name] = Unremovable(name, CURRENTLY_BEING_DELETED)
                continue
            if not is_node_ready(node):
                unremovable[name] = Unremovable(name, NOT_UNREADY_LONG_ENOUGH)
                continue
            util = float(utils[index])
            if util >= o.scale_down_utilization_threshold:
                unremovable[name] = Unremovable(name, NOT_UNDERUTILIZED)
                continue
            eligible.append((0 if name in self.since else 1, util, index, group))
        eligible.sort(key=lambda e: (e[0], e[1], e[2]))
        work = snapshot.fork()
        removed = np.zeros(work.num_nodes, dtype=bool)
        for name in exclude:
            i = work.index_of(name)
            if i is not None:
                removed[i] = True
        pdb = PdbTracker(pdbs)
        fits = FitCache(self.simulator, work)
        found: dict[str, Candidate] = {}
        for _, util, index, group in eligible:
            name = work.node_names[index]
            infos = {p.key: p for p in work.pods_on(index)}
            movable, blocking = pods_to_move([p.pod for p in infos.values()], o, pdb, now)
            if blocking is not None:
                unremovable[name] = Unremovable(name, BLOCKED_BY_POD, blocking)
                continue
            if movable:
                trial = work.fork()
                for pod in movable:
                    trial.forget(pod, index)
                removed[index] = True
                ok = True
                destinations = ~removed
                for pod in movable:
                    info = infos[f"{pod['metadata'].get('namespace')}/{pod['metadata'].get('name')}"]
                    target = fits.first_fit(info, trial, destinations, base=work)
                    if target is None:
                        ok = False
                        break
                    trial.assume(info, target)
                    fits.assumed(info)
                if not ok:
                    removed[index] = False
                    unremovable[name] = Unremovable(name, NO_PLACE_TO_MOVE_PODS)
                    continue
                pdb.spend(movable)  # the trial is dropped: upstream reverts the fork
            removed[index] = True
            found[name] = Candidate(name, group, movable, util)
        self.since = {name: self.since.get(name, now) for name in found}
        self.unneeded = found
        self.unremovable = unremovable
        m.UNNEEDED.set(len(found))

    def removable_now(self, now: float) -> list[Candidate]:
        """Unneeded nodes whose unneeded time has passed, in simulation order."""
        wait = self.options.scale_down_unneeded_time
        return [c for name, c in self.unneeded.items() if now - self.since[name] >= wait]


@dataclass
class Drain:
    node: str
    group: NodeGroup
    started: float
    pods: list[Obj] = field(default_factory=list)


class Actuator:
    """Taints, drains and deletes (upstream ``actuation.Actuator``); one drain at a time."""

    def __init__(self, core: ServerCore, options: AutoscalingOptions, event: Callable[[Obj, str, str, str], None],
                 log_event: Callable[[str, str], None] = lambda reason, message: None) -> None:
        self.core = core
        self.options = options
        self.event = event
        self.log_event = log_event  # upstream's LogRecorder: events on the status ConfigMap
        self.draining: dict[str, Drain] = {}
        self.last_delete = float("-inf")
        self.last_failure = float("-inf")

    # ------------------------------------------------------------------ taints
    def _set_taint(self, name: str, now: float, present: bool) -> Obj | None:
        for _ in range(5):
            try:
                node = self.core.get(NODE, None, name)
            except errors.StatusError as e:
                if e.code == 404:
                    return None
                raise
            taints = [t for t in (node.get("spec") or {}).get("taints") or () if t.get("key") != TO_BE_DELETED_TAINT]
            if present:
                taints.append({"key": TO_BE_DELETED_TAINT, "value": str(int(now)), "effect": "NoSchedule"})
            elif len(taints) == len((node.get("spec") or {}).get("taints") or ()):
                return node
            try:
                return self.core.update(NODE, {**node, "spec": {**(node.get("spec") or {}), "taints": taints}})
            except errors.StatusError as e:
                if e.code != 409:
                    raise
        return None

    def clean_taints(self, nodes: Sequence[Obj], now: float) -> None:
        """Startup: nodes a previous autoscaler left tainted get their taint back off (upstream
        ``CleanAllToBeDeleted``)."""
        for node in nodes:
            if has_to_be_deleted_taint(node) and node["metadata"]["name"] not in self.draining:
                self._set_taint(node["metadata"]["name"], now, present=False)

    # ------------------------------------------------------------------ deleting
    def start(self, candidates: Sequence[Candidate], groups: Mapping[str, tuple[int, int]], now: float,
              record: Callable[[str, Unremovable], None]) -> list[str]:
        """Begin removing ``candidates`` (empty ones in bulk, one drain); returns the nodes deleted now.

        ``groups``: group -> (target size, min size); a group is never taken below its min.
        """
        left = {g: target - size_min for g, (target, size_min) in groups.items()}
        for d in self.draining.values():
            left[d.group.id()] = left.get(d.group.id(), 0) - 1
        deleted: list[str] = []
        empty = [c for c in candidates if not c.pods]
        for c in empty[: self.options.max_empty_bulk_delete]:
            node = self._claim(c, left, record, now)
            if node is None:
                continue
            c.group.delete_nodes([c.name])
            message = f'Scale-down: removing empty node "{c.name}"'
            self.log_event("ScaleDownEmpty", message)
            self.event(node, "Normal", "ScaleDownEmpty", message)
            m.SCALED_DOWN.labels("empty").inc()
            self.last_delete = now
            deleted.append(c.name)
        if self.draining:
            return deleted
        for c in candidates:
            if not c.pods:
                continue
            node = self._claim(c, left, record, now)
            if node is None:
                continue
            self.event(node, "Normal", "ScaleDown", "marked the node as toBeDeleted/unschedulable")
            names = ",".join(f"{(p.get('metadata') or {}).get('namespace')}/{(p.get('metadata') or {}).get('name')}"
                             for p in c.pods)
            self.log_event("ScaleDown", f"Scale-down: removing node {c.name}, utilization: {c.utilization:.2f}, "
                                        f"pods to reschedule: {names}")
            self.draining[c.name] = Drain(c.name, c.group, now, list(c.pods))
            self._evict(c.pods, now)
            break
        return deleted

    def _claim(self, c: Candidate, left: dict[str, int], record: Callable[[str, Unremovable], None],
               now: float) -> Obj | None:
        """Take ``c`` for deletion if its group stays at or above its min: taint it, count it off the group's
        room; the tainted node, or None (the group is at its min - recorded - or the node is gone)."""
        if left.get(c.group.id(), 0) <= 0:
            record(c.name, Unremovable(c.name, NODE_GROUP_MIN_SIZE_REACHED))
            return None
        node = self._set_taint(c.name, now, present=True)
        if node is not None:
            left[c.group.id()] -= 1
        return node

    def _evict(self, pods: Sequence[Obj], now: float) -> int:
        """Evict what is not already going; returns how many evictions the API server refused."""
        refused = 0
        for pod in pods:
            meta = pod.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            grace = min(30 if grace is None else int(grace), self.options.max_graceful_termination_sec)
            body = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
                    "deleteOptions": {"gracePeriodSeconds": grace}}
            try:
                evict(self.core, meta.get("namespace") or "", meta.get("name") or "", body)
                self.event(pod, "Normal", "ScaleDown", "deleting pod for node scale down")
            except errors.StatusError as e:
                if e.code != 404:
                    refused += 1
        return refused

    def progress(self, pods_on: Callable[[str], list[Obj]], now: float) -> list[str]:
        """Carry on with the drains: evict again what is left, delete drained nodes, give up on stuck ones."""
        done: list[str] = []
        for name, drain in list(self.draining.items()):
            left = [p for p in pods_on(name) if not is_daemonset_pod(p)
                    and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            if not left:
                drain.group.delete_nodes([name])
                del self.draining[name]
                m.SCALED_DOWN.labels("underutilized").inc()
                self.last_delete = now
                node = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name}}
                self.event(node, "Normal", "ScaleDown", "node removed by cluster autoscaler")
                done.append(name)
                continue
            limit = self.options.max_pod_eviction_time + self.options.max_graceful_termination_sec
            if now - drain.started > limit:
                log.warning("cluster-autoscaler: draining %s did not finish in %.0f s; giving up", name, limit)
                del self.draining[name]
                self._set_taint(name, now, present=False)
                self.last_failure = now
                continue
            if now - drain.started <= self.options.max_pod_eviction_time:
                self._evict(left, now)
        return done

    def in_cooldown(self, last_scale_up: float, now: float) -> bool:
        o = self.options
        return (now < last_scale_up + o.scale_down_delay_after_add
                or now < self.last_delete + o.delay_after_delete
                or now < self.last_failure + o.scale_down_delay_after_failure)
