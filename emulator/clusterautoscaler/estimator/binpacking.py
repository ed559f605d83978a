"""How many new nodes of a group the pending pods need: first-fit bin packing (upstream
``estimator/binpacking_estimator.go``).

Pods are taken largest first (upstream ``calculatePodScore``: cpu request /
node cpu + memory request / node memory) and each goes to the first new node it
fits, the last opened node first; a pod that fits none opens one more node, up
to ``limit``. A pod that does not fit even an empty node is left out.

Two ways to decide "fits", same answer:

* **pods with inter-pod constraints or host ports** (topology spread, pod
  (anti-)affinity, ``hostPort``): the scheduler's Filter plugins on the cluster
  snapshot with the new nodes added (``Snapshot.add_node``), candidates
  restricted to the new nodes - upstream's way for every pod;
* **the other pods**: whether they fit a node of the group at all was settled by
  the plugins on the group's template (node affinity, taints, selectors - equal
  on every new node of the group); what remains is NodeResourcesFit's rule
  (requests + the node's requested <= allocatable, pod count < allowed pods),
  kept as a row of int64 per new node, so packing 1,000 pods is a few thousand
  numpy operations instead of a thousand Filter passes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from emulator.api.types import Obj
from emulator.clusterautoscaler.simulator.scheduling import PodSimulator, is_simple
from emulator.kubelet.nodes import LABEL_HOSTNAME
from emulator.scheduler.framework.snapshot import Snapshot, node_allocatable
from emulator.scheduler.framework.types import CPU, MEMORY, PodInfo

__all__ = ["BinpackingEstimator", "Estimate", "pod_score"]


@dataclass
class Estimate:
    """``node_count`` new nodes hold ``pods``; ``per_node`` lists each node's pods."""

    node_count: int
    pods: list[PodInfo]
    per_node: list[list[PodInfo]] = field(default_factory=list)


def pod_score(pod: PodInfo, alloc: Mapping[str, int]) -> float:
    """Upstream ``calculatePodScore``: the pod's cpu and memory as fractions of the node's, summed."""
    score = 0.0
    for r in (CPU, MEMORY):
        if alloc.get(r):
            score += pod.requests.get(r, 0) / alloc[r]
    return score


def new_node(template: Mapping[str, Any], name: str) -> Obj:
    node = copy.deepcopy(dict(template))
    node["metadata"]["name"] = name
    node["metadata"]["labels"] = {**(node["metadata"].get("labels") or {}), LABEL_HOSTNAME: name}
    return node


class BinpackingEstimator:
    """See the module docstring."""

    def __init__(self, simulator: PodSimulator) -> None:
        self.simulator = simulator

    def estimate(self, pods: Sequence[PodInfo], template: Mapping[str, Any], limit: int,
                 snapshot: Snapshot | None = None) -> Estimate:
        if limit <= 0 or not pods:
            return Estimate(0, [])
        alloc, allowed = node_allocatable(template)
        ordered = sorted(pods, key=lambda p: -pod_score(p, alloc))
        if all(is_simple(p) for p in ordered):
            return self._by_arithmetic(ordered, alloc, allowed, limit)
        return self._by_plugins(ordered, template, limit, snapshot if snapshot is not None else Snapshot.build([]))

    @staticmethod
    def _by_arithmetic(pods: Sequence[PodInfo], alloc: Mapping[str, int], allowed: int, limit: int) -> Estimate:
        names = sorted({r for p in pods for r in p.requests} | {CPU, MEMORY})
        cap = np.asarray([alloc.get(r, 0) for r in names], dtype=np.int64)
        rows = min(limit, len(pods))
        used = np.zeros((rows, len(names)), dtype=np.int64)
        counts = np.zeros(rows, dtype=np.int64)
        per_node: list[list[PodInfo]] = []
        placed: list[PodInfo] = []
        opened = 0
        for pod in pods:
            req = np.asarray([pod.requests.get(r, 0) for r in names], dtype=np.int64)
            if allowed < 1 or np.any(req > cap):
                continue  # does not fit even an empty node
            index = -1
            last = opened - 1
            if opened and counts[last] < allowed and np.all(used[last] + req <= cap):
                index = last
            elif opened > 1:
                fits = np.all(used[:opened] + req <= cap, axis=1) & (counts[:opened] < allowed)
                if fits.any():
                    index = int(np.argmax(fits))
            if index < 0:
                if opened >= rows:
                    continue
                index = opened
                opened += 1
                per_node.append([])
            used[index] += req
            counts[index] += 1
            per_node[index].append(pod)
            placed.append(pod)
        return Estimate(opened, placed, per_node)

    def _by_plugins(self, pods: Sequence[PodInfo], template: Mapping[str, Any], limit: int,
                    snapshot: Snapshot) -> Estimate:
        sim = self.simulator
        base = (template.get("metadata") or {}).get("name") or "template"
        est = snapshot
        new: list[int] = []  # new nodes with pods, in opening order
        spare: int | None = None  # a new node nothing fitted yet (kept for the next pod)
        per_node: dict[int, list[PodInfo]] = {}
        placed: list[PodInfo] = []
        for pod in pods:
            index = None
            if new:
                last = np.asarray([new[-1]], dtype=np.intp)
                index = sim.first_fit(pod, est, last)
                if index is None and len(new) > 1:
                    index = sim.first_fit(pod, est, np.asarray(new[:-1], dtype=np.intp))
            if index is None:
                if spare is None:
                    if len(new) >= limit:
                        continue
                    est = est.add_node(new_node(template, f"{base}-estimate-{len(new)}"))
                    spare = est.num_nodes - 1
                index = sim.first_fit(pod, est, np.asarray([spare], dtype=np.intp))
                if index is None:
                    continue  # does not fit an empty node of the group
                new.append(spare)
                spare = None
            if est is snapshot:
                est = est.fork()
            est.assume(pod, index)
            per_node.setdefault(index, []).append(pod)
            placed.append(pod)
        return Estimate(len(new), placed, [per_node[i] for i in new])
