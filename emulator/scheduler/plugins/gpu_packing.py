"""GPUPacking: the FGD paper's GPU Packing baseline -- partly used devices first, then used nodes, then idle ones.

The authors' simulator (``gpu_packing_score.go``) ranks three cases, high to low:

1. the pod fits on devices already partly used: ``100 - (free % of the
   chosen devices) / 10``, at least 50;
2. it needs fully free devices on a node already in use:
   ``50 - fully free devices taken``, at least 33;
3. the node's GPUs are all free: ``max(33 - its free devices, its free
   devices)``.

The device is the fitting one with the least free milli (fully free devices
by index for whole GPUs). GPU-less pods score 0 everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from emulator.api.gpu import MILLI
from emulator.scheduler.framework.interface import MAX_NODE_SCORE, Handle
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.plugins.gpu_devices import (
    DevicePolicy,
    NodeArrays,
    gpu_request_of,
    tightest_device,
    whole_devices,
)

NAME = "GPUPacking"


class GPUPacking(DevicePolicy):
    """Score plugin: the three packing cases above."""

    name = NAME

    def node_scores(self, pod: PodInfo, snapshot: Snapshot | None, nodes: NodeArrays,
                    indices: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        request = gpu_request_of(pod)
        k = nodes.free.shape[0]
        device = np.full(k, -1, dtype=np.int64)
        if not request or not nodes.free.shape[1]:
            return np.zeros(k, dtype=np.int64), device
        fully = ((nodes.free >= MILLI) & nodes.exists).sum(axis=1)
        devices = nodes.exists.sum(axis=1)
        idle = fully == devices
        case3 = np.maximum(MAX_NODE_SCORE // 3 - fully, fully)
        if request.shared:
            device = tightest_device(nodes.free, request.milli)
            chosen_free = nodes.free[np.arange(k), np.maximum(device, 0)]
            uses_free = chosen_free >= MILLI
            case1 = np.maximum(MAX_NODE_SCORE - (chosen_free * 100 // MILLI) // 10, MAX_NODE_SCORE // 2)
            case2 = np.maximum(MAX_NODE_SCORE // 2 - 1, MAX_NODE_SCORE // 3)
            scores = np.where(uses_free, case2, case1)
        else:
            scores = np.full(k, max(MAX_NODE_SCORE // 2 - request.count, MAX_NODE_SCORE // 3), dtype=np.int64)
            device = whole_devices(nodes.free, request.count)
        return np.where(idle, case3, scores).astype(np.int64), device


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> GPUPacking:
    return GPUPacking()
