"""ImageLocality: prefer nodes that already have the pod's container images.

Upstream ``pkg/scheduler/framework/plugins/imagelocality/image_locality.go``.
Each container image (init containers included, tag defaulted to
``:latest``) present on the node adds its size scaled by the fraction of
snapshot nodes that have it -- an image everywhere says little, and the
scaling keeps pods from piling onto the first nodes that pulled it. The sum
is clamped to [23 MiB, 1000 MiB x containers] and mapped linearly onto
0..100.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from emulator.scheduler.framework.interface import MAX_NODE_SCORE, CycleState, Handle, Status
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import ImageStateSummary, NodeInfo, PodInfo, normalized_image_name
from emulator.scheduler.plugins.helper import go_div, go_int_div

NAME = "ImageLocality"
PRE_SCORE_KEY = "PreScore" + NAME

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def scaled_image_score(size: int, num_nodes: int, total_nodes: int) -> int:
    """``scaledImageScore``: the image size times the fraction of nodes that have it (float64, truncated)."""
    spread = float(num_nodes) / float(total_nodes)
    return int(float(size) * spread)


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    """``calculatePriority``: clamp the summed image scores and map them linearly onto 0..100."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return go_int_div(MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD), max_threshold - MIN_THRESHOLD)


class ImageLocality:
    """Score plugin on images already present on nodes."""

    name = NAME

    def __init__(self, handle: Handle | None = None) -> None:
        self.handle = handle

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> Status | None:
        # Upstream reads the node count from the handle's snapshot at Score; recording it here lets
        # the per-node and vectorised forms run over any snapshot passed to the framework.
        state.write(PRE_SCORE_KEY, snapshot.num_nodes)
        return None

    def _total_nodes(self, state: CycleState) -> int:
        total = state.get(PRE_SCORE_KEY)
        if total is None:
            snapshot = self.handle.snapshot() if self.handle is not None else None
            total = snapshot.num_nodes if snapshot is not None else 0
        return int(total)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        total = self._total_nodes(state)
        image_sum = 0
        for image in pod.images:
            summary: ImageStateSummary | None = node.image_states.get(normalized_image_name(image))
            if summary is not None:
                image_sum += scaled_image_score(summary.size, summary.num_nodes, total)
        return calculate_priority(image_sum, len(pod.images)), None

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray:
        total = self._total_nodes(state)
        sums = np.zeros(len(nodes), dtype=np.int64)
        present = False
        for image in pod.images:
            name = normalized_image_name(image)
            having, size = snapshot.image(name)
            if len(having):
                present = True
                sums += snapshot.image_mask(name)[nodes] * scaled_image_score(size, len(having), total)
        if not present:
            return sums  # no node has any of the images: every sum is 0, below minThreshold, so every score is 0
        max_threshold = MAX_CONTAINER_THRESHOLD * len(pod.images)
        clamped = np.where(sums < MIN_THRESHOLD, MIN_THRESHOLD, np.where(sums > max_threshold, max_threshold, sums))
        return go_div(MAX_NODE_SCORE * (clamped - MIN_THRESHOLD), max_threshold - MIN_THRESHOLD)

def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> ImageLocality:
    return ImageLocality(handle)
