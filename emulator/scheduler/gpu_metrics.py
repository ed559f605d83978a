"""The FGD paper's GPU measures over the scheduler cache's snapshot, as gauges read at scrape time.

Not an upstream kube-scheduler metric: GPU-sharing schedulers export their
own. From the snapshot's per-device view (:meth:`Snapshot.device_free`):
the GPU allocation ratio, the fragmented GPUs against the target workload
(the task types of the pods the cache holds, all of them) as a number and
as fractions of the cluster's and of the idle GPUs, and the allocation ratio
per GPU model. Computed only when Prometheus scrapes.
"""

from __future__ import annotations

import numpy as np

from emulator.api.gpu import GPU_MODEL_LABEL, MILLI, TargetWorkload, cluster_metrics
from emulator.scheduler.framework.devices import pod_gpu_request
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import CPU

__all__ = ["gpu_gauges"]


def gpu_gauges(snapshot: Snapshot) -> dict[str, dict[tuple[str, ...], float]]:
    """The ``kemu_gpu_*`` gauges of :mod:`emulator.scheduler.metrics` for ``snapshot`` ({} without GPUs)."""
    capacity = snapshot.device_capacity()
    if not capacity.size or not capacity.any():
        return {}
    tasks = [(info.requests.get(CPU, 0), pod_gpu_request(info)) for _, info in snapshot.iter_pods()]
    workload = TargetWorkload.from_requests(tasks, popularity=100.0) if any(r for _, r in tasks) else None
    column = snapshot.label_column(GPU_MODEL_LABEL)
    models = np.asarray([*column.values, ""], dtype=object)[column.codes]
    cpu_free = snapshot.allocatable(CPU) - snapshot.requested(CPU)
    m = cluster_metrics(capacity, snapshot.device_free(), cpu_free, list(models), workload)
    return {
        "kemu_gpu_allocation_ratio": {(): m.allocation_ratio},
        "kemu_gpu_fragmented_gpus": {(): m.fragmented / MILLI},
        "kemu_gpu_fragmentation_ratio": {("cluster",): m.fragmentation_of_capacity, ("idle",): m.fragmentation_of_idle},
        "kemu_gpu_model_allocation_ratio": {(model or "unknown",): alloc / cap if cap else 0.0
                                            for model, (alloc, cap) in m.by_model.items()},
    }
