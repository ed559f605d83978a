"""Shared by the GPU-sharing plugins (not a plugin): per-node device arrays and the device each policy chose.

The policies of the GPU-sharing literature (the FGD paper's baselines, as in
the authors' simulator ``hkust-adsl/kubernetes-scheduler-simulator``) score a
node *and* pick the device a GPU share goes to. Score plugins call
:func:`node_arrays` for the candidate nodes' devices (or :func:`one_node` in
the per-node path), score them, and record the chosen device per node with
:func:`record_choice`; the GPUShare plugin's Reserve reads the choice for the
node the framework selected and writes it as the pod's
``alibabacloud.com/gpu-index`` annotation at bind. When only one node is
feasible the framework skips scoring (as upstream), so each policy also
leaves a chooser in the CycleState at PreFilter (:class:`DevicePolicy`),
which Reserve asks for that one node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from emulator.api.gpu import GPU_MODEL_LABEL, MILLI, GPURequest
from emulator.scheduler.framework.devices import pod_gpu_request
from emulator.scheduler.framework.interface import CycleState, PreFilterResult, Status
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import CPU, NodeInfo, PodInfo

__all__ = ["CHOICE_KEY", "CHOOSER_KEY", "DevicePolicy", "NodeArrays", "gpu_request_of", "node_arrays", "one_node",
           "record_choice", "tightest_device", "whole_after"]

CHOICE_KEY = "GPUShare/choice"
CHOOSER_KEY = "GPUShare/chooser"


@dataclass(frozen=True)
class NodeArrays:
    """Candidate nodes' GPU state: free milli per device (K x D), device exists (K x D), free CPU, GPU model."""

    free: np.ndarray
    exists: np.ndarray
    cpu_free: np.ndarray
    cpu_alloc: np.ndarray
    models: np.ndarray  # object array of model names ("" without the label)


def gpu_request_of(pod: PodInfo) -> GPURequest:
    return pod_gpu_request(pod)


def _models(snapshot: Snapshot) -> np.ndarray:
    def compute() -> np.ndarray:
        column = snapshot.label_column(GPU_MODEL_LABEL)
        table = np.asarray([*column.values, ""], dtype=object)
        return table[column.codes]
    return snapshot.node_memo(("gpu-devices", "models"), compute)


def node_arrays(snapshot: Snapshot, nodes: np.ndarray) -> NodeArrays:
    capacity = snapshot.device_capacity()[nodes]
    free = snapshot.device_free()[nodes]
    cpu_alloc = snapshot.allocatable(CPU)[nodes]
    return NodeArrays(free, capacity > 0, cpu_alloc - snapshot.requested(CPU)[nodes], cpu_alloc,
                      _models(snapshot)[nodes])


def one_node(node: NodeInfo) -> NodeArrays:
    """The same arrays for one node of the per-node (reference) path."""
    free = np.asarray([list(node.device_free)], dtype=np.int64).reshape(1, len(node.device_free))
    cpu_alloc = node.allocatable.get(CPU, 0)
    return NodeArrays(free, np.ones_like(free, dtype=bool), np.asarray([cpu_alloc - node.requested.get(CPU, 0)]),
                      np.asarray([cpu_alloc]), np.asarray([node.labels.get(GPU_MODEL_LABEL, "")], dtype=object))


def tightest_device(free: np.ndarray, milli: int) -> np.ndarray:
    """Per row, the fitting device with the least free milli (open-gpu-share's binpack); -1 if none fits."""
    if free.shape[1] == 0:
        return np.full(free.shape[0], -1, dtype=np.int64)
    masked = np.where(free >= milli, free, np.iinfo(np.int64).max)
    best = np.argmin(masked, axis=1)
    return np.where(masked[np.arange(free.shape[0]), best] == np.iinfo(np.int64).max, -1, best)


def whole_after(free: np.ndarray, count: int) -> np.ndarray:
    """Free milli per device after taking the ``count`` lowest-indexed fully free devices of each row."""
    fully = free >= MILLI
    take = fully & (np.cumsum(fully, axis=1) <= count)
    return free - take * MILLI


def record_choice(state: CycleState, snapshot_nodes: np.ndarray, device: np.ndarray) -> None:
    """Remember, per candidate node (snapshot index), the device a share goes to (-1: the default choice)."""
    state.write(CHOICE_KEY, dict(zip(snapshot_nodes.tolist(), device.tolist(), strict=True)))


# chooser(pod, snapshot, node index) -> device for a share there (-1: the default choice)
Chooser = Callable[[PodInfo, Snapshot, int], int]


class DevicePolicy:
    """Base of the GPU Score plugins: ``score_all``/``score`` and the chooser, from one ``node_scores``."""

    def node_scores(self, pod: PodInfo, snapshot: Snapshot | None, nodes: NodeArrays,
                    indices: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(scores, device per node) for the nodes ``nodes`` describes (``indices`` in ``snapshot``)."""
        raise NotImplementedError

    def learn(self, pod: PodInfo) -> None:
        """Once per cycle, before scoring (FGD learns its target workload here)."""

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        self.learn(pod)
        state.write(CHOOSER_KEY, self.choose)
        return None, None

    def pre_filter_extensions(self) -> None:
        return None

    def choose(self, pod: PodInfo, snapshot: Snapshot, index: int) -> int:
        nodes = np.asarray([index])
        return int(self.node_scores(pod, snapshot, node_arrays(snapshot, nodes), nodes)[1][0])

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray:
        scores, device = self.node_scores(pod, snapshot, node_arrays(snapshot, nodes), nodes)
        record_choice(state, nodes, device)
        return scores

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        return int(self.node_scores(pod, None, one_node(node), None)[0][0]), None
