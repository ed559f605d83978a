"""The StatefulSet controller against a real Redis: ordered creation, stable identity, partitioned updates.

The stand-in kubelet is stepped by hand (``step``), so the test decides when a pod becomes
Running and Ready and can check, between steps, that the controller created nothing ahead
of its turn (OrderedReady: pod N+1 only after pod N is Running and Ready).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from emulator.api import errors
from emulator.api.kinds import CONTROLLERREVISION, PERSISTENTVOLUMECLAIM, POD, STATEFULSET
from emulator.api.types import Obj
from emulator.controllers.manager import ControllerManager
from emulator.server.core import ServerCore
from tests.kubelet_standin import StandInKubelet, is_ready
from tests.waiting import wait_for
from tests.workloads import retry_on_conflict

pytestmark = pytest.mark.integration


@pytest.fixture
def manager(start_manager: Callable[..., ControllerManager]) -> ControllerManager:
    return start_manager("statefulset")


def stateful_set(name: str = "db", replicas: int = 3, *, policy: str = "OrderedReady", partition: int = 0,
                 strategy: str = "RollingUpdate", image: str = "postgres:16") -> Obj:
    update: Obj = {"type": strategy}
    if strategy == "RollingUpdate":
        update["rollingUpdate"] = {"partition": partition}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": policy,
                     "updateStrategy": update, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "db", "image": image}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}


def pods(core: ServerCore) -> dict[str, Obj]:
    return {p["metadata"]["name"]: p for p in core.list(POD, "default").items
            if not p["metadata"].get("deletionTimestamp")}


def settle(manager: ControllerManager) -> None:
    """Wait until the controller has nothing queued or running (it has acted on everything it saw)."""
    queue = manager.controllers()["statefulset"].queue  # type: ignore[attr-defined]
    wait_for(lambda: len(queue) == 0 and queue.unfinished_work_seconds() == 0, 10, "the controller to be idle")


def edit(core: ServerCore, change: Callable[[Obj], None]) -> Obj:
    """Read the set, change it, write it back; again on a conflict with the controller's status writes."""
    def attempt() -> Obj:
        current = core.get(STATEFULSET, "default", "db")
        change(current)
        return core.update(STATEFULSET, current)
    return retry_on_conflict(attempt)


def image(value: str) -> Callable[[Obj], None]:
    def change(sts: Obj) -> None:
        sts["spec"]["template"]["spec"]["containers"][0]["image"] = value
    return change


def revision(pod: Obj) -> str:
    return pod["metadata"]["labels"]["controller-revision-hash"]


def test_ordered_ready_creates_each_pod_after_the_previous_is_running_and_ready(
        core: ServerCore, manager: ControllerManager) -> None:
    kubelet = StandInKubelet(core, nodes=1)
    core.create(STATEFULSET, stateful_set(replicas=3))
    for n in range(3):
        wait_for(lambda n=n: f"db-{n}" in pods(core), 10, f"db-{n}")
        settle(manager)
        assert sorted(pods(core)) == [f"db-{i}" for i in range(n + 1)], "created ahead of its predecessor"
        assert not is_ready(pods(core)[f"db-{n}"])
        kubelet.step()  # db-n becomes Running and Ready: only now may db-(n+1) come
    wait_for(lambda: core.get(STATEFULSET, "default", "db")["status"].get("readyReplicas") == 3, 10, "3 ready")
    pod = pods(core)["db-1"]
    assert pod["spec"]["hostname"] == "db-1" and pod["spec"]["subdomain"] == "db"
    assert pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "db-1"
    assert pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "1"
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}} in pod["spec"]["volumes"]
    claims = sorted(c["metadata"]["name"] for c in core.list(PERSISTENTVOLUMECLAIM, "default").items)
    assert claims == ["data-db-0", "data-db-1", "data-db-2"]


def test_parallel_creates_every_pod_at_once(core: ServerCore, manager: ControllerManager) -> None:
    core.create(STATEFULSET, stateful_set(replicas=4, policy="Parallel"))
    wait_for(lambda: sorted(pods(core)) == [f"db-{i}" for i in range(4)], 10, "four pods without any being ready")


def test_a_deleted_pod_comes_back_with_its_name_and_claim(core: ServerCore, manager: ControllerManager) -> None:
    kubelet = StandInKubelet(core, nodes=1)
    core.create(STATEFULSET, stateful_set(replicas=3))
    wait_for(lambda: kubelet.step() >= 0 and len([p for p in pods(core).values() if is_ready(p)]) == 3, 20,
             "three ready pods")
    old = pods(core)["db-1"]
    claim_uid = core.get(PERSISTENTVOLUMECLAIM, "default", "data-db-1")["metadata"]["uid"]
    core.delete(POD, "default", "db-1")
    wait_for(lambda: kubelet.step() >= 0 and "db-1" in pods(core)
             and pods(core)["db-1"]["metadata"]["uid"] != old["metadata"]["uid"], 20, "db-1 recreated")
    assert sorted(pods(core)) == ["db-0", "db-1", "db-2"]
    assert core.get(PERSISTENTVOLUMECLAIM, "default", "data-db-1")["metadata"]["uid"] == claim_uid


def test_partitioned_rolling_update_updates_only_ordinals_at_or_above_the_partition(
        core: ServerCore, manager: ControllerManager) -> None:
    kubelet = StandInKubelet(core, nodes=1)
    core.create(STATEFULSET, stateful_set(replicas=4, partition=2))
    wait_for(lambda: kubelet.step() >= 0 and len([p for p in pods(core).values() if is_ready(p)]) == 4, 20,
             "four ready pods")
    before = {name: revision(p) for name, p in pods(core).items()}
    assert len(set(before.values())) == 1

    edit(core, image("postgres:17"))

    def rolled() -> bool:
        kubelet.step()
        status = core.get(STATEFULSET, "default", "db")["status"]
        return status.get("updatedReplicas") == 2 and status.get("readyReplicas") == 4
    wait_for(rolled, 20, "ordinals 2 and 3 updated")
    settle(manager)
    after = pods(core)
    status = core.get(STATEFULSET, "default", "db")["status"]
    assert status["updateRevision"] != status["currentRevision"]
    assert {n: revision(p) == status["updateRevision"] for n, p in after.items()} == {
        "db-0": False, "db-1": False, "db-2": True, "db-3": True}
    assert after["db-3"]["spec"]["containers"][0]["image"] == "postgres:17"
    assert after["db-0"]["spec"]["containers"][0]["image"] == "postgres:16"
    # A pod below the partition that is deleted comes back at the current (old) revision.
    core.delete(POD, "default", "db-0")
    wait_for(lambda: kubelet.step() >= 0 and "db-0" in pods(core) and is_ready(pods(core)["db-0"]), 20, "db-0 back")
    assert pods(core)["db-0"]["spec"]["containers"][0]["image"] == "postgres:16"

    edit(core, lambda sts: sts["spec"]["updateStrategy"]["rollingUpdate"].update(partition=0))

    def done() -> bool:
        kubelet.step()
        s = core.get(STATEFULSET, "default", "db")["status"]
        return s.get("updatedReplicas") == 4 and s.get("readyReplicas") == 4 and \
            s.get("currentRevision") == s.get("updateRevision")
    wait_for(done, 30, "the whole set at the new revision")
    assert {p["spec"]["containers"][0]["image"] for p in pods(core).values()} == {"postgres:17"}
    assert len(core.list(CONTROLLERREVISION, "default").items) == 2


def test_max_unavailable_takes_that_many_pods_down_at_once(core: ServerCore, manager: ControllerManager) -> None:
    kubelet = StandInKubelet(core, nodes=1)
    body = stateful_set(replicas=4)
    body["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = 2
    core.create(STATEFULSET, body)
    wait_for(lambda: kubelet.step() >= 0 and len([p for p in pods(core).values() if is_ready(p)]) == 4, 20,
             "four ready pods")
    edit(core, image("postgres:17"))

    def terminating() -> list[str]:
        return sorted(p["metadata"]["name"] for p in core.list(POD, "default").items
                      if p["metadata"].get("deletionTimestamp"))
    # The kubelet is not stepped: deleted pods stay terminating, so the controller may not go past two.
    wait_for(lambda: terminating() == ["db-2", "db-3"], 10, "the two highest ordinals going")
    settle(manager)
    assert terminating() == ["db-2", "db-3"]


def test_on_delete_waits_for_the_user(core: ServerCore, manager: ControllerManager) -> None:
    kubelet = StandInKubelet(core, nodes=1)
    core.create(STATEFULSET, stateful_set(replicas=2, strategy="OnDelete"))
    wait_for(lambda: kubelet.step() >= 0 and len([p for p in pods(core).values() if is_ready(p)]) == 2, 20,
             "two ready pods")
    edit(core, image("postgres:17"))
    wait_for(lambda: core.get(STATEFULSET, "default", "db")["status"].get("updateRevision")
             != core.get(STATEFULSET, "default", "db")["status"].get("currentRevision"), 10, "a new update revision")
    settle(manager)
    assert {p["spec"]["containers"][0]["image"] for p in pods(core).values()} == {"postgres:16"}
    core.delete(POD, "default", "db-1")
    wait_for(lambda: kubelet.step() >= 0 and "db-1" in pods(core)
             and pods(core)["db-1"]["spec"]["containers"][0]["image"] == "postgres:17", 20, "db-1 at the update")


def test_scale_down_removes_the_highest_ordinal_first(core: ServerCore, manager: ControllerManager) -> None:
    kubelet = StandInKubelet(core, nodes=1)
    core.create(STATEFULSET, stateful_set(replicas=3))
    wait_for(lambda: kubelet.step() >= 0 and len([p for p in pods(core).values() if is_ready(p)]) == 3, 20,
             "three ready pods")
    since = core.store.current_rv()
    edit(core, lambda sts: sts["spec"].update(replicas=1))
    wait_for(lambda: kubelet.step() >= 0 and sorted(pods(core)) == ["db-0"], 20, "one pod left")
    # The order from the pod watch (every change, in resourceVersion order), not from polling snapshots:
    # db-1 starts terminating only once db-2 is gone (OrderedReady scale-down, one ordinal at a time).
    watch = core.watch(POD, since_rv=since, namespace="default")
    order: list[tuple[str, str]] = []
    while batch := watch.next_batch(timeout=0.2):
        for event in batch:
            name = event.object["metadata"]["name"]
            if event.type == "DELETED":
                order.append(("gone", name))
            elif event.object["metadata"].get("deletionTimestamp") and ("terminating", name) not in order:
                order.append(("terminating", name))
    watch.close()
    assert order.index(("gone", "db-2")) < order.index(("terminating", "db-1")), order
    assert ("terminating", "db-0") not in order
    assert core.get(PERSISTENTVOLUMECLAIM, "default", "data-db-2")  # Retain: the claim stays


def test_when_scaled_delete_removes_the_claims_of_removed_ordinals(
        core: ServerCore, start_manager: Callable[..., ControllerManager]) -> None:
    manager = start_manager("statefulset", "garbagecollector")
    kubelet = StandInKubelet(core, nodes=1)
    body = stateful_set(replicas=2)
    body["spec"]["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Retain", "whenScaled": "Delete"}
    core.create(STATEFULSET, body)
    wait_for(lambda: kubelet.step() >= 0 and len([p for p in pods(core).values() if is_ready(p)]) == 2, 20,
             "two ready pods")
    edit(core, lambda sts: sts["spec"].update(replicas=1))

    def claims() -> list[str]:
        kubelet.step()
        return sorted(c["metadata"]["name"] for c in core.list(PERSISTENTVOLUMECLAIM, "default").items)
    wait_for(lambda: claims() == ["data-db-0"], 20, "data-db-1 collected with db-1")
    assert sorted(pods(core)) == ["db-0"]
    assert manager.controllers()["statefulset"].errors == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize(("change", "field"), [
    ({"podManagementPolicy": "Sometimes"}, "spec.podManagementPolicy"),
    ({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": -1}}},
     "spec.updateStrategy.rollingUpdate.partition"),
    ({"selector": {"matchLabels": {"app": "other"}}}, "spec.template.metadata.labels"),
], ids=["policy", "negative-partition", "selector-mismatch"])
def test_invalid_stateful_sets_are_422(core: ServerCore, change: Obj, field: str) -> None:
    body = stateful_set()
    body["spec"].update(change)
    with pytest.raises(errors.StatusError) as e:
        core.create(STATEFULSET, body)
    assert e.value.code == 422 and field in {c.field for c in e.value.causes}


def test_only_some_spec_fields_may_change(core: ServerCore) -> None:
    current = core.create(STATEFULSET, stateful_set())
    current["spec"]["serviceName"] = "elsewhere"
    with pytest.raises(errors.StatusError) as e:
        core.update(STATEFULSET, current)
    assert e.value.code == 422 and "updates to statefulset spec for fields other than" in e.value.message
