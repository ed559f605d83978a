"""The ReplicaSet controller against a real Redis, on a manual cluster clock.

Controllers run in a controller manager without leader election; the test plays the
kubelet (``tests/kubelet_standin.py``) where pods must run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from emulator.api.kinds import DEPLOYMENT, EVENT, NODE, POD, PRIORITYCLASS, REPLICASET
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager
from emulator.controllers.replicaset import ReplicaSetController
from emulator.controllers.runtime import ControllerContext, EventRecorder
from emulator.informers import SharedInformerFactory
from emulator.server.core import ServerCore
from tests import builders as b
from tests import workloads as w
from tests.kubelet_standin import StandInKubelet, running_ready_status
from tests.waiting import cache_matches, wait_for
from tests.workloads import retry_on_conflict

pytestmark = pytest.mark.integration

LABELS = {"app": "web"}


@pytest.fixture
def manager(start_manager: Callable[..., ControllerManager]) -> ControllerManager:
    return start_manager("replicaset")


def pods_of(core: ServerCore, selector: str = "app=web") -> list[Obj]:
    return [p for p in core.list(POD, "default", label_selector=selector).items
            if not p["metadata"].get("deletionTimestamp")]


def rs_status(core: ServerCore, name: str = "web") -> Obj:
    return core.get(REPLICASET, "default", name).get("status") or {}


def scale(core: ServerCore, replicas: int, name: str = "web") -> None:
    def attempt() -> Obj:  # the controller writes the status meanwhile: retry on conflict
        rs = core.get(REPLICASET, "default", name)
        return core.update(REPLICASET, {**rs, "spec": {**rs["spec"], "replicas": replicas}})

    retry_on_conflict(attempt)


def set_state(core: ServerCore, name: str, *, phase: str = "Running", ready: bool = True, node: str | None = None
              ) -> None:
    pod = core.get(POD, "default", name)
    if node:
        pod = core.bind("default", name, node)
    status = running_ready_status(pod, core.clock.now()) if ready else {**pod["status"], "phase": phase}
    status["phase"] = phase
    core.update_status(POD, {**pod, "status": status})


def test_scale_up_creates_pods_from_the_template_with_controller_references(core: ServerCore,
                                                                           manager: ControllerManager) -> None:
    rs = core.create(REPLICASET, w.replica_set("web", 7, LABELS))
    wait_for(lambda: len(pods_of(core)) == 7 and rs_status(core).get("replicas") == 7, 20, "seven pods")
    for pod in pods_of(core):
        meta = pod["metadata"]
        assert meta["generateName"] == "web-" and meta["name"].startswith("web-") and len(meta["name"]) == 9
        assert meta["labels"] == LABELS
        assert meta["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                            "uid": rs["metadata"]["uid"], "controller": True,
                                            "blockOwnerDeletion": True}]
        assert pod["spec"]["containers"][0]["image"] == "nginx:1.27"
    status = rs_status(core)
    assert (status["fullyLabeledReplicas"], status["readyReplicas"], status["availableReplicas"],
            status["observedGeneration"]) == (7, 0, 0, 1)
    manager.controllers()["replicaset"].recorder.flush()
    created = [e for e in core.list(EVENT, "default").items if e["reason"] == "SuccessfulCreate"]
    assert len(created) == 7 and all(e["message"].startswith("Created pod: web-") for e in created)
    assert {e["source"]["component"] for e in created} == {"replicaset-controller"}
    # A pod deleted behind the controller's back is replaced.
    victim = pods_of(core)[0]["metadata"]["name"]
    core.delete(POD, "default", victim)
    wait_for(lambda: len(pods_of(core)) == 7 and victim not in {p["metadata"]["name"] for p in pods_of(core)},
             20, "a replacement pod")


def test_status_counts_ready_and_available_after_min_ready_seconds(core: ServerCore, clock: ManualClock,
                                                                   manager: ControllerManager) -> None:
    body = w.replica_set("web", 2, LABELS)
    body["spec"]["minReadySeconds"] = 30
    core.create(REPLICASET, body)
    wait_for(lambda: len(pods_of(core)) == 2, 20, "two pods")
    kubelet = StandInKubelet(core, nodes=1)
    kubelet.step()
    wait_for(lambda: rs_status(core).get("readyReplicas") == 2, 20, "two ready replicas")
    assert rs_status(core)["availableReplicas"] == 0
    clock.advance(31)  # the controller requeued itself for minReadySeconds later
    wait_for(lambda: rs_status(core).get("availableReplicas") == 2, 20, "two available replicas")


def test_min_ready_seconds_count_from_the_ready_transition_not_from_when_the_controller_saw_it(
        core: ServerCore, clock: ManualClock, manager: ControllerManager) -> None:
    body = w.replica_set("web", 1, LABELS)
    body["spec"]["minReadySeconds"] = 30
    core.create(REPLICASET, body)
    (pod,) = wait_for(lambda: pods_of(core), 20, "the pod")
    # The kubelet stamped Ready 20 s of cluster time before the controller hears of it (a ManualClock a test
    # stepped in between): available once more than 30 s have passed since that stamp (upstream's strict
    # IsPodAvailable), so a second past ready_at + 30 s, 11 s from now.
    ready_at = clock.now() - 20
    core.update_status(POD, {**pod, "status": running_ready_status(pod, ready_at)})
    wait_for(lambda: rs_status(core).get("readyReplicas") == 1, 20, "one ready replica")
    assert rs_status(core).get("availableReplicas", 0) == 0
    ctrl: Any = manager.controllers()["replicaset"]
    # Before time moves, the controller has seen everything, its own status write included (whose late
    # update event would otherwise make it look again at the new time, whatever it had asked for).
    wait_for(lambda: cache_matches(core, ctrl.rs_informer, REPLICASET) and cache_matches(core, ctrl.pod_informer, POD)
             and len(ctrl.queue) == 0 and ctrl.queue.unfinished_work_seconds() == 0, 20, "the controller idle")
    clock.advance(11)
    wait_for(lambda: rs_status(core).get("availableReplicas") == 1, 20, "available a second past Ready time + 30 s")


def test_scale_down_removes_pods_in_upstream_order(core: ServerCore, clock: ManualClock,
                                                   manager: ControllerManager) -> None:
    for n in ("n1", "n2", "n3", "n4"):
        core.create(NODE, b.node(n))
    # Hand-made pods, one per rule, created oldest first; the ReplicaSet adopts them.
    states = [("running-ready", "Running", True, "n1"), ("running-unready", "Running", False, "n2"),
              ("pending-bound", "Pending", False, "n3"), ("unscheduled", "Pending", False, None),
              ("running-ready-newer", "Running", True, "n4")]
    for name, phase, ready, node in states:
        core.create(POD, b.pod(name, labels=LABELS))
        set_state(core, name, phase=phase, ready=ready, node=node)
        clock.advance(3600)  # creation and ready times an hour apart: distinct log2 buckets
    cache = manager.controllers()["replicaset"].pod_informer.indexer
    wait_for(lambda: len(cache.list()) == 5, 20, "the pods in the controller's cache")
    core.create(REPLICASET, w.replica_set("web", 5, LABELS))
    wait_for(lambda: rs_status(core).get("replicas") == 5, 20, "the five pods adopted")
    assert all(p["metadata"].get("ownerReferences") for p in pods_of(core))
    expected_order = ["unscheduled", "pending-bound", "running-unready", "running-ready-newer"]
    for remaining in (4, 3, 2, 1):
        scale(core, remaining)
        gone = expected_order[4 - remaining]
        wait_for(lambda gone=gone: gone not in {p["metadata"]["name"] for p in pods_of(core)}, 20,
                 f"{gone} to be deleted")
        assert len(pods_of(core)) == remaining
    assert [p["metadata"]["name"] for p in pods_of(core)] == ["running-ready"]


def test_expectations_stop_a_second_create_until_the_cache_shows_the_first(core: ServerCore,
                                                                           clock: ManualClock) -> None:
    """With the pod informer not running, the cache never shows the pods it created: no second batch."""
    factory = SharedInformerFactory(core.store, clock=clock)
    ctx = ControllerContext(core, factory, clock, EventRecorder(core, "replicaset-controller", clock=clock))
    controller = ReplicaSetController(ctx, workers=1)
    factory.multiplexer.start()
    controller.rs_informer.start()  # the ReplicaSet cache only
    try:
        core.create(REPLICASET, w.replica_set("web", 3, LABELS))
        assert controller.rs_informer.wait_for_cache_sync(10)
        wait_for(lambda: controller.rs_informer.indexer.get_by_key("default/web") is not None, 10, "the cached RS")
        controller.reconcile("default/web")
        assert len(pods_of(core)) == 3
        controller.reconcile("default/web")  # the cache still shows no pod: expectations hold it back
        assert len(pods_of(core)) == 3
        clock.advance(301)  # expectations expire after five minutes: the controller acts on its (stale) cache
        controller.reconcile("default/web")
        assert len(pods_of(core)) == 6
        controller.pod_informer.start()  # now the cache fills and the observations count
        wait_for(lambda: len(controller.pod_informer.indexer.list()) == 6, 10, "six pods cached")
        wait_for(lambda: controller.expectations.satisfied_expectations("default/web"), 10, "creations observed")
        controller.reconcile("default/web")  # six where three are wanted: three go
        assert len(pods_of(core)) == 3
    finally:
        controller.stop()
        factory.shutdown()


def test_adopts_matching_orphans_and_releases_pods_that_stop_matching(core: ServerCore,
                                                                      manager: ControllerManager) -> None:
    orphan = core.create(POD, b.pod("orphan", labels=LABELS))
    other = core.create(DEPLOYMENT, w.deployment("other", 1, {"tier": "x"}))  # no Deployment controller here
    # Matches the ReplicaSet's selector, but another controller controls it.
    foreign = core.create(POD, w.owned_pod("foreign", [other], labels={**LABELS, "tier": "x"}))
    cache = manager.controllers()["replicaset"].pod_informer.indexer
    wait_for(lambda: len(cache.list()) == 2, 20, "the pods in the controller's cache")
    rs = core.create(REPLICASET, w.replica_set("web", 2, LABELS))
    wait_for(lambda: rs_status(core).get("replicas") == 2, 20, "two pods claimed")
    adopted = core.get(POD, "default", "orphan")
    assert adopted["metadata"]["uid"] == orphan["metadata"]["uid"]
    assert adopted["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
    assert core.get(POD, "default", "foreign")["metadata"]["ownerReferences"] == \
        foreign["metadata"]["ownerReferences"]
    owned = [p for p in pods_of(core) if p["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]]
    assert len(owned) == 2  # the orphan counted: only one pod was created
    # Relabel the adopted pod out of the selector: it is released and replaced.
    def relabel() -> Obj:
        pod = core.get(POD, "default", "orphan")
        return core.update(POD, {**pod, "metadata": {**pod["metadata"], "labels": {"app": "moved"}}})

    retry_on_conflict(relabel)
    wait_for(lambda: "ownerReferences" not in core.get(POD, "default", "orphan")["metadata"], 20, "the release")
    wait_for(lambda: len([p for p in pods_of(core) if (p["metadata"].get("ownerReferences") or [{}])[0].get("uid")
                          == rs["metadata"]["uid"]]) == 2, 20, "a replacement")


def test_a_pod_being_deleted_is_not_adopted(core: ServerCore, manager: ControllerManager) -> None:
    core.create(NODE, b.node("n1"))
    core.create(POD, b.pod("dying", labels=LABELS, node="n1"))
    core.delete(POD, "default", "dying")  # bound: graceful, it lingers with a deletionTimestamp
    core.create(REPLICASET, w.replica_set("web", 1, LABELS))
    wait_for(lambda: rs_status(core).get("replicas") == 1, 20, "one pod")
    assert "ownerReferences" not in core.get(POD, "default", "dying")["metadata"]


def test_failed_creates_set_replica_failure_until_they_succeed(core: ServerCore, clock: ManualClock,
                                                               manager: ControllerManager) -> None:
    body = w.replica_set("web", 2, LABELS)
    body["spec"]["template"]["spec"]["priorityClassName"] = "gold"  # does not exist yet: admission refuses
    core.create(REPLICASET, body)

    def failure() -> Obj | None:
        return next((c for c in rs_status(core).get("conditions") or [] if c["type"] == "ReplicaFailure"), None)

    cond = wait_for(failure, 20, "the ReplicaFailure condition")
    assert cond["reason"] == "FailedCreate" and "gold" in cond["message"]
    assert pods_of(core) == []
    manager.controllers()["replicaset"].recorder.flush()
    warnings = [e for e in core.list(EVENT, "default").items if e["reason"] == "FailedCreate"]
    assert warnings and warnings[0]["type"] == "Warning" and warnings[0]["message"].startswith("Error creating: ")
    core.create(PRIORITYCLASS, b.priority_class("gold", 1000))
    wait_for(lambda: len(pods_of(core)) == 2 and failure() is None, 30, "pods once the class exists",
             tick=lambda: clock.advance(1.0))  # the retry waits out its back-off on the cluster clock
