"""The framework runtime: profiles, PreFilter/Filter/Score flow, node sampling, host selection, FitError text."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from emulator.scheduler import in_tree_registry, new_framework
from emulator.scheduler.framework.interface import Code, CycleState, Status
from emulator.scheduler.framework.profile import PluginRef, PluginSet, Profile
from emulator.scheduler.framework.runtime import Framework, num_feasible_nodes_to_find, select_host
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import (
    FitError,
    NoNodesAvailable,
    PodInfo,
    QueuedPodInfo,
    ScheduleResult,
    SchedulingError,
)
from tests.builders import pod, req_pod, res_container, sched_node, taint


@pytest.mark.parametrize(("nodes", "percentage", "expected"), [
    (0, 0, 0), (50, 0, 50), (99, 0, 99), (100, 0, 100), (300, 0, 144), (1000, 0, 420), (5000, 0, 500),
    (6000, 0, 300), (20000, 0, 1000), (100000, 0, 5000), (1000, 10, 100), (5000, 1, 100), (5000, 100, 5000),
    (99, 1, 99),
], ids=str)
def test_num_feasible_nodes_to_find(nodes, percentage, expected):
    # schedule_one.go: all below 100; else max(5, 50 - n/125) % (or the configured %), at least 100.
    assert num_feasible_nodes_to_find(nodes, percentage) == expected


def test_profile_percentage_overrides_global():
    registry = in_tree_registry()
    assert Framework(registry, percentage_of_nodes_to_score=20).num_feasible_nodes_to_find(1000) == 200
    profile = Profile.default(registry, percentage_of_nodes_to_score=30)
    assert Framework(registry, profile, percentage_of_nodes_to_score=20).num_feasible_nodes_to_find(1000) == 300
    with pytest.raises(ValueError, match="percentageOfNodesToScore"):
        Profile(percentage_of_nodes_to_score=101)


# -- profiles -----------------------------------------------------------------------------------------------------


def test_default_profile_order_and_weights():
    # Upstream's default profile (default_plugins.go) with every ported plugin, in upstream's order per point.
    fw = new_framework()
    names = {point: [p.name for p in fw.plugins_at(point)] for point in (
        "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve", "preBind")}
    assert names == {
        "preEnqueue": ["SchedulingGates"],
        "queueSort": ["PrioritySort"],
        "preFilter": ["NodeAffinity", "NodePorts", "NodeResourcesFit", "VolumeBinding", "VolumeZone",
                      "PodTopologySpread", "InterPodAffinity"],
        "filter": ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
                   "NodeResourcesFit", "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity"],
        "postFilter": ["DefaultPreemption"],
        "preScore": ["TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity",
                     "NodeResourcesBalancedAllocation", "ImageLocality"],
        "score": ["TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity",
                  "NodeResourcesBalancedAllocation", "ImageLocality"],
        "reserve": ["VolumeBinding"],
        "preBind": ["VolumeBinding"],
    }
    assert fw.score_weights == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
                                "PodTopologySpread": 2, "InterPodAffinity": 2,
                                "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}
    # Example research plugins are registered (a configuration can name them) but not enabled by default.
    assert "GPUBinPack" in in_tree_registry() and "GPUBinPack" not in fw.plugins


def test_profile_overrides_disables_and_errors():
    registry = in_tree_registry()
    profile = Profile.default(registry, points={
        "score": PluginSet(enabled=[PluginRef("ImageLocality", 5)], disabled=["TaintToleration"]),
        "filter": PluginSet(disabled=["*"], enabled=[PluginRef("NodeResourcesFit")])})
    fw = Framework(registry, profile)
    # A plugin in both multiPoint and the point's own set comes first, with the point's weight.
    assert [p.name for p in fw.plugins_at("score")] == ["ImageLocality", "NodeAffinity", "NodeResourcesFit",
                                                        "PodTopologySpread", "InterPodAffinity",
                                                        "NodeResourcesBalancedAllocation"]
    assert fw.score_weights["ImageLocality"] == 5
    assert [p.name for p in fw.plugins_at("filter")] == ["NodeResourcesFit"]
    with pytest.raises(ValueError, match="does not exist"):
        Framework(registry, Profile(multi_point=PluginSet([PluginRef("NoSuchPlugin")])))
    with pytest.raises(ValueError, match="does not extend"):
        Framework(registry, Profile(points={"score": PluginSet([PluginRef("NodeName")])}))
    registry.register("OtherSort", lambda args, handle: type("S", (), {"name": "OtherSort",
                                                                      "less": lambda self, a, b: False})())
    with pytest.raises(ValueError, match="queue sort"):
        Framework(registry, Profile(multi_point=PluginSet([PluginRef("PrioritySort"), PluginRef("OtherSort")])))
    with pytest.raises(ValueError, match="already exists"):
        registry.register("OtherSort", lambda args, handle: None)


# -- sampling and round robin -----------------------------------------------------------------------------------


def reference_visit(feasible: list[bool], start: int, wanted: int) -> tuple[list[int], int]:
    """schedule_one.go findNodesThatPassFilters with parallelism 1: (feasible nodes found, nodes processed)."""
    n = len(feasible)
    found: list[int] = []
    failed = 0
    for i in range(n):
        node = (start + i) % n
        if feasible[node]:
            if len(found) == wanted:
                break
            found.append(node)
        else:
            failed += 1
    return found, len(found) + failed


def test_round_robin_over_nodes_with_sampling():
    # 300 nodes, every third one tainted: 144 feasible nodes are wanted per cycle (48 %).
    nodes = [sched_node(f"n{i:03d}", taints=[taint("t")] if i % 3 == 0 else None) for i in range(300)]
    snapshot = Snapshot.build(nodes)
    feasible = [i % 3 != 0 for i in range(300)]
    fw = new_framework(rng=random.Random(3))
    start = 0
    for cycle in range(5):
        result = fw.schedule_one(req_pod(f"p{cycle}", "10m"), snapshot)
        found, processed = reference_visit(feasible, start, 144)
        assert isinstance(result, ScheduleResult)
        assert (result.feasible, result.evaluated) == (144, processed)
        assert result.node_index in found
        start = (start + processed) % 300
        assert fw.next_start_node_index == start


def test_single_feasible_node_is_taken_without_scoring():
    snapshot = Snapshot.build([sched_node("a", cpu="1"), sched_node("b", cpu="4"), sched_node("c", cpu="1")])
    result = new_framework(rng=random.Random(0)).schedule_one(req_pod("p", "2"), snapshot)
    assert result == ScheduleResult("b", 1, 3, 1)


# -- host selection --------------------------------------------------------------------------------------------


def test_select_host_reservoir_sampling():
    nodes = np.array([10, 11, 12, 13, 14])
    totals = np.array([5, 9, 9, 1, 9])
    rng = random.Random(42)
    assert select_host(nodes, np.array([1, 7, 3, 2, 0]), rng) == 11
    assert rng.random() == random.Random(42).random()  # a unique best score draws nothing
    counts = Counter(select_host(nodes, totals, random.Random(seed)) for seed in range(3000))
    assert set(counts) == {11, 12, 14}
    assert all(850 < c < 1150 for c in counts.values()), counts  # each tie about 1/3 of the time

    def reference(seed: int) -> int:
        # Upstream's loop: the k-th tied node replaces the choice with probability 1/k.
        r = random.Random(seed)
        ties = [i for i, t in enumerate(totals) if t == totals.max()]
        chosen = ties[0]
        for k, t in enumerate(ties[1:], start=2):
            if r.random() * k < 1:
                chosen = t
        return int(nodes[chosen])

    assert [select_host(nodes, totals, random.Random(s)) for s in range(50)] == [reference(s) for s in range(50)]
    with pytest.raises(ValueError):
        select_host(np.array([], dtype=int), np.array([], dtype=int), rng)


def test_seeded_frameworks_place_identically():
    nodes = [sched_node(f"n{i}") for i in range(20)]

    def run(seed: int) -> list[str]:
        snapshot = Snapshot.build(nodes)
        fw = new_framework(rng=random.Random(seed))
        placed = []
        for i in range(30):
            result = fw.schedule_one(req_pod(f"p{i}", "100m", "100Mi"), snapshot)
            assert isinstance(result, ScheduleResult)
            snapshot.assume(req_pod(f"p{i}", "100m", "100Mi"), result.node_index)
            placed.append(result.node)
        return placed

    assert run(7) == run(7)
    assert run(7) != run(8)


# -- FitError --------------------------------------------------------------------------------------------------


def not_helpful(n: int) -> str:
    """What DefaultPreemption appends when no node failed with a status preemption could fix."""
    return f" preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."


def test_fit_error_histogram_is_sorted_as_strings():
    nodes = [sched_node(f"small{i}", cpu="1") for i in range(10)]
    nodes += [sched_node(f"tainted{i}", taints=[taint("k", "v")]) for i in range(2)]
    nodes.append(sched_node("full", cpu="2", memory="1Gi"))
    result = new_framework().schedule_one(req_pod("p", "2", "2Gi"), Snapshot.build(nodes))
    assert isinstance(result, FitError)
    # "10 ..." sorts before "2 ..." as Go's sort.Strings does; "full" lacks cpu (no: 2 cpu fit) and memory.
    # Every node is UnschedulableAndUnresolvable, so DefaultPreemption adds upstream's "not helpful" text.
    assert str(result) == ("0/13 nodes are available: 1 Insufficient memory, 10 Insufficient cpu, "
                           "2 node(s) had untolerated taint {k: v}." + not_helpful(13))
    assert result.diagnosis.unschedulable_plugins == {"TaintToleration", "NodeResourcesFit"}
    assert result.num_all_nodes == 13


def test_fit_error_counts_every_reason_of_a_node():
    nodes = [sched_node("a", cpu="1", memory="1Gi"), sched_node("b", cpu="1", memory="8Gi")]
    result = new_framework().schedule_one(req_pod("p", "2", "2Gi"), Snapshot.build(nodes))
    assert str(result) == "0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu." + not_helpful(2)
    statuses = dict(result.diagnosis.node_to_status.items())
    assert statuses["a"].reasons == ["Insufficient cpu", "Insufficient memory"]
    assert statuses["a"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert statuses["a"].plugin == "NodeResourcesFit"


def test_fit_error_with_pre_filter_messages():
    snapshot = Snapshot.build([sched_node("a", cpu="1"), sched_node("b"), sched_node("c")])
    fw = new_framework()

    def pinned(*names: str) -> dict[str, Any]:
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]} for name in names]}}}

    conflict = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]},
                         {"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}}
    result = fw.schedule_one(req_pod("p", affinity=conflict), snapshot)
    assert str(result) == "0/3 nodes are available: pod affinity terms conflict." + not_helpful(3)
    assert result.diagnosis.unschedulable_plugins == {"NodeAffinity"}

    result = fw.schedule_one(req_pod("q", "2", affinity=pinned("a")), snapshot)
    assert str(result) == ("0/3 nodes are available: 1 Insufficient cpu, "
                           "2 node(s) didn't satisfy plugin(s) [NodeAffinity]." + not_helpful(3))
    ok = fw.schedule_one(req_pod("r", "2", affinity=pinned("a", "c", "zz")), snapshot)
    assert isinstance(ok, ScheduleResult) and ok.node == "c" and ok.evaluated == 2


def test_no_nodes():
    result = new_framework().schedule_one(req_pod("p"), Snapshot.build([]))
    assert isinstance(result, NoNodesAvailable) and str(result) == "no nodes available to schedule pods"


class NotHelpful:
    """A PostFilter plugin answering as DefaultPreemption does when preemption cannot help."""

    name = "NotHelpful"

    def post_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, node_to_status: Any) -> Any:
        n = snapshot.num_nodes
        return None, Status(Code.UNSCHEDULABLE,
                            f"preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling.")


def test_post_filter_message_ends_the_fit_error():
    registry = in_tree_registry()
    registry.register("NotHelpful", lambda args, handle: NotHelpful())
    profile = Profile.default(registry, points={"postFilter": PluginSet(disabled=["DefaultPreemption"])})
    profile.multi_point.enabled.append(PluginRef("NotHelpful"))
    fw = Framework(registry, profile)
    snapshot = Snapshot.build([sched_node("a", taints=[taint("node-role.kubernetes.io/control-plane")])])
    expected = ("0/1 nodes are available: 1 node(s) had untolerated taint "
                "{node-role.kubernetes.io/control-plane: }. preemption: 0/1 nodes are available: "
                "1 Preemption is not helpful for scheduling.")
    assert str(fw.schedule_one(req_pod("p", tolerations=[]), snapshot)) == expected
    # The real DefaultPreemption of the default profile says exactly the same.
    assert str(new_framework().schedule_one(req_pod("p", tolerations=[]), snapshot)) == expected


# -- plugins without vectorised forms, plugin failures -------------------------------------------------------------


class EvenOnly:
    """A per-node-only filter (no filter_all): rejects nodes whose name ends in an odd digit."""

    name = "EvenOnly"

    def filter(self, state: CycleState, pod: PodInfo, node: Any) -> Status | None:
        return None if int(node.name[-1]) % 2 == 0 else Status(Code.UNSCHEDULABLE, "node(s) are odd")


def _mixed_framework(vectorised: bool) -> Framework:
    registry = in_tree_registry()
    registry.register("EvenOnly", lambda args, handle: EvenOnly())
    # EvenOnly runs between TaintToleration and NodeResourcesFit.
    profile = Profile(multi_point=PluginSet([PluginRef("TaintToleration"), PluginRef("EvenOnly"),
                                             PluginRef("NodeResourcesFit", 1)]))
    return Framework(registry, profile, rng=random.Random(5), vectorised=vectorised)


def test_per_node_plugins_mix_with_vectorised_ones_in_profile_order():
    nodes = [sched_node(f"n{i}", cpu="1" if i in (2, 3) else "8", taints=[taint("t")] if i in (0, 1) else None)
             for i in range(8)]
    snapshot = Snapshot.build(nodes)
    results = {}
    for vectorised in (True, False):
        fw = _mixed_framework(vectorised)
        state = CycleState()
        mask, statuses = fw.run_filter_plugins(state, PodInfo.of(req_pod("p", "2")), snapshot)
        results[vectorised] = (mask.tolist(), sorted((name, s.plugin, s.reasons) for name, s in statuses.items()))
    assert results[True] == results[False]
    mask, statuses = results[True]
    assert mask == [False, False, False, False, True, False, True, False]
    assert statuses == [
        ("n0", "TaintToleration", ["node(s) had untolerated taint {t: }"]),
        ("n1", "TaintToleration", ["node(s) had untolerated taint {t: }"]),  # odd too, but taints come first
        ("n2", "NodeResourcesFit", ["Insufficient cpu"]),
        ("n3", "EvenOnly", ["node(s) are odd"]),  # short of cpu too, but EvenOnly comes first
        ("n5", "EvenOnly", ["node(s) are odd"]),
        ("n7", "EvenOnly", ["node(s) are odd"]),
    ]


class Broken:
    name = "Broken"

    def filter(self, state: CycleState, pod: PodInfo, node: Any) -> Status | None:
        return Status.error("disk on fire")

    def score(self, state: CycleState, pod: PodInfo, node: Any) -> tuple[int, Status | None]:
        return 150, None  # out of range and no NormalizeScore


@pytest.mark.parametrize("point", ["filter", "score"])
def test_plugin_errors_raise_scheduling_error(point):
    registry = in_tree_registry()
    registry.register("Broken", lambda args, handle: Broken())
    profile = Profile(points={point: PluginSet([PluginRef("Broken")])},
                      multi_point=PluginSet([PluginRef("NodeResourcesFit")]))
    fw = Framework(registry, profile)
    snapshot = Snapshot.build([sched_node("a"), sched_node("b")])
    with pytest.raises(SchedulingError) as caught:
        fw.schedule_one(req_pod("p"), snapshot)
    expected = ("running 'Broken' filter plugin: disk on fire" if point == "filter" else
                "plugin 'Broken' returns an invalid score 150, it should in the range of [0, 100] after normalizing")
    assert str(caught.value) == expected


def test_pre_filter_skip_turns_the_filter_off():
    fw = new_framework()
    state = CycleState()
    snapshot = Snapshot.build([sched_node("a")])
    _, status, _ = fw.run_pre_filter_plugins(state, PodInfo.of(req_pod("p")), snapshot)
    assert status is None
    # No selector, ports, claims, spread constraints or affinity: those PreFilters answer Skip.
    assert state.skip_filter_plugins == {"NodeAffinity", "NodePorts", "VolumeBinding", "VolumeZone",
                                         "PodTopologySpread", "InterPodAffinity"}
    wants_port = pod("q", containers=[res_container(host_ports=[("", "TCP", 80)])], nodeSelector={"a": "b"})
    fw.run_pre_filter_plugins(state, PodInfo.of(wants_port), snapshot)
    assert state.skip_filter_plugins == {"VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity"}


def test_pre_score_skip_turns_the_score_off():
    fw = new_framework()
    state = CycleState()
    snapshot = Snapshot.build([sched_node("a"), sched_node("b")])
    nodes = np.arange(2)
    assert fw.run_pre_score_plugins(state, PodInfo.of(req_pod("p")), snapshot, nodes) is None
    assert state.skip_score_plugins == {"NodeAffinity", "NodeResourcesBalancedAllocation", "PodTopologySpread",
                                        "InterPodAffinity"}
    scores = fw.run_score_plugins(state, PodInfo.of(req_pod("p")), snapshot, nodes)
    assert set(scores.plugin_scores) == {"TaintToleration", "NodeResourcesFit", "ImageLocality"}
    # Empty nodes, default requests 100m/200Mi of 8 cpu/32Gi: least allocated (98 + 99) // 2 = 98;
    # no taints: 100, weight 3; no images: 0.
    least = ((8000 - 100) * 100 // 8000 + (32 * 2**30 - 200 * 2**20) * 100 // (32 * 2**30)) // 2
    assert least == 98
    assert scores.totals.tolist() == [3 * 100 + least + 0] * 2


def test_queue_side_points_and_binding_cycle_points():
    fw = new_framework()
    gated = pod("g", schedulingGates=[{"name": "wait"}])
    status = fw.run_pre_enqueue_plugins(gated)
    assert status is not None and status.plugin == "SchedulingGates"
    assert fw.run_pre_enqueue_plugins(pod("ok")) is None
    less = fw.queue_sort_less()
    high = QueuedPodInfo(PodInfo.of(pod("h", priority=10)), 2.0)
    low = QueuedPodInfo(PodInfo.of(pod("l", priority=1)), 1.0)
    assert less(high, low) and not less(low, high)
    state, info = CycleState(), PodInfo.of(pod("p"))
    assert fw.run_reserve_plugins_reserve(state, info, "a") is None
    assert fw.run_permit_plugins(state, info, "a") is None
    assert fw.run_pre_bind_plugins(state, info, "a") is None
    assert fw.run_bind_plugins(state, info, "a").code == Code.SKIP  # no binder ported yet


def test_nominated_node_is_tried_first():
    snapshot = Snapshot.build([sched_node("big", cpu="64", memory="256Gi"), sched_node("small", cpu="2"),
                               sched_node("tiny", cpu="1")])
    fw = new_framework(rng=random.Random(0))
    nominated = {**req_pod("p", "1"), "status": {"nominatedNodeName": "small"}}
    result = fw.schedule_one(nominated, snapshot)
    # LeastAllocated would prefer "big"; the nominated node fits, so it is taken without scoring.
    assert result == ScheduleResult("small", 1, 1, 1)
    assert fw.next_start_node_index == 0
    too_big = {**req_pod("q", "2"), "status": {"nominatedNodeName": "tiny"}}
    result = fw.schedule_one(too_big, snapshot)
    assert isinstance(result, ScheduleResult) and result.node in ("big", "small")
    assert result.evaluated == 3  # the nominated node failed, then all three were filtered
