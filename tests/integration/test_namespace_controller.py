"""Namespace deletion against a real Redis: Terminating phase, the namespace controller's cascade, finalize.

The test plays the kubelet where a bound pod must confirm its deletion.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from emulator.api import errors
from emulator.api.kinds import CONFIGMAP, DEPLOYMENT, JOB, LIMITRANGE, NAMESPACE, NODE, POD, RESOURCEQUOTA, Kind
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager
from emulator.server.core import ServerCore
from tests import builders as b
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

NS = "team-a"


@pytest.fixture
def manager(start_manager: Callable[..., ControllerManager]) -> ControllerManager:
    return start_manager("namespace")


def deployment(name: str, namespace: str = NS) -> Obj:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [b.container()]}}}}


def job(name: str, namespace: str = NS) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [b.container()]}}}}


def configmap(name: str, namespace: str = NS) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": {"k": "v"}}


def gone(core: ServerCore, kind: Kind, namespace: str | None, name: str) -> bool:
    try:
        core.get(kind, namespace, name)
    except errors.StatusError as e:
        return e.code == 404
    return False


def conditions(core: ServerCore, name: str = NS) -> dict[str, tuple[str, str, str]]:
    status = core.get(NAMESPACE, None, name).get("status") or {}
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status.get("conditions") or []}


def test_deleting_a_namespace_cascades_to_its_content_then_removes_it(core: ServerCore,
                                                                       manager: ControllerManager) -> None:
    core.create(NAMESPACE, b.namespace(NS))
    core.create(NODE, b.node("n1"))
    content: list[tuple[Kind, Obj]] = [
        (CONFIGMAP, configmap("settings")), (DEPLOYMENT, deployment("web")), (JOB, job("batch")),
        (LIMITRANGE, b.limit_range("limits", NS, default={"cpu": "100m"})),
        (RESOURCEQUOTA, {"metadata": {"name": "q", "namespace": NS}, "spec": {"hard": {"pods": "10"}}}),
        (POD, b.pod("loose", NS)), (POD, b.pod("bound", NS, node="n1")),
    ]
    for kind, body in content:
        core.create(kind, body)
    # Something in another namespace must survive.
    core.create(CONFIGMAP, configmap("keep", "default"))

    marked = core.delete(NAMESPACE, None, NS)
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["status"]["phase"] == "Terminating"
    assert marked["spec"]["finalizers"] == ["kubernetes"]
    with pytest.raises(errors.StatusError) as refused:
        core.create(CONFIGMAP, configmap("late"))
    assert refused.value.code == 403
    assert "because it is being terminated" in refused.value.message

    # Everything but the bound pod goes at once; the bound pod waits for its kubelet (grace period).
    for kind, body in content[:-1]:
        wait_for(lambda k=kind, n=body["metadata"]["name"]: gone(core, k, NS, n), 10, f"{kind.plural} deleted")
    bound = core.get(POD, NS, "bound")
    assert bound["metadata"]["deletionTimestamp"] and bound["metadata"]["deletionGracePeriodSeconds"] == 30
    remaining = wait_for(lambda: conditions(core).get("NamespaceContentRemaining"), 10, "content condition")
    assert remaining == ("True", "SomeResourcesRemain", "Some resources are remaining: pods has 1 resource instances")
    assert conditions(core)["NamespaceDeletionContentFailure"] == (
        "False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization")
    assert core.get(NAMESPACE, None, NS)["status"]["phase"] == "Terminating"

    core.delete(POD, NS, "bound", grace_period_seconds=0)  # the kubelet confirms
    wait_for(lambda: gone(core, NAMESPACE, None, NS), 10, "namespace removed")
    assert core.get(CONFIGMAP, "default", "keep")["metadata"]["name"] == "keep"


def test_an_empty_namespace_is_finalized_and_removed(core: ServerCore, manager: ControllerManager) -> None:
    core.create(NAMESPACE, b.namespace("empty"))
    core.delete(NAMESPACE, None, "empty")
    wait_for(lambda: gone(core, NAMESPACE, None, "empty"), 10, "namespace removed")
    assert manager.controllers()["namespace"].finalized == 1


def test_without_spec_finalizers_a_namespace_goes_at_once(core: ServerCore) -> None:
    core.create(NAMESPACE, {**b.namespace("bare"), "spec": {"finalizers": []}})
    core.delete(NAMESPACE, None, "bare")
    assert gone(core, NAMESPACE, None, "bare")


def test_finalize_keeps_a_namespace_that_is_not_being_deleted(core: ServerCore) -> None:
    core.create(NAMESPACE, b.namespace("alive"))
    finalized = core.finalize_namespace("alive", [])
    assert finalized["spec"].get("finalizers") == []
    assert not gone(core, NAMESPACE, None, "alive")


def test_deleting_twice_keeps_the_first_mark(core: ServerCore, clock: ManualClock) -> None:
    core.create(NAMESPACE, b.namespace(NS))
    first = core.delete(NAMESPACE, None, NS)
    clock.advance(10)
    second = core.delete(NAMESPACE, None, NS)
    assert second["metadata"]["deletionTimestamp"] == first["metadata"]["deletionTimestamp"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
def test_system_namespaces_may_not_be_deleted(core: ServerCore, name: str) -> None:
    with pytest.raises(errors.StatusError) as refused:
        core.delete(NAMESPACE, None, name)
    assert refused.value.code == 403
    assert refused.value.message == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
    assert "deletionTimestamp" not in core.get(NAMESPACE, None, name)["metadata"]
