"""The end-of-run invariants (loadgen.invariants) over hand-built pods, nodes and leases."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.api.gotime import micro_time
from loadgen import invariants

NOW = 1_700_000_000.0


def pod(name: str, node: str = "", phase: str = "Pending", cpu: str = "1", memory: str = "1Gi",
        deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "load-0"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T00:00:00Z"
    return {"metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {
                "requests": {"cpu": cpu, "memory": memory}}}]},
            "status": {"phase": phase}}


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
         ready: str | None = "True") -> dict[str, Any]:
    status: dict[str, Any] = {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    return {"metadata": {"name": name}, "status": status}


def lease(name: str, age: float, duration: int = 40) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": duration, "renewTime": micro_time(NOW - age)}}


@pytest.mark.parametrize(("acknowledged", "stored", "deleted", "violated"), [
    (["load-0/a", "load-0/b"], ["a", "b"], [], 0),
    (["load-0/a", "load-0/b"], ["a"], ["load-0/b"], 0),
    (["load-0/a", "load-0/b"], ["a"], [], 1),
    (["load-0/a"], ["a", "unacknowledged-but-stored"], [], 0),
    ([], [], ["load-0/x"], 0),
], ids=["all-stored", "one-deleted-by-someone", "one-lost", "extra-stored-is-fine", "nothing-created"])
def test_acknowledged_writes(acknowledged: list[str], stored: list[str], deleted: list[str], violated: int) -> None:
    check = invariants.acknowledged_writes(acknowledged, [pod(n) for n in stored], deleted)
    assert check.violated == violated
    assert check.checked == len(acknowledged)


@pytest.mark.parametrize(("pods", "violated"), [
    ([pod("a", "n1", "Running", cpu="2"), pod("b", "n1", "Running", cpu="2")], 0),
    ([pod("a", "n1", "Running", cpu="2"), pod("b", "n1", "Running", cpu="2100m")], 1),
    ([pod("a", "n1", "Running", cpu="3"), pod("b", "n1", "Succeeded", cpu="3")], 0),
    ([pod("a", "n1", "Running", memory="5Gi"), pod("b", "n1", "Pending", memory="4Gi")], 1),
    ([pod("a", "n1", "Running", cpu="3"), pod("b", "", "Pending", cpu="3")], 0),
    ([pod(f"p{i}", "n2", "Running", cpu="10m", memory="1Mi") for i in range(3)], 1),
], ids=["exactly-full", "cpu-over-by-100m", "terminal-pods-free-room", "memory-over-with-pending-bound",
        "unbound-pods-count-nowhere", "more-pods-than-capacity"])
def test_node_commitment(pods: list[dict[str, Any]], violated: int) -> None:
    check = invariants.node_commitment([node("n1"), node("n2", pods="2")], pods)
    assert check.violated == violated
    assert check.checked == 2


@pytest.mark.parametrize(("pods", "violated"), [
    ([pod("a", "ready", "Running"), pod("b", "ready", "Succeeded")], 0),
    ([pod("a", "ready", "Pending")], 1),
    ([pod("a", "notready", "Pending"), pod("b", "", "Pending")], 0),
    ([pod("a", "ready", "Pending", deleting=True)], 0),
    ([pod("a", "bare", "Pending")], 1),
], ids=["running-and-done", "pending-on-ready-node", "pending-on-not-ready-or-unbound",
        "terminating-is-not-stuck", "node-without-conditions-counts-as-ready"])
def test_nothing_stuck(pods: list[dict[str, Any]], violated: int) -> None:
    nodes = [node("ready"), node("notready", ready="False"), node("bare", ready=None)]
    assert invariants.nothing_stuck(nodes, pods).violated == violated


@pytest.mark.parametrize(("leases", "violated"), [
    ([lease("n1", 10), lease("n2", 39)], 0),
    ([lease("n1", 10), lease("n2", 41)], 1),
    ([lease("n1", 10)], 1),
    ([lease("n1", 10), lease("n2", 50, duration=60)], 0),
], ids=["fresh", "one-older-than-its-duration", "ready-node-without-lease", "longer-duration-honoured"])
def test_leases_fresh(leases: list[dict[str, Any]], violated: int) -> None:
    nodes = [node("n1"), node("n2"), node("down", ready="False")]  # a NotReady node needs no fresh lease
    check = invariants.leases_fresh(nodes, leases, NOW)
    assert check.violated == violated
    assert check.checked == 2


def test_check_all_holds_only_when_every_check_holds() -> None:
    good = dict(acknowledged=["load-0/a"], deleted=[], pods=[pod("a", "n1", "Running")], nodes=[node("n1")],
                leases=[lease("n1", 1)], now=NOW, received=1, duplicates=0, out_of_order=0)
    assert invariants.check_all(**good)["holds"]
    broken = invariants.check_all(**{**good, "duplicates": 2})
    assert not broken["holds"]
    assert broken["watchDeliveredOnceInOrder"] == {"holds": False, "checked": 1, "violated": 1,
                                                   "examples": ["2 duplicate watch events"]}
    assert broken["noPodStuck"]["holds"]
