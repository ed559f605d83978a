"""The Deployment controller (with the ReplicaSet controller) against a real Redis.

The test plays kubelet and scheduler with :class:`~tests.kubelet_standin.StandInKubelet` and
watches pods with :class:`~tests.kubelet_standin.ReadyMonitor`, so invariants are checked over
every event of a rollout, not only at the end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from emulator.api.kinds import DEPLOYMENT, EVENT, POD, REPLICASET
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.controllers.deployment import util as dep
from emulator.controllers.manager import ControllerManager
from emulator.server.core import ServerCore
from tests import workloads as w
from tests.kubelet_standin import ReadyMonitor, StandInKubelet
from tests.waiting import wait_for
from tests.workloads import retry_on_conflict

pytestmark = pytest.mark.integration

LABELS = {"app": "web"}


@pytest.fixture
def manager(start_manager: Callable[..., ControllerManager]) -> ControllerManager:
    return start_manager("replicaset", "deployment")


@pytest.fixture
def kubelet(core: ServerCore) -> Iterator[StandInKubelet]:
    gate = threading.Event()
    gate.set()
    k = StandInKubelet(core, nodes=4, ready_when=lambda _pod: gate.is_set())
    k.gate = gate  # type: ignore[attr-defined]  # tests close it to hold pods back
    k.start()
    yield k
    k.stop()


def deployment(replicas: int = 4, *, strategy: Obj | None = None, image: str = "nginx:1.27", **spec: Any) -> Obj:
    body = w.deployment("web", replicas, LABELS)
    body["spec"]["template"]["spec"]["containers"][0]["image"] = image
    if strategy is not None:
        body["spec"]["strategy"] = strategy
    body["spec"].update(spec)
    return body


def rolling(surge: Any, unavailable: Any) -> Obj:
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}


def get(core: ServerCore) -> Obj:
    return core.get(DEPLOYMENT, "default", "web")


def rolled_out(core: ServerCore) -> bool:
    """What ``kubectl rollout status`` waits for."""
    d = get(core)
    s, n = d.get("status") or {}, d["spec"]["replicas"]
    return (d["metadata"]["generation"] <= s.get("observedGeneration", 0) and s.get("updatedReplicas") == n
            and s.get("replicas") == n and s.get("availableReplicas") == n)


def update(core: ServerCore, change: Any) -> Obj:
    """Read-modify-write of the Deployment, retried on conflict (the controller writes its status meanwhile)."""
    def attempt() -> Obj:
        d = get(core)
        change(d)
        return core.update(DEPLOYMENT, d)

    return retry_on_conflict(attempt)


def set_image(core: ServerCore, image: str) -> None:
    update(core, lambda d: d["spec"]["template"]["spec"]["containers"][0].__setitem__("image", image))


def replica_sets(core: ServerCore) -> dict[str, Obj]:
    return {rs["metadata"]["name"]: rs for rs in core.list(REPLICASET, "default").items}


def condition(core: ServerCore, cond_type: str) -> Obj | None:
    return dep.get_condition(get(core).get("status") or {}, cond_type)


def test_new_deployment_gets_a_hashed_replica_set_revision_1_and_conditions(core: ServerCore,
                                                                           manager: ControllerManager,
                                                                           kubelet: StandInKubelet) -> None:
    d = core.create(DEPLOYMENT, deployment(3))
    wait_for(lambda: rolled_out(core), 30, "the first rollout")
    [(name, rs)] = replica_sets(core).items()
    pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
    assert name == f"web-{pod_hash}" and set(pod_hash) <= set("456789bcdf")
    assert pod_hash == dep.compute_hash(d["spec"]["template"], None)
    assert rs["spec"]["selector"]["matchLabels"] == {**LABELS, "pod-template-hash": pod_hash}
    assert rs["metadata"]["annotations"] == {dep.REVISION: "1", dep.DESIRED_REPLICAS: "3", dep.MAX_REPLICAS: "4"}
    assert rs["metadata"]["ownerReferences"][0]["uid"] == d["metadata"]["uid"]
    assert all(p["metadata"]["labels"]["pod-template-hash"] == pod_hash and p["metadata"]["name"].startswith(name)
               for p in core.list(POD, "default").items)
    status = get(core)["status"]
    assert get(core)["metadata"]["annotations"][dep.REVISION] == "1"
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"], status["availableReplicas"],
            status["unavailableReplicas"], status["observedGeneration"]) == (3, 3, 3, 3, 0, 1)
    available, progressing = condition(core, "Available"), condition(core, "Progressing")
    assert available is not None and (available["status"], available["reason"]) == ("True",
                                                                                     "MinimumReplicasAvailable")
    assert progressing is not None and (progressing["status"], progressing["reason"]) == ("True",
                                                                                          "NewReplicaSetAvailable")
    assert progressing["message"] == f'ReplicaSet "{name}" has successfully progressed.'
    manager.controllers()["deployment"].recorder.flush()
    scaled = [e["message"] for e in core.list(EVENT, "default").items if e["reason"] == "ScalingReplicaSet"]
    assert scaled == [f"Scaled up replica set {name} from 0 to 3"]


@pytest.mark.parametrize(("surge", "unavailable"), [(1, 0), ("25%", 0), (3, 0)])
def test_rolling_update_with_max_unavailable_0_never_drops_below_the_desired_ready_count(
        core: ServerCore, manager: ControllerManager, kubelet: StandInKubelet, surge: Any, unavailable: Any) -> None:
    core.create(DEPLOYMENT, deployment(5, strategy=rolling(surge, unavailable)))
    wait_for(lambda: rolled_out(core), 30, "the first rollout")
    old_hash = next(iter(replica_sets(core).values()))["metadata"]["labels"]["pod-template-hash"]
    monitor = ReadyMonitor(core, "app=web")
    try:
        set_image(core, "nginx:1.28")
        wait_for(lambda: rolled_out(core) and get(core)["metadata"]["generation"] == 2, 60, "the rolling update")
        wait_for(lambda: len(monitor.pods) == 5, 20, "the old pods gone")
    finally:
        monitor.stop()
    assert monitor.history, "the monitor saw no pod events"
    assert min(monitor.history) >= 5, f"ready pods dropped to {min(monitor.history)} during the rollout"
    total_surge = dep.scaled_value(surge, 5, True)
    assert len(monitor.created) == 5  # exactly one new pod per replica: nothing created twice
    sets = replica_sets(core)
    new = next(rs for rs in sets.values() if rs["metadata"]["labels"]["pod-template-hash"] != old_hash)
    old = next(rs for rs in sets.values() if rs["metadata"]["labels"]["pod-template-hash"] == old_hash)
    assert (new["spec"]["replicas"], old["spec"]["replicas"]) == (5, 0)
    assert new["metadata"]["annotations"][dep.REVISION] == "2"
    assert new["metadata"]["annotations"][dep.MAX_REPLICAS] == str(5 + total_surge)
    assert get(core)["metadata"]["annotations"][dep.REVISION] == "2"
    assert all(p["spec"]["containers"][0]["image"] == "nginx:1.28" for p in core.list(POD, "default").items)


def test_recreate_removes_every_old_pod_before_creating_new_ones(core: ServerCore, manager: ControllerManager,
                                                                kubelet: StandInKubelet) -> None:
    core.create(DEPLOYMENT, deployment(3, strategy={"type": "Recreate"}))
    wait_for(lambda: rolled_out(core), 30, "the first rollout")
    watch = core.watch(POD, since_rv=core.store.current_rv())
    set_image(core, "nginx:1.28")
    wait_for(lambda: rolled_out(core) and get(core)["metadata"]["generation"] == 2, 60, "the recreate rollout")
    events = []
    while batch := watch.next_batch(timeout=0.2):
        events.extend(batch)
    watch.close()
    image = [(e.type, e.object["spec"]["containers"][0]["image"]) for e in events]
    first_new = image.index(("ADDED", "nginx:1.28"))
    last_old_gone = max(i for i, ev in enumerate(image) if ev == ("DELETED", "nginx:1.27"))
    assert last_old_gone < first_new, "a new pod was created while an old one still existed"
    assert sum(1 for ev in image if ev == ("ADDED", "nginx:1.28")) == 3


def test_rollback_by_applying_the_old_template_reuses_its_replica_set(core: ServerCore, manager: ControllerManager,
                                                                      kubelet: StandInKubelet) -> None:
    core.create(DEPLOYMENT, deployment(2))
    wait_for(lambda: rolled_out(core), 30, "revision 1")
    [v1_name] = replica_sets(core)
    old_template = get(core)["spec"]["template"]
    set_image(core, "nginx:1.28")
    wait_for(lambda: rolled_out(core) and get(core)["metadata"]["generation"] == 2, 30, "revision 2")
    # What `kubectl rollout undo` does: put the old ReplicaSet's template back (without its hash label).
    v1 = replica_sets(core)[v1_name]
    template = v1["spec"]["template"]
    template["metadata"]["labels"].pop("pod-template-hash")
    assert template == old_template
    update(core, lambda d: d["spec"].__setitem__("template", template))
    wait_for(lambda: rolled_out(core) and get(core)["metadata"]["generation"] == 3, 30, "the rollback")
    sets = replica_sets(core)
    assert len(sets) == 2  # no third ReplicaSet: revision 1's came back
    back = sets[v1_name]
    assert back["spec"]["replicas"] == 2
    assert back["metadata"]["annotations"][dep.REVISION] == "3"
    assert back["metadata"]["annotations"][dep.REVISION_HISTORY] == "1"
    assert get(core)["metadata"]["annotations"][dep.REVISION] == "3"
    wait_for(lambda: {p["spec"]["containers"][0]["image"] for p in core.list(POD, "default").items} ==
             {"nginx:1.27"}, 20, "only revision 1's pods")


def test_rollback_to_annotation_restores_the_previous_revision(core: ServerCore, manager: ControllerManager,
                                                               kubelet: StandInKubelet) -> None:
    core.create(DEPLOYMENT, deployment(2))
    wait_for(lambda: rolled_out(core), 30, "revision 1")
    set_image(core, "nginx:1.28")
    wait_for(lambda: rolled_out(core) and get(core)["metadata"]["generation"] == 2, 30, "revision 2")
    update(core, lambda d: d["metadata"].setdefault("annotations", {}).__setitem__(dep.ROLLBACK_TO, "0"))
    wait_for(lambda: get(core)["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27", 30,
             "the template of revision 1")
    assert dep.ROLLBACK_TO not in get(core)["metadata"]["annotations"]
    wait_for(lambda: rolled_out(core) and get(core)["metadata"]["annotations"][dep.REVISION] == "3", 30,
             "the rollback rollout")


def test_progress_deadline_exceeded_on_the_cluster_clock(core: ServerCore, clock: ManualClock,
                                                         manager: ControllerManager,
                                                         kubelet: StandInKubelet) -> None:
    core.create(DEPLOYMENT, deployment(2, strategy=rolling(1, 0), progressDeadlineSeconds=60))
    wait_for(lambda: rolled_out(core), 30, "revision 1")
    kubelet.gate.clear()  # type: ignore[attr-defined]  # new pods never become Ready
    set_image(core, "nginx:broken")
    # The last progress: the surge pod exists (3 replicas, 1 updated) and will never be Ready, so the
    # Progressing condition's lastUpdateTime stays at the current cluster time from here on.
    wait_for(lambda: (s := get(core).get("status") or {}).get("replicas") == 3 and s.get("updatedReplicas") == 1
             and (c := condition(core, "Progressing")) and c["reason"] == "ReplicaSetUpdated", 20, "the last progress")
    clock.advance(30)
    # Not yet: make the controller sync at +30 s (a spec change it must observe) and read its verdict.
    generation = update(core, lambda d: d["spec"].__setitem__("revisionHistoryLimit", 9))["metadata"]["generation"]
    wait_for(lambda: get(core)["status"]["observedGeneration"] == generation, 20, "a sync at +30 s")
    assert condition(core, "Progressing")["status"] == "True"  # type: ignore[index]
    clock.advance(32)  # past lastUpdateTime + 60 s: the controller requeued itself for this moment
    cond = wait_for(lambda: (c := condition(core, "Progressing")) and c["reason"] == "ProgressDeadlineExceeded" and c,
                    20, "ProgressDeadlineExceeded")
    new_rs = next(n for n, rs in replica_sets(core).items() if rs["metadata"]["annotations"][dep.REVISION] == "2")
    assert cond["status"] == "False" and cond["message"] == f'ReplicaSet "{new_rs}" has timed out progressing.'
    available = condition(core, "Available")
    assert available is not None and available["status"] == "True"  # the old pods still serve
    kubelet.gate.set()  # type: ignore[attr-defined]
    wait_for(lambda: rolled_out(core), 30, "the rollout once pods start")
    wait_for(lambda: condition(core, "Progressing")["reason"] == "NewReplicaSetAvailable", 20,  # type: ignore[index]
             "the Progressing condition to recover")


def test_paused_deployment_scales_but_does_not_roll_out(core: ServerCore, manager: ControllerManager,
                                                        kubelet: StandInKubelet) -> None:
    core.create(DEPLOYMENT, deployment(2))
    wait_for(lambda: rolled_out(core), 30, "revision 1")
    update(core, lambda d: d["spec"].__setitem__("paused", True))
    wait_for(lambda: (c := condition(core, "Progressing")) and c["reason"] == "DeploymentPaused", 20, "paused")
    set_image(core, "nginx:1.28")
    update(core, lambda d: d["spec"].__setitem__("replicas", 4))
    wait_for(lambda: get(core)["status"].get("availableReplicas") == 4, 30, "the scale-up while paused")
    assert len(replica_sets(core)) == 1
    assert {p["spec"]["containers"][0]["image"] for p in core.list(POD, "default").items} == {"nginx:1.27"}
    update(core, lambda d: d["spec"].__setitem__("paused", False))
    wait_for(lambda: rolled_out(core) and len(replica_sets(core)) == 2 and
             get(core)["status"].get("updatedReplicas") == 4, 60, "the rollout after resume")


def test_revision_history_limit_deletes_the_oldest_scaled_down_replica_sets(core: ServerCore,
                                                                            manager: ControllerManager,
                                                                            kubelet: StandInKubelet) -> None:
    core.create(DEPLOYMENT, deployment(1, revisionHistoryLimit=1))
    wait_for(lambda: rolled_out(core), 30, "revision 1")
    for generation, image in ((2, "nginx:1.28"), (3, "nginx:1.29"), (4, "nginx:1.30")):
        set_image(core, image)
        wait_for(lambda g=generation: rolled_out(core) and get(core)["metadata"]["generation"] == g, 30,
                 f"generation {generation}")
    wait_for(lambda: len(replica_sets(core)) == 2, 20, "old ReplicaSets cleaned up")
    revisions = sorted(rs["metadata"]["annotations"][dep.REVISION] for rs in replica_sets(core).values())
    assert revisions == ["3", "4"]


def test_scaling_during_a_rollout_is_proportional(core: ServerCore, manager: ControllerManager,
                                                  kubelet: StandInKubelet) -> None:
    core.create(DEPLOYMENT, deployment(10, strategy=rolling(3, 2)))
    wait_for(lambda: rolled_out(core), 30, "revision 1")
    kubelet.gate.clear()  # type: ignore[attr-defined]  # the rollout stalls with both ReplicaSets active
    set_image(core, "nginx:1.28")

    def stalled() -> bool:
        # The fixed point with no new pod Ready: old scaled to 10 - maxUnavailable, new to the surge left.
        sizes = {rs["metadata"]["annotations"][dep.REVISION]: rs["spec"]["replicas"]
                 for rs in replica_sets(core).values()}
        return sizes == {"1": 8, "2": 5} and get(core)["status"].get("observedGeneration") == 2

    wait_for(stalled, 30, "a stalled rollout at 8 old + 5 new pods")
    before = {rs["metadata"]["annotations"][dep.REVISION]: rs["spec"]["replicas"] for rs in replica_sets(core).values()}
    update(core, lambda d: d["spec"].__setitem__("replicas", 20))
    wait_for(lambda: sum(rs["spec"]["replicas"] for rs in replica_sets(core).values()) == 23, 30,
             "the scale to 20 (+3 surge)")
    after = {rs["metadata"]["annotations"][dep.REVISION]: rs["spec"]["replicas"] for rs in replica_sets(core).values()}
    # Each ReplicaSet grows by its share of 13 -> 23 (upstream getReplicaSetFraction): 8 -> 14, 5 -> 9.
    assert before == {"1": 8, "2": 5} and after == {"1": 14, "2": 9}, (before, after)
    kubelet.gate.set()  # type: ignore[attr-defined]
    wait_for(lambda: rolled_out(core), 60, "the rollout to finish at 20")
