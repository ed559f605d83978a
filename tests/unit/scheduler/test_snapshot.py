"""Snapshot: accounting from node and pod dicts, copy-on-write purity, hypothetical nodes for autoscaler simulations."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from emulator.api.selectors import LabelSelector
from emulator.scheduler import new_framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import FitError, PodInfo, ScheduleResult
from tests.builders import pod, req_pod, res_container, sched_node, taint

MI = 2**20


def fingerprint(s: Snapshot) -> Any:
    """Everything observable about a snapshot, as plain values."""
    n = s.num_nodes
    return (
        tuple(s.node_names),
        {r: (s.allocatable(r).tolist(), s.requested(r).tolist()) for r in s.resource_names},
        s.nonzero_requested("cpu").tolist(), s.nonzero_requested("memory").tolist(),
        s.pod_counts.tolist(), s.allowed_pods.tolist(), s.unschedulable.tolist(),
        [tuple(p.key for p in s.pods_on(i)) for i in range(n)],
        s.port_conflicts("", "TCP", 8080).tolist(),
        [sorted(s.image_states(i).items()) for i in range(n)],
        [(s.node_info(i).requested, s.node_info(i).nonzero_requested, len(s.node_info(i).pods)) for i in range(n)],
    )


def cluster() -> Snapshot:
    nodes = [sched_node("a", cpu="4", memory="8Gi", images={"img:1": 100 * MI}),
             sched_node("b", cpu="8", memory="16Gi", labels={"zone": "z1"}, **{"nvidia.com/gpu": "4"}),
             sched_node("c", cpu="2", memory="4Gi", taints=[taint("t", "v")], unschedulable=True)]
    pods = [
        req_pod("p1", "1", "1Gi", node="a"),
        req_pod("p2", None, None, node="a"),  # counts 100m / 200Mi as non-zero requests
        req_pod("p3", "2", "2Gi", node="b", extra={"nvidia.com/gpu": "1"}),
        {**req_pod("done", "3", "3Gi", node="b"), "status": {"phase": "Succeeded"}},  # terminal: ignored
        req_pod("pending", "1", "1Gi"),  # not bound: ignored
        req_pod("elsewhere", "1", "1Gi", node="zz"),  # unknown node: ignored
        pod("ports", node="c", containers=[res_container(host_ports=[("", "TCP", 8080)])]),
    ]
    return Snapshot.build(nodes, pods)


def test_build_accounts_bound_pods():
    s = cluster()
    assert list(s.node_names) == ["a", "b", "c"]
    assert s.allocatable("cpu").tolist() == [4000, 8000, 2000]
    assert s.requested("cpu").tolist() == [1000, 2000, 0]
    assert s.requested("memory").tolist() == [2**30, 2 * 2**30, 0]
    assert s.nonzero_requested("cpu").tolist() == [1100, 2000, 100]
    assert s.nonzero_requested("memory").tolist() == [2**30 + 200 * MI, 2 * 2**30, 200 * MI]
    assert s.requested("nvidia.com/gpu").tolist() == [0, 1, 0]
    assert s.allocatable("nvidia.com/gpu").tolist() == [0, 4, 0]
    assert s.pod_counts.tolist() == [2, 1, 1]
    assert s.allowed_pods.tolist() == [110, 110, 110]
    assert s.unschedulable.tolist() == [False, False, True]
    assert s.taints(2) == (("t", "v", "NoSchedule"),)
    assert s.port_conflicts("1.2.3.4", "TCP", 8080).tolist() == [False, False, True]
    assert s.port_conflicts("", "UDP", 8080).tolist() == [False, False, False]
    assert s.label_column("zone").codes.tolist() == [-1, 0, -1]
    assert s.image("img:1")[0].tolist() == [0]
    assert s.num_pods == 4


def test_node_info_matches_arrays():
    s = cluster()
    info = s.node_info(1)
    assert info.name == "b"
    assert info.allocatable["cpu"] == 8000 and info.allocatable["nvidia.com/gpu"] == 4
    assert info.requested["cpu"] == 2000 and info.requested["nvidia.com/gpu"] == 1
    assert info.nonzero_requested == {"cpu": 2000, "memory": 2 * 2**30}
    assert [p.name for p in info.pods] == ["p3"]
    assert s.node_info(2).used_ports.check_conflict("", "TCP", 8080)


def test_arrays_are_read_only():
    s = cluster()
    with pytest.raises(ValueError, match="read-only"):
        s.requested("cpu")[0] = 1
    with pytest.raises(ValueError, match="read-only"):
        s.pod_counts[0] = 1


def test_columns_appear_for_new_extended_resources():
    s = cluster()
    assert "example.com/foo" not in s.resource_names
    t = s.with_pod(req_pod("x", extra={"example.com/foo": "3"}), "a")
    assert t.requested("example.com/foo").tolist() == [3, 0, 0]
    assert t.allocatable("example.com/foo").tolist() == [0, 0, 0]
    assert "example.com/foo" not in s.resource_names


def test_duplicate_node_names_are_refused():
    with pytest.raises(ValueError, match="duplicate"):
        Snapshot.build([sched_node("a"), sched_node("a")])


def test_with_pod_leaves_the_original_unchanged():
    s = cluster()
    before = fingerprint(s)
    t = s.with_pod(pod("new", containers=[res_container(requests={"cpu": "500m", "nvidia.com/gpu": "2"},
                                                        host_ports=[("", "TCP", 8080)])]), "b")
    assert fingerprint(s) == before
    assert t.requested("cpu").tolist() == [1000, 2500, 0]
    assert t.requested("nvidia.com/gpu").tolist() == [0, 3, 0]
    assert t.pod_counts.tolist() == [2, 2, 1]
    assert t.port_conflicts("", "TCP", 8080).tolist() == [False, True, True]
    assert [p.name for p in t.pods_on(1)] == ["p3", "new"]


def test_without_pod_and_add_node_leave_the_original_unchanged():
    s = cluster()
    before = fingerprint(s)
    t = s.without_pod("default/p1")
    assert t.requested("cpu").tolist() == [0, 2000, 0]
    assert t.nonzero_requested("cpu").tolist() == [100, 2000, 100]
    u = s.without_pod(req_pod("ports", node="c"))
    assert u.port_conflicts("", "TCP", 8080).tolist() == [False, False, False]
    v = s.add_node(sched_node("d", cpu="16", images={"img:1": 100 * MI}), pods=[req_pod("q", "1", node="d")])
    assert list(v.node_names) == ["a", "b", "c", "d"]
    assert v.requested("cpu").tolist() == [1000, 2000, 0, 1000]
    assert v.image_states(0)["img:1"].num_nodes == 2  # the image is now on two nodes
    assert s.image_states(0)["img:1"].num_nodes == 1
    assert fingerprint(s) == before
    with pytest.raises(KeyError):
        s.without_pod("default/nope")
    with pytest.raises(ValueError, match="already"):
        s.add_node(sched_node("a"))


def test_assume_on_a_fork_never_reaches_the_parent_and_vice_versa():
    s = cluster()
    child = s.fork()
    before_parent, before_child = fingerprint(s), fingerprint(child)
    child.assume(req_pod("x", "1", "1Gi"), 0)
    assert fingerprint(s) == before_parent
    s.assume(req_pod("y", "2", "1Gi"), 1)
    child_after = fingerprint(child)
    assert child_after != before_child
    assert child.requested("cpu").tolist() == [2000, 2000, 0]
    assert s.requested("cpu").tolist() == [1000, 4000, 0]
    s.forget("default/y")
    assert fingerprint(s) == before_parent
    assert fingerprint(child) == child_after


def test_pods_matching_by_labels():
    s = Snapshot.build([sched_node("a"), sched_node("b")], [
        req_pod("w1", node="a", labels={"app": "web"}), req_pod("w2", node="b", labels={"app": "web"}),
        req_pod("db", node="b", labels={"app": "db"}), pod("other", namespace="x", node="a", labels={"app": "web"})])
    found = s.pods_matching(LabelSelector.from_dict({"matchLabels": {"app": "web"}}), namespaces=["default"])
    assert [(i, p.name) for i, p in found] == [(0, "w1"), (1, "w2")]
    assert s.find_pod("x/other") == (0, s.pods_on(0)[1])


# -- Cluster Autoscaler style "what if" -------------------------------------------------------------------------


def test_hypothetical_node_makes_pending_pods_fit_without_touching_the_snapshot():
    nodes = [sched_node(f"n{i}", cpu="2", memory="4Gi") for i in range(3)]
    snapshot = Snapshot.build(nodes, [req_pod(f"b{i}", "1500m", "1Gi", node=f"n{i}") for i in range(3)])
    before = fingerprint(snapshot)
    framework = new_framework(rng=random.Random(1))
    pending = [PodInfo.of(req_pod(f"p{i}", "1", "1Gi")) for i in range(3)]
    assert all(isinstance(framework.schedule_one(p, snapshot), FitError) for p in pending)

    template = sched_node("template-1", cpu="4", memory="8Gi", labels={"node-group": "g1"})
    simulated = snapshot.add_node(template)
    placed = []
    for p in pending:
        result = framework.schedule_one(p, simulated)
        if isinstance(result, ScheduleResult):
            simulated = simulated.with_pod(p, result.node_index)
            placed.append(result.node)
    assert placed == ["template-1"] * 3  # 4 cpu hold the three 1-cpu pods
    assert simulated.requested("cpu").tolist() == [1500, 1500, 1500, 3000]
    assert fingerprint(snapshot) == before
    assert isinstance(framework.schedule_one(pending[0], snapshot), FitError)


def test_hypothetical_node_respects_taints_and_selectors():
    snapshot = Snapshot.build([sched_node("n0", cpu="1")])
    framework = new_framework(rng=random.Random(0))
    gpu_pod = req_pod("g", "2", extra={"nvidia.com/gpu": "1"}, nodeSelector={"accelerator": "a100"})
    tainted = sched_node("gpu-1", cpu="8", labels={"accelerator": "a100"}, taints=[taint("nvidia.com/gpu", "true")],
                         **{"nvidia.com/gpu": "8"})
    result = framework.schedule_one(gpu_pod, snapshot.add_node(tainted))
    assert isinstance(result, FitError)
    assert str(result) == ("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                           "1 node(s) had untolerated taint {nvidia.com/gpu: true}. preemption: 0/2 nodes are "
                           "available: 2 Preemption is not helpful for scheduling.")
    tolerant = {**gpu_pod, "spec": {**gpu_pod["spec"], "tolerations": [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
    result = framework.schedule_one(tolerant, snapshot.add_node(tainted))
    assert isinstance(result, ScheduleResult) and result.node == "gpu-1"
    assert snapshot.num_nodes == 1 and np.array_equal(snapshot.requested("cpu"), [0])


def test_node_memo_is_shared_by_forks_and_dropped_by_add_node():
    snapshot = Snapshot.build([sched_node("a"), sched_node("b", taints=[taint("k", "v")])])
    framework = new_framework(rng=random.Random(0))
    assert framework.schedule_one(req_pod("p"), snapshot).node == "a"  # fills the taint verdict memo
    calls = []
    assert snapshot.fork().node_memo(("test",), lambda: calls.append(1) or 1) == 1
    assert snapshot.node_memo(("test",), lambda: calls.append(2) or 2) == 1  # shared with the fork
    assert calls == [1]
    grown = snapshot.add_node(sched_node("c", taints=[taint("k", "v")]))
    assert grown.node_memo(("test",), lambda: 3) == 3
    result = framework.schedule_one(req_pod("q", "100"), grown)  # too big everywhere: every node reports
    assert str(result) == ("0/3 nodes are available: 1 Insufficient cpu, "
                           "2 node(s) had untolerated taint {k: v}. preemption: 0/3 nodes are available: "
                           "3 Preemption is not helpful for scheduling.")


def test_with_requested_views_other_columns_and_leaves_the_original_alone():
    snap = Snapshot.build([sched_node("a", cpu="4"), sched_node("b", cpu="4")], [req_pod("p", "1", node="a")])
    cpu = snap.requested("cpu").copy()
    counts = snap.pod_counts.copy()
    view = snap.with_requested({"cpu": cpu}, counts)
    cpu[0] += 2000  # the caller changes its arrays between filter runs: the view sees them, the original does not
    counts[1] += 3
    assert view.requested("cpu").tolist() == [3000, 0] and view.pod_counts.tolist() == [1, 3]
    assert snap.requested("cpu").tolist() == [1000, 0] and snap.pod_counts.tolist() == [1, 0]
    assert view.pods_on(0) == snap.pods_on(0)  # everything else is shared
    # The original keeps changing in place afterwards; the view's own arrays do not follow.
    snap.assume(req_pod("q", "1"), "b")
    assert snap.requested("cpu").tolist() == [1000, 1000] and view.requested("cpu").tolist() == [3000, 0]


def test_changed_nodes_since_logs_in_place_changes_of_this_snapshot_only():
    snap = Snapshot.build([sched_node("a"), sched_node("b"), sched_node("c")])
    start = snap.generation
    snap.assume(req_pod("p", "1"), "b")
    snap.assume(req_pod("q", "1"), "c")
    snap.forget("default/p", "b")
    assert snap.changed_nodes_since(start) == [1, 2, 1]
    assert snap.changed_nodes_since(snap.generation) == []
    fork = snap.fork()
    assert fork.changed_nodes_since(start) is None  # before the fork existed: unknown
    fork.assume(req_pod("r", "1"), "a")
    assert fork.changed_nodes_since(snap.generation) == [0] and snap.changed_nodes_since(start) == [1, 2, 1]
    grown = snap.add_node(sched_node("d"))
    assert grown.changed_nodes_since(snap.generation) is None  # the node set changed: rebuild
