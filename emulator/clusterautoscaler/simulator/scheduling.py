"""Would this pod fit there? The scheduler's own PreFilter and Filter plugins over a snapshot.

Upstream ``simulator/scheduling/hinting_simulator.go`` and
``simulator/clustersnapshot``: the Cluster Autoscaler asks the scheduler
framework - the same plugins, the same code - whether a pod fits a node of a
(hypothetical) cluster. kemu's framework is already a pure function over an
array-backed :class:`~emulator.scheduler.framework.snapshot.Snapshot`, so a
"what if" is a fork of the snapshot (copy-on-write), pods assumed or forgotten
in place, nodes added with ``add_node``, and one vectorised Filter pass over
every candidate node per pod.

:class:`PodSimulator` wraps one framework (upstream's default profile) and
answers: the nodes a pod fits among candidates (:meth:`feasible`), the first of
them (:meth:`first_fit`, upstream's hinting simulator without the hints: first
fit in node order), and why a pod does not fit a node (:meth:`reasons_on`).

Pods are grouped into *equivalence groups* (upstream
``core/utils/pod_equivalence``: same controller, same spec): what the filters
say about one pod of a group on a node holds for all of them, which keeps a
scan over 1,000 pending pods at a handful of Filter passes.

:class:`FitCache` is what makes placing thousands of pods one after another
cheap (filter-out-schedulable, the scale-down simulation). Within one pass pods
are only ever *added* to the nodes they may go to, so a node's room only
shrinks: the nodes the plugins accepted for the first pod of an equivalence
group are a superset of the nodes any later pod of the group fits. For a
*simple* pod (:func:`is_simple`: no host ports, no inter-pod (anti-)affinity,
no topology spread) nothing but room can change that verdict - as long as no
pod in the snapshot carries a required anti-affinity term (then the cache steps
aside) - so a later pod needs only NodeResourcesFit's rule on those nodes, one
vectorised comparison, instead of a full PreFilter + Filter pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from emulator.scheduler import new_framework
from emulator.scheduler.framework.interface import CycleState
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo

__all__ = ["FitCache", "PodSimulator", "equivalence_key", "is_simple", "unbound"]

_EMPTY = np.zeros(0, dtype=np.intp)
_SPEC_IGNORED = ("nodeName",)


def equivalence_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    """Pods of one controller with the same spec and labels are equivalent
    (upstream ``groupPodsBySchedulingProperties``)."""
    meta = pod.get("metadata") or {}
    owner = next((r.get("uid") or r.get("name") or "" for r in meta.get("ownerReferences") or ()
                  if r.get("controller")), "")
    if not owner:
        return (f"pod:{meta.get('namespace')}/{meta.get('name')}", "")
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k not in _SPEC_IGNORED}
    return (owner, json.dumps([spec, meta.get("labels") or {}], sort_keys=True, default=str))


def is_simple(info: PodInfo) -> bool:
    """A pod whose fit on an empty node of a group depends only on room: no host ports, no inter-pod
    (anti-)affinity, no topology spread. Such pods are packed by arithmetic once the plugins accepted
    the group's template (see :mod:`emulator.clusterautoscaler.estimator.binpacking`)."""
    spec = info.pod.get("spec") or {}
    affinity = info.affinity or {}
    return not (info.host_ports or spec.get("topologySpreadConstraints") or affinity.get("podAffinity")
                or affinity.get("podAntiAffinity"))


class PodSimulator:
    """The default profile's PreFilter and Filter plugins as a fit oracle (see the module docstring)."""

    def __init__(self) -> None:
        self.framework = new_framework()
        self.filter_runs = 0

    def feasible(self, pod: PodInfo, snapshot: Snapshot, candidates: np.ndarray | None = None) -> np.ndarray:
        """Indices (among ``candidates``, default all nodes) of the nodes ``pod`` fits, in node order."""
        if snapshot.num_nodes == 0 or (candidates is not None and len(candidates) == 0):
            return _EMPTY
        self.filter_runs += 1
        fw = self.framework
        state = CycleState()
        pre, status, _ = fw.run_pre_filter_plugins(state, pod, snapshot)
        if status is not None and status.is_rejected():
            return _EMPTY
        nodes = None if candidates is None else np.asarray(candidates, dtype=np.intp)
        if pre is not None and not pre.all_nodes():
            allowed = {i for name in pre.node_names or () if (i := snapshot.index_of(name)) is not None}
            base = range(snapshot.num_nodes) if nodes is None else nodes.tolist()
            nodes = np.asarray(sorted(i for i in base if i in allowed), dtype=np.intp)
            if not len(nodes):
                return _EMPTY
        mask, _ = fw.run_filter_plugins(state, pod, snapshot, nodes)
        return np.flatnonzero(mask)

    def first_fit(self, pod: PodInfo, snapshot: Snapshot, candidates: np.ndarray | None = None) -> int | None:
        found = self.feasible(pod, snapshot, candidates)
        return int(found[0]) if len(found) else None

    def reasons_on(self, pod: PodInfo, snapshot: Snapshot, index: int) -> list[str]:
        """Why ``pod`` does not fit node ``index`` (the rejecting plugin's reasons; [] if it fits)."""
        fw = self.framework
        state = CycleState()
        self.filter_runs += 1
        _, status, _ = fw.run_pre_filter_plugins(state, pod, snapshot)
        if status is not None and status.is_rejected():
            return status.all_reasons() or [status.message]
        mask, statuses = fw.run_filter_plugins(state, pod, snapshot, np.asarray([index], dtype=np.intp))
        if mask[index]:
            return []
        found = statuses.get(snapshot.node_names[index])
        return (found.all_reasons() if found is not None else []) or ["node(s) didn't fit"]


def unbound(info: PodInfo) -> PodInfo:
    """The pod as the scheduler sees it before binding (no ``spec.nodeName``: NodeName would pin it)."""
    if not info.node_name:
        return info
    pod = info.pod
    return PodInfo({**pod, "spec": {**(pod.get("spec") or {}), "nodeName": ""}})


def has_required_anti_affinity(info: PodInfo) -> bool:
    anti = (info.affinity or {}).get("podAntiAffinity") or {}
    return bool(anti.get("requiredDuringSchedulingIgnoredDuringExecution"))


class FitCache:
    """First fit for many pods over one pass whose nodes only lose room (see the module docstring)."""

    def __init__(self, simulator: PodSimulator, snapshot: Snapshot) -> None:
        self.simulator = simulator
        self.enabled = not any(has_required_anti_affinity(p) for _, p in snapshot.iter_pods())
        self.masks: dict[tuple[str, str], np.ndarray] = {}
        self.hits = 0

    def assumed(self, info: PodInfo) -> None:
        """Call after placing ``info``: a pod with required anti-affinity switches the cache off."""
        if self.enabled and has_required_anti_affinity(info):
            self.enabled = False
            self.masks.clear()

    def first_fit(self, info: PodInfo, snapshot: Snapshot, allowed: np.ndarray | None = None,
                  base: Snapshot | None = None) -> int | None:
        """The first node (in node order, among ``allowed`` - a bool mask - if given) ``info`` fits.

        ``base``: a snapshot with at least as much room on every allowed node as ``snapshot`` (the pass's
        committed state, when ``snapshot`` is a trial on top of it); the plugins' verdict is taken there.
        """
        if not self.enabled or not info.memo("ca/simple", is_simple):
            return self.simulator.first_fit(unbound(info), snapshot,
                                            None if allowed is None else np.flatnonzero(allowed))
        key = info.memo("ca/equivalence", lambda i: equivalence_key(i.pod))
        mask = self.masks.get(key)
        if mask is None or len(mask) != snapshot.num_nodes:
            source = base if base is not None and base.num_nodes == snapshot.num_nodes else snapshot
            mask = np.zeros(snapshot.num_nodes, dtype=bool)
            mask[self.simulator.feasible(unbound(info), source)] = True
            self.masks[key] = mask
        else:
            self.hits += 1
        cand = np.flatnonzero(mask if allowed is None else mask & allowed)
        if not len(cand):
            return None
        ok = snapshot.pod_counts[cand] < snapshot.allowed_pods[cand]
        names = snapshot.resource_names
        for r, amount in info.requests.items():
            if r not in names:
                return None
            ok &= snapshot.requested(r)[cand] + amount <= snapshot.allocatable(r)[cand]
        hit = np.flatnonzero(ok)
        return int(cand[hit[0]]) if len(hit) else None


def template_snapshot(nodes: Iterable[Mapping[str, Any]]) -> Snapshot:
    """A snapshot of only ``nodes`` (empty template nodes), for a quick "does it fit a new node" check."""
    return Snapshot.build(list(nodes))
