"""GPUBinPack: an example Score plugin that packs GPU work onto the nodes with the fewest free GPUs.

A research policy for GPU clusters (e.g. the openb trace): fragmentation of
GPUs across nodes strands capacity -- eight nodes with one free GPU each
cannot run one 8-GPU job -- so this plugin prefers, among the feasible nodes,
the one left with the **fewest free GPUs** once the pod is placed:

* raw score = free GPUs after placing the pod
  (``allocatable - requested - pod request``, floored at 0);
* NormalizeScore reverses it onto 0..100 (upstream's
  ``DefaultNormalizeScore(reverse=true)``): the node left with the fewest
  free GPUs gets 100, the one with the most gets 0.

A pod without GPUs therefore prefers nodes with no free GPUs at all
(CPU-only nodes, or full GPU nodes), keeping GPU nodes free for GPU pods.

It is written exactly like an in-tree plugin -- a ``name``, per-node
``score``, vectorised ``score_all`` over snapshot arrays, ``normalize_score``
-- and built by ``new(args, handle)`` from its ``pluginConfig`` args::

    profiles:
    - schedulerName: gpu-packer
      plugins:
        multiPoint:
          enabled:
          - name: GPUBinPack
            weight: 5
      pluginConfig:
      - name: GPUBinPack
        args:
          resourceName: nvidia.com/gpu    # the default; e.g. a milli-GPU resource for fractional GPUs
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from emulator.scheduler.framework.interface import CycleState, Handle, Status
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import NodeInfo, PodInfo
from emulator.scheduler.plugins.helper import default_normalize_score

__all__ = ["DEFAULT_RESOURCE", "NAME", "GPUBinPack", "new"]

NAME = "GPUBinPack"
DEFAULT_RESOURCE = "nvidia.com/gpu"


class GPUBinPack:
    """Score plugin: fewer free GPUs after placement scores higher."""

    name = NAME

    def __init__(self, resource: str = DEFAULT_RESOURCE) -> None:
        self.resource = resource

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        free = (node.allocatable.get(self.resource, 0) - node.requested.get(self.resource, 0)
                - pod.requests.get(self.resource, 0))
        return max(free, 0), None

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray:
        free = (snapshot.allocatable(self.resource)[nodes] - snapshot.requested(self.resource)[nodes]
                - pod.requests.get(self.resource, 0))
        return np.maximum(free, 0)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        default_normalize_score(scores, reverse=True)
        return None


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> GPUBinPack:
    """Build from args ``{"resourceName": "nvidia.com/gpu"}`` (optional)."""
    resource = (args or {}).get("resourceName") or DEFAULT_RESOURCE
    if not isinstance(resource, str):
        raise ValueError(f"resourceName: Invalid value: {resource!r}: must be a string")
    return GPUBinPack(resource)
