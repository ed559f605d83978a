"""Low- and HighNodeUtilization: which nodes are under/over, how many pods move, and when it stops.

Every expectation is worked out here from upstream's rules (nodeutilization.go,
lownodeutilization.go): usage% = requests (or measured usage) / allocatable x 100;
underutilized = schedulable and every thresholded resource <= thresholds;
overutilized = some thresholded resource > targetThresholds; an overutilized
node loses its lowest-priority evictable pods while its usage is above
``targetThreshold% x allocatable`` (truncated) on some resource and the
underutilized nodes' room under their targets stays positive on every resource.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from emulator.clock import ManualClock
from emulator.descheduler.api import load_policy
from emulator.descheduler.evictions import PodEvictor
from emulator.descheduler.framework import ClusterSnapshot, RunningProfile
from tests import builders as b
from tests.unit.descheduler.helpers import evicted, node, pod, policy, profile, run

LNU = "LowNodeUtilization"
CPU = 4000  # every node: 4 cpu allocatable


def lnu(low: float, high: float, **extra) -> dict:
    return policy(profile("balance", LNU, {"thresholds": {"cpu": low}, "targetThresholds": {"cpu": high}, **extra}))


def loaded(name: str, n_pods: int, millis: int, **node_kw) -> tuple[dict, list[dict]]:
    return node(name, **node_kw), [pod(f"{name}-p{k}", name, f"{millis}m") for k in range(n_pods)]


def cluster(*specs: tuple[str, int, int]) -> tuple[list[dict], list[dict]]:
    nodes, pods = [], []
    for name, n_pods, millis in specs:
        n, ps = loaded(name, n_pods, millis)
        nodes.append(n)
        pods += ps
    return nodes, pods


def expected_moves(usage: int, millis: int, target_pct: float, room: int) -> int:
    """Evict while usage > floor(target% x cpu) and the destinations' room (> 0) lasts (checked after each)."""
    cap = math.floor(target_pct * 0.01 * CPU)
    moves = 0
    while usage > cap and room > 0:
        usage -= millis
        room -= millis
        moves += 1
    return moves


# (id, node specs (name, pods, millicores each), thresholds, targetThresholds, over-node usage, pod size, room)
TABLE = [
    # n1 80 % (> 60) over; n2 10 %, n3 20 % (<= 30) under. Room: (2400-400) + (2400-800) = 3600.
    ("stops-at-target", (("n1", 8, 400), ("n2", 1, 400), ("n3", 2, 400)), 30, 60, 3200, 400, 3600),
    # n1 100 % over; n2 50 % neither; n3 30 % under (<= 30 counts). Room only n3's 2400-1200 = 1200.
    ("stops-when-room-runs-out", (("n1", 8, 500), ("n2", 4, 500), ("n3", 12, 100)), 30, 60, 4000, 500, 1200),
    # n1 62.5 % just over 60: one 100m pod brings it to 60 %, not above the 2400m cap.
    ("just-over", (("n1", 25, 100), ("n2", 0, 100), ("n3", 0, 100)), 30, 60, 2500, 100, 4800),
]


@pytest.mark.parametrize(("specs", "low", "high", "usage", "millis", "room"), [t[1:] for t in TABLE],
                         ids=[t[0] for t in TABLE])
def test_low_node_utilization_moves(specs, low, high, usage, millis, room) -> None:
    nodes, pods = cluster(*specs)
    result = run(lnu(low, high), nodes, pods)
    assert len(result.evicted) == expected_moves(usage, millis, high, room)
    assert {e.node for e in result.evicted} == {"n1"}


@pytest.mark.parametrize(("specs", "extra", "why"), [
    ((("n1", 8, 400), ("n2", 4, 400), ("n3", 4, 400)), {}, "no node under 30 %"),
    ((("n1", 2, 400), ("n2", 1, 400), ("n3", 0, 400)), {}, "every node underutilized"),
    ((("n1", 5, 400), ("n2", 1, 400), ("n3", 0, 400)), {}, "none over 60 % (n1 at 50 %)"),
    ((("n1", 8, 400), ("n2", 1, 400), ("n3", 0, 400)), {"numberOfNodes": 2}, "only numberOfNodes underutilized"),
], ids=["none-under", "all-under", "none-over", "number-of-nodes"])
def test_low_node_utilization_does_nothing(specs, extra, why) -> None:
    nodes, pods = cluster(*specs)
    assert evicted(run(lnu(30, 60, **extra), nodes, pods)) == [], why


def test_unschedulable_node_is_not_underutilized() -> None:
    (n1, p1), (n2, p2) = loaded("n1", 8, 400), loaded("n2", 0, 400, unschedulable=True)
    assert evicted(run(lnu(30, 60), [n1, n2, node("n3", cpu="1", pods="0")], p1 + p2)) == []


def test_lowest_priority_then_best_effort_goes_first() -> None:
    nodes, _ = cluster(("n1", 0, 0), ("n2", 0, 0), ("n3", 0, 0))
    pods = [pod("guaranteed-high", "n1", "1", memory="1Gi", priority=100),
            pod("burstable-low", "n1", "1", priority=1),
            pod("burstable-high", "n1", "1", priority=100),
            pod("besteffort-high", "n1", None, priority=100),
            pod("no-priority", "n1", "500m")]
    pods[0]["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "1", "memory": "1Gi"}
    # n1: 3500m of 4000 = 87.5 % > 60; cap 2400; evict no-priority (3000), burstable-low (2000) -> done.
    assert evicted(run(lnu(30, 60), nodes, pods)) == ["no-priority", "burstable-low"]


def test_per_plugin_and_policy_node_limits() -> None:
    nodes, pods = cluster(("n1", 8, 400), ("n2", 0, 400), ("n3", 0, 400))
    assert len(run(lnu(30, 60, evictionLimits={"node": 1}), nodes, pods).evicted) == 1
    pol = lnu(30, 60)
    pol["maxNoOfPodsToEvictPerNode"] = 1
    assert len(run(pol, nodes, pods).evicted) == 1


def test_pods_not_tolerating_any_destination_stay() -> None:
    (n1, p1) = loaded("n1", 8, 400)
    dest = [node("n2", taints=[b.taint("dedicated", "x")]), node("n3", taints=[b.taint("dedicated", "x")])]
    assert evicted(run(lnu(30, 60), [n1, *dest], p1)) == []
    p1[0]["spec"]["tolerations"] = [b.toleration("dedicated", operator="Exists")]
    assert evicted(run(lnu(30, 60), [n1, *dest], p1)) == [p1[0]["metadata"]["name"]]


def classify(pol: dict, nodes: list[dict], pods: list[dict], **snap) -> object:
    snapshot = ClusterSnapshot.build(nodes, pods, **snap)
    running = RunningProfile(load_policy(pol).profiles[0], snapshot, ManualClock(), PodEvictor(None, dry_run=True),
                             nodes)
    return running.balance_plugins[0].classify(nodes)


def test_deviation_thresholds_follow_the_average() -> None:
    # usage 80 %, 10 %, 30 %: average 40; spans 10/10 -> under <= 30, over > 50.
    nodes, pods = cluster(("n1", 8, 400), ("n2", 1, 400), ("n3", 3, 400))
    c = classify(lnu(10, 10, useDeviationThresholds=True), nodes, pods)
    assert c.low.tolist() == [30.0] and c.high.tolist() == [50.0]
    assert c.names(c.under) == ["n2", "n3"] and c.names(c.over) == ["n1"]
    # 80 -> cap floor(50 % of 4000) = 2000: 3200 -> 2000 takes 3 pods.
    assert len(run(lnu(10, 10, useDeviationThresholds=True), nodes, pods).evicted) == 3


def test_thresholds_on_several_resources() -> None:
    pol = policy(profile("balance", LNU, {"thresholds": {"cpu": 20, "memory": 20, "pods": 20},
                                          "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50}}))
    nodes = [node("n1", pods="10"), node("n2", pods="10"), node("n3", pods="10")]
    # n1: 6 pods of 10 = 60 % > 50 (cpu and memory low): over on pods alone. n2: 1 pod (10 %) under.
    # n3: 3 pods = 30 % pods: neither. Pods count down by one per eviction: 6 -> 5 (50 %, not above 5).
    pods = [pod(f"a{k}", "n1", "10m") for k in range(6)] + [pod("b", "n2", "10m")] + \
        [pod(f"c{k}", "n3", "10m") for k in range(3)]
    c = classify(pol, nodes, pods)
    assert c.names(c.over) == ["n1"] and c.names(c.under) == ["n2"]
    assert len(run(pol, nodes, pods).evicted) == 1


def test_actual_usage_moves_the_heaviest_pods_off_a_hot_node() -> None:
    """metricsUtilization: measured usage, not requests; equal priorities: heaviest first."""
    pol = lnu(30, 60, metricsUtilization={"source": "KubernetesMetrics"})
    nodes, pods = cluster(("hot", 4, 100), ("cool", 4, 100), ("idle", 0, 100))
    node_usage = {"hot": {"cpu": 3600, "memory": 0}, "cool": {"cpu": 400, "memory": 0},
                  "idle": {"cpu": 0, "memory": 0}}
    per_pod = {"hot-p0": 300, "hot-p1": 1500, "hot-p2": 1000, "hot-p3": 800}
    pod_usage = {("default", p["metadata"]["name"]): {"cpu": per_pod.get(p["metadata"]["name"], 100), "memory": 0}
                 for p in pods}
    # hot: 90 % > 60 -> over; cool 10 %, idle 0 % under. Cap 2400: evict 1500 (-> 2100) and stop.
    result = run(pol, nodes, pods, node_usage=node_usage, pod_usage=pod_usage)
    assert evicted(result) == ["hot-p1"]
    # By requests the same cluster is balanced (every node 10 %): nothing moves.
    assert evicted(run(lnu(30, 60), nodes, pods)) == []
    # A node without metrics: the plugin reports an error (upstream: "error getting node usage").
    broken = run(pol, nodes, pods, node_usage={"hot": {"cpu": 3600}}, pod_usage=pod_usage)
    assert evicted(broken) == [] and "error getting node usage" in broken.errors[0]


HNU = "HighNodeUtilization"


def test_high_node_utilization_empties_the_least_used_nodes() -> None:
    pol = policy(profile("balance", HNU, {"thresholds": {"cpu": 20}}))
    # n1 10 % and n2 15 % are sources (<= 20), n3 70 % a destination with 1200m of room.
    nodes, pods = cluster(("n1", 1, 400), ("n2", 3, 200), ("n3", 7, 400))
    table_mask = classify(pol, nodes, pods)
    assert table_mask[1].tolist() == [True, True, False] and table_mask[2].tolist() == [False, False, True]
    # Least used first: n1's pod (room 1200 -> 800), then n2's three (800 -> 600 -> 400 -> 200): 4 moves.
    result = run(pol, nodes, pods)
    assert [e.node for e in result.evicted] == ["n1", "n2", "n2", "n2"]
    # Every node under the threshold: nothing (there is nowhere to pack).
    nodes, pods = cluster(("n1", 1, 400), ("n2", 1, 400))
    assert evicted(run(pol, nodes, pods)) == []


def test_percentages_are_vectorised_over_nodes() -> None:
    nodes, pods = cluster(("n1", 8, 400), ("n2", 1, 400), ("n3", 0, 400))
    c = classify(lnu(30, 60), nodes, pods)
    cpu = c.table.column("cpu")
    assert np.allclose(c.table.usage[:, cpu] / c.table.capacity[:, cpu] * 100, [80, 10, 0])
