"""Node lifecycle and taint eviction controllers against a real Redis, on a manual cluster clock.

The test plays the kubelets: it renews the Leases of the nodes that are alive.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from emulator.api.kinds import LEASE, NODE, POD
from emulator.api.meta import resource_version
from emulator.api.types import Obj
from emulator.clock import ManualClock, rfc3339
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.controllers.nodelifecycle import EVICT_KEY, MONITOR_KEY, compute_zone_state
from emulator.server.core import ServerCore
from tests import builders as b
from tests.kubelet_standin import running_ready_status
from tests.waiting import cache_matches, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def manager(core: ServerCore, clock: ManualClock) -> Iterator[ControllerManager]:
    m = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=(
        "nodelifecycle", "taint-eviction-controller")), clock=clock)
    _MANAGERS.append(m)
    yield m
    _MANAGERS.remove(m)
    m.stop()


def add_node(core: ServerCore, name: str, zone: str = "a") -> None:
    body = b.node(name, labels={"topology.kubernetes.io/zone": zone})
    now = rfc3339(core.clock.now())
    body["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                     "lastHeartbeatTime": now, "lastTransitionTime": now}]
    core.create(NODE, body)
    core.create(LEASE, {"metadata": {"name": name, "namespace": "kube-node-lease"},
                        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now}})


def renew(core: ServerCore, names: list[str]) -> None:
    for name in names:
        lease = core.get(LEASE, "kube-node-lease", name)
        core.update(LEASE, {**lease, "spec": {**lease["spec"], "renewTime": rfc3339(core.clock.now())}})


_MANAGERS: list[ControllerManager] = []


def advance(clock: ManualClock, core: ServerCore, seconds: float, alive: list[str], step: float = 5.0) -> None:
    """Move cluster time in steps, renewing the live nodes' Leases as their kubelets would.

    After each step the test waits until the controller has *observed* every renewal: a
    ManualClock jumps in microseconds, and a heartbeat the controller never saw is, for it, a
    missed one (with a real clock the 10 s renew interval leaves it plenty of time).
    """
    left = seconds
    while left > 0:
        d = min(step, left)
        clock.advance(d)
        left -= d
        renew(core, alive)
        stamp = rfc3339(clock.now())
        for m in _MANAGERS:
            if m.active:
                ctrl = m.controllers()["nodelifecycle"]
                wait_for(lambda c=ctrl, s=stamp: all(s in c._probe.get(n, ("", 0))[0] for n in alive), 10,
                         "the controller saw the renewals")
                settle(core, ctrl)


def settle(core: ServerCore, ctrl: Any) -> None:
    """Have the controller pass at the current cluster time on a cache holding the store's nodes.

    Without live nodes nothing wakes the controller after a step (no renewal to see), and a pass begun
    before it, or on a cache behind the controller's own taint writes, would stand for the new time.
    """
    wait_for(lambda: cache_matches(core, ctrl.node_informer, NODE, None), 10, "the controller's node cache current")
    before = ctrl.reconciles
    ctrl.enqueue_key(MONITOR_KEY)
    ctrl.enqueue_key(EVICT_KEY)
    wait_for(lambda: ctrl.reconciles >= before + 2 and len(ctrl.queue) == 0
             and ctrl.queue.unfinished_work_seconds() == 0, 10, "a monitor and an eviction pass at the new time")


def run_pod(core: ServerCore, name: str, node: str, tolerations: list[Obj] | None = None) -> None:
    body = b.pod(name)
    if tolerations:
        body["spec"]["tolerations"] = tolerations
    pod = core.create(POD, body)
    pod = core.bind("default", name, node)
    core.update_status(POD, {**pod, "status": running_ready_status(pod, core.clock.now())})


def ready(core: ServerCore, node: str) -> str:
    return next(c["status"] for c in core.get(NODE, None, node)["status"]["conditions"] if c["type"] == "Ready")


def ready_in(node: Obj | None) -> str:
    return next((c["status"] for c in ((node or {}).get("status") or {}).get("conditions") or ()
                 if c["type"] == "Ready"), "")


def noexecute(core: ServerCore, node: str) -> list[str]:
    return [t["key"] for t in core.get(NODE, None, node)["spec"].get("taints") or [] if t["effect"] == "NoExecute"]


def deleting(core: ServerCore, name: str) -> bool:
    return bool(core.get(POD, "default", name)["metadata"].get("deletionTimestamp"))


@pytest.mark.parametrize(("statuses", "state"), [
    (["True"] * 10, "Normal"),
    (["Unknown", "Unknown"] + ["True"] * 2, "Normal"),  # two not-ready never count as partial
    (["Unknown"] * 3 + ["True"] * 2, "PartialDisruption"),
    (["Unknown"] * 3 + ["True"] * 3, "Normal"),  # 0.5 < 0.55
    (["Unknown", "False"], "FullDisruption"),
])
def test_zone_state(statuses: list[str], state: str) -> None:
    assert compute_zone_state(statuses, 0.55) == state


def test_silent_node_goes_unknown_after_grace_and_pods_go_after_300s(core: ServerCore, manager: ControllerManager,
                                                                    clock: ManualClock) -> None:
    add_node(core, "dead")
    add_node(core, "alive")
    run_pod(core, "web", "dead")
    run_pod(core, "daemon", "dead", [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                      "effect": "NoExecute"}])
    manager.start()
    assert manager.wait_active(20)
    advance(clock, core, 35, ["alive"])
    wait_for(lambda: manager.controllers()["nodelifecycle"].reconciles > 2, 10, "monitor passes")
    assert ready(core, "dead") == "True"
    advance(clock, core, 10, ["alive"])
    wait_for(lambda: ready(core, "dead") == "Unknown", 10, "Ready=Unknown after 40 s without lease renewals")
    cond = next(c for c in core.get(NODE, None, "dead")["status"]["conditions"] if c["type"] == "Ready")
    assert (cond["reason"], cond["message"]) == ("NodeStatusUnknown", "Kubelet stopped posting node status.")
    wait_for(lambda: noexecute(core, "dead") == ["node.kubernetes.io/unreachable"], 10, "unreachable:NoExecute")
    assert "node.kubernetes.io/unreachable" in [t["key"] for t in core.get(NODE, None, "dead")["spec"]["taints"]
                                                if t["effect"] == "NoSchedule"]
    assert ready(core, "alive") == "True" and not noexecute(core, "alive")
    assert core.get(POD, "default", "web")["status"]["conditions"][-1]["status"] != "True"
    advance(clock, core, 295, ["alive"], step=20)
    assert not deleting(core, "web")
    advance(clock, core, 8, ["alive"])
    wait_for(lambda: deleting(core, "web"), 10, "web evicted after its 300 s toleration")
    web = core.get(POD, "default", "web")
    assert any(c["type"] == "DisruptionTarget" and c["reason"] == "DeletionByTaintManager"
               for c in web["status"]["conditions"])
    assert not deleting(core, "daemon")  # tolerates for ever


def test_manual_noexecute_taint_evicts_intolerant_pods_at_once(core: ServerCore, manager: ControllerManager,
                                                              clock: ManualClock) -> None:
    add_node(core, "n1")
    run_pod(core, "plain", "n1")
    run_pod(core, "patient", "n1", [{"key": "maintenance", "operator": "Exists", "effect": "NoExecute",
                                     "tolerationSeconds": 60}])
    manager.start()
    assert manager.wait_active(20)
    node = core.get(NODE, None, "n1")
    core.update(NODE, {**node, "spec": {"taints": [{"key": "maintenance", "effect": "NoExecute",
                                                    "timeAdded": rfc3339(clock.now())}]}})
    wait_for(lambda: deleting(core, "plain"), 10, "the intolerant pod deleted at once")
    assert not deleting(core, "patient")
    advance(clock, core, 61, ["n1"])
    wait_for(lambda: deleting(core, "patient"), 10, "the tolerating pod deleted after 60 s")


def test_eviction_taints_are_rate_limited_per_zone(core: ServerCore, manager: ControllerManager,
                                                  clock: ManualClock) -> None:
    names = [f"a{i}" for i in range(10)]
    for name in names:
        add_node(core, name)
    manager.start()
    assert manager.wait_active(20)
    alive = names[2:]
    advance(clock, core, 45, alive)
    wait_for(lambda: ready(core, "a0") == "Unknown" and ready(core, "a1") == "Unknown", 10, "two nodes Unknown")
    wait_for(lambda: sum(bool(noexecute(core, n)) for n in names) == 1, 10, "the first node tainted")
    advance(clock, core, 4, alive, step=2)
    assert sum(bool(noexecute(core, n)) for n in names) == 1  # 0.1 per second: the next one ~10 s later
    advance(clock, core, 8, alive, step=2)
    wait_for(lambda: sum(bool(noexecute(core, n)) for n in names) == 2, 10, "the second node tainted")


def test_full_disruption_of_every_zone_stops_evictions(core: ServerCore, manager: ControllerManager,
                                                      clock: ManualClock) -> None:
    for name in ("z1", "z2", "z3"):
        add_node(core, name)
    manager.start()
    assert manager.wait_active(20)
    advance(clock, core, 45, [])
    wait_for(lambda: all(ready(core, n) == "Unknown" for n in ("z1", "z2", "z3")), 10, "all Unknown")
    # Zone states and the taints taken off in full disruption are computed from the controller's node cache at
    # each monitor pass: the passes of the next 30 s must see what the store shows, the Unknown conditions and
    # any taint an earlier pass wrote (the ManualClock jumps faster than a watch delivers).
    cache = manager.controllers()["nodelifecycle"].node_informer.indexer
    wait_for(lambda: all(resource_version(cache.get_by_key(n) or {"metadata": {}}) ==
                         resource_version(core.get(NODE, None, n)) for n in ("z1", "z2", "z3")), 10,
             "the controller's cache caught up with the store")
    assert all(ready_in(cache.get_by_key(n)) == "Unknown" for n in ("z1", "z2", "z3"))
    advance(clock, core, 30, [])
    wait_for(lambda: manager.controllers()["nodelifecycle"].zone_states, 10, "zone states")
    assert set(manager.controllers()["nodelifecycle"].zone_states.values()) == {"FullDisruption"}
    assert not any(noexecute(core, n) for n in ("z1", "z2", "z3"))


def _status_write(core: ServerCore) -> None:
    pod = core.get(POD, "default", "web")
    core.update_status(POD, {**pod, "status": {**pod["status"], "message": "still running"}})


def _deletion_mark(core: ServerCore) -> None:
    core.delete(POD, "default", "web")  # graceful: marked, not gone


def _bind(core: ServerCore) -> None:
    core.create(POD, b.pod("late"))
    core.bind("default", "late", "n1")


@pytest.mark.parametrize(("change", "queued"), [(_status_write, 0), (_deletion_mark, 0), (_bind, 1)],
                         ids=["status-write", "graceful-deletion-mark", "bind-changes-the-node"])
def test_taint_eviction_queues_a_pod_update_only_when_its_node_or_tolerations_change(
        core: ServerCore, manager: ControllerManager, change: Any, queued: int) -> None:
    """Upstream ``PodUpdated`` returns when the old and new pod have the same node and tolerations: a status write
    or a deletion mark is not worth a pass (a taint change of the node re-checks its pods by itself)."""
    add_node(core, "n1")
    run_pod(core, "web", "n1")
    manager.start()
    assert manager.wait_active(20)
    ctrl = manager.controllers()["taint-eviction-controller"]
    wait_for(lambda: cache_matches(core, ctrl.pod_informer, POD) and len(ctrl.queue) == 0
             and ctrl.queue.unfinished_work_seconds() == 0, 10, "the initial pods passed")
    before = ctrl.reconciles
    change(core)
    # A marker the handler always queues, after the change on the same informer: once it has been reconciled,
    # the change's notification has been handled too (one handler thread, in order).
    core.create(POD, b.pod("marker"))
    core.bind("default", "marker", "n1")
    wait_for(lambda: cache_matches(core, ctrl.pod_informer, POD) and ctrl.reconciles >= before + 1 + queued
             and len(ctrl.queue) == 0 and ctrl.queue.unfinished_work_seconds() == 0, 10, "the marker reconciled")
    assert ctrl.reconciles == before + 1 + queued
