"""GPUFragmentation: FGD, Fragmentation Gradient Descent (Weng et al., USENIX ATC '23).

The paper measures a node's GPU fragmentation against a target workload M
(task types m with popularity p_m): F_n(M) = sum_m p_m F_n(m), where F_n(m)
is all the node's free milli-GPU if m cannot run there (CPU, GPU model, no
device layout), else the free milli of the devices with less free than m asks
of one device (:func:`emulator.api.gpu.fragmentation`). FGD places each pod
where the fragmentation *grows least*: for every feasible node -- and, for a
GPU share, every device with room -- it computes F_n(M) before and after the
placement, and scores ``int(100 * sigmoid((before - after) / 1000))`` as the
authors' simulator does (``fgd_score.go``); a share's device is the one with
the best score on that node, whole GPUs take the lowest-indexed free devices
(the simulator's ``AllocateExclusiveGpuId``; fully free devices are alike).

F_n(M) depends on the node's state only (free milli per device, free CPU,
GPU model), and one bind changes one node. So the plugin keeps, over the
snapshot's node x device matrix, F_n(M) per node and, per pod shape (CPU,
GPU count, milli), the best placement's delta per node
(:class:`FragmentationCache`): each cycle compares the snapshot's arrays with
its copy, recomputes F_n(M) for the rows that changed, and re-evaluates a
shape's placements only on nodes changed since that shape was last scored --
all in vectorised calls (every (node, device) placement of the stale rows at
once).

Args (``pluginConfig``): ``targetWorkload``, a list of task types
``{cpuMilli, gpuCount, gpuMilli, models: [..], weight}``. Without it the
plugin learns M from the pods it has scored (the top types covering 95 %).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.api.gpu import GPURequest, TargetWorkload, fragmentation
from emulator.scheduler.framework.interface import MAX_NODE_SCORE, Handle
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import CPU, PodInfo
from emulator.scheduler.plugins.gpu_devices import (
    DevicePolicy,
    NodeArrays,
    gpu_request_of,
    node_models,
    whole_after,
    whole_devices,
)

NAME = "GPUFragmentation"
_RELEARN_EVERY = 100
_NONE_FITS = -1e12
_CACHE_ENTRIES = 2_000_000  # (shape, node) entries kept, 24 bytes each: ~48 MB, then the tables are dropped


def placement_deltas(free: np.ndarray, cpu_free: np.ndarray, models: np.ndarray, before: np.ndarray, *,
                     request: GPURequest, cpu: int, workload: TargetWorkload) -> tuple[np.ndarray, np.ndarray]:
    """Per row: F_n(M) before - after the best placement of the pod, and the share's device there (-1).

    Rows where a share fits no device get ``_NONE_FITS``; whole GPUs take
    the lowest-indexed fully free devices (which ones does not change F_n).
    """
    k, d = free.shape
    device = np.full(k, -1, dtype=np.int64)
    if request.shared and d:
        # Every (node, device) placement that fits, in one call: row r is node ni[r] with the share on di[r].
        ni, di = np.nonzero(free >= request.milli)
        after = free[ni]
        after[np.arange(len(ni)), di] -= request.milli
        delta = before[ni] - fragmentation(after, cpu_free[ni] - cpu, models[ni], workload)
        order = np.lexsort((di, -delta, ni))  # per node: the largest delta first, the lowest device on ties
        first = order[np.unique(ni[order], return_index=True)[1]]
        best = np.full(k, _NONE_FITS)
        best[ni[first]] = delta[first]
        device[ni[first]] = di[first]
        return best, device
    after = whole_after(free, request.count) if request else free
    return before - fragmentation(after, cpu_free - cpu, models, workload), device


@dataclass
class _Placements:
    """One pod shape's best placement per snapshot node, as of the node version it was computed at."""

    version: np.ndarray
    best: np.ndarray
    device: np.ndarray


class FragmentationCache:
    """F_n(M) per node and each pod shape's placement deltas, kept up to date incrementally.

    Content-addressed: a row is recomputed when the node's free devices, free
    CPU or model differ from the copy, whichever snapshot (a fork, a
    ``without_pod`` view, the next cycle's) is passed in.
    """

    def __init__(self, workload: TargetWorkload) -> None:
        self.workload = workload
        self.free: np.ndarray | None = None
        self.cpu_free = np.zeros(0, dtype=np.int64)
        self.models = np.zeros(0, dtype=object)
        self.version = np.zeros(0, dtype=np.int64)
        self.before = np.zeros(0)
        self.shapes: dict[tuple[int, int, int], _Placements] = {}

    def sync(self, snapshot: Snapshot) -> None:
        free = snapshot.device_free()
        cpu_free = snapshot.allocatable(CPU) - snapshot.requested(CPU)
        models = node_models(snapshot)
        if self.free is None or self.free.shape != free.shape:
            self.free, self.cpu_free, self.models = free.copy(), cpu_free.copy(), models
            self.before = fragmentation(free, cpu_free, models, self.workload)
            self.version = np.zeros(len(free), dtype=np.int64)
            self.shapes.clear()
            return
        changed = (free != self.free).any(axis=1) | (cpu_free != self.cpu_free)
        if models is not self.models:
            changed |= models != self.models
            self.models = models
        rows = np.flatnonzero(changed)
        if rows.size:
            self.free[rows] = free[rows]
            self.cpu_free[rows] = cpu_free[rows]
            self.before[rows] = fragmentation(free[rows], cpu_free[rows], models[rows], self.workload)
            self.version[rows] += 1

    def deltas(self, request: GPURequest, cpu: int, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Best delta and share device for nodes ``indices`` (after :meth:`sync`)."""
        assert self.free is not None
        key = (cpu, request.count, request.milli)
        entry = self.shapes.get(key)
        if entry is None:
            n = len(self.version)
            if (len(self.shapes) + 1) * n > _CACHE_ENTRIES:  # openb: ~90 shapes x 1,213 nodes, far below
                self.shapes.clear()
            entry = self.shapes[key] = _Placements(np.full(n, -1, dtype=np.int64), np.full(n, _NONE_FITS),
                                                   np.full(n, -1, dtype=np.int64))
        stale = indices[entry.version[indices] != self.version[indices]]
        if stale.size:
            best, device = placement_deltas(self.free[stale], self.cpu_free[stale], self.models[stale],
                                            self.before[stale], request=request, cpu=cpu, workload=self.workload)
            entry.best[stale] = best
            entry.device[stale] = device
            entry.version[stale] = self.version[stale]
        return entry.best[indices], entry.device[indices]


class GPUFragmentation(DevicePolicy):
    """Score plugin: least growth of F_n(M)."""

    name = NAME

    def __init__(self, workload: TargetWorkload | None = None) -> None:
        self.workload = workload
        self._fixed = workload is not None
        self._seen: list[tuple[int, GPURequest]] = []
        self._cache: FragmentationCache | None = None

    def learn(self, pod: PodInfo) -> None:
        request = gpu_request_of(pod)
        if not self._fixed and request:
            self._seen.append((pod.requests.get(CPU, 0), request))
            if self.workload is None or len(self._seen) % _RELEARN_EVERY == 0:
                self.workload = TargetWorkload.from_requests(self._seen)

    def node_scores(self, pod: PodInfo, snapshot: Snapshot | None, nodes: NodeArrays,
                    indices: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        request = gpu_request_of(pod)
        workload = self.workload
        k = nodes.free.shape[0]
        if workload is None:
            return np.full(k, MAX_NODE_SCORE, dtype=np.int64), np.full(k, -1, dtype=np.int64)
        cpu = pod.requests.get(CPU, 0)
        if snapshot is not None and indices is not None:
            if self._cache is None or self._cache.workload is not workload:
                self._cache = FragmentationCache(workload)
            self._cache.sync(snapshot)
            best, device = self._cache.deltas(request, cpu, np.asarray(indices, dtype=np.int64))
        else:  # the per-node (reference) path: straight from the definition
            before = fragmentation(nodes.free, nodes.cpu_free, nodes.models, workload)
            best, device = placement_deltas(nodes.free, nodes.cpu_free, nodes.models, before, request=request,
                                            cpu=cpu, workload=workload)
        scores = MAX_NODE_SCORE / (1.0 + np.exp(-np.clip(best / 1000.0, -50, 50)))
        if request and not request.shared:
            return scores.astype(np.int64), whole_devices(nodes.free, request.count)
        return scores.astype(np.int64), device


def parse_workload(raw: Any) -> TargetWorkload:
    if not isinstance(raw, list) or not raw:
        raise ValueError("targetWorkload: Invalid value: must be a non-empty list of task types")
    types: dict[tuple[int, int, int, frozenset[str]], float] = {}
    for i, item in enumerate(raw):
        try:
            key = (int(item.get("cpuMilli", 0)), int(item.get("gpuCount", 0)), int(item.get("gpuMilli", 0)),
                   frozenset(item.get("models") or ()))
            weight = float(item.get("weight", 1))
        except (AttributeError, TypeError, ValueError) as e:
            raise ValueError(f"targetWorkload[{i}]: Invalid value: {e}") from None
        types[key] = types.get(key, 0.0) + weight
    return TargetWorkload(types)


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> GPUFragmentation:
    raw = (args or {}).get("targetWorkload")
    return GPUFragmentation(parse_workload(raw) if raw is not None else None)
