"""The deschedule and balance plugins (node utilization aside), table-driven through one dry-run pass."""

from __future__ import annotations

import math

import pytest

from emulator.descheduler.plugins.removepodsviolatingtopologyspreadconstraint.removepodsviolatingtopologyspreadconstraint import (  # noqa: E501
    balance_domains,
)
from tests import builders as b
from tests.unit.descheduler.helpers import T0, evicted, node, pod, policy, profile, run

TAINTS = "RemovePodsViolatingNodeTaints"
MAINT = b.taint("dedicated", "maintenance")


@pytest.mark.parametrize(("args", "taints", "tolerations", "expected"), [
    (None, [MAINT], [], ["a"]),
    (None, [MAINT], [b.toleration("dedicated", "maintenance", "NoSchedule")], []),
    (None, [MAINT], [b.toleration("dedicated", operator="Exists")], []),
    (None, [b.taint("dedicated", "maintenance", "PreferNoSchedule")], [], []),
    ({"includePreferNoSchedule": True}, [b.taint("dedicated", "maintenance", "PreferNoSchedule")], [], ["a"]),
    (None, [b.taint("dedicated", "maintenance", "NoExecute")], [], []),
    ({"excludedTaints": ["dedicated"]}, [MAINT], [], []),
    ({"excludedTaints": ["dedicated=other"]}, [MAINT], [], ["a"]),
    ({"includedTaints": ["dedicated=maintenance"]}, [MAINT, b.taint("gpu")], [], ["a"]),
    ({"includedTaints": ["gpu"]}, [MAINT], [], []),
    ({"namespaces": {"exclude": ["default"]}}, [MAINT], [], []),
], ids=["untolerated", "tolerated-equal", "tolerated-exists", "prefer-ignored", "prefer-included", "noexecute-ignored",
        "excluded-key", "excluded-other-value", "included", "not-included", "namespace-excluded"])
def test_node_taints(args, taints, tolerations, expected) -> None:
    nodes = [node("n1", taints=taints), node("n2")]
    pods = [pod("a", "n1", tolerations=tolerations), pod("b", "n2")]
    assert evicted(run(policy(profile("deschedule", TAINTS, args)), nodes, pods)) == expected


def test_node_taints_bare_and_critical_pods_stay() -> None:
    nodes = [node("n1", taints=[MAINT]), node("n2")]
    pods = [pod("owned", "n1"), pod("bare", "n1", owner=None), pod("critical", "n1", priority=2_000_000_000)]
    assert evicted(run(policy(profile("deschedule", TAINTS)), nodes, pods)) == ["owned"]


def test_a_single_node_cluster_is_left_alone() -> None:
    result = run(policy(profile("deschedule", TAINTS)), [node("n1", taints=[MAINT])], [pod("a", "n1")])
    assert evicted(result) == [] and "cluster size is 0 or 1" in result.skipped


def required(key: str, *values: str) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]}}}


def preferred(weight: int, key: str, value: str) -> dict:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "preference": {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}}]}}


@pytest.mark.parametrize(("args", "nodes", "affinity", "expected"), [
    (None, [node("n1", labels={"disk": "hdd"}), node("n2", labels={"disk": "ssd"})], required("disk", "ssd"), ["a"]),
    (None, [node("n1", labels={"disk": "ssd"}), node("n2", labels={"disk": "ssd"})], required("disk", "ssd"), []),
    (None, [node("n1", labels={"disk": "hdd"}), node("n2", labels={"disk": "hdd"})], required("disk", "ssd"), []),
    (None, [node("n1", labels={"disk": "hdd"}), node("n2", labels={"disk": "ssd"}, cpu="50m")],
     required("disk", "ssd"), []),
    (None, [node("n1", labels={"disk": "hdd"}), node("n2", labels={"disk": "ssd"})], preferred(10, "disk", "ssd"),
     []),
    ({"nodeAffinityType": ["preferredDuringSchedulingIgnoredDuringExecution"]},
     [node("n1", labels={"disk": "hdd"}), node("n2", labels={"disk": "ssd"})], preferred(10, "disk", "ssd"), ["a"]),
    ({"nodeAffinityType": ["preferredDuringSchedulingIgnoredDuringExecution"]},
     [node("n1", labels={"disk": "ssd"}), node("n2", labels={"disk": "ssd"})], preferred(10, "disk", "ssd"), []),
], ids=["required-violated", "required-held", "nowhere-better", "better-node-full", "preferred-not-enabled",
        "preferred-better-elsewhere", "preferred-as-good-here"])
def test_node_affinity(args, nodes, affinity, expected) -> None:
    pods = [pod("a", "n1", affinity=affinity)]
    assert evicted(run(policy(profile("deschedule", "RemovePodsViolatingNodeAffinity", args)), nodes, pods)) == \
        expected


def anti(key: str, match: dict) -> dict:
    return b.pod_affinity(anti_required=[b.affinity_term(key, match)])


def test_inter_pod_anti_affinity_evicts_the_lower_priority_one_once() -> None:
    nodes = [node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "a"}), node("n3", labels={"zone": "b"})]
    pods = [pod("high", "n1", priority=100, labels={"app": "x"}, affinity=anti("zone", {"app": "x"})),
            pod("low", "n2", priority=10, labels={"app": "x"}, affinity=anti("zone", {"app": "x"})),
            pod("alone", "n3", labels={"app": "x"}, affinity=anti("zone", {"app": "x"}))]
    # Node order: n1's "high" violates first (low shares zone a) and goes; then "low" no longer does.
    assert evicted(run(policy(profile("deschedule", "RemovePodsViolatingInterPodAntiAffinity")), nodes, pods)) == \
        ["high"]


def test_inter_pod_anti_affinity_within_a_node_takes_lowest_priority_first() -> None:
    nodes = [node("n1"), node("n2")]
    host = "kubernetes.io/hostname"
    pods = [pod("high", "n1", priority=100, labels={"app": "x"}, affinity=anti(host, {"app": "x"})),
            pod("low", "n1", priority=10, labels={"app": "x"}, affinity=anti(host, {"app": "x"}))]
    assert evicted(run(policy(profile("deschedule", "RemovePodsViolatingInterPodAntiAffinity")), nodes, pods)) == \
        ["low"]


@pytest.mark.parametrize(("args", "restarts", "phase_waiting", "expected"), [
    ({"podRestartThreshold": 3}, 3, None, ["a"]),
    ({"podRestartThreshold": 3}, 2, None, []),
    ({"podRestartThreshold": 3, "states": ["CrashLoopBackOff"]}, 5, None, []),
    ({"podRestartThreshold": 3, "states": ["CrashLoopBackOff"]}, 5, "CrashLoopBackOff", ["a"]),
], ids=["at-threshold", "under", "state-not-matching", "crashloop"])
def test_too_many_restarts(args, restarts, phase_waiting, expected) -> None:
    p = pod("a", "n1", restarts=restarts)
    if phase_waiting:
        p["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": phase_waiting}}
    result = run(policy(profile("deschedule", "RemovePodsHavingTooManyRestarts", args)), [node("n1"), node("n2")], [p])
    assert evicted(result) == expected


def test_pod_lifetime_evicts_oldest_first_within_the_total_limit() -> None:
    pods = [pod("young", "n1", created=T0 - 100), pod("old", "n1", created=T0 - 5000),
            pod("older", "n2", created=T0 - 9000), pod("edge", "n2", created=T0 - 3600)]
    pol = policy(profile("deschedule", "PodLifeTime", {"maxPodLifeTimeSeconds": 3600}), maxNoOfPodsToEvictTotal=5)
    assert evicted(run(pol, [node("n1"), node("n2")], pods)) == ["older", "old"]
    pol = policy(profile("deschedule", "PodLifeTime", {"maxPodLifeTimeSeconds": 3600}), maxNoOfPodsToEvictTotal=1)
    assert evicted(run(pol, [node("n1"), node("n2")], pods)) == ["older"]


def failed(name: str, reason: str = "", *, exit_code: int = 1, started: float = T0 - 100, **kw) -> dict:
    p = pod(name, "n1", phase="Failed", started=started, **kw)
    p["status"]["containerStatuses"][0]["state"] = {"terminated": {"reason": reason or "Error", "exitCode": exit_code}}
    return p


@pytest.mark.parametrize(("args", "subject", "expected"), [
    (None, failed("f"), ["f"]),
    (None, pod("r", "n1"), []),
    ({"reasons": ["OOMKilled"]}, failed("f", "OOMKilled"), ["f"]),
    ({"reasons": ["OOMKilled"]}, failed("f", "Error"), []),
    ({"exitCodes": [137]}, failed("f", exit_code=137), ["f"]),
    ({"excludeOwnerKinds": ["Job"]}, failed("f", owner_kind="Job"), []),
    ({"minPodLifetimeSeconds": 300}, failed("f", started=T0 - 100), []),
    (None, failed("f", owner=None), []),
], ids=["failed", "running", "reason-match", "reason-miss", "exit-code", "excluded-owner", "too-young", "bare"])
def test_remove_failed_pods(args, subject, expected) -> None:
    assert evicted(run(policy(profile("deschedule", "RemoveFailedPods", args)), [node("n1"), node("n2")],
                       [subject])) == expected


@pytest.mark.parametrize(("counts", "n_nodes"), [((6, 0, 0), 3), ((5, 1, 0), 3), ((4, 0), 2), ((7, 2, 1, 0), 4),
                                                ((3, 3, 3), 3)],
                         ids=["6-on-one-of-3", "5-1-0", "4-on-one-of-2", "7-2-1-0", "already-even"])
def test_remove_duplicates_spreads_a_replicaset(counts: tuple[int, ...], n_nodes: int) -> None:
    nodes = [node(f"n{i}") for i in range(n_nodes)]
    pods = [pod(f"p{i}-{k}", f"n{i}") for i, c in enumerate(counts) for k in range(c)]
    result = run(policy(profile("balance", "RemoveDuplicates")), nodes, pods)
    # upstream: upperAvg = ceil(pods / target nodes); a node with more keeps upperAvg of them.
    upper = math.ceil(sum(counts) / n_nodes)
    expected = sum(max(0, c - upper) for c in counts)
    assert len(result.evicted) == expected
    for i, c in enumerate(counts):
        assert sum(1 for e in result.evicted if e.node == f"n{i}") == max(0, c - upper)


def test_remove_duplicates_ignores_other_owners_images_and_untolerated_nodes() -> None:
    nodes = [node("n0"), node("n1", taints=[MAINT])]
    pods = [pod(f"a{k}", "n0") for k in range(4)] + [pod("other", "n0", owner="rs-b"), pod("img", "n0", image="x:1")]
    # Only n0 is a feasible target (n1's taint is not tolerated): fewer than two nodes, nothing moves.
    assert evicted(run(policy(profile("balance", "RemoveDuplicates")), nodes, pods)) == []


def test_remove_duplicates_respects_the_per_node_limit() -> None:
    nodes = [node(f"n{i}") for i in range(3)]
    pods = [pod(f"p{k}", "n0") for k in range(6)]
    result = run(policy(profile("balance", "RemoveDuplicates"), maxNoOfPodsToEvictPerNode=1), nodes, pods)
    assert len(result.evicted) == 1


@pytest.mark.parametrize(("sizes", "max_skew"), [((0, 0, 6), 1), ((2, 3, 5, 5, 7, 8), 1), ((1, 5), 2), ((3, 3, 4), 1)],
                         ids=["0-0-6", "six-domains", "1-5-skew2", "balanced"])
def test_balance_domains_brings_every_domain_within_max_skew(sizes: tuple[int, ...], max_skew: int) -> None:
    domains = [[{"id": f"{d}-{k}"} for k in range(n)] for d, n in enumerate(sizes)]
    moved = balance_domains(domains, max_skew)
    after = sorted(len(d) for d in domains)
    assert max(after) - min(after) <= max_skew
    assert sum(after) == sum(sizes)
    assert len(moved) == sum(max(0, n - m) for n, m in zip(sorted(sizes), after, strict=True))


def test_topology_spread_evicts_from_the_crowded_zone() -> None:
    nodes = [node("a1", labels={"zone": "a"}), node("b1", labels={"zone": "b"}), node("c1", labels={"zone": "c"})]
    tsc = [b.spread("zone", 1, match={"app": "web"})]
    pods = [pod(f"w{k}", "a1", labels={"app": "web"}, topologySpreadConstraints=tsc) for k in range(6)]
    result = run(policy(profile("balance", "RemovePodsViolatingTopologySpreadConstraint")), nodes, pods)
    # 6-0-0 with maxSkew 1: idealAvg 2, so 4 pods leave zone a (2 towards each of b and c).
    assert len(result.evicted) == 4 and {e.node for e in result.evicted} == {"a1"}
    soft = [b.spread("zone", 1, when="ScheduleAnyway", match={"app": "web"})]
    pods = [pod(f"w{k}", "a1", labels={"app": "web"}, topologySpreadConstraints=soft) for k in range(6)]
    assert evicted(run(policy(profile("balance", "RemovePodsViolatingTopologySpreadConstraint")), nodes, pods)) == []
    assert len(run(policy(profile("balance", "RemovePodsViolatingTopologySpreadConstraint",
                                  {"constraints": ["DoNotSchedule", "ScheduleAnyway"]})), nodes, pods).evicted) == 4
