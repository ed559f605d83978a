"""The DaemonSet controller against a real Redis, on a manual cluster clock.

The test plays the default scheduler and kubelet: it binds each pending daemon pod to the node its
pinned node affinity names (as the scheduler's NodeAffinity filter would) and marks it Ready.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from emulator.api import errors
from emulator.api.kinds import DAEMONSET, NODE, POD
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.controllers.daemonset import REVISION_LABEL, replace_node_name_affinity
from emulator.controllers.manager import ControllerManager
from emulator.server.core import ServerCore
from tests import builders as b
from tests.kubelet_standin import ReadyMonitor, running_ready_status
from tests.waiting import wait_for
from tests.workloads import retry_on_conflict

pytestmark = pytest.mark.integration


@pytest.fixture
def manager(start_manager: Callable[..., ControllerManager]) -> ControllerManager:
    return start_manager("daemonset")


def daemonset(*, node_selector: dict[str, str] | None = None, tolerations: list[Obj] | None = None,
              image: str = "agent:1", max_unavailable: int | str = 1) -> Obj:
    spec: Obj = {"containers": [{**b.container(), "image": image}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable}},
                     "template": {"metadata": {"labels": {"app": "agent"}}, "spec": spec}}}


def add_node(core: ServerCore, name: str, *, labels: dict[str, str] | None = None, taints: list[Obj] | None = None,
             unschedulable: bool = False) -> None:
    body = b.node(name, labels=labels)
    body["spec"] = {"taints": taints or [], **({"unschedulable": True} if unschedulable else {})}
    core.create(NODE, body)


def live(core: ServerCore) -> list[Obj]:
    return [p for p in core.list(POD, "default", label_selector="app=agent").items
            if not p["metadata"].get("deletionTimestamp")]


def pinned_node(pod: Obj) -> str:
    term = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return term["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]


def schedule_and_run(core: ServerCore) -> int:
    """The scheduler + kubelet: bind pending pods where their affinity pins them; Ready; confirm deletions."""
    changed = 0
    for pod in core.list(POD, "default", label_selector="app=agent").items:
        meta = pod["metadata"]
        try:
            if meta.get("deletionTimestamp"):
                core.delete(POD, "default", meta["name"], grace_period_seconds=0)
                changed += 1
                continue
            if not pod["spec"].get("nodeName"):
                bound = core.bind("default", meta["name"], pinned_node(pod))
                core.update_status(POD, {**bound, "status": running_ready_status(bound, core.clock.now())})
                changed += 1
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise
    return changed


def ds_status(core: ServerCore) -> Obj:
    return core.get(DAEMONSET, "default", "agent").get("status") or {}


def test_pin_affinity_replaces_match_fields_and_keeps_expressions() -> None:
    pinned = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    assert replace_node_name_affinity(None, "n1") == {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [pinned]}}}
    expr = {"key": "zone", "operator": "In", "values": ["a"]}
    given = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [expr], "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["x"]}]}]}}}
    terms = replace_node_name_affinity(given, "n2")["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [expr], "matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]


def test_one_pod_per_eligible_node_with_automatic_tolerations(core: ServerCore, manager: ControllerManager) -> None:
    add_node(core, "plain", labels={"role": "worker"})
    add_node(core, "cordoned", labels={"role": "worker"}, unschedulable=True,
             taints=[b.taint("node.kubernetes.io/unschedulable")])
    add_node(core, "pressured", labels={"role": "worker"}, taints=[b.taint("node.kubernetes.io/memory-pressure")])
    add_node(core, "unreachable", labels={"role": "worker"},
             taints=[b.taint("node.kubernetes.io/unreachable", effect="NoExecute")])
    add_node(core, "dedicated", labels={"role": "worker"}, taints=[b.taint("dedicated", "gpu")])
    add_node(core, "other-role", labels={"role": "infra"})
    core.create(DAEMONSET, daemonset(node_selector={"role": "worker"}))
    wait_for(lambda: len(live(core)) == 4, 10, "four daemon pods")
    pods = live(core)
    assert sorted(pinned_node(p) for p in pods) == ["cordoned", "plain", "pressured", "unreachable"]
    tolerations = pods[0]["spec"]["tolerations"]
    for key, effect in (("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
                        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
                        ("node.kubernetes.io/unschedulable", "NoSchedule")):
        t = next(t for t in tolerations if t["key"] == key)
        assert t["effect"] == effect and "tolerationSeconds" not in t  # no 300 s from admission
    assert all(not p["spec"].get("nodeName") for p in pods)  # placed by the scheduler, not by the controller
    assert len({p["metadata"]["labels"][REVISION_LABEL] for p in pods}) == 1
    wait_for(lambda: schedule_and_run(core) == 0 and ds_status(core).get("numberReady") == 4, 10, "ready")
    status = ds_status(core)
    assert (status["desiredNumberScheduled"], status["currentNumberScheduled"], status["numberAvailable"],
            status["updatedNumberScheduled"], status["numberMisscheduled"]) == (4, 4, 4, 4, 0)
    # A tolerating template reaches the dedicated node; a relabelled node loses its pod.
    node = core.get(NODE, None, "plain")
    core.update(NODE, {**node, "metadata": {**node["metadata"], "labels": {"role": "infra"}}})
    wait_for(lambda: "plain" not in {pinned_node(p) for p in live(core)}, 10, "pod removed from the relabelled node")


def test_rolling_update_respects_max_unavailable(core: ServerCore, manager: ControllerManager) -> None:
    for i in range(4):
        add_node(core, f"n{i}")
    core.create(DAEMONSET, daemonset())
    wait_for(lambda: schedule_and_run(core) == 0 and ds_status(core).get("numberAvailable") == 4, 10, "4 available")
    old_hash = live(core)[0]["metadata"]["labels"][REVISION_LABEL]
    monitor = ReadyMonitor(core, "app=agent")

    def bump() -> Obj:
        ds = core.get(DAEMONSET, "default", "agent")
        template = ds["spec"]["template"]
        spec = {**template["spec"], "containers": [{**template["spec"]["containers"][0], "image": "agent:2"}]}
        return core.update(DAEMONSET, {**ds, "spec": {**ds["spec"], "template": {**template, "spec": spec}}})

    retry_on_conflict(bump)

    def rolled() -> bool:
        schedule_and_run(core)
        pods = live(core)
        return len(pods) == 4 and all(p["metadata"]["labels"][REVISION_LABEL] != old_hash for p in pods) and \
            ds_status(core).get("updatedNumberScheduled") == 4 and ds_status(core).get("numberAvailable") == 4

    wait_for(rolled, 20, "all pods on the new revision")
    monitor.stop()
    assert monitor.min_after(4) == 3  # maxUnavailable 1: never two nodes down at once


def test_min_ready_seconds_count_from_the_ready_transition_not_from_when_the_controller_saw_it(
        core: ServerCore, clock: ManualClock, manager: ControllerManager) -> None:
    add_node(core, "n1")
    body = daemonset()
    body["spec"]["minReadySeconds"] = 30
    core.create(DAEMONSET, body)
    (pod,) = wait_for(lambda: live(core), 10, "the daemon pod")
    # The kubelet stamped Ready 20 s of cluster time before the controller hears of it (a ManualClock a test
    # stepped in between): the pod is available 30 s after that stamp, 10 s from now.
    ready_at = clock.now() - 20
    bound = core.bind("default", pod["metadata"]["name"], pinned_node(pod))
    core.update_status(POD, {**bound, "status": running_ready_status(bound, ready_at)})
    wait_for(lambda: ds_status(core).get("numberReady") == 1, 10, "the pod counted Ready")
    assert ds_status(core)["numberAvailable"] == 0
    clock.advance(10)  # exactly ready_at + minReadySeconds: upstream's IsPodAvailable holds from then on
    wait_for(lambda: ds_status(core).get("numberAvailable") == 1, 10, "the pod available at its Ready time + 30 s")
