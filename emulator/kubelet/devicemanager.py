"""The device manager: GPU devices per node, as a GPU-sharing device plugin advertises and allocates them.

Upstream ``pkg/kubelet/cm/devicemanager`` (``ManagerImpl``: devices
registered by device plugins per resource, ``Allocate`` at pod admission,
``podDevices`` checkpointed per pod, freed when the pod's containers are
gone) with the GPU-sharing plugin's conventions of :mod:`emulator.api.gpu`:

* **Advertise.** A node with ``nvidia.com/gpu: N`` also advertises
  ``alibabacloud.com/gpu-milli: N*1000`` (:func:`advertised_capacity`, used
  when a pool node is registered). Its devices are ``0..N-1``, each 1000
  milli-GPU, of the model in the node label ``alibabacloud.com/gpu-card-model``
  with that model's memory (:data:`emulator.api.gpu.GPU_MEMORY_MIB`).
* **Allocate** (an admit handler): a pod asking for GPUs gets concrete
  devices -- the ones its ``alibabacloud.com/gpu-index`` annotation names
  (the scheduler's choice) when they still have room, else the tightest fit.
  When no single device can hold a share (or not enough devices are fully
  free for whole GPUs) the pod is rejected with ``UnexpectedAdmissionError``
  and upstream's message, whatever the node-level sum of ``gpu-milli`` says;
  a pod whose ``gpu_spec`` (``alibabacloud.com/gpu-card-model`` annotation)
  does not name the node's model is rejected the same way. Devices the pod
  did not carry in its annotation are written there (one metadata write),
  as GPU-sharing device plugins record their allocation on the pod.
* **Free.** A finished or deleted pod's devices return to the node.

Pods a restarted shard takes over are charged again from their annotation.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from emulator.api.errors import StatusError
from emulator.api.gpu import (
    DEVICE_INDEX_ANNOTATION,
    GPU_MEMORY_MIB,
    GPU_MILLI_RESOURCE,
    GPU_MODEL_LABEL,
    GPU_RESOURCE,
    MILLI,
    allocate,
    format_device_ids,
    gpu_request,
    node_gpu_count,
    parse_device_ids,
)
from emulator.api.kinds import POD

if TYPE_CHECKING:
    from emulator.kubelet.state import NodeRecord, PodRecord, ShardState

__all__ = ["DeviceManager", "NodeDevices", "advertised_capacity", "device_uuid"]

log = logging.getLogger(__name__)


def device_uuid(node: str, index: int) -> str:
    """A stable NVIDIA-style UUID for device ``index`` of ``node`` (what dcgm-exporter's UUID label carries)."""
    h = hashlib.blake2b(f"{node}/{index}".encode(), digest_size=16).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def advertised_capacity(capacity: Mapping[str, str]) -> dict[str, str]:
    """Capacity with the sharing resource the GPU device plugin advertises next to ``nvidia.com/gpu``."""
    out = dict(capacity)
    gpus = str(out.get(GPU_RESOURCE) or "0")
    if gpus.isdigit() and int(gpus) > 0 and GPU_MILLI_RESOURCE not in out:
        out[GPU_MILLI_RESOURCE] = str(int(gpus) * MILLI)
    return out


@dataclass
class NodeDevices:
    """One node's GPUs: model, memory per device, used milli per device and which pod holds what."""

    model: str
    memory_mib: int
    used: np.ndarray  # milli-GPU per device
    holders: dict[str, tuple[tuple[int, ...], int]] = field(default_factory=dict)  # pod uid -> (ids, milli)

    @property
    def count(self) -> int:
        return len(self.used)

    @property
    def free(self) -> np.ndarray:
        return MILLI - self.used


class DeviceManager:
    """Devices of every node of the shard; allocation at admission and release when pods finish."""

    def __init__(self, state: ShardState) -> None:
        self.state = state
        self.nodes: dict[str, NodeDevices] = {}

    def node(self, node: NodeRecord) -> NodeDevices:
        devices = self.nodes.get(node.name)
        if devices is None:
            model = ((node.obj.get("metadata") or {}).get("labels") or {}).get(GPU_MODEL_LABEL, "")
            devices = self.nodes[node.name] = NodeDevices(
                model, GPU_MEMORY_MIB.get(model, 0), np.zeros(node_gpu_count(node.alloc), dtype=np.int64))
        return devices

    def allocate(self, rec: PodRecord, node: NodeRecord, *, restoring: bool = False) -> tuple[str, str] | None:
        """Give the pod its devices (upstream ``Allocate``); the rejection (reason, message) if impossible."""
        request = gpu_request(rec.obj, rec.requests)
        if not request and not request.models:
            return None
        devices = self.node(node)
        if request.models and devices.model not in request.models and not restoring:
            return "UnexpectedAdmissionError", (
                f"Allocate failed due to the node's GPU model {devices.model or '(none)'} is not one of "
                f"{'|'.join(sorted(request.models))}, which is unexpected")
        if not request or rec.uid in devices.holders:
            return None
        free = devices.free
        ids = parse_device_ids(rec.obj)
        wanted = ids
        if ids is not None and (len(ids) != request.count or max(ids) >= devices.count
                                or (not restoring and bool((free[list(ids)] < request.milli).any()))):
            ids = None
        if ids is None and not request.error:
            ids = allocate(free, request)
        if ids is None:
            available = int((free >= request.milli).sum()) if not request.error else 0
            resource = GPU_MILLI_RESOURCE if request.shared else GPU_RESOURCE
            return "UnexpectedAdmissionError", (
                f"Allocate failed due to requested number of devices unavailable for {resource}. "
                f"Requested: {request.count if not request.shared else request.milli}, "
                f"Available: {available if not request.shared else int(free.max(initial=0))}, which is unexpected")
        devices.used[list(ids)] += request.milli
        devices.holders[rec.uid] = (ids, request.milli)
        if ids != wanted:
            self._record(rec, ids)
        return None

    def release(self, rec: PodRecord) -> None:
        """The pod's containers are gone: its devices are free again."""
        devices = self.nodes.get(rec.node)
        held = devices.holders.pop(rec.uid, None) if devices is not None else None
        if held is not None and devices is not None:
            ids, milli = held
            devices.used[list(ids)] -= milli

    def series(self) -> list[tuple[str, int, str, str, float, float, int]]:
        """Per GPU device of the hosted nodes: (node, index, UUID, model, util %, memory used MiB, milli).

        Read by the metrics thread at scrape time: it copies the tables first (see ``allocation``).
        """
        out = []
        for node in list(self.state.nodes.values()):
            if node_gpu_count(node.alloc) <= 0:
                continue
            devices = self.nodes.get(node.name) or NodeDevices(
                ((node.obj.get("metadata") or {}).get("labels") or {}).get(GPU_MODEL_LABEL, ""), 0,
                np.zeros(node_gpu_count(node.alloc), dtype=np.int64))
            memory = GPU_MEMORY_MIB.get(devices.model, 0)
            for index, milli in enumerate(devices.used.tolist()):
                out.append((node.name, index, device_uuid(node.name, index), devices.model, milli / 10,
                            memory * milli / MILLI, int(milli)))
        return out

    def node_gone(self, name: str) -> None:
        self.nodes.pop(name, None)

    def pod_devices(self, node: str, uid: str) -> tuple[int, ...]:
        devices = self.nodes.get(node)
        held = devices.holders.get(uid) if devices is not None else None
        return held[0] if held is not None else ()

    def _record(self, rec: PodRecord, ids: tuple[int, ...]) -> None:
        """Write the allocation on the pod, as GPU-sharing device plugins annotate the pods they serve."""
        text = format_device_ids(ids)

        def mutate(meta: dict[str, Any]) -> dict[str, Any] | None:
            annotations = dict(meta.get("annotations") or {})
            if annotations.get(DEVICE_INDEX_ANNOTATION) == text:
                return None
            annotations[DEVICE_INDEX_ANNOTATION] = text
            return {**meta, "annotations": annotations}

        try:
            self.state.core.update_metadata(POD, rec.ns, rec.name, mutate, uid=rec.uid)
        except StatusError as e:
            log.debug("kubelet shard %d: recording the devices of %s/%s: %s", self.state.index, rec.ns, rec.name,
                      e.message)
