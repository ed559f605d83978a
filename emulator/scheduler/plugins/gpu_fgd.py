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
the best score on that node, whole GPUs take the lowest-indexed free devices.

All hypothetical node states of one cycle (each node with the share on each
device that fits) are evaluated in one vectorised call.

Args (``pluginConfig``): ``targetWorkload``, a list of task types
``{cpuMilli, gpuCount, gpuMilli, models: [..], weight}``. Without it the
plugin learns M from the pods it has scored (the top types covering 95 %).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from emulator.api.gpu import GPURequest, TargetWorkload, fragmentation
from emulator.scheduler.framework.interface import MAX_NODE_SCORE, Handle
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import CPU, PodInfo
from emulator.scheduler.plugins.gpu_devices import DevicePolicy, NodeArrays, gpu_request_of, whole_after

NAME = "GPUFragmentation"
_RELEARN_EVERY = 100


class GPUFragmentation(DevicePolicy):
    """Score plugin: least growth of F_n(M)."""

    name = NAME

    def __init__(self, workload: TargetWorkload | None = None) -> None:
        self.workload = workload
        self._fixed = workload is not None
        self._seen: list[tuple[int, GPURequest]] = []

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
        k, d = nodes.free.shape
        device = np.full(k, -1, dtype=np.int64)
        if workload is None:
            return np.full(k, MAX_NODE_SCORE, dtype=np.int64), device
        cpu = pod.requests.get(CPU, 0)
        before = fragmentation(nodes.free, nodes.cpu_free, nodes.models, workload)
        if request.shared and d:
            # Every (node, device) placement that fits, in one call: row r is node ni[r] with the share on di[r].
            ni, di = np.nonzero(nodes.free >= request.milli)
            after = nodes.free[ni]
            after[np.arange(len(ni)), di] -= request.milli
            delta = before[ni] - fragmentation(after, nodes.cpu_free[ni] - cpu, nodes.models[ni], workload)
            order = np.lexsort((di, -delta, ni))  # per node: the largest delta first, the lowest device on ties
            first = order[np.unique(ni[order], return_index=True)[1]]
            best = np.full(k, -1e12)
            best[ni[first]] = delta[first]
            device[ni[first]] = di[first]
        else:
            after = whole_after(nodes.free, request.count) if request else nodes.free
            best = before - fragmentation(after, nodes.cpu_free - cpu, nodes.models, workload)
        scores = MAX_NODE_SCORE / (1.0 + np.exp(-np.clip(best / 1000.0, -50, 50)))
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
