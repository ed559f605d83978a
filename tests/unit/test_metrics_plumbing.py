"""Where metrics endpoints bind and what they advertise; the cluster-state counts; the API server verbs."""

from __future__ import annotations

import pytest

from emulator import metrics
from emulator.apiserver import metrics as apimetrics
from emulator.controllers import clusterstate
from tests import builders as b


def test_bind_host_defaults_to_loopback_and_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(metrics.HOST_ENV, raising=False)
    assert metrics.bind_host() == "127.0.0.1"
    monkeypatch.setenv(metrics.HOST_ENV, "0.0.0.0")
    assert metrics.bind_host() == "0.0.0.0"


def test_advertised_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(metrics.ADVERTISE_ENV, raising=False)
    assert metrics.advertised_host("127.0.0.1") == "127.0.0.1"
    # Bound to the wildcard: an address other machines can dial, never 0.0.0.0.
    assert metrics.advertised_host("0.0.0.0") not in ("0.0.0.0", "")
    monkeypatch.setenv(metrics.ADVERTISE_ENV, "scheduler-1")
    assert metrics.advertised_host("0.0.0.0") == "scheduler-1"


def test_serve_uses_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(metrics.ADVERTISE_ENV, "kemu-test-host")
    host, port = metrics.serve()
    assert host == "kemu-test-host" and port > 0


def test_upstream_reported_verbs() -> None:
    assert [apimetrics.reported_verb(v) for v in ("get", "list", "watch", "create", "update", "patch", "delete",
                                                  "deletecollection")] == [
        "GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION"]
    assert apimetrics.reported_verb("patch", "application/apply-patch+yaml") == "APPLY"


def _node(name: str, ready: str, memory_pressure: str | None = None, cordoned: bool = False) -> dict:
    conditions = [{"type": "Ready", "status": ready}]
    if memory_pressure is not None:
        conditions.append({"type": "MemoryPressure", "status": memory_pressure})
    return {"metadata": {"name": name}, "spec": {"unschedulable": True} if cordoned else {},
            "status": {"conditions": conditions}}


def test_cluster_state_counts_aggregate_and_include_zeros() -> None:
    nodes = [_node("a", "True", "False"), _node("b", "True", "True", cordoned=True), _node("c", "Unknown")]
    pending = b.pod("p1")
    bound = b.pod("p2", node="a")
    running = b.pod("p3", node="a")
    running["status"] = {"phase": "Running"}
    counts = clusterstate.count(nodes, [pending, bound, running])
    by_condition = counts["kemu_cluster_nodes"]
    assert by_condition[("Ready", "true")] == 2 and by_condition[("Ready", "unknown")] == 1
    assert by_condition[("MemoryPressure", "true")] == 1 and by_condition[("MemoryPressure", "unknown")] == 1
    assert by_condition[("DiskPressure", "unknown")] == 3 and by_condition[("PIDPressure", "true")] == 0
    assert len(by_condition) == len(clusterstate.CONDITIONS) * len(clusterstate.STATUSES)
    assert counts["kemu_cluster_nodes_unschedulable"] == {(): 1}
    assert counts["kemu_cluster_pods"][("Pending",)] == 2 and counts["kemu_cluster_pods"][("Running",)] == 1
    assert counts["kemu_cluster_pods"][("Failed",)] == 0
    assert counts["kemu_cluster_pods_unscheduled"] == {(): 1}
