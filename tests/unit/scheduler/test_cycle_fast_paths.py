"""The scheduling cycle's fast paths give exactly what the general path (and upstream's formula) gives.

Each fast path skips numpy calls for the usual case -- many tied nodes in
``select_host``, cpu+memory on every node for the resource scorers, nothing
rejected by NodeResourcesFit -- and must not change a node choice, a score,
a reason or the random generator's state.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from emulator.scheduler import in_tree_registry, new_framework
from emulator.scheduler.framework.interface import Code, CycleState, Status
from emulator.scheduler.framework.profile import PluginRef, PluginSet, Profile
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo, ScheduleResult, SchedulingError
from emulator.scheduler.framework.visiting import select_host
from emulator.scheduler.plugins import node_resources_fit
from emulator.scheduler.plugins.resource_allocation import (
    balanced_scorer,
    least_allocated_scorer,
    nodes_amount_rows,
    parse_resources,
)
from tests.builders import req_pod, sched_node

# -- select_host ------------------------------------------------------------------------------------------------


def _reservoir(nodes: np.ndarray, totals: np.ndarray, rng: random.Random) -> int:
    """Upstream ``selectHost``: the k-th tied node replaces the choice with probability 1/k, one draw per tie."""
    best = max(totals.tolist())
    ties = [i for i, t in enumerate(totals.tolist()) if t == best]
    chosen = ties[0]
    for k, t in enumerate(ties[1:], start=2):
        if rng.random() * k < 1:
            chosen = t
    return int(nodes[chosen])


class _OwnRandom(random.Random):
    """A generator whose draws select_host must take one by one (it cannot know how they are made)."""


@pytest.mark.parametrize("ties", [1, 2, 15, 16, 17, 100, 230, 500, 2999], ids=lambda n: f"{n}-ties")
@pytest.mark.parametrize("seed", [0, 1, 7, 2024])
@pytest.mark.parametrize("rng_type", [random.Random, _OwnRandom], ids=["Random", "subclass"])
def test_select_host_draws_as_upstreams_loop(ties, seed, rng_type):
    layout = random.Random(seed * 7919 + ties)
    others = ties // 3 + 5
    totals = np.asarray([300] * ties + [layout.randrange(0, 300) for _ in range(others)], dtype=np.int64)
    layout.shuffle(totals)  # ties spread among lower scores
    nodes = np.arange(len(totals), dtype=np.intp) * 3 + 11
    ours, theirs = rng_type(seed), random.Random(seed)
    assert select_host(nodes, totals, ours) == _reservoir(nodes, totals, theirs)
    assert ours.getstate() == theirs.getstate()  # the same number of draws: later choices stay the same too


def test_select_host_beyond_the_batched_range_loops():
    ties = 100_001  # more than the batched draws' table covers
    nodes = np.arange(ties, dtype=np.intp)
    totals = np.zeros(ties, dtype=np.int64)
    ours, theirs = random.Random(11), random.Random(11)
    assert select_host(nodes, totals, ours) == _reservoir(nodes, totals, theirs)
    assert ours.getstate() == theirs.getstate()


def test_select_host_over_many_ties_is_uniform():
    nodes = np.arange(40, dtype=np.intp)
    totals = np.zeros(40, dtype=np.int64)
    rng = random.Random(3)
    counts = np.bincount([select_host(nodes, totals, rng) for _ in range(8000)], minlength=40)
    assert counts.min() > 120 and counts.max() < 290, counts  # 200 expected each


# -- resource scorers: the row forms ------------------------------------------------------------------------------


def least(requested: int, allocatable: int) -> int:
    """least_allocated.go leastRequestedScore."""
    return 0 if requested > allocatable else (allocatable - requested) * 100 // allocatable


def balanced(fractions: list[float]) -> int:
    """balanced_allocation.go for two resources: (1 - |f1 - f2| / 2) * 100, fractions capped at 1, truncated."""
    std = abs((fractions[0] - fractions[1]) / 2)
    return int((1 - std) * 100.0)


# Nodes as ((cpu alloc, memory alloc), (cpu requested, memory requested)), the pod included.
ROW_CASES: dict[str, list[tuple[tuple[int, int], tuple[int, int]]]] = {
    "empty-nodes": [((4000, 32 * 2**30), (100, 500 * 2**20)), ((8000, 64 * 2**30), (100, 500 * 2**20))],
    "part-full": [((4000, 10000), (3700, 10)), ((4000, 10000), (1, 9999)), ((3, 7), (1, 5)), ((4000, 10000), (0, 0))],
    "over-committed": [((4000, 10000), (4500, 100)), ((4000, 10000), (4000, 10001)), ((1000, 1000), (9999, 9999))],
    "exact-fit": [((4000, 10000), (4000, 10000)), ((999, 333), (333, 111))],
}


@pytest.mark.parametrize("nodes", list(ROW_CASES.values()), ids=list(ROW_CASES))
@pytest.mark.parametrize("weights", [(1, 1), (3, 1), (1, 100)], ids=["w1-1", "w3-1", "w1-100"])
def test_least_allocated_rows_match_the_formula(nodes, weights):
    scorer = least_allocated_scorer(parse_resources([{"name": "cpu", "weight": weights[0]},
                                                     {"name": "memory", "weight": weights[1]}]))
    alloc = [np.asarray([a[r] for a, _ in nodes], dtype=np.int64) for r in (0, 1)]
    req = [np.asarray([q[r] for _, q in nodes], dtype=np.int64) for r in (0, 1)]
    expected = [sum(least(q[r], a[r]) * weights[r] for r in (0, 1)) // sum(weights) for a, q in nodes]
    assert scorer.rows is not None
    assert scorer.rows(req, alloc).tolist() == expected
    assert scorer.many(np.stack(req), np.stack(alloc)).tolist() == expected


@pytest.mark.parametrize("nodes", list(ROW_CASES.values()), ids=list(ROW_CASES))
def test_balanced_rows_match_the_formula(nodes):
    scorer = balanced_scorer()
    alloc = [np.asarray([a[r] for a, _ in nodes], dtype=np.int64) for r in (0, 1)]
    req = [np.asarray([q[r] for _, q in nodes], dtype=np.int64) for r in (0, 1)]
    expected = [balanced([min(q[r] / a[r], 1.0) for r in (0, 1)]) for a, q in nodes]
    assert scorer.rows is not None
    assert scorer.rows(req, alloc).tolist() == expected
    assert scorer.many(np.stack(req), np.stack(alloc)).tolist() == expected


def test_row_forms_decline_what_they_do_not_cover():
    zero = [np.asarray([4000, 0], dtype=np.int64), np.asarray([100, 100], dtype=np.int64)]
    some = [np.asarray([10, 10], dtype=np.int64), np.asarray([10, 10], dtype=np.int64)]
    assert least_allocated_scorer(parse_resources(None)).rows(some, zero) is None  # a node without the resource
    assert balanced_scorer().rows(some, zero) is None
    three = [some[0], some[0], some[0]]
    assert balanced_scorer().rows(three, three) is None  # more than two fractions: the population std form
    snapshot = Snapshot.build([sched_node("a", **{"nvidia.com/gpu": "8"})])
    resources = parse_resources([{"name": "cpu"}, {"name": "nvidia.com/gpu"}])
    assert nodes_amount_rows(snapshot, np.asarray([0]), resources, [100, 1], use_requested=False) is None


# -- the default profile end to end: vectorised (fast paths) against per node ----------------------------------------


def _cluster(seed: int, n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(seed)
    nodes, bound = [], []
    for i in range(n):
        cpu = rng.choice(("2", "4", "8"))
        node = sched_node(f"n{i:03d}", cpu=cpu, memory=rng.choice(("4Gi", "8Gi", "32Gi")),
                          pods=str(rng.choice((3, 5, 110))))
        nodes.append(node)
        for j in range(rng.randrange(0, 4)):
            p = req_pod(f"b{i}-{j}", rng.choice(("100m", "500m", "900m", "1500m")),
                        rng.choice(("128Mi", "500Mi", "2Gi")))
            p["spec"]["nodeName"] = node["metadata"]["name"]
            bound.append(p)
    return nodes, bound


@pytest.mark.parametrize("seed", [1, 2, 3, 4], ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("n", [12, 140], ids=lambda n: f"{n}-nodes")
def test_default_profile_fast_paths_place_and_reject_as_the_per_node_path(seed, n):
    nodes, bound = _cluster(seed, n)
    stream = [req_pod(f"p{i}", random.Random(seed + i).choice(("100m", "1", "3")),
                      random.Random(seed - i).choice(("100Mi", "1Gi", "20Gi"))) for i in range(40)]
    runs = {}
    for vectorised in (True, False):
        snapshot = Snapshot.build(nodes, bound)
        fw = new_framework(rng=random.Random(seed), vectorised=vectorised)
        log = []
        for raw in stream:
            info = PodInfo.of(raw)
            result = fw.schedule_one(info, snapshot)
            if isinstance(result, ScheduleResult):
                snapshot.assume(info, result.node_index)
                log.append(("placed", result.node, result.evaluated, result.feasible))
            else:
                statuses = sorted((name, s.code, s.plugin, tuple(s.reasons))
                                  for name, s in result.diagnosis.node_to_status.items())
                log.append(("unschedulable", result.message, tuple(statuses)))
        runs[vectorised] = (log, fw.rng.getstate())
    assert runs[True] == runs[False]
    assert any(entry[0] == "placed" for entry in runs[True][0])


@pytest.mark.parametrize("seed", [5, 6], ids=lambda s: f"seed{s}")
def test_default_profile_scores_equal_the_per_node_scores(seed):
    nodes, bound = _cluster(seed, 60)
    snapshot = Snapshot.build(nodes, bound)
    pod = PodInfo.of(req_pod("p", "200m", "300Mi"))
    scores = {}
    for vectorised in (True, False):
        fw = new_framework(rng=random.Random(seed), vectorised=vectorised)
        state = CycleState()
        feasible, _ = fw.find_nodes_that_fit(state, pod, snapshot)
        result = fw.prioritize_nodes(state, pod, snapshot, feasible)
        scores[vectorised] = (result.nodes.tolist(), result.totals.tolist(),
                              {k: v.tolist() for k, v in result.plugin_scores.items()})
    assert scores[True] == scores[False]


# -- NodeResourcesFit's Filter ------------------------------------------------------------------------------------

# (node kwargs, bound pods' (cpu, memory), the pod's (cpu, memory)) and the per-node Filter's answer.
FIT_CASES = {
    "fits": ({"cpu": "4", "memory": "4Gi"}, [("1", "1Gi")], ("1", "1Gi")),
    "short-cpu": ({"cpu": "4", "memory": "4Gi"}, [("3500m", "1Gi")], ("1", "1Gi")),
    "short-both": ({"cpu": "4", "memory": "4Gi"}, [("3500m", "3900Mi")], ("1", "1Gi")),
    "too-big": ({"cpu": "4", "memory": "4Gi"}, [], ("5", "1Gi")),
    "too-many-pods": ({"cpu": "4", "memory": "4Gi", "pods": "1"}, [("1", "1Gi")], ("1", "1Gi")),
    "all-three": ({"cpu": "2", "memory": "2Gi", "pods": "1"}, [("2", "2Gi")], ("3", "1Gi")),
}


@pytest.mark.parametrize("case", list(FIT_CASES), ids=list(FIT_CASES))
def test_fit_filter_all_reports_what_the_per_node_filter_reports(case):
    node_kw, bound_requests, (cpu, memory) = FIT_CASES[case]
    nodes = [sched_node("fine", cpu="64", memory="64Gi"), sched_node("x", **node_kw)]
    bound = []
    for j, (c, m) in enumerate(bound_requests):
        p = req_pod(f"b{j}", c, m)
        p["spec"]["nodeName"] = "x"
        bound.append(p)
    snapshot = Snapshot.build(nodes, bound)
    plugin = node_resources_fit.new(None)
    pod = PodInfo.of(req_pod("p", cpu, memory))
    verdict = plugin.filter_all(CycleState(), pod, snapshot)
    for i in range(snapshot.num_nodes):
        expected = plugin.filter(CycleState(), pod, snapshot.node_info(i))
        assert bool(verdict.mask[i]) == (expected is None)
        if expected is not None:
            got = verdict.status_for(i, plugin.name)
            assert (got.code, got.reasons) == (expected.code, expected.reasons)
    assert verdict.passes_all == (case == "fits")


def test_fit_filter_reasons_follow_upstreams_order_and_codes():
    # fit.go fitsRequest: pods first, then cpu, memory; a request above the whole allocatable is unresolvable.
    node_kw, bound_requests, (cpu, memory) = FIT_CASES["all-three"]
    node = sched_node("x", **node_kw)
    p = req_pod("b0", *bound_requests[0])
    p["spec"]["nodeName"] = "x"
    snapshot = Snapshot.build([node], [p])
    verdict = node_resources_fit.new(None).filter_all(CycleState(), PodInfo.of(req_pod("p", cpu, memory)), snapshot)
    status = verdict.status_for(0, "NodeResourcesFit")
    assert status.reasons == ["Too many pods", "Insufficient cpu", "Insufficient memory"]
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE  # 3 cpu > 2 allocatable


# -- Score's range check ------------------------------------------------------------------------------------------


class _Negative:
    name = "Negative"

    def score(self, state: CycleState, pod: PodInfo, node: Any) -> tuple[int, Status | None]:
        return -1, None

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray:
        return np.full(len(nodes), -1, dtype=np.int64)


@pytest.mark.parametrize("vectorised", [True, False], ids=["vectorised", "per-node"])
def test_a_negative_score_is_out_of_range(vectorised):
    registry = in_tree_registry()
    registry.register("Negative", lambda args, handle: _Negative())
    profile = Profile(points={"score": PluginSet([PluginRef("Negative")])},
                      multi_point=PluginSet([PluginRef("NodeResourcesFit")]))
    fw = Framework(registry, profile, vectorised=vectorised)
    with pytest.raises(SchedulingError) as caught:
        fw.schedule_one(req_pod("p"), Snapshot.build([sched_node("a"), sched_node("b")]))
    assert str(caught.value) == ("plugin 'Negative' returns an invalid score -1, it should in the range of "
                                 "[0, 100] after normalizing")


# -- NodeResourcesFit's headroom shortcut ---------------------------------------------------------------------------


def _verdict_view(verdict: Any, plugin: Any, n: int) -> list[tuple[bool, Any]]:
    """Per node: passes, and the status the verdict gives a rejected node (code and reasons)."""
    out = []
    for i in range(n):
        if verdict.mask[i]:
            out.append((True, None))
        else:
            status = verdict.status_for(i, plugin.name)
            out.append((False, (status.code, tuple(status.reasons))))
    return out


# Steps on a 4-node cluster (2 cpu, 2Gi, 3 pod slots each): ("assume", pod name, cpu, memory, node) /
# ("forget", pod name, node), and the incoming pod's (cpu, memory) checked after every step.
HEADROOM_CASES = {
    "fill-one-node": ([("assume", "a", "1", "1Gi", 0), ("assume", "b", "900m", "100Mi", 0),
                       ("assume", "c", "100m", "100Mi", 0)], ("100m", "100Mi")),
    "fill-then-free": ([("assume", "a", "1900m", "1Gi", 2), ("forget", "a", 2), ("assume", "b", "1", "1Gi", 2),
                        ("forget", "b", 2)], ("200m", "1Gi")),
    "slots-run-out": ([("assume", f"p{i}", "10m", "10Mi", 3) for i in range(4)], ("10m", "10Mi")),
    "memory-then-cpu": ([("assume", "m", "100m", "1900Mi", 1), ("assume", "c", "1950m", "1Mi", 3),
                         ("forget", "m", 1)], ("100m", "200Mi")),
    "too-big-anyway": ([("assume", "a", "1", "1Gi", 0)], ("3", "1Gi")),
}


@pytest.mark.parametrize("case", list(HEADROOM_CASES), ids=list(HEADROOM_CASES))
def test_fit_headroom_keeps_the_verdicts_of_a_fresh_filter(case):
    steps, (cpu, memory) = HEADROOM_CASES[case]
    snapshot = Snapshot.build([sched_node(f"n{i}", cpu="2", memory="2Gi", pods="3") for i in range(4)])
    incoming = PodInfo.of(req_pod("incoming", cpu, memory))
    kept = node_resources_fit.new(None)  # sees the snapshot object every step, as a scheduler's cycle does
    kept.filter_all(CycleState(), incoming, snapshot)
    placed: dict[str, PodInfo] = {}
    for step in steps:
        if step[0] == "assume":
            _, name, c, m, node = step
            placed[name] = snapshot.assume(req_pod(name, c, m), node)
        else:
            _, name, node = step
            snapshot.forget(placed.pop(name), node)
        for _ in range(2):  # the second look takes the kept bounds
            ours = kept.filter_all(CycleState(), incoming, snapshot)
            fresh = node_resources_fit.new(None).filter_all(CycleState(), incoming, snapshot)
            assert _verdict_view(ours, kept, 4) == _verdict_view(fresh, kept, 4)
            per_node = [node_resources_fit.new(None).filter(CycleState(), incoming, snapshot.node_info(i))
                        for i in range(4)]
            assert [v[0] for v in _verdict_view(ours, kept, 4)] == [s is None for s in per_node]


def test_fit_headroom_is_not_fooled_by_what_if_columns():
    # Preemption's dry run and the nominated-pods pass change a view's requested columns in place (no log).
    from emulator.scheduler.framework.overlay import RequestOverlay

    snapshot = Snapshot.build([sched_node(f"n{i}", cpu="2", memory="2Gi", pods="3") for i in range(3)])
    incoming = PodInfo.of(req_pod("incoming", "1", "1Gi"))
    plugin = node_resources_fit.new(None)
    overlay = RequestOverlay(snapshot)
    for _ in range(2):
        assert plugin.filter_all(CycleState(), incoming, overlay.snapshot).mask.tolist() == [True] * 3
    overlay.add([1], {"cpu": np.asarray([1500])}, np.asarray([1]), +1)
    for _ in range(2):
        assert plugin.filter_all(CycleState(), incoming, overlay.snapshot).mask.tolist() == [True, False, True]
    overlay.add([1], {"cpu": np.asarray([1500])}, np.asarray([1]), -1)
    assert plugin.filter_all(CycleState(), incoming, overlay.snapshot).mask.tolist() == [True] * 3


@pytest.mark.parametrize("n", [50, 130, 260], ids=lambda n: f"{n}-nodes")
def test_a_cluster_where_every_node_fits_is_visited_round_robin_as_per_node(n):
    # numFeasibleNodesToFind: all below 100 nodes, else max(5, 50 - n/125) % but at least 100.
    nodes = [sched_node(f"n{i:03d}", cpu="64", memory="256Gi") for i in range(n)]
    runs = {}
    for vectorised in (True, False):
        snapshot = Snapshot.build(nodes)
        fw = new_framework(rng=random.Random(n), vectorised=vectorised)
        log = []
        for i in range(12):
            info = PodInfo.of(req_pod(f"p{i}", "100m", "100Mi"))
            result = fw.schedule_one(info, snapshot)
            assert isinstance(result, ScheduleResult)
            snapshot.assume(info, result.node_index)
            log.append((result.node, result.evaluated, result.feasible, fw.next_start_node_index))
        runs[vectorised] = log
    assert runs[True] == runs[False]
    wanted = n if n < 100 else max(n * max(5, 50 - n // 125) // 100, 100)
    assert [entry[2] for entry in runs[True]] == [wanted] * 12
    # schedule_one.go: nextStartNodeIndex advances by the nodes processed (the feasible ones, nothing rejected).
    assert [entry[3] for entry in runs[True]] == [(wanted * (k + 1)) % n for k in range(12)]


def test_fit_headroom_survives_a_what_if_view_each_cycle():
    # With nominated pods, every cycle also filters a what-if view of the snapshot: the scheduler's own snapshot
    # keeps its bounds, and both keep their verdicts.
    from emulator.scheduler.framework.overlay import RequestOverlay

    snapshot = Snapshot.build([sched_node(f"n{i}", cpu="4", memory="4Gi", pods="10") for i in range(5)])
    plugin = node_resources_fit.new(None)
    small = PodInfo.of(req_pod("small", "100m", "100Mi"))
    for k in range(6):
        snapshot.assume(req_pod(f"p{k}", "500m", "100Mi"), k % 5)
        assert plugin.filter_all(CycleState(), small, snapshot).passes_all
        overlay = RequestOverlay(snapshot)
        overlay.add([k % 5], {"cpu": np.asarray([3800])}, np.asarray([1]), +1)  # a nominated pod's room
        view = plugin.filter_all(CycleState(), small, overlay.snapshot)
        assert view.mask.tolist() == [i != k % 5 for i in range(5)]
    assert plugin.headroom.fits_everywhere(snapshot, [("cpu", 100), ("memory", 100 * 2**20)])
    assert plugin.headroom.fits_everywhere(snapshot, [("cpu", 3000)])  # n0 holds 2 x 500m: 3,000m free
    assert not plugin.headroom.fits_everywhere(snapshot, [("cpu", 3001)])
