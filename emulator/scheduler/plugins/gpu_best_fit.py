"""GPUBestFit: the FGD paper's Best-Fit baseline -- the node left with the least free CPU and GPU wins.

As the authors' simulator (``best_fit_score.go``): the weighted remaining
resources after placement, ``0.5 * (cpu free - cpu request) / 128 cores +
0.5 * (GPU free - GPU request) / 8 GPUs`` (lower is better), reversed onto
0..100: ``int(100 * (1 - that))``. A share goes to the fitting device with
the least free milli; whole GPUs the lowest-indexed fully free devices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from emulator.api.gpu import MILLI
from emulator.scheduler.framework.interface import MAX_NODE_SCORE, Handle
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import CPU, PodInfo
from emulator.scheduler.plugins.gpu_devices import (
    DevicePolicy,
    NodeArrays,
    gpu_request_of,
    tightest_device,
    whole_devices,
)

NAME = "GPUBestFit"
MAX_SPEC_CPU = 128_000  # millicores: the normalisers of the simulator (its largest node shapes)
MAX_SPEC_GPU = 8 * MILLI


class GPUBestFit(DevicePolicy):
    """Score plugin: least weighted CPU + GPU left after placement."""

    name = NAME

    def node_scores(self, pod: PodInfo, snapshot: Snapshot | None, nodes: NodeArrays,
                    indices: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        request = gpu_request_of(pod)
        left = (0.5 * (nodes.cpu_free - pod.requests.get(CPU, 0)) / MAX_SPEC_CPU
                + 0.5 * (nodes.free.sum(axis=1) - request.total_milli) / MAX_SPEC_GPU)
        device = tightest_device(nodes.free, request.milli) if request.shared else \
            whole_devices(nodes.free, request.count)
        return np.clip((1.0 - left) * MAX_NODE_SCORE, 0, MAX_NODE_SCORE).astype(np.int64), device


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> GPUBestFit:
    return GPUBestFit()
