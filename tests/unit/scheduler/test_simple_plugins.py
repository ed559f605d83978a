"""NodeUnschedulable, NodeName, NodePorts, PrioritySort and SchedulingGates."""

from __future__ import annotations

import pytest

from emulator.scheduler.framework.interface import Code
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import HostPortInfo, PodInfo, QueuedPodInfo
from emulator.scheduler.plugins import node_name, node_ports, node_unschedulable, priority_sort, scheduling_gates
from tests.builders import pod, req_pod, res_container, sched_node, toleration
from tests.unit.scheduler.util import prepare, run_filter


@pytest.mark.parametrize(("tolerations", "fits_cordoned"), [
    ([], False),
    ([toleration("node.kubernetes.io/unschedulable", effect="NoSchedule", operator="Exists")], True),
    ([toleration(operator="Exists")], True),
    ([toleration("node.kubernetes.io/unschedulable", effect="NoExecute", operator="Exists")], False),
], ids=["none", "exact", "wildcard", "wrong-effect"])
def test_node_unschedulable(tolerations, fits_cordoned):
    snapshot = Snapshot.build([sched_node("ok"), sched_node("cordoned", unschedulable=True)])
    ok, cordoned = run_filter(node_unschedulable.new(), req_pod("p", tolerations=tolerations), snapshot)
    assert ok is None
    if fits_cordoned:
        assert cordoned is None
    else:
        assert cordoned is not None and cordoned.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert cordoned.reasons == ["node(s) were unschedulable"]


@pytest.mark.parametrize(("wanted", "fits"), [(None, [True, True]), ("b", [False, True]), ("zz", [False, False])],
                         ids=["unset", "named", "unknown-node"])
def test_node_name(wanted, fits):
    snapshot = Snapshot.build([sched_node("a"), sched_node("b")])
    statuses = run_filter(node_name.new(), req_pod("p", node=wanted), snapshot)
    assert [s is None for s in statuses] == fits
    for status in statuses:
        if status is not None:
            assert status.reasons == ["node(s) didn't match the requested node name"]


# Bound pod uses TCP 8080 on 10.0.0.1 and UDP 53 on all addresses.
PORT_CASES = [
    (("", "TCP", 8080), False),  # 0.0.0.0 clashes with any IP
    (("10.0.0.1", "TCP", 8080), False),
    (("10.0.0.2", "TCP", 8080), True),
    (("10.0.0.1", "UDP", 8080), True),
    (("10.0.0.9", "UDP", 53), False),  # a specific IP clashes with 0.0.0.0
    (("", "", 9090), True),
]


@pytest.mark.parametrize(("wanted", "fits"), PORT_CASES,
                         ids=["any-ip", "same-ip", "other-ip", "other-protocol", "bound-on-all", "free"])
def test_node_ports(wanted, fits):
    bound = pod("b", node="n", containers=[res_container(host_ports=[("10.0.0.1", "TCP", 8080), ("", "UDP", 53)])])
    snapshot = Snapshot.build([sched_node("n"), sched_node("empty")], [bound])
    p = pod("p", containers=[res_container(host_ports=[wanted])])
    busy, empty = run_filter(node_ports.new(), p, snapshot)
    assert empty is None
    if fits:
        assert busy is None
    else:
        assert busy is not None and busy.code == Code.UNSCHEDULABLE
        assert busy.reasons == ["node(s) didn't have free ports for the requested pod ports"]


def test_node_ports_skip_and_host_port_info():
    _, _, status = prepare(node_ports.new(), req_pod("p"), Snapshot.build([sched_node("n")]))
    assert status is not None and status.code == Code.SKIP
    info = HostPortInfo([("", "TCP", 80)])
    assert info.check_conflict("1.2.3.4", "TCP", 80)
    assert not info.check_conflict("1.2.3.4", "TCP", 81)
    assert not info.check_conflict("1.2.3.4", "TCP", 0)  # port 0 never conflicts


def test_sidecar_host_ports_count():
    sidecar = {**res_container("s", host_ports=[("", "TCP", 7000)]), "restartPolicy": "Always"}
    plain_init = res_container("i", host_ports=[("", "TCP", 7001)])
    info = PodInfo.of(pod("p", init=[sidecar, plain_init]))
    assert info.host_ports == (("0.0.0.0", "TCP", 7000),)


def _queued(priority: int | None, timestamp: float) -> QueuedPodInfo:
    spec = {} if priority is None else {"priority": priority}
    return QueuedPodInfo(PodInfo.of(pod("p", **spec)), timestamp=timestamp)


@pytest.mark.parametrize(("a", "b", "less"), [
    ((10, 5.0), (1, 1.0), True),
    ((1, 1.0), (10, 5.0), False),
    ((5, 1.0), (5, 2.0), True),
    ((5, 2.0), (5, 1.0), False),
    ((None, 1.0), (0, 2.0), True),  # unset priority is 0
], ids=["higher-priority", "lower-priority", "earlier", "later", "unset-is-zero"])
def test_priority_sort(a, b, less):
    assert priority_sort.new().less(_queued(*a), _queued(*b)) is less


def test_scheduling_gates():
    plugin = scheduling_gates.new()
    assert plugin.pre_enqueue(pod("p")) is None
    status = plugin.pre_enqueue(pod("p", schedulingGates=[{"name": "a"}, {"name": "b.io/c"}]))
    assert status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == "waiting for scheduling gates: [a b.io/c]"
