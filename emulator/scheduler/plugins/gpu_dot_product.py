"""GPUDotProduct: the Tetris-style DotProduct baseline of the FGD paper, per GPU device.

Upstream of nothing in Kubernetes; the authors' simulator
(``dot_product_score.go``) scores a node by the dot product of its free
resource vector and the pod's request vector, both normalised by the node's
capacity, over (CPU, GPU). For a GPU share the GPU dimension is one device's
free milli (each fitting device is a candidate and the best one is the
choice); for whole GPUs and GPU-less pods it is the node's total (whole GPUs take the
lowest-indexed fully free devices: they are alike). As in that
simulator the score is ``100 * (1 - dot / dimensions)``: the node whose free
vector aligns *least* with the request -- the one it fills up most -- wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from emulator.api.gpu import MILLI
from emulator.scheduler.framework.interface import MAX_NODE_SCORE, Handle
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import CPU, PodInfo
from emulator.scheduler.plugins.gpu_devices import DevicePolicy, NodeArrays, gpu_request_of, whole_devices

NAME = "GPUDotProduct"


def _ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.divide(a, b, out=np.zeros(np.broadcast(a, b).shape, dtype=np.float64), where=b > 0)


class GPUDotProduct(DevicePolicy):
    """Score plugin: 100 * (1 - <free/capacity, request/capacity> / 2) over (cpu, gpu)."""

    name = NAME

    def node_scores(self, pod: PodInfo, snapshot: Snapshot | None, nodes: NodeArrays,
                    indices: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        request = gpu_request_of(pod)
        cpu = pod.requests.get(CPU, 0)
        alloc = nodes.cpu_alloc.astype(np.float64)
        cpu_dot = _ratio(nodes.cpu_free, alloc) * _ratio(np.full_like(alloc, cpu), alloc)
        k = nodes.free.shape[0]
        device = np.full(k, -1, dtype=np.int64)
        if request.shared and nodes.free.shape[1]:
            per_device = (cpu_dot[:, None] + (nodes.free / MILLI) * (request.milli / MILLI)) / 2
            score = np.where(nodes.free >= request.milli, 1.0 - per_device, -1.0)
            device = np.argmax(score, axis=1)
            best = score[np.arange(k), device]
            device = np.where(best >= 0, device, -1)
            return (np.maximum(best, 0) * MAX_NODE_SCORE).astype(np.int64), device
        capacity = (nodes.exists * MILLI).sum(axis=1).astype(np.float64)
        gpu_dot = _ratio(nodes.free.sum(axis=1), capacity) * _ratio(np.full_like(capacity, request.total_milli),
                                                                    capacity)
        if request:
            device = whole_devices(nodes.free, request.count)
        return ((1.0 - (cpu_dot + gpu_dot) / 2) * MAX_NODE_SCORE).astype(np.int64), device


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> GPUDotProduct:
    return GPUDotProduct()
