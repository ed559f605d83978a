"""NodeResourcesFit: does the node have room for the pod's requests, and how full would it be?

Upstream ``pkg/scheduler/framework/plugins/noderesources/fit.go`` (Filter) and
``resource_allocation.go`` + the scoring strategies (Score).

Filter, per node: pod count (``Too many pods``), then cpu, memory,
ephemeral-storage and every requested scalar resource (extended resources
such as ``nvidia.com/gpu``, hugepages) -- a request larger than
``allocatable - requested`` is ``Insufficient <name>``. All failing resources
are reported. The code is Unschedulable (preemption could free room) unless
some request exceeds the node's whole allocatable, which makes it
UnschedulableAndUnresolvable. Requests are the pod's effective requests
(init containers, sidecars, overhead); pods with no requests only need a pod
slot. ``ignoredResources`` / ``ignoredResourceGroups`` skip extended
resources by name / by prefix.

Score: ``scoringStrategy.type`` LeastAllocated (default), MostAllocated or
RequestedToCapacityRatio over ``scoringStrategy.resources`` (default cpu and
memory, weight 1), using non-zero requests for cpu/memory.

Scalar resources are checked in name order (upstream iterates a Go map, so
the order of reasons within one node's status is unspecified there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.api.pods import is_extended_resource
from emulator.scheduler.framework.interface import (
    Code,
    CycleState,
    FilterVerdict,
    Handle,
    PreFilterResult,
    Rejection,
    Status,
    all_pass,
)
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, NodeInfo, PodInfo
from emulator.scheduler.plugins.resource_allocation import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    ResourceSpec,
    Scorer,
    least_allocated_scorer,
    most_allocated_scorer,
    node_amounts,
    nodes_amount_rows,
    nodes_amounts,
    parse_resources,
    parse_shape,
    pod_requests_for,
    requested_to_capacity_ratio_scorer,
)

NAME = "NodeResourcesFit"
PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME
TOO_MANY_PODS = "Too many pods"


@dataclass(frozen=True)
class InsufficientResource:
    """One resource the node lacks (upstream ``InsufficientResource``)."""

    resource: str
    reason: str
    requested: int
    used: int
    capacity: int
    unresolvable: bool


_SLOTS = "pods"  # Headroom's key for the pod slots (allowed pods - pods), next to resource names
_NO_NODES = 2**62  # the least room over no nodes at all: any request fits "every" node
_FEW_CHANGES = 64  # more changed nodes than this since the last look: start over instead of walking them
_FEW_NODES = 4  # up to this many changed nodes, their free room is read one by one


class Headroom:
    """The least free room of any node, per resource, over one snapshot object as its owner assumes and forgets pods.

    Not upstream's: a shortcut for NodeResourcesFit's Filter. A pod asking for
    no more of each resource than every node has free, and for one pod slot
    when every node has one, is rejected by no node -- the verdict is known
    without looking at each node. The bounds are exact when computed and then
    kept as *lower* bounds while the snapshot logs the nodes whose pods
    changed in place (``Snapshot.changed_nodes_since``): a bound drops to a
    changed node's free room when that is lower, and is left as it is when a
    pod left (still a bound, if a loose one). Bounds are computed only for a
    snapshot object seen before whose changes are logged -- the scheduler's
    own, cycle after cycle -- not for one-off forks and what-if views (their
    columns change without a log: ``Snapshot.columns_changed``). When the
    shortcut does not decide, the Filter judges every node as before.
    """

    __slots__ = ("_states",)

    _KEPT = 2  # the scheduler's snapshot, and the what-if view it makes in the same cycle (nominated pods)

    def __init__(self) -> None:
        # Most recent first: (snapshot, generation, bounds or None = none kept); tuples are never changed in place.
        self._states: list[tuple[Snapshot, int, dict[str, int] | None]] = []

    def _keep(self, snapshot: Snapshot, generation: int, bounds: dict[str, int] | None) -> None:
        others = [s for s in self._states if s[0] is not snapshot]
        self._states = [(snapshot, generation, bounds), *others][:self._KEPT]

    def _bounds(self, snapshot: Snapshot, generation: int) -> dict[str, int] | None:
        known = next((s for s in self._states if s[0] is snapshot), None)
        if known is not None and known[1] == generation:
            if self._states[0] is not known:
                self._keep(snapshot, generation, known[2])
            return known[2]
        changed = snapshot.changed_nodes_since(known[1]) if known is not None else None
        bounds = known[2] if known is not None else None
        if changed is None or len(changed) > _FEW_CHANGES:
            bounds = {} if changed is not None else None
        elif bounds is None:
            bounds = {}
        elif changed:
            nodes = list(set(changed))
            if len(nodes) <= _FEW_NODES:
                # The usual cycle: the one node the last pod went to. Plain ints per node beat four numpy calls.
                bounds = {name: min(bound, *(_free_at(snapshot, name, i) for i in nodes))
                          for name, bound in bounds.items()}
            else:
                bounds = {name: min(bound, int(_free(snapshot, name, nodes).min()))
                          for name, bound in bounds.items()}
        self._keep(snapshot, generation, bounds)
        return bounds

    def fits_everywhere(self, snapshot: Snapshot, requests: list[tuple[str, int]]) -> bool:
        """Whether every node surely has a pod slot and at least ``amount`` free of each (resource, amount);
        False also when that is not known."""
        generation = snapshot.generation  # read once: what the bounds below are for
        bounds = self._bounds(snapshot, generation)
        if bounds is None:
            return False
        for name, amount in ((_SLOTS, 1), *requests):
            bound = bounds.get(name)
            if bound is None:
                free = _free(snapshot, name)
                bound = int(free.min()) if len(free) else _NO_NODES
                bounds = {**bounds, name: bound}
                self._keep(snapshot, generation, bounds)
            if bound < amount:
                return False
        return True


def _free_at(snapshot: Snapshot, name: str, i: int) -> int:
    """Node ``i``'s free room of ``name`` (see :func:`_free`), as a Python int."""
    if name == _SLOTS:
        return int(snapshot.allowed_pods[i]) - int(snapshot.pod_counts[i])
    return int(snapshot.allocatable(name)[i]) - int(snapshot.requested(name)[i])


def _free(snapshot: Snapshot, name: str, nodes: list[int] | None = None) -> np.ndarray:
    """Free room per node (of ``nodes``, default all): pod slots for ``_SLOTS``, else allocatable - requested."""
    if name == _SLOTS:
        if nodes is None:
            return snapshot.allowed_pods - snapshot.pod_counts  # type: ignore[no-any-return]
        return snapshot.allowed_pods[nodes] - snapshot.pod_counts[nodes]  # type: ignore[no-any-return]
    if nodes is None:
        return snapshot.allocatable(name) - snapshot.requested(name)  # type: ignore[no-any-return]
    return snapshot.allocatable(name)[nodes] - snapshot.requested(name)[nodes]  # type: ignore[no-any-return]


class NodeResourcesFit:
    """Filter on free resources, score by the configured allocation strategy."""

    name = NAME

    def __init__(self, scorer: Scorer, resources: tuple[ResourceSpec, ...], ignored: frozenset[str],
                 ignored_groups: frozenset[str]) -> None:
        self.scorer = scorer
        self.resources = resources
        self.ignored = ignored
        self.ignored_groups = ignored_groups
        # _checked depends on the pod and these settings only: memoised on the pod under a key naming them.
        self._checked_key = f"{NAME}/checked/{sorted(ignored)}/{sorted(ignored_groups)}"
        self.headroom = Headroom()

    # -- PreFilter / Filter ----------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        state.write(PRE_FILTER_KEY, pod.requests)
        return None, None

    def pre_filter_extensions(self) -> None:
        return None

    def _checked(self, pod: PodInfo) -> list[tuple[str, int]]:
        """The (resource, amount) requests the filter checks, in upstream's order (scalars sorted)."""
        requests = pod.requests
        out = [(name, requests[name]) for name in (CPU, MEMORY, EPHEMERAL_STORAGE) if requests.get(name, 0) > 0]
        for name in sorted(requests):
            if name in (CPU, MEMORY, EPHEMERAL_STORAGE) or requests[name] <= 0:
                continue
            if is_extended_resource(name) and (name in self.ignored or name.split("/")[0] in self.ignored_groups):
                continue
            out.append((name, requests[name]))
        return out

    def insufficient_resources(self, pod: PodInfo, node: NodeInfo) -> list[InsufficientResource]:
        """Every resource ``node`` lacks for ``pod`` (upstream ``fitsRequest``)."""
        out = []
        if len(node.pods) + 1 > node.allowed_pod_number:
            out.append(InsufficientResource("pods", TOO_MANY_PODS, 1, len(node.pods), node.allowed_pod_number, False))
        for name, amount in pod.memo(self._checked_key, self._checked):
            allocatable = node.allocatable.get(name, 0)
            used = node.requested.get(name, 0)
            if amount > allocatable - used:
                out.append(InsufficientResource(name, f"Insufficient {name}", amount, used, allocatable,
                                                amount > allocatable))
        return out

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        insufficient = self.insufficient_resources(pod, node)
        if not insufficient:
            return None
        code = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE if any(r.unresolvable for r in insufficient)
                else Code.UNSCHEDULABLE)
        return Status(code, *(r.reason for r in insufficient))

    def filter_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict:
        checked = pod.memo(self._checked_key, self._checked)
        if self.headroom.fits_everywhere(snapshot, checked):
            return all_pass(snapshot.num_nodes)
        too_many = snapshot.pod_counts >= snapshot.allowed_pods  # pods + 1 > allowed
        reasons = []
        failed = None
        if too_many.any():
            reasons.append(Rejection(TOO_MANY_PODS, too_many))
            failed = too_many
        for name, amount in checked:
            allocatable = snapshot.allocatable(name)
            short = allocatable - snapshot.requested(name) < amount
            if short.any():
                reasons.append(Rejection(f"Insufficient {name}", short, unresolvable=amount > allocatable))
                failed = short if failed is None else failed | short
        if failed is None:
            return all_pass(snapshot.num_nodes)
        return FilterVerdict(~failed, tuple(reasons))

    # -- PreScore / Score ------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> Status | None:
        state.write(PRE_SCORE_KEY, pod_requests_for(pod, self.resources, use_requested=False))
        return None

    def _pod_requests(self, state: CycleState, pod: PodInfo) -> list[int]:
        requests = state.get(PRE_SCORE_KEY)
        return requests if requests is not None else pod_requests_for(pod, self.resources, use_requested=False)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        requests = self._pod_requests(state, pod)
        pairs = [node_amounts(node, spec.name, amount, use_requested=False)
                 for spec, amount in zip(self.resources, requests, strict=True)]
        return self.scorer.one([p[1] for p in pairs], [p[0] for p in pairs]), None

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray:
        requests = self._pod_requests(state, pod)
        if self.scorer.rows is not None:
            rows = nodes_amount_rows(snapshot, nodes, self.resources, requests, use_requested=False)
            scores = None if rows is None else self.scorer.rows(rows[1], rows[0])
            if scores is not None:
                return scores
        alloc, req = nodes_amounts(snapshot, nodes, self.resources, requests, use_requested=False)
        return self.scorer.many(req, alloc)


def new(args: Mapping[str, Any] | None, handle: Handle | None = None) -> NodeResourcesFit:
    """Build from ``NodeResourcesFitArgs`` (camelCase keys as in KubeSchedulerConfiguration)."""
    args = args or {}
    strategy = args.get("scoringStrategy") or {}
    kind = strategy.get("type") or LEAST_ALLOCATED
    resources = parse_resources(strategy.get("resources"))
    if kind == LEAST_ALLOCATED:
        scorer = least_allocated_scorer(resources)
    elif kind == MOST_ALLOCATED:
        scorer = most_allocated_scorer(resources)
    elif kind == REQUESTED_TO_CAPACITY_RATIO:
        shape = parse_shape((strategy.get("requestedToCapacityRatio") or {}).get("shape"))
        scorer = requested_to_capacity_ratio_scorer(resources, shape)
    else:
        raise ValueError(f"scoring strategy {kind} is not supported")
    return NodeResourcesFit(scorer, resources, frozenset(args.get("ignoredResources") or ()),
                            frozenset(args.get("ignoredResourceGroups") or ()))
