"""Alibaba openb GPU-cluster traces as kemu nodes and pods.

The openb files (``cluster-trace-gpu-v2023``; columns documented in
``../shared/datasets/openb/SOURCE.md``) describe a node list (``sn,
cpu_milli, memory_mib, gpu, model``) and a pod list (``name, cpu_milli,
memory_mib, num_gpu, gpu_milli, ..., creation_time, deletion_time``, times
in seconds). kemu maps them as follows:

* **Nodes → node pools.** Nodes with the same shape (CPU, memory, GPU
  count and model) become one :class:`emulator.kubelet.nodes.NodePool`
  named ``openb-<model>-<k>`` (``openb-cpu-<k>`` without GPUs), in the order
  the shapes first appear, so the list's node count and total capacity are
  kept exactly (node names are the pool's, not the trace's ``sn``). GPUs
  are two extended resources: ``nvidia.com/gpu`` (devices) and
  ``alibabacloud.com/gpu-milli`` (1000 per device, the unit of the trace's
  GPU sharing); the model is the label ``alibabacloud.com/gpu-card-model``
  (:mod:`emulator.api.gpu`).
* **Pods.** CPU and memory requests as given; a pod with GPUs requests
  ``num_gpu * gpu_milli`` of ``alibabacloud.com/gpu-milli`` (whole-GPU pods
  have ``gpu_milli`` 1000); its ``gpu_spec`` (allowed GPU models) becomes
  the annotation ``alibabacloud.com/gpu-card-model``, which the GPUShare
  Filter and the kubelet's device manager honour. The default scheduler accounts that per node,
  not per device: a 0.5-GPU pod and a 0.6-GPU pod may share a node with one
  GPU's worth of milli left on each of two devices - the packing problem
  the trace was published to study: enable the device-aware GPUShare
  plugin (and a GPU policy) to place per device, as ``kemu bench openb``
  does (:mod:`loadgen.bench_openb`).

Reading is plain :mod:`csv` (a few thousand rows); nothing here talks to a
cluster.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from emulator.api.gpu import GPU_MILLI_RESOURCE, GPU_MODEL_LABEL, GPU_RESOURCE

__all__ = ["GPU_MILLI_RESOURCE", "GPU_MODEL_LABEL", "GPU_RESOURCE", "TracePod", "node_pools", "pods"]


@dataclass(frozen=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    gpu_milli: int  # num_gpu * gpu_milli: the pod's share of GPU time in milli-GPUs
    created: float  # seconds from the trace's start
    deleted: float | None  # None: still running when the trace ends
    num_gpu: int = 0  # whole GPUs (1 for a share)
    gpu_spec: str = ""  # allowed GPU models, "|"-separated ("": any)

    def requests(self) -> dict[str, str]:
        out = {"cpu": f"{self.cpu_milli}m", "memory": f"{self.memory_mib}Mi"}
        if self.gpu_milli:
            out[GPU_MILLI_RESOURCE] = str(self.gpu_milli)
        return out


def _rows(path: Path, required: set[str]) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = required - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: not an openb file (missing column(s) {', '.join(sorted(missing))})")
        return list(reader)


def node_pools(path: Path, limit: int = 0) -> list[dict[str, Any]]:
    """The node list (its first ``limit`` nodes; 0: all) as node pools, one per distinct shape."""
    rows = _rows(path, {"sn", "cpu_milli", "memory_mib", "gpu", "model"})
    if limit:
        rows = rows[:limit]
    shapes: dict[tuple[int, int, int, str], int] = {}
    for r in rows:
        key = (int(r["cpu_milli"]), int(r["memory_mib"]), int(r["gpu"] or 0), r["model"].strip())
        shapes[key] = shapes.get(key, 0) + 1
    pools: list[dict[str, Any]] = []
    per_model: dict[str, int] = {}
    for (cpu, memory, gpus, model), count in shapes.items():
        tag = model.lower() if model else "cpu"
        k = per_model.get(tag, 0)
        per_model[tag] = k + 1
        capacity = {"cpu": f"{cpu}m", "memory": f"{memory}Mi", "pods": "110"}
        labels: dict[str, str] = {}
        if gpus:
            capacity[GPU_RESOURCE] = str(gpus)
            capacity[GPU_MILLI_RESOURCE] = str(gpus * 1000)
            labels[GPU_MODEL_LABEL] = model
        pools.append({"name": f"openb-{tag}-{k}", "count": count, "capacity": capacity, "labels": labels,
                      "zones": ["zone-a"]})
    return pools


def pods(path: Path, *, offset: int = 0, limit: int = 0) -> list[TracePod]:
    """The pod list in creation order, from its ``offset``-th pod, at most ``limit`` (0: all)."""
    rows = _rows(path, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time",
                        "deletion_time"})
    out = []
    for r in rows:
        deleted = r["deletion_time"].strip()
        out.append(TracePod(r["name"], int(r["cpu_milli"]), int(r["memory_mib"]),
                            int(r["num_gpu"] or 0) * int(r["gpu_milli"] or 0), float(r["creation_time"]),
                            float(deleted) if deleted else None, int(r["num_gpu"] or 0),
                            (r.get("gpu_spec") or "").strip()))
    # Pods still running when the trace was cut carry the cut as their deletion time: they were not deleted.
    cut = max((p.deleted for p in out if p.deleted is not None), default=None)
    out = [p if p.deleted != cut else replace(p, deleted=None) for p in out]
    out.sort(key=lambda p: (p.created, p.name))
    out = out[offset:]
    return out[:limit] if limit else out
