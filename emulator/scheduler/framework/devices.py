"""Per-device accounting for the snapshot: which GPU devices of each node hold how much of which pod.

Upstream the scheduler counts an extended resource per node only
(``NodeInfo.Allocatable.ScalarResources``); GPU-sharing schedulers keep a
per-device cache beside it (open-gpu-share's ``GpuNodeInfo``/``DeviceInfo``,
the devices of ``pkg/kubelet/cm/devicemanager`` as the scheduler sees them).
kemu keeps that cache as two arrays in the snapshot -- capacity and used
milli-GPU per (node, device slot) -- so device-aware plugins read every
node's devices with one array operation.

A pod's devices are its ``alibabacloud.com/gpu-index`` annotation when it
has a valid one (the scheduler's choice at bind, or the kubelet's); else the
table picks them as the device manager would (:func:`emulator.api.gpu.allocate`).
:meth:`DeviceTable.reassign` moves an assumed pod to the devices a plugin
chose in Reserve. The table is copied on write by its snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from emulator.api.gpu import MILLI, GPURequest, allocate, gpu_request, node_gpu_count, parse_device_ids
from emulator.scheduler.framework.types import PodInfo

__all__ = ["DeviceTable", "pod_gpu_request"]


def pod_gpu_request(info: PodInfo) -> GPURequest:
    """The pod's device request, parsed once per PodInfo."""
    return info.memo("gpu-request", lambda i: gpu_request(i.pod, i.requests))


class DeviceTable:
    """Capacity and use per (node, device slot), plus each accounted pod's devices."""

    __slots__ = ("_free", "assign", "capacity", "used")

    def __init__(self, capacity: np.ndarray, used: np.ndarray,
                 assign: dict[str, tuple[int, tuple[int, ...], int]]) -> None:
        self.capacity = capacity
        self.used = used
        self.assign = assign  # pod key -> (node index, device ids, milli per device)
        self._free: np.ndarray | None = None  # capacity - used, until the next charge

    @classmethod
    def build(cls, allocs: Sequence[Mapping[str, int]]) -> DeviceTable:
        counts = [node_gpu_count(a) for a in allocs]
        width = max(counts, default=0)
        capacity = np.zeros((len(allocs), width), dtype=np.int64)
        for i, c in enumerate(counts):
            capacity[i, :c] = MILLI
        capacity.flags.writeable = False
        used = np.zeros_like(capacity)
        used.flags.writeable = False
        return cls(capacity, used, {})

    def copy(self) -> DeviceTable:
        return DeviceTable(self.capacity, self.used.copy(), dict(self.assign))

    @property
    def free(self) -> np.ndarray:
        """capacity - used (read-only; computed once per change: plugins read it several times a cycle)."""
        if self._free is None:
            self._free = self.capacity - self.used
            self._free.flags.writeable = False
        return self._free

    def add(self, info: PodInfo, i: int) -> None:
        request = pod_gpu_request(info)
        if not request or request.error or not self.capacity.shape[1]:
            return
        count = int((self.capacity[i] > 0).sum())
        ids = parse_device_ids(info.pod)
        if ids is None or len(ids) != request.count or max(ids) >= count:
            ids = allocate(self.free[i, :count], request)
            if ids is None:  # over-committed (bound past the scheduler): charge the emptiest devices
                order = np.argsort(-self.free[i, :count], kind="stable")
                ids = tuple(int(d) for d in order[:request.count])
        self._charge(i, ids, request.milli)
        self.assign[info.key] = (i, ids, request.milli)

    def remove(self, key: str) -> None:
        entry = self.assign.pop(key, None)
        if entry is not None:
            i, ids, milli = entry
            self._charge(i, ids, -milli)

    def reassign(self, key: str, ids: tuple[int, ...]) -> bool:
        """Move pod ``key``'s charge to devices ``ids`` of its node; False if it is not accounted here."""
        entry = self.assign.get(key)
        if entry is None or len(ids) != len(entry[1]):
            return False
        i, old, milli = entry
        self._charge(i, old, -milli)
        self._charge(i, ids, milli)
        self.assign[key] = (i, tuple(ids), milli)
        return True

    def grow(self, alloc: Mapping[str, int]) -> DeviceTable:
        """A new table with one more node (and wider if it has more devices)."""
        count = node_gpu_count(alloc)
        width = max(self.capacity.shape[1], count)
        n = self.capacity.shape[0]
        capacity = np.zeros((n + 1, width), dtype=np.int64)
        used = np.zeros_like(capacity)
        capacity[:n, :self.capacity.shape[1]] = self.capacity
        used[:n, :self.used.shape[1]] = self.used
        capacity[n, :count] = MILLI
        capacity.flags.writeable = False
        return DeviceTable(capacity, used, dict(self.assign))

    def _charge(self, i: int, ids: tuple[int, ...], milli: int) -> None:
        self._free = None
        for d in ids:
            self.used[i, d] += milli
