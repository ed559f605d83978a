"""DefaultPreemption through the framework: minimal victim sets, upstream's tie-break order, PDBs, eligibility,
the "not helpful" messages, the seeded candidate offset, and preemption undoing inter-pod anti-affinity."""

from __future__ import annotations

import random
from typing import Any

import pytest

from emulator.scheduler import in_tree_registry
from emulator.scheduler.framework.interface import CycleState
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import FitError, PodInfo
from emulator.scheduler.plugins import default_preemption as dp
from emulator.scheduler.plugins.listers import ObjectLister, StaticLister
from tests.builders import affinity_term, pdb, pod, pod_affinity, req_pod, sched_node, taint

MAX_INT32 = 2**31 - 1


def running(name: str, node: str, cpu: str, priority: int, start: str = "2024-01-01T00:00:00Z",
            labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body = req_pod(name, cpu, node=node, priority=priority, **spec)
    body["metadata"]["labels"] = dict(labels or {})
    body["status"] = {"phase": "Running", "startTime": start}
    return body


def framework(listers: ObjectLister | None = None, seed: int = 0) -> Framework:
    registry = in_tree_registry()
    registry.unregister(dp.NAME)
    registry.register(dp.NAME, lambda args, handle: dp.new(args, handle, listers=listers, rng=random.Random(seed)))
    return Framework(registry, rng=random.Random(seed))


def preempt(fw: Framework, new: dict[str, Any], snapshot: Snapshot) -> tuple[FitError, dp.PreemptionResult | None]:
    state = CycleState()
    result = fw.schedule_one(new, snapshot, state=state)
    assert isinstance(result, FitError)
    return result, state.get(dp.RESULT_KEY)


def names(pods: Any) -> list[str]:
    return [p.name for p in pods]


def test_minimal_victims_on_the_node_the_tie_break_picks():
    nodes = [sched_node(f"n{i}", cpu="4") for i in (1, 2, 3)]
    pods = [
        # n1: must lose low-1 (2 cpu) and low-3; low-2 (1 cpu) is reprieved. Highest victim priority 1.
        running("low-1", "n1", "2", 1, "2024-01-01T00:00:00Z"),
        running("low-2", "n1", "1", 1, "2024-01-01T01:00:00Z"),
        running("low-3", "n1", "1", 0),
        # n2: one victim of priority 5 is enough -- but its priority is the highest.
        running("mid", "n2", "3", 5), running("tiny", "n2", "1", 0),
        # n3: only x (3 cpu) must go; y is reprieved. Highest victim priority 1, like n1, but a smaller sum.
        running("x", "n3", "3", 1, "2024-01-01T00:00:00Z"), running("y", "n3", "1", 1, "2024-01-01T02:00:00Z"),
    ]
    fit, result = preempt(framework(), req_pod("high", "3", priority=10), Snapshot.build(nodes, pods))
    assert result is not None and result.node_name == "n3" and names(result.victims) == ["x"]
    assert fit.nominating_info == result.nominating_info and result.nominating_info.nominated_node_name == "n3"
    assert result.nominating_info.override
    # The same choice from upstream's ordered score functions, spelled out:
    candidates = {"n1": [1, 0], "n2": [5], "n3": [1]}  # victim priorities, most important first
    highest = {n: -v[0] for n, v in candidates.items()}
    assert [n for n, s in highest.items() if s == max(highest.values())] == ["n1", "n3"]
    sums = {n: -sum(p + MAX_INT32 + 1 for p in candidates[n]) for n in ("n1", "n3")}
    assert max(sums, key=sums.__getitem__) == "n3"


def test_victims_are_all_lower_priority_and_reported_most_important_first():
    nodes = [sched_node("n1", cpu="4")]
    pods = [running("a", "n1", "1", 3), running("b", "n1", "1", 2), running("c", "n1", "1", 1),
            running("d", "n1", "1", 20)]
    _, result = preempt(framework(), req_pod("high", "3", priority=10), Snapshot.build(nodes, pods))
    # d outranks the preemptor and stays; the 3 lower pods must all go to free 3 cpu.
    assert result is not None and names(result.victims) == ["a", "b", "c"]


def test_pdb_violations_are_avoided_where_possible():
    nodes = [sched_node("n1", cpu="2"), sched_node("n2", cpu="2")]
    pods = [running("guarded", "n1", "2", 1, labels={"app": "guarded"}),
            running("free", "n2", "2", 2, labels={"app": "free"})]
    listers = StaticLister.from_objects([pdb("keep", {"app": "guarded"}, allowed=0)])
    new = req_pod("high", "2", priority=10)
    # Without the budget n1 wins (its victim has the lower priority).
    _, result = preempt(framework(), new, Snapshot.build(nodes, pods))
    assert result is not None and result.node_name == "n1"
    # With it, n1's candidate violates one PDB: the node with no violation wins.
    _, result = preempt(framework(listers), new, Snapshot.build(nodes, pods))
    assert result is not None and result.node_name == "n2" and result.num_pdb_violations == 0
    # When every choice violates, the violation is counted and accepted.
    _, result = preempt(framework(listers), new, Snapshot.build(nodes[:1], pods[:1]))
    assert result is not None and result.node_name == "n1" and result.num_pdb_violations == 1


def test_pdb_violating_pods_are_reprieved_first_on_a_node():
    nodes = [sched_node("n1", cpu="4")]
    # Equal priority; "spare" started earlier so it would be reprieved first without the PDB rule.
    pods = [running("guarded", "n1", "2", 1, "2024-01-02T00:00:00Z", labels={"app": "guarded"}),
            running("spare", "n1", "2", 1, "2024-01-01T00:00:00Z", labels={"app": "spare"})]
    new = req_pod("high", "2", priority=10)
    _, result = preempt(framework(), new, Snapshot.build(nodes, pods))
    assert result is not None and names(result.victims) == ["guarded"]
    listers = StaticLister.from_objects([pdb("keep", {"app": "guarded"}, allowed=0)])
    _, result = preempt(framework(listers), new, Snapshot.build(nodes, pods))
    assert result is not None and names(result.victims) == ["spare"] and result.num_pdb_violations == 0
    # A pod already in the budget's disruptedPods was processed by the API server: no violation for it.
    processed = StaticLister.from_objects([pdb("keep", {"app": "guarded"}, allowed=0, disrupted=["guarded"])])
    violating, safe = dp.filter_pods_with_pdb_violation([PodInfo.of(p) for p in pods],
                                                         processed.list("poddisruptionbudgets.policy"))
    assert violating == [] and names(safe) == ["guarded", "spare"]


def test_preemption_policy_never_does_not_preempt():
    nodes = [sched_node("n1", cpu="2")]
    pods = [running("low", "n1", "2", 1)]
    fit, result = preempt(framework(), req_pod("high", "2", priority=10, preemptionPolicy="Never"),
                          Snapshot.build(nodes, pods))
    assert result is None and fit.nominating_info is None
    assert str(fit) == ("0/1 nodes are available: 1 Insufficient cpu. "
                        "preemption: not eligible due to preemptionPolicy=Never.")


def test_not_helpful_messages_follow_upstream():
    nodes = [sched_node("busy", cpu="2"), sched_node("tainted", cpu="8", taints=[taint("t")])]
    pods = [running("important", "busy", "2", 100)]
    fit, result = preempt(framework(), req_pod("p", "2", priority=10), Snapshot.build(nodes, pods))
    assert result is None
    assert fit.nominating_info is not None and fit.nominating_info.nominated_node_name == ""
    assert str(fit) == ("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {t: }. "
                        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
                        "1 Preemption is not helpful for scheduling.")


def test_terminating_victims_on_the_nominated_node_block_another_preemption():
    nodes = [sched_node("n1", cpu="2"), sched_node("n2", cpu="2")]
    leaving = running("leaving", "n1", "1", 1)
    leaving["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    leaving["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                        "reason": "PreemptionByScheduler"}]
    pods = [leaving, running("other", "n1", "1", 1), running("low", "n2", "2", 1)]
    new = req_pod("high", "2", priority=10)
    new["status"] = {"nominatedNodeName": "n1"}
    fit, result = preempt(framework(), new, Snapshot.build(nodes, pods))
    assert result is None
    assert str(fit).endswith("preemption: not eligible due to a terminating pod on the nominated node.")
    # Without the nomination the same pod may preempt.
    fit, result = preempt(framework(), req_pod("high", "2", priority=10), Snapshot.build(nodes, pods))
    assert result is not None


def test_preemption_removes_the_pod_an_anti_affinity_rule_objects_to():
    zone = "topology.kubernetes.io/zone"
    nodes = [sched_node("n1", labels={zone: "a"}), sched_node("n2", labels={zone: "b"})]
    pods = [running("low", "n1", "1", 1, labels={"app": "noisy"}),
            running("vip", "n2", "1", 50, labels={"app": "noisy"})]
    new = req_pod("high", "1", priority=10,
                  affinity=pod_affinity(anti_required=[affinity_term(zone, {"app": "noisy"})]))
    fit, result = preempt(framework(), new, Snapshot.build(nodes, pods))
    # Only InterPodAffinity's RemovePod makes n1 fit once "low" is gone; n2's pod outranks the preemptor.
    assert result is not None and result.node_name == "n1" and names(result.victims) == ["low"]
    assert str(fit).startswith("0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules.")


@pytest.mark.parametrize(("nodes", "percentage", "absolute", "expected"), [
    (10, 10, 100, 10), (5000, 10, 100, 500), (500, 10, 100, 100), (50, 0, 3, 3), (2000, 1, 10, 20),
])
def test_number_of_candidates(nodes, percentage, absolute, expected):
    plugin = dp.new({"minCandidateNodesPercentage": percentage, "minCandidateNodesAbsolute": absolute})
    assert plugin.calculate_num_candidates(nodes) == expected


def test_argument_validation():
    with pytest.raises(ValueError, match="minCandidateNodesPercentage"):
        dp.new({"minCandidateNodesPercentage": 101})
    with pytest.raises(ValueError, match="same time"):
        dp.new({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0})


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_seeded_offset_picks_among_equal_candidates(seed):
    # Eight identical candidates: every tie-break ties, so the first visited -- potential[offset] -- wins.
    nodes = [sched_node(f"n{i}", cpu="1") for i in range(8)]
    pods = [running(f"low{i}", f"n{i}", "1", 1) for i in range(8)]
    _, result = preempt(framework(seed=seed), req_pod("high", "1", priority=10), Snapshot.build(nodes, pods))
    assert result is not None and result.node_name == f"n{random.Random(seed).randrange(8)}"


TIE_BREAKS = [
    # (id, {node: (victim priorities most important first, start times of those victims, pdb violations)}, winner)
    ("fewest PDB violations", {"a": ([1], [0.0], 1), "b": ([5], [0.0], 0)}, "b"),
    ("lowest highest priority", {"a": ([3, 1], [0.0, 0.0], 0), "b": ([2, 2], [0.0, 0.0], 0)}, "b"),
    ("smallest sum", {"a": ([2, 2], [0.0, 0.0], 0), "b": ([2, 1], [0.0, 0.0], 0)}, "b"),
    ("negative priorities count by their shifted sum", {"a": ([-5, -5], [0.0, 0.0], 0), "b": ([-5], [0.0], 0)}, "b"),
    ("fewest victims", {"a": ([2, 0, 0], [0.0] * 3, 0), "b": ([2, 0, 0], [0.0] * 3, 0)}, "a"),
    ("latest start of the highest-priority victims", {"a": ([2, 1], [10.0, 1.0], 0), "b": ([2, 1], [20.0, 0.0], 0)},
     "b"),
]


@pytest.mark.parametrize(("candidates", "winner"), [c[1:] for c in TIE_BREAKS], ids=[c[0] for c in TIE_BREAKS])
def test_pick_one_node_tie_break_order(candidates, winner):
    def victim(i: int, priority: int, start: float) -> PodInfo:
        stamp = f"2024-01-01T00:00:{int(start):02d}Z"
        return PodInfo.of({**pod(f"v{i}", priority=priority), "status": {"startTime": stamp}})

    cands = []
    for name, (prios, starts, violations) in candidates.items():
        victims = [victim(i, p, s) for i, (p, s) in enumerate(zip(prios, starts, strict=True))]
        cands.append(dp.Candidate(name, dp.Victims(victims, violations)))
    assert dp.pick_one_node_for_preemption(cands) == winner
