"""GPU devices and GPU sharing: the resource names, annotations and accounting every component agrees on.

Kubernetes itself knows GPUs only as an extended resource counted per node
(``nvidia.com/gpu``, advertised by a device plugin). GPU *sharing* is the
device plugins' and schedulers' convention; kemu follows the open-gpu-share
convention of Alibaba's clusters (the one the openb trace and the FGD paper --
Weng et al., "Beware of Fragmentation", USENIX ATC '23 -- use):

* a node has ``N`` GPUs (``nvidia.com/gpu: N``) and advertises
  ``alibabacloud.com/gpu-milli: N*1000``; its GPU model is the node label
  ``alibabacloud.com/gpu-card-model``;
* a pod asks for **one device's fraction** in thousandths
  (``alibabacloud.com/gpu-milli: 300``) or for **N whole devices**
  (``nvidia.com/gpu: N``, or ``gpu-milli: N*1000``);
* the pod annotation ``alibabacloud.com/gpu-card-model`` (models separated by
  ``|``) restricts the models it may run on (openb's ``gpu_spec``);
* the devices a pod got are the annotation ``alibabacloud.com/gpu-index``
  (device indices joined by ``-``): the scheduler writes it at bind, the
  kubelet's device manager honours it (or allocates and writes it).

This module is pure: request parsing, default device allocation and the
paper's fragmentation measure over numpy arrays of per-device free milli-GPU.
Scheduler plugins, the kubelet device manager, the snapshot and the openb
bench all use it, so their accounting cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.api.pods import pod_requests

__all__ = [
    "DEVICE_INDEX_ANNOTATION",
    "GPU_MEMORY_MIB",
    "GPU_MILLI_RESOURCE",
    "GPU_MODEL_LABEL",
    "GPU_RESOURCE",
    "MILLI",
    "GPUClusterMetrics",
    "GPURequest",
    "TargetWorkload",
    "allocate",
    "cluster_metrics",
    "format_device_ids",
    "fragmentation",
    "gpu_request",
    "node_gpu_count",
    "parse_device_ids",
]

GPU_RESOURCE = "nvidia.com/gpu"
GPU_MILLI_RESOURCE = "alibabacloud.com/gpu-milli"
GPU_MODEL_LABEL = "alibabacloud.com/gpu-card-model"  # node label; also the pod's gpu_spec annotation
DEVICE_INDEX_ANNOTATION = "alibabacloud.com/gpu-index"
MILLI = 1000
_SEP = "-"

# Device memory per model (MiB), as open-gpu-share tabulates it; openb's G1-G3 are undisclosed (0).
GPU_MEMORY_MIB: Mapping[str, int] = {
    "P4": 7611, "2080": 11019, "1080": 11178, "M40": 11448, "T4": 15109, "V100M16": 16160, "P100": 16280,
    "A10": 22731, "3090": 24268, "V100M32": 32510, "A100": 81251,
}


@dataclass(frozen=True)
class GPURequest:
    """What a pod needs from GPU devices: ``count`` devices with ``milli`` free each (0, 0: none).

    ``models`` is the allowed GPU models (empty: any); ``error`` says why the
    request cannot be satisfied by any device layout (gpu-milli above 1000
    that is not whole devices).
    """

    count: int = 0
    milli: int = 0
    models: frozenset[str] = frozenset()
    error: str = ""

    @property
    def shared(self) -> bool:
        return self.count == 1 and 0 < self.milli < MILLI

    @property
    def total_milli(self) -> int:
        return self.count * self.milli

    def __bool__(self) -> bool:
        return self.count > 0


NO_GPU = GPURequest()


def gpu_request(pod: Mapping[str, Any], requests: Mapping[str, int] | None = None) -> GPURequest:
    """The pod's device request (see the module docstring); ``requests`` are its effective requests if known."""
    req = requests if requests is not None else pod_requests(pod)
    whole = int(req.get(GPU_RESOURCE, 0) or 0)
    milli = int(req.get(GPU_MILLI_RESOURCE, 0) or 0)
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    spec = annotations.get(GPU_MODEL_LABEL) or ""
    models = frozenset(m.strip() for m in spec.split("|") if m.strip())
    if whole > 0:
        return GPURequest(whole, MILLI, models)
    if milli <= 0:
        return GPURequest(0, 0, models) if models else NO_GPU
    if milli < MILLI:
        return GPURequest(1, milli, models)
    if milli % MILLI:
        return GPURequest(1, milli, models, error=f"{GPU_MILLI_RESOURCE} {milli} is more than one device but "
                                                  f"not whole devices")
    return GPURequest(milli // MILLI, MILLI, models)


def node_gpu_count(allocatable: Mapping[str, int]) -> int:
    """How many GPU devices a node has: ``nvidia.com/gpu``, else ``gpu-milli`` / 1000."""
    count = int(allocatable.get(GPU_RESOURCE, 0) or 0)
    if count <= 0:
        count = int(allocatable.get(GPU_MILLI_RESOURCE, 0) or 0) // MILLI
    return max(count, 0)


def parse_device_ids(pod: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The device indices in the pod's ``gpu-index`` annotation, or None (absent or malformed)."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEVICE_INDEX_ANNOTATION)
    if not text:
        return None
    try:
        ids = tuple(int(part) for part in str(text).split(_SEP))
    except ValueError:
        return None
    return ids if ids and min(ids) >= 0 and len(set(ids)) == len(ids) else None


def format_device_ids(ids: Iterable[int]) -> str:
    return _SEP.join(str(int(i)) for i in ids)


def allocate(free: Sequence[int] | np.ndarray, request: GPURequest) -> tuple[int, ...] | None:
    """Default device choice (open-gpu-share's binpack): the devices that fit with the least left over.

    A share goes to the fitting device with the least free milli (lowest
    index on ties); whole devices are the lowest-indexed fully free ones.
    None when the devices cannot hold the request.
    """
    free = np.asarray(free, dtype=np.int64)
    if not request or request.error:
        return None
    fits = np.flatnonzero(free >= request.milli)
    if len(fits) < request.count:
        return None
    if request.shared:
        return (int(fits[np.argmin(free[fits])]),)
    return tuple(int(i) for i in fits[:request.count])


def fits(free: np.ndarray, request: GPURequest) -> np.ndarray:
    """Bool per row of ``free`` (rows x devices): can the devices hold ``request``."""
    if not request:
        return np.ones(free.shape[0], dtype=bool)
    if request.error:
        return np.zeros(free.shape[0], dtype=bool)
    return (free >= request.milli).sum(axis=1) >= request.count


# -- fragmentation (FGD paper, section 3) ------------------------------------------------------------


class TargetWorkload:
    """The target workload M of the paper: task types m with popularity p_m (summing to 1).

    A task type is (cpu milli, GPU count, milli per GPU, allowed models).
    Built from a pod list as the authors' simulator does: count each type,
    keep the most popular types covering ``popularity``% of the pods, and
    renormalise. GPU-less types are skipped unless ``include_cpu`` (a GPU-less
    task can use none of a node's free GPUs, so they only add a constant).

    The GPU task types are also kept as flat arrays (CPU, count, popularity,
    which distinct milli-per-device, which models) so :func:`fragmentation`
    evaluates every type on every row in a few array operations.
    """

    def __init__(self, types: Mapping[tuple[int, int, int, frozenset[str]], float]) -> None:
        total = float(sum(types.values()))
        if total <= 0:
            raise ValueError("the target workload needs at least one task type")
        self.types = {k: v / total for k, v in types.items()}
        self.total = 1.0
        gpu = [(k, p) for k, p in self.types.items() if k[1] > 0]  # a GPU-less task uses no GPU: see fragmentation
        self.cpu = np.asarray([k[0] for k, _ in gpu], dtype=np.int64)
        self.count = np.asarray([k[1] for k, _ in gpu], dtype=np.int64)
        self.popularity = np.asarray([p for _, p in gpu], dtype=np.float64)
        self.millis = np.asarray(sorted({k[2] for k, _ in gpu}), dtype=np.int32)
        self.milli_index = np.searchsorted(self.millis, [k[2] for k, _ in gpu]).astype(np.int64)
        named = sorted({m for k, _ in gpu for m in k[3]})
        self.model_code = {m: i for i, m in enumerate(named)}
        # allowed[c, t]: task type t may run on GPU model code c (the last code: any model no type names).
        self.allowed = np.ones((len(named) + 1, len(gpu)), dtype=bool)
        for t, (k, _) in enumerate(gpu):
            if k[3]:
                self.allowed[:, t] = [m in k[3] for m in named] + [False]

    @classmethod
    def from_requests(cls, tasks: Iterable[tuple[int, GPURequest]], *, popularity: float = 95.0,
                      include_cpu: bool = False) -> TargetWorkload:
        """From (cpu milli, GPU request) per pod: the top types covering ``popularity`` % of the pods."""
        counts: dict[tuple[int, int, int, frozenset[str]], int] = {}
        for cpu, req in tasks:
            if not req and not include_cpu:
                continue
            key = (int(cpu), req.count, req.milli, req.models)
            counts[key] = counts.get(key, 0) + 1
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])
        total = sum(counts.values())
        kept: dict[tuple[int, int, int, frozenset[str]], float] = {}
        covered = 0
        for key, n in ranked:
            if covered >= popularity / 100.0 * total:
                break
            kept[key] = n
            covered += n
        return cls(kept)


def fragmentation(free: np.ndarray, cpu_free: np.ndarray, models: Sequence[str], workload: TargetWorkload,
                  ) -> np.ndarray:
    """F_n(M) per row: the expected milli-GPU of a node state that the target workload cannot use.

    ``free`` is rows x devices of free milli-GPU (absent devices 0),
    ``cpu_free`` the free CPU (millicores) per row, ``models`` each row's GPU
    model. Per the paper, for a task type m: if m cannot run on the node
    (CPU, GPU model, or no device layout holds it) all free GPU is fragment;
    else the free milli of the devices with less free than m asks of one
    device is. F_n(M) = sum_m p_m F_n(m) = total free - sum over the task
    types that can run of p_m * (free milli of the devices that fit m): a
    rows x types matrix of "m runs here" times the free milli of the devices
    that fit m, against the popularity vector. The devices that fit are
    counted once per distinct milli-per-device.
    """
    free = np.asarray(free, dtype=np.int32)  # <= 1000 per device: the narrow type halves the memory traffic
    total = free.sum(axis=1, dtype=np.int64).astype(np.float64)
    out = total * workload.total
    if not len(workload.popularity) or not len(free):
        return out
    # Per row and distinct milli-per-device u: how many devices have >= u free, and their free milli.
    usable = free[:, :, None] >= workload.millis
    n_usable = usable.sum(axis=1)
    usable_free = np.where(usable, free[:, :, None], 0).sum(axis=1, dtype=np.int64)
    last = len(workload.model_code)
    codes = np.fromiter((workload.model_code.get(m, last) for m in models), dtype=np.int64, count=len(free))
    runs = ((n_usable[:, workload.milli_index] >= workload.count)
            & workload.allowed[codes]
            & (workload.cpu <= np.asarray(cpu_free)[:, None]))
    return out - (runs * usable_free[:, workload.milli_index]) @ workload.popularity


@dataclass(frozen=True)
class GPUClusterMetrics:
    """The paper's cluster-level measures (section 6), in milli-GPU.

    ``allocation_ratio`` = allocated / capacity; ``fragmented`` = sum over
    nodes of F_n(M); as fractions of the capacity and of the idle milli;
    ``by_model`` = model -> (allocated, capacity).
    """

    capacity: int
    allocated: int
    fragmented: float
    by_model: Mapping[str, tuple[int, int]]

    @property
    def idle(self) -> int:
        return self.capacity - self.allocated

    @property
    def allocation_ratio(self) -> float:
        return self.allocated / self.capacity if self.capacity else 0.0

    @property
    def fragmentation_of_capacity(self) -> float:
        return self.fragmented / self.capacity if self.capacity else 0.0

    @property
    def fragmentation_of_idle(self) -> float:
        return self.fragmented / self.idle if self.idle > 0 else 0.0


def cluster_metrics(capacity: np.ndarray, free: np.ndarray, cpu_free: np.ndarray, models: Sequence[str],
                    workload: TargetWorkload | None) -> GPUClusterMetrics:
    """Allocation, fragmentation against ``workload`` (0 without one) and per-model allocation of a cluster.

    ``capacity``/``free`` are nodes x device slots in milli-GPU (as the
    scheduler's snapshot holds them), ``cpu_free`` per node, ``models`` the
    GPU model per node.
    """
    capacity = np.asarray(capacity, dtype=np.int64)
    free = np.asarray(free, dtype=np.int64)
    per_node_cap = capacity.sum(axis=1)
    per_node_alloc = per_node_cap - free.sum(axis=1)
    fragmented = float(fragmentation(free, cpu_free, models, workload).sum()) if workload is not None else 0.0
    by_model: dict[str, tuple[int, int]] = {}
    for model in sorted({m for m, c in zip(models, per_node_cap, strict=True) if c > 0}):
        rows = np.asarray([m == model for m in models]) & (per_node_cap > 0)
        by_model[model] = (int(per_node_alloc[rows].sum()), int(per_node_cap[rows].sum()))
    return GPUClusterMetrics(int(per_node_cap.sum()), int(per_node_alloc.sum()), fragmented, by_model)
