"""Shared by the GPU-sharing plugins (not a plugin): per-node device arrays and the device each policy chose.

The policies of the GPU-sharing literature (the FGD paper's baselines, as in
the authors' simulator ``hkust-adsl/kubernetes-scheduler-simulator``) score a
node *and* pick the device a GPU share goes to. Score plugins call
:func:`node_arrays` for the candidate nodes' devices (or :func:`one_node` in
the per-node path), score them, and record the chosen device per node with
:func:`record_choice`; the GPUShare plugin's Reserve reads the choice for the
node the framework selected and writes it as the pod's
``alibabacloud.com/gpu-index`` annotation at bind -- one device for a GPU
share, the ``count`` devices for whole GPUs (``node_scores`` returns a K
vector or a K x count matrix of device indices, -1 for none). When only one node is
feasible the framework skips scoring (as upstream), so each policy also
leaves a chooser in the CycleState at PreFilter (:class:`DevicePolicy`),
which Reserve asks for that one node.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from emulator.api.gpu import GPU_MODEL_LABEL, MILLI, GPURequest
from emulator.scheduler.framework.devices import pod_gpu_request
from emulator.scheduler.framework.interface import CycleState, PreFilterResult, Status
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import CPU, NodeInfo, PodInfo

__all__ = ["CHOICE_KEY", "CHOOSER_KEY", "DeviceChoice", "DevicePolicy", "NodeArrays", "gpu_request_of", "node_arrays",
           "node_models", "one_node", "record_choice", "tightest_device", "whole_after", "whole_devices"]

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


def node_models(snapshot: Snapshot) -> np.ndarray:
    """GPU model per snapshot node (object array, "" without the label), memoised for the node set."""
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
                      node_models(snapshot)[nodes])


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


def whole_devices(free: np.ndarray, count: int, keys: np.ndarray | None = None) -> np.ndarray:
    """K x ``count``: per row the fully free devices to take (ascending), -1 where too few are free.

    Without ``keys`` the lowest-indexed ones (the simulator's
    ``AllocateExclusiveGpuId``); with ``keys`` (rows x devices) the fully
    free devices with the largest keys (a random choice with random keys).
    """
    k, d = free.shape
    if count > d or count <= 0:
        return np.full((k, max(count, 0)), -1, dtype=np.int64)
    fully = free >= MILLI
    out = np.full((k, count), -1, dtype=np.int64)
    if keys is None:  # no sort: the n-th fully free device of a row goes to column n-1
        rank = np.cumsum(fully, axis=1)
        rows, cols = np.nonzero(fully & (rank <= count) & (rank[:, -1:] >= count))
        out[rows, rank[rows, cols] - 1] = cols
        return out
    order = np.sort(np.argsort(np.where(fully, -keys, np.inf), axis=1, kind="stable")[:, :count], axis=1)
    enough = fully.sum(axis=1) >= count
    out[enough] = order[enough]
    return out


class DeviceChoice:
    """The devices a policy chose per candidate node of one cycle, looked up by snapshot index."""

    __slots__ = ("_device", "_nodes")

    def __init__(self, snapshot_nodes: np.ndarray, device: np.ndarray) -> None:
        self._nodes = snapshot_nodes  # scoring only stores the arrays: Reserve looks up one node
        self._device = device.reshape(len(device), -1) if len(device) else device.reshape(0, 0)

    def get(self, index: int) -> tuple[int, ...] | None:
        """The devices chosen on node ``index`` (None: no choice, take the default)."""
        rows = np.flatnonzero(self._nodes == index)
        if not rows.size or not self._device.shape[1] or (self._device[rows[0]] < 0).any():
            return None
        return tuple(int(d) for d in self._device[rows[0]])

    def __getitem__(self, index: int) -> tuple[int, ...] | None:
        return self.get(index)


def record_choice(state: CycleState, snapshot_nodes: np.ndarray, device: np.ndarray) -> None:
    """Remember, per candidate node (snapshot index), the devices the pod goes to (-1: the default choice)."""
    state.write(CHOICE_KEY, DeviceChoice(np.asarray(snapshot_nodes), np.asarray(device)))


# chooser(pod, snapshot, node index) -> devices there (None: the default choice)
Chooser = Callable[[PodInfo, Snapshot, int], "tuple[int, ...] | None"]


class DevicePolicy(abc.ABC):
    """Base of the GPU Score plugins: ``score_all``/``score`` and the chooser, from one ``node_scores``."""

    @abc.abstractmethod
    def node_scores(self, pod: PodInfo, snapshot: Snapshot | None, nodes: NodeArrays,
                    indices: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(scores, devices) for the nodes ``nodes`` describes (``indices`` in ``snapshot``).

        Devices: per node the device of a GPU share (a K vector) or the
        ``count`` devices of whole GPUs (K x count); -1 for none.
        """

    def learn(self, pod: PodInfo) -> None:
        """Once per cycle, before scoring (FGD learns its target workload here)."""
        return None

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        self.learn(pod)
        state.write(CHOOSER_KEY, self.choose)
        return None, None

    def pre_filter_extensions(self) -> None:
        return None

    def choose(self, pod: PodInfo, snapshot: Snapshot, index: int) -> tuple[int, ...] | None:
        nodes = np.asarray([index])
        return DeviceChoice(nodes, self.node_scores(pod, snapshot, node_arrays(snapshot, nodes), nodes)[1]).get(index)

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray:
        scores, device = self.node_scores(pod, snapshot, node_arrays(snapshot, nodes), nodes)
        record_choice(state, nodes, device)
        return scores

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        return int(self.node_scores(pod, None, one_node(node), None)[0][0]), None
