"""NodeResourcesBalancedAllocation against upstream's standard-deviation formula."""

from __future__ import annotations

import math

import pytest

from emulator.scheduler.framework.interface import Code
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.plugins import node_resources_balanced_allocation as balanced
from tests.builders import req_pod, sched_node
from tests.unit.scheduler.util import run_score


def balanced_score(pairs: list[tuple[int, int]]) -> int:
    """balanced_allocation.go balancedResourceScorer over (requested, allocatable) pairs."""
    fractions = [min(req / alloc, 1.0) for req, alloc in pairs if alloc != 0]
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    else:
        std = 0.0
    return int((1 - std) * 100)


CASES = [
    # bound pods (cpu, memory), pod (cpu, memory) -> real requests on a 4-cpu / 10000-byte node
    ([], ("1", "2500"), [(1000, 4000), (2500, 10000)]),
    ([], ("2", "1000"), [(2000, 4000), (1000, 10000)]),
    ([("1", "8000")], ("1", "1000"), [(2000, 4000), (9000, 10000)]),
    ([("3", "1000")], ("2", "1000"), [(5000, 4000), (2000, 10000)]),  # cpu fraction capped at 1
    ([(None, None)], ("1", None), [(1000, 4000), (0, 10000)]),  # real requests: request-less pods add nothing
]


@pytest.mark.parametrize(("bound", "want", "pairs"), CASES,
                         ids=["even", "cpu-heavy", "memory-heavy", "capped", "no-defaults"])
def test_two_resources(bound, want, pairs):
    snapshot = Snapshot.build([sched_node("n", cpu="4", memory="10000")],
                              [req_pod(f"b{i}", c, m, node="n") for i, (c, m) in enumerate(bound)])
    status, [score] = run_score(balanced.new(None), req_pod("p", *want), snapshot)
    assert status is None
    assert score == balanced_score(pairs)


def test_hand_computed_values():
    # cpu 2000/4000 = 0.5, memory 1000/10000 = 0.1: std = 0.2, score = 80.
    snapshot = Snapshot.build([sched_node("n", cpu="4", memory="10000")])
    _, [score] = run_score(balanced.new(None), req_pod("p", "2", "1000"), snapshot)
    assert score == 80


@pytest.mark.parametrize(("gpu_alloc", "gpu_used", "gpu_want"), [
    ("8", "2", "2"), ("8", "0", "8"), ("0", "0", "1"), ("4", "1", "0"),
], ids=["three-fractions", "gpu-full", "node-without-gpu", "pod-without-gpu"])
def test_three_resources(gpu_alloc, gpu_used, gpu_want):
    args = {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                          {"name": "nvidia.com/gpu", "weight": 1}]}
    node = sched_node("n", cpu="4", memory="10000", **{"nvidia.com/gpu": gpu_alloc})
    bound = [req_pod("b", "1", "2000", node="n", extra={"nvidia.com/gpu": gpu_used})]
    snapshot = Snapshot.build([node], bound)
    p = req_pod("p", "1", "1000", extra={"nvidia.com/gpu": gpu_want})
    _, [score] = run_score(balanced.new(args), p, snapshot)
    pairs = [(2000, 4000), (3000, 10000)]
    if int(gpu_want):  # a scalar resource the pod does not request is left out
        pairs.append((int(gpu_used) + int(gpu_want), int(gpu_alloc)))
    assert score == balanced_score(pairs)


def test_best_effort_pod_skips_scoring():
    snapshot = Snapshot.build([sched_node("n")])
    status, _ = run_score(balanced.new(None), req_pod("p"), snapshot)
    assert status is not None and status.code == Code.SKIP
