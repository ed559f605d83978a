"""GPURandom: the FGD paper's Random baseline -- a uniformly random score per node and a random fitting device.

After the device-aware Filter (:mod:`.gpushare`), every feasible node gets a
score drawn uniformly from 0..100, a share goes to a random device with
room and whole GPUs to random fully free devices; the seed comes from the plugin args (``seed``, default 0), so runs
reproduce. The authors' simulator's ``RandomScore`` plugin plays the same role.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from emulator.scheduler.framework.interface import MAX_NODE_SCORE, Handle
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.plugins.gpu_devices import DevicePolicy, NodeArrays, gpu_request_of, whole_devices

NAME = "GPURandom"


class GPURandom(DevicePolicy):
    """Score plugin: random scores, random fitting device."""

    name = NAME

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def node_scores(self, pod: PodInfo, snapshot: Snapshot | None, nodes: NodeArrays,
                    indices: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        k = nodes.free.shape[0]
        scores = self.rng.integers(0, MAX_NODE_SCORE + 1, size=k, dtype=np.int64)
        request = gpu_request_of(pod)
        device = np.full(k, -1, dtype=np.int64)
        if request.shared and nodes.free.shape[1]:
            keys = np.where(nodes.free >= request.milli, self.rng.random(nodes.free.shape), -1.0)
            best = np.argmax(keys, axis=1)
            device = np.where(keys[np.arange(k), best] >= 0, best, -1)
        elif request and nodes.free.shape[1]:
            device = whole_devices(nodes.free, request.count, self.rng.random(nodes.free.shape))
        return scores, device


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> GPURandom:
    return GPURandom(int((args or {}).get("seed") or 0))
