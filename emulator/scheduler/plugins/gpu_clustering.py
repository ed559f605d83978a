"""GPUClustering: the FGD paper's GPU Clustering baseline -- pods of one GPU kind together.

As the authors' simulator (``gpu_clustering_score.go``): a pod's GPU kind
is ``share`` for a GPU share and ``<N>-gpu`` for N whole GPUs. A node scores
in one of four bands by the kinds of the GPU pods it runs, then higher
within the band the less GPU it has free (``25 * (8000 - free milli) //
8000``):

* (75, 100] only pods of the pod's kind;  (50, 75] that kind among others;
* (25, 50] no GPU pods at all;            (0, 25] only other kinds.

GPU-less pods score 0 everywhere. The kinds per node are recomputed only for
nodes whose pod list changed since the last cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from emulator.api.gpu import GPURequest
from emulator.scheduler.framework.interface import MAX_NODE_SCORE, CycleState, Handle, Status
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import NodeInfo, PodInfo
from emulator.scheduler.plugins.gpu_devices import (
    DevicePolicy,
    NodeArrays,
    gpu_request_of,
    tightest_device,
    whole_devices,
)

NAME = "GPUClustering"
MAX_SPEC_GPU = 8000


def kind(request: GPURequest) -> str:
    return "share" if request.shared else f"{request.count}-gpu"


def _kinds(pods: tuple[PodInfo, ...]) -> frozenset[str]:
    return frozenset(kind(r) for r in (gpu_request_of(p) for p in pods) if r)


class GPUClustering(DevicePolicy):
    """Score plugin: the four bands above."""

    name = NAME

    def __init__(self) -> None:
        self._cache: dict[int, tuple[tuple[PodInfo, ...], frozenset[str]]] = {}
        self._node_pods: tuple[PodInfo, ...] = ()

    def _node_kinds(self, snapshot: Snapshot, i: int) -> frozenset[str]:
        pods = snapshot.pods_on(i)
        hit = self._cache.get(i)
        if hit is None or hit[0] is not pods:
            hit = self._cache[i] = (pods, _kinds(pods))
        return hit[1]

    def node_scores(self, pod: PodInfo, snapshot: Snapshot | None, nodes: NodeArrays,
                    indices: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        request = gpu_request_of(pod)
        k = nodes.free.shape[0]
        if not request:
            return np.zeros(k, dtype=np.int64), np.full(k, -1, dtype=np.int64)
        if snapshot is not None and indices is not None:
            if snapshot.num_nodes < len(self._cache):
                self._cache.clear()
            kinds = [self._node_kinds(snapshot, int(i)) for i in indices]
        else:
            kinds = [_kinds(self._node_pods)]
        mine = kind(request)
        band = np.asarray([(3 if len(s) == 1 else 2) if mine in s else (1 if not s else 0) for s in kinds],
                          dtype=np.int64)
        within = MAX_NODE_SCORE // 4 * (MAX_SPEC_GPU - nodes.free.sum(axis=1)) // MAX_SPEC_GPU
        device = tightest_device(nodes.free, request.milli) if request.shared else \
            whole_devices(nodes.free, request.count)
        return (band * MAX_NODE_SCORE // 4 + within).astype(np.int64), device

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        self._node_pods = node.pods
        return super().score(state, pod, node)


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> GPUClustering:
    return GPUClustering()
