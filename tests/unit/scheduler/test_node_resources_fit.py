"""NodeResourcesFit: filter verdicts and the three scoring strategies, against upstream's formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

from emulator.scheduler.framework.interface import Code
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.plugins import node_resources_fit
from emulator.scheduler.plugins.resource_allocation import least_allocated_scorer, parse_resources
from tests.builders import pod, req_pod, res_container, sched_node
from tests.unit.scheduler.util import run_filter, run_score

GI = 2**30
MI = 2**20


# -- Filter -------------------------------------------------------------------------------------------------

FILTER_CASES = [
    # (node kwargs, bound pods' (cpu, memory, extra), pod (cpu, memory, extra), args, expected (code, reasons) or None)
    ({}, [], ("1", "1Gi", None), None, None),
    ({}, [("3500m", None, None)], ("1", None, None), None, (Code.UNSCHEDULABLE, ["Insufficient cpu"])),
    ({}, [("3", "7Gi", None)], ("2", "2Gi", None), None,
     (Code.UNSCHEDULABLE, ["Insufficient cpu", "Insufficient memory"])),
    ({}, [], ("5", None, None), None, (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient cpu"])),
    ({}, [("1", None, None)], ("3", "9Gi", None), None,
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient memory"])),
    ({"pods": "1"}, [(None, None, None)], (None, None, None), None, (Code.UNSCHEDULABLE, ["Too many pods"])),
    ({"pods": "1"}, [(None, None, None)], ("5", None, None), None,
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Too many pods", "Insufficient cpu"])),
    ({}, [("4", "8Gi", None)], (None, None, None), None, None),  # no requests: only a pod slot is needed
    ({"nvidia.com/gpu": "2"}, [(None, None, {"nvidia.com/gpu": "1"})], (None, None, {"nvidia.com/gpu": "2"}), None,
     (Code.UNSCHEDULABLE, ["Insufficient nvidia.com/gpu"])),
    ({}, [], ("1", None, {"nvidia.com/gpu": "1"}), None,
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient nvidia.com/gpu"])),
    ({}, [], (None, None, {"example.com/foo": "1"}), {"ignoredResources": ["example.com/foo"]}, None),
    ({}, [], (None, None, {"example.com/foo": "1"}), {"ignoredResourceGroups": ["example.com"]}, None),
    ({}, [], (None, None, {"example.com/foo": "1"}), {"ignoredResourceGroups": ["other.io"]},
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient example.com/foo"])),
    ({"ephemeral-storage": "10Gi"}, [(None, None, {"ephemeral-storage": "8Gi"})],
     (None, None, {"ephemeral-storage": "4Gi"}), None, (Code.UNSCHEDULABLE, ["Insufficient ephemeral-storage"])),
    ({"hugepages-2Mi": "4Mi"}, [], (None, None, {"hugepages-2Mi": "6Mi"}), None,
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient hugepages-2Mi"])),
    ({"nvidia.com/gpu": "8"}, [(None, None, {"nvidia.com/gpu": "4"})],
     ("1", None, {"nvidia.com/gpu": "4", "example.com/a": "1"}), None,
     (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient example.com/a"])),
]
FILTER_IDS = ["fits", "cpu", "cpu+memory", "cpu-unresolvable", "memory-unresolvable", "too-many-pods",
              "too-many-pods+cpu", "no-requests-on-full-node", "gpu-short", "gpu-absent", "ignored-resource",
              "ignored-group", "other-group", "ephemeral-storage", "hugepages", "scalars-sorted"]


@pytest.mark.parametrize(("node_kw", "bound", "want", "args", "expected"), FILTER_CASES, ids=FILTER_IDS)
def test_filter(node_kw, bound, want, args, expected):
    node = sched_node("n", cpu="4", memory="8Gi", **node_kw)
    pods = [req_pod(f"b{i}", cpu, mem, node="n", extra=extra) for i, (cpu, mem, extra) in enumerate(bound)]
    snapshot = Snapshot.build([node], pods)
    cpu, mem, extra = want
    [status] = run_filter(node_resources_fit.new(args), req_pod("p", cpu, mem, extra=extra), snapshot)
    if expected is None:
        assert status is None
    else:
        assert status is not None
        assert (status.code, status.reasons) == expected


def test_filter_counts_init_containers_and_overhead():
    # Effective request: max(init 3 cpu, app 1+1 cpu) + overhead 500m = 3500m > 3 cpu free.
    snapshot = Snapshot.build([sched_node("n", cpu="4")], [req_pod("b", "1", node="n")])
    p = pod("p", containers=[res_container("a", {"cpu": "1"}), res_container("b", {"cpu": "1"})],
            init=[res_container("i", {"cpu": "3"})], overhead={"cpu": "500m"})
    [status] = run_filter(node_resources_fit.new(None), p, snapshot)
    assert status is not None and status.reasons == ["Insufficient cpu"]
    small = pod("q", containers=[res_container("a", {"cpu": "1"})], init=[res_container("i", {"cpu": "3"})])
    assert run_filter(node_resources_fit.new(None), small, snapshot) == [None]


# -- Score ----------------------------------------------------------------------------------------------------

def least(requested: int, allocatable: int) -> int:
    """least_allocated.go leastRequestedScore."""
    return 0 if requested > allocatable else (allocatable - requested) * 100 // allocatable


def most(requested: int, allocatable: int) -> int:
    """most_allocated.go mostRequestedScore."""
    return min(requested, allocatable) * 100 // allocatable


def weighted(per_resource: list[tuple[int, int]]) -> int:
    """(score, weight) pairs -> weighted mean, Go integer division."""
    return sum(s * w for s, w in per_resource) // sum(w for _, w in per_resource)


# Node: 4 cpu (4000m), 10000 bytes of memory. Bound pods' requests are in parentheses of each case.
SCORE_CASES = [
    # (bound pods as (cpu, memory) strings or None, pod (cpu, memory), expected (cpu_req_total, mem_req_total))
    ([], ("1", "2500"), (1000, 2500)),
    ([("1", "5000")], ("1", "2500"), (2000, 7500)),
    ([("3", "9000")], ("2", "2000"), (5000, 11000)),  # over allocatable: least -> 0, most -> clamped
    ([(None, None)], ("1", "1000"), (1100, 1000 + 200 * MI)),  # a request-less pod counts 100m / 200Mi
    ([], (None, None), (100, 200 * MI)),  # the pod itself without requests: the defaults too
    ([("500m", None)], ("0", "0"), (500, 200 * MI)),  # explicit 0: kept for cpu; the bound pod lacks memory
]
SCORE_IDS = ["empty-node", "half-used", "overcommitted", "request-less-bound-pod", "request-less-pod",
             "explicit-zero"]


def _score_snapshot(bound: list[tuple[str | None, str | None]]) -> Snapshot:
    node = sched_node("n", cpu="4", memory="10000")
    return Snapshot.build([node], [req_pod(f"b{i}", c, m, node="n") for i, (c, m) in enumerate(bound)])


@pytest.mark.parametrize(("bound", "want", "totals"), SCORE_CASES, ids=SCORE_IDS)
@pytest.mark.parametrize("weights", [(1, 1), (3, 1)], ids=["w1-1", "w3-1"])
def test_least_allocated(bound, want, totals, weights):
    args = {"scoringStrategy": {"type": "LeastAllocated", "resources": [
        {"name": "cpu", "weight": weights[0]}, {"name": "memory", "weight": weights[1]}]}}
    _, [score] = run_score(node_resources_fit.new(args), req_pod("p", *want), _score_snapshot(bound))
    cpu, mem = totals
    assert score == weighted([(least(cpu, 4000), weights[0]), (least(mem, 10000), weights[1])])


# Nodes as (cpu, memory) (allocatable, requested) columns for the vectorised LeastAllocated scorer: every
# resource counted on every node (its shortcut), one over-committed, and a node without memory (the general form).
LEAST_MANY_CASES = {
    "all-counted": [((4000, 10000), (0, 0)), ((4000, 10000), (1000, 2500)), ((8000, 3), (7999, 1))],
    "over-committed": [((4000, 10000), (4500, 100)), ((4000, 10000), (4000, 10000))],
    "no-memory": [((4000, 0), (1000, 50)), ((4000, 10000), (1000, 5000))],
}


@pytest.mark.parametrize("nodes", list(LEAST_MANY_CASES.values()), ids=list(LEAST_MANY_CASES))
@pytest.mark.parametrize("weights", [(1, 1), (3, 1)], ids=["w1-1", "w3-1"])
def test_least_allocated_over_many_nodes_matches_the_formula(nodes, weights):
    scorer = least_allocated_scorer(parse_resources([{"name": "cpu", "weight": weights[0]},
                                                     {"name": "memory", "weight": weights[1]}]))
    allocatable = np.array([[a[0] for a, _ in nodes], [a[1] for a, _ in nodes]], dtype=np.int64)
    requested = np.array([[r[0] for _, r in nodes], [r[1] for _, r in nodes]], dtype=np.int64)
    # A resource the node does not have (allocatable 0) is left out of its weighted mean.
    expected = [weighted([(least(r, a), w) for r, a, w in zip(req, alloc, weights, strict=True) if a])
                for alloc, req in nodes]
    assert scorer.many(requested, allocatable).tolist() == expected


@pytest.mark.parametrize(("bound", "want", "totals"), SCORE_CASES, ids=SCORE_IDS)
def test_most_allocated(bound, want, totals):
    args = {"scoringStrategy": {"type": "MostAllocated"}}
    _, [score] = run_score(node_resources_fit.new(args), req_pod("p", *want), _score_snapshot(bound))
    cpu, mem = totals
    assert score == weighted([(most(cpu, 4000), 1), (most(mem, 10000), 1)])


def test_least_allocated_hand_computed():
    # 4-cpu node with 1 cpu requested; the pod adds 1 cpu: (4000-2000)*100/4000 = 50 for cpu,
    # memory 10000 with 2500+2500 requested: 50; mean 50.
    snapshot = _score_snapshot([("1", "2500")])
    _, [score] = run_score(node_resources_fit.new(None), req_pod("p", "1", "2500"), snapshot)
    assert score == 50


def broken_linear(shape: list[tuple[int, int]], p: int) -> int:
    """helper/shape_score.go BuildBrokenLinearFunction with scores already scaled to 0..100."""
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            u0, s0 = shape[i - 1]
            return s0 + int((s - s0) * (p - u0) / (u - u0))  # Go truncates toward zero
    return shape[-1][1]


def rtcr(pairs: list[tuple[int, int, int]], shape: list[tuple[int, int]]) -> int:
    """requested_to_capacity_ratio.go: (requested, allocatable, weight) per resource."""
    total = weights = 0
    for req, alloc, weight in pairs:
        if alloc == 0:
            continue
        score = broken_linear(shape, 100 if req > alloc else req * 100 // alloc)
        if score > 0:
            total += score * weight
            weights += weight
    return 0 if weights == 0 else math.floor(total / weights + 0.5)


RTCR_SHAPES = {
    "bin-packing": [(0, 0), (100, 10)],
    "spreading": [(0, 10), (100, 0)],
    "three-points": [(0, 2), (50, 9), (100, 3)],
}


@pytest.mark.parametrize("shape", list(RTCR_SHAPES.values()), ids=list(RTCR_SHAPES))
@pytest.mark.parametrize(("bound", "want", "gpu"), [
    ([], ("1", "2500"), None),
    ([("1", "5000")], ("500m", "1234"), None),
    ([("3", "9000")], ("2", "2000"), None),
    ([("1", "3000")], ("1", "1000"), "1"),
    ([], (None, None), "3"),
], ids=["empty", "partly-used", "overcommitted", "with-gpu", "gpu-only"])
def test_requested_to_capacity_ratio(shape, bound, want, gpu):
    args = {"scoringStrategy": {"type": "RequestedToCapacityRatio", "resources": [
        {"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 5}],
        "requestedToCapacityRatio": {"shape": [{"utilization": u, "score": s} for u, s in shape]}}}
    node = sched_node("n", cpu="4", memory="10000", **{"nvidia.com/gpu": "4"})
    snapshot = Snapshot.build([node], [req_pod(f"b{i}", c, m, node="n") for i, (c, m) in enumerate(bound)])
    extra = {"nvidia.com/gpu": gpu} if gpu else None
    p = req_pod("p", *want, extra=extra)
    _, [score] = run_score(node_resources_fit.new(args), p, snapshot)
    info = snapshot.node_info(0)
    pi = PodInfo.of(p)
    pairs = [(info.nonzero_requested["cpu"] + pi.nonzero_cpu, 4000, 2),
             (info.nonzero_requested["memory"] + pi.nonzero_memory, 10000, 1)]
    if gpu:  # an extended resource counts only when the pod requests it
        pairs.append((int(gpu), 4, 5))
    scaled = [(u, s * 10) for u, s in shape]
    assert score == rtcr(pairs, scaled)


def test_invalid_args_are_rejected():
    with pytest.raises(ValueError, match="weight"):
        node_resources_fit.new({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}})
    with pytest.raises(ValueError, match="not supported"):
        node_resources_fit.new({"scoringStrategy": {"type": "Random"}})
    with pytest.raises(ValueError, match="increasing"):
        node_resources_fit.new({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
            "shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]}}})
