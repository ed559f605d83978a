"""Resource-allocation scoring shared by NodeResourcesFit and NodeResourcesBalancedAllocation.

Upstream ``pkg/scheduler/framework/plugins/noderesources/``:
``resource_allocation.go`` (which amounts a node score is computed from),
``least_allocated.go``, ``most_allocated.go``,
``requested_to_capacity_ratio.go`` (+ ``helper/shape_score.go``) and
``balanced_allocation.go`` (the scorers).

For every configured resource a node contributes a pair (allocatable,
requested-including-this-pod):

* cpu/memory: requested is the node's *non-zero* requests (containers
  without a request count 100m / 200Mi) unless the scorer uses real requests
  (``use_requested``, BalancedAllocation); the pod's own request likewise.
* ephemeral-storage and scalar resources: real requests. A scalar resource
  the pod does not request is left out (pair (0, 0)).
* A pair with allocatable 0 is left out of the score altogether.

Every scorer exists twice: a per-node function in plain Python ints/floats,
line by line with the Go code (the reference), and an array form over many
nodes. Integer divisions are Go's (truncating), float steps are the same IEEE
operations in the same order, so both give identical scores -- tests check it
on random clusters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.api.gomath import go_round
from emulator.scheduler.framework.interface import MAX_NODE_SCORE
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, NodeInfo, PodInfo, is_scalar_resource
from emulator.scheduler.plugins.helper import go_div

__all__ = [
    "LEAST_ALLOCATED",
    "MOST_ALLOCATED",
    "REQUESTED_TO_CAPACITY_RATIO",
    "ResourceSpec",
    "Scorer",
    "balanced_scorer",
    "least_allocated_scorer",
    "most_allocated_scorer",
    "node_amounts",
    "nodes_amount_rows",
    "nodes_amounts",
    "parse_resources",
    "pod_requests_for",
    "requested_to_capacity_ratio_scorer",
]

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"

# config/types.go: shape scores are given on 0..10 and scaled to the scheduler's 0..100.
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100


@dataclass(frozen=True)
class ResourceSpec:
    """A resource a scorer looks at and its weight (upstream ``config.ResourceSpec``)."""

    name: str
    weight: int = 1


DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


def parse_resources(raw: Sequence[Mapping[str, Any]] | None) -> tuple[ResourceSpec, ...]:
    """``[{"name": "cpu", "weight": 1}, ...]`` as in KubeSchedulerConfiguration; cpu+memory when unset.

    Weight 0 defaults to 1 (``SetDefaults_NodeResourcesFitArgs``); weights
    outside 1..100 are rejected (``ValidateNodeResourcesFitArgs``).
    """
    if not raw:
        return DEFAULT_RESOURCES
    specs = []
    for entry in raw:
        weight = int(entry.get("weight") or 1)
        if not 1 <= weight <= 100:
            raise ValueError(f"resource {entry.get('name')!r} weight {weight} must be in the range [1, 100]")
        specs.append(ResourceSpec(str(entry["name"]), weight))
    return tuple(specs)


def pod_requests_for(pod: PodInfo, resources: Sequence[ResourceSpec], use_requested: bool) -> list[int]:
    """The pod's request for each scored resource (``calculatePodResourceRequestList``)."""
    out = []
    for spec in resources:
        if not use_requested and spec.name == CPU:
            out.append(pod.nonzero_cpu)
        elif not use_requested and spec.name == MEMORY:
            out.append(pod.nonzero_memory)
        else:
            out.append(pod.requests.get(spec.name, 0))
    return out


def node_amounts(node: NodeInfo, resource: str, pod_request: int, use_requested: bool) -> tuple[int, int]:
    """(allocatable, requested + pod) of one node (``calculateResourceAllocatableRequest``)."""
    if pod_request == 0 and is_scalar_resource(resource):
        return 0, 0
    if resource in (CPU, MEMORY):
        used = node.requested if use_requested else node.nonzero_requested
        return node.allocatable.get(resource, 0), used.get(resource, 0) + pod_request
    if resource == EPHEMERAL_STORAGE:
        return node.allocatable.get(resource, 0), node.requested.get(resource, 0) + pod_request
    if is_scalar_resource(resource) and resource in node.allocatable:
        return node.allocatable[resource], node.requested.get(resource, 0) + pod_request
    return 0, 0


def nodes_amounts(snapshot: Snapshot, nodes: np.ndarray, resources: Sequence[ResourceSpec], pod_requests: Sequence[int],
                  use_requested: bool) -> tuple[np.ndarray, np.ndarray]:
    """(allocatable, requested + pod) as two (resources x nodes) int64 matrices; :func:`node_amounts` per cell."""
    alloc = np.zeros((len(resources), len(nodes)), dtype=np.int64)
    req = np.zeros((len(resources), len(nodes)), dtype=np.int64)
    for row, (spec, pod_request) in enumerate(zip(resources, pod_requests, strict=True)):
        name = spec.name
        if pod_request == 0 and is_scalar_resource(name):
            continue
        if name in (CPU, MEMORY):
            used = snapshot.requested(name) if use_requested else snapshot.nonzero_requested(name)
        elif name == EPHEMERAL_STORAGE or is_scalar_resource(name):
            used = snapshot.requested(name)
        else:
            continue
        # A node without the scalar resource has allocatable 0 here and is skipped by the scorers,
        # as the per-node form skips it for not having the key.
        alloc[row] = snapshot.allocatable(name)[nodes]
        req[row] = used[nodes] + pod_request
    return alloc, req


RowsForm = Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], "np.ndarray | None"]


class Scorer:
    """A scoring strategy: ``one(requested, allocatable)`` for one node, ``many`` for (resources x nodes) matrices.

    ``rows`` (optional) is ``many`` over one 1-D array per resource, for the
    usual case where every resource counts on every node; it answers None
    when that does not hold (then ``many`` must run). It saves building the
    matrices: over a few hundred nodes each numpy call costs more than its
    arithmetic.
    """

    def __init__(self, name: str, one: Callable[[Sequence[int], Sequence[int]], int],
                 many: Callable[[np.ndarray, np.ndarray], np.ndarray], rows: RowsForm | None = None) -> None:
        self.name = name
        self.one = one
        self.many = many
        self.rows = rows


def nodes_amount_rows(snapshot: Snapshot, nodes: np.ndarray, resources: Sequence[ResourceSpec],
                      pod_requests: Sequence[int],
                      use_requested: bool) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
    """:func:`nodes_amounts` as one (allocatable, requested + pod) row per resource when every resource is cpu or
    memory (the default ``resources``), else None."""
    alloc: list[np.ndarray] = []
    req: list[np.ndarray] = []
    for spec, pod_request in zip(resources, pod_requests, strict=True):
        name = spec.name
        if name not in (CPU, MEMORY):
            return None
        used = snapshot.requested(name) if use_requested else snapshot.nonzero_requested(name)
        alloc.append(snapshot.allocatable(name)[nodes])
        req.append(used[nodes] + pod_request)
    return alloc, req


def _weighted_mean(score: np.ndarray, counted: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per node (column): sum(score * weight) // sum(weight) over the counted rows; 0 when none counts."""
    weight_sum = (weights * counted).sum(axis=0)
    node_score = (score * weights * counted).sum(axis=0)
    return np.where(weight_sum == 0, 0, node_score // np.maximum(weight_sum, 1))


def _weighted_mean_one(weights: Sequence[int],
                       score: Callable[[int, int], int]) -> Callable[[Sequence[int], Sequence[int]], int]:
    """The one-node form of :func:`_weighted_mean`: ``score(requested, allocatable)`` per resource with some
    allocatable, averaged with the resources' weights (integer division, as upstream)."""
    def one(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = weight_sum = 0
        for req, alloc, weight in zip(requested, allocatable, weights, strict=True):
            if alloc == 0:
                continue
            node_score += score(req, alloc) * weight
            weight_sum += weight
        return 0 if weight_sum == 0 else node_score // weight_sum
    return one


# -- LeastAllocated (least_allocated.go) ---------------------------------------------------------


def least_allocated_scorer(resources: Sequence[ResourceSpec]) -> Scorer:
    """Favours free nodes: weighted mean over resources of ``(allocatable - requested) * 100 / allocatable``."""
    weights = [r.weight for r in resources]
    one = _weighted_mean_one(weights, lambda req, alloc: 0 if req > alloc else (alloc - req) * MAX_NODE_SCORE // alloc)
    column = np.asarray(weights, dtype=np.int64)[:, None]
    weight_sum = sum(weights)

    def many(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
        if weight_sum > 0 and allocatable.all():
            # Every resource counts on every node (the usual case): the weighted mean's divisor is the
            # weights' sum, and no division needs guarding. The same integers as the general form below.
            score = (allocatable - requested) * MAX_NODE_SCORE // allocatable
            score[requested > allocatable] = 0
            return (score * column).sum(axis=0) // weight_sum  # type: ignore[no-any-return]
        valid = allocatable != 0
        score = np.where(requested > allocatable, 0,
                         (allocatable - requested) * MAX_NODE_SCORE // np.where(valid, allocatable, 1))
        return _weighted_mean(score, valid, column)

    def rows(requested: Sequence[np.ndarray], allocatable: Sequence[np.ndarray]) -> np.ndarray | None:
        if weight_sum <= 0 or not all(a.all() for a in allocatable):
            return None
        total: np.ndarray | None = None
        for req, alloc, weight in zip(requested, allocatable, weights, strict=True):
            score = (alloc - req) * MAX_NODE_SCORE // alloc
            # requested > allocatable scores 0: exactly the nodes where the floor division above went negative.
            np.maximum(score, 0, out=score)
            if weight != 1:
                score *= weight
            total = score if total is None else total + score
        assert total is not None
        return total // weight_sum  # type: ignore[no-any-return]

    return Scorer(LEAST_ALLOCATED, one, many, rows)


# -- MostAllocated (most_allocated.go) ---------------------------------------------------------------


def most_allocated_scorer(resources: Sequence[ResourceSpec]) -> Scorer:
    """Favours full nodes: weighted mean of ``min(requested, allocatable) * 100 / allocatable``."""
    weights = [r.weight for r in resources]
    # requested can exceed allocatable: pods without requests count the non-zero defaults.
    one = _weighted_mean_one(weights, lambda req, alloc: min(req, alloc) * MAX_NODE_SCORE // alloc)
    column = np.asarray(weights, dtype=np.int64)[:, None]

    def many(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
        valid = allocatable != 0
        score = np.minimum(requested, allocatable) * MAX_NODE_SCORE // np.where(valid, allocatable, 1)
        return _weighted_mean(score, valid, column)

    return Scorer(MOST_ALLOCATED, one, many)


# -- RequestedToCapacityRatio (requested_to_capacity_ratio.go, helper/shape_score.go) ---------------

DEFAULT_SHAPE = ((0, 10), (100, 0))  # SetDefaults_NodeResourcesFitArgs: favour free nodes


def parse_shape(raw: Sequence[Mapping[str, Any]] | None) -> tuple[tuple[int, int], ...]:
    """``[{"utilization": u, "score": s}, ...]``: utilizations 0..100 strictly increasing, scores 0..10."""
    if not raw:
        return DEFAULT_SHAPE
    shape = tuple((int(p.get("utilization") or 0), int(p.get("score") or 0)) for p in raw)
    for i, (utilization, score) in enumerate(shape):
        if not 0 <= utilization <= MAX_UTILIZATION:
            raise ValueError(f"shape[{i}].utilization {utilization} must be in the range [0, 100]")
        if not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ValueError(f"shape[{i}].score {score} must be in the range [0, 10]")
        if i and utilization <= shape[i - 1][0]:
            raise ValueError("shape utilization values must be sorted in increasing order")
    return shape


def _broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    """``BuildBrokenLinearFunction``: piecewise linear through the shape points, flat outside them."""
    for i, (utilization, score) in enumerate(shape):
        if p <= utilization:
            if i == 0:
                return score
            u0, s0 = shape[i - 1]
            num = (score - s0) * (p - u0)
            den = utilization - u0
            quotient = abs(num) // den
            return s0 + (quotient if num >= 0 else -quotient)  # Go truncates toward zero
    return shape[-1][1]


def _broken_linear_many(shape: Sequence[tuple[int, int]], p: np.ndarray) -> np.ndarray:
    out = np.full(p.shape, shape[-1][1], dtype=np.int64)
    # Walk the points backwards so the first point with p <= utilization has the last word.
    for i in range(len(shape) - 1, -1, -1):
        utilization, score = shape[i]
        if i == 0:
            value = np.full(p.shape, score, dtype=np.int64)
        else:
            u0, s0 = shape[i - 1]
            value = s0 + go_div((score - s0) * (p - u0), utilization - u0)
        out = np.where(p <= utilization, value, out)
    return out


def requested_to_capacity_ratio_scorer(resources: Sequence[ResourceSpec],
                                       shape: Sequence[tuple[int, int]]) -> Scorer:
    """Scores each resource's utilization through a user-defined piecewise-linear shape (bin packing and more).

    Resources scoring 0 are left out of the weighted mean (upstream's
    ``if resourceScore > 0``), and the mean is rounded half away from zero
    (``math.Round``), computed exactly in integers as ``(2a + b) // 2b``.
    """
    weights = [r.weight for r in resources]
    scaled = tuple((u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape)

    def resource_score(req: int, alloc: int) -> int:
        if alloc == 0 or req > alloc:
            return _broken_linear(scaled, MAX_UTILIZATION)
        return _broken_linear(scaled, req * MAX_UTILIZATION // alloc)

    def one(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = weight_sum = 0
        for req, alloc, weight in zip(requested, allocatable, weights, strict=True):
            if alloc == 0:
                continue
            score = resource_score(req, alloc)
            if score > 0:
                node_score += score * weight
                weight_sum += weight
        if weight_sum == 0:
            return 0
        return go_round(float(node_score) / float(weight_sum))

    def many(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
        node_score = np.zeros(requested.shape[1], dtype=np.int64)
        weight_sum = np.zeros(requested.shape[1], dtype=np.int64)
        for row, weight in enumerate(weights):
            req, alloc = requested[row], allocatable[row]
            valid = alloc != 0
            utilization = np.where(req > alloc, MAX_UTILIZATION, req * MAX_UTILIZATION // np.where(valid, alloc, 1))
            score = _broken_linear_many(scaled, utilization)
            counted = valid & (score > 0)
            node_score += np.where(counted, score * weight, 0)
            weight_sum += np.where(counted, weight, 0)
        return np.where(weight_sum == 0, 0, (2 * node_score + weight_sum) // np.maximum(2 * weight_sum, 1))

    return Scorer(REQUESTED_TO_CAPACITY_RATIO, one, many)


# -- BalancedAllocation (balanced_allocation.go) -----------------------------------------------------


def balanced_scorer() -> Scorer:
    """``(1 - std(fractions)) * 100`` over the resources' requested/allocatable fractions (capped at 1).

    Two fractions: std = |f1 - f2| / 2; more: the population standard
    deviation. Resources with allocatable 0 are left out; fewer than two
    fractions give std 0.
    """

    def one(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        fractions: list[float] = []
        total = 0.0
        for req, alloc in zip(requested, allocatable, strict=True):
            if alloc == 0:
                continue
            fraction = min(float(req) / float(alloc), 1.0)
            total += fraction
            fractions.append(fraction)
        std = 0.0
        if len(fractions) == 2:
            std = abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            mean = total / len(fractions)
            acc = 0.0
            for fraction in fractions:
                acc = acc + (fraction - mean) * (fraction - mean)
            std = math.sqrt(acc / len(fractions))
        return int((1 - std) * float(MAX_NODE_SCORE))

    def many(requested: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
        rows, n = requested.shape
        valid = allocatable != 0
        fractions = np.minimum(requested.astype(np.float64) / np.where(valid, allocatable, 1).astype(np.float64), 1.0)
        fractions = np.where(valid, fractions, 0.0)
        if rows == 2:  # the default (cpu, memory): std is half the difference when both count
            both = valid[0] & valid[1]
            std = np.where(both, np.abs((fractions[0] - fractions[1]) / 2), 0.0)
            return ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)
        count = valid.sum(axis=0)
        # |f_first - f_second| / 2 for nodes with exactly two fractions, taking them in resource order.
        first = np.zeros(n)
        second = np.zeros(n)
        seen = np.zeros(n, dtype=np.int64)
        total = np.zeros(n)
        for row in range(rows):
            v = valid[row]
            first = np.where(v & (seen == 0), fractions[row], first)
            second = np.where(v & (seen == 1), fractions[row], second)
            seen = seen + v
            total = total + fractions[row]  # adding 0.0 for skipped resources changes nothing
        std = np.where(count == 2, np.abs((first - second) / 2), 0.0)
        many_rows = count > 2
        if many_rows.any():
            safe = np.maximum(count, 1).astype(np.float64)
            mean = total / safe
            acc = np.zeros(n)
            for row in range(rows):
                diff = fractions[row] - mean
                acc = acc + np.where(valid[row], diff * diff, 0.0)
            std = np.where(many_rows, np.sqrt(acc / safe), std)
        return ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)

    def rows(requested: Sequence[np.ndarray], allocatable: Sequence[np.ndarray]) -> np.ndarray | None:
        if len(requested) != 2 or not (allocatable[0].all() and allocatable[1].all()):
            return None
        # Both fractions count on every node: many()'s two-resource form without its masks (int64 / int64
        # divides in float64, as the explicit casts there).
        first = np.minimum(requested[0] / allocatable[0], 1.0)
        second = np.minimum(requested[1] / allocatable[1], 1.0)
        std = np.abs((first - second) / 2)
        return ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)

    return Scorer("BalancedAllocation", one, many, rows)
