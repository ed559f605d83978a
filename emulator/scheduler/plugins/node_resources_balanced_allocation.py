"""NodeResourcesBalancedAllocation: prefer nodes whose resources would be used evenly.

Upstream ``pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go``.
For each configured resource (default cpu and memory) the fraction
``(requested + pod) / allocatable`` (capped at 1) is computed with *real*
requests (``useRequested``); the score is ``(1 - std(fractions)) * 100``.

PreScore answers Skip for a pod that requests none of the resources
(best-effort), so such pods are not herded onto already-balanced nodes
(upstream issue #129138).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from emulator.scheduler.framework.interface import Code, CycleState, Handle, Status
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import NodeInfo, PodInfo
from emulator.scheduler.plugins.resource_allocation import (
    ResourceSpec,
    balanced_scorer,
    node_amounts,
    nodes_amount_rows,
    nodes_amounts,
    parse_resources,
    pod_requests_for,
)

NAME = "NodeResourcesBalancedAllocation"
PRE_SCORE_KEY = "PreScore" + NAME


class NodeResourcesBalancedAllocation:
    """Score plugin: the more even the resource fractions, the higher the score."""

    name = NAME

    def __init__(self, resources: tuple[ResourceSpec, ...]) -> None:
        self.resources = resources
        self.scorer = balanced_scorer()

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> Status | None:
        requests = pod_requests_for(pod, self.resources, use_requested=True)
        if not any(requests):
            return Status(Code.SKIP)
        state.write(PRE_SCORE_KEY, requests)
        return None

    def _pod_requests(self, state: CycleState, pod: PodInfo) -> list[int]:
        requests = state.get(PRE_SCORE_KEY)
        return requests if requests is not None else pod_requests_for(pod, self.resources, use_requested=True)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        requests = self._pod_requests(state, pod)
        if not any(requests):
            return 0, None
        pairs = [node_amounts(node, spec.name, amount, use_requested=True)
                 for spec, amount in zip(self.resources, requests, strict=True)]
        return self.scorer.one([p[1] for p in pairs], [p[0] for p in pairs]), None

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray:
        requests = self._pod_requests(state, pod)
        if not any(requests):
            return np.zeros(len(nodes), dtype=np.int64)
        rows = nodes_amount_rows(snapshot, nodes, self.resources, requests, use_requested=True)
        scores = None if rows is None or self.scorer.rows is None else self.scorer.rows(rows[1], rows[0])
        if scores is not None:
            return scores
        alloc, req = nodes_amounts(snapshot, nodes, self.resources, requests, use_requested=True)
        return self.scorer.many(req, alloc)


def new(args: Mapping[str, Any] | None, handle: Handle | None = None) -> NodeResourcesBalancedAllocation:
    """Build from ``NodeResourcesBalancedAllocationArgs`` (``{"resources": [{"name": ..., "weight": ...}]}``)."""
    return NodeResourcesBalancedAllocation(parse_resources((args or {}).get("resources")))
