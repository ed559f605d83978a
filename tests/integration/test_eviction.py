"""The eviction subresource and the disruption controller, against a real Redis.

The disruption controller is driven with ``sync_once()`` and a manual clock; the
test stands in for the kubelet (pod phase and Ready condition) and for the
ReplicaSet / Deployment controllers (objects created with ownerReferences).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from emulator.api import errors
from emulator.api.kinds import DAEMONSET, DEPLOYMENT, NODE, PDB, POD, REPLICASET
from emulator.api.types import Obj
from emulator.apiserver import kubeconfig
from emulator.apiserver.process import ApiServerProcess
from emulator.apiserver.settings import ServerSettings
from emulator.clock import ManualClock, rfc3339
from emulator.controllers.disruption import DisruptionController
from emulator.controllers.loop import ControllerLoop
from emulator.server.core import ServerCore
from emulator.server.eviction import evict
from emulator.store.store import Store
from tests import builders as b
from tests import workloads as w
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

LABELS = {"app": "web"}


@pytest.fixture
def dc(core: ServerCore, clock: ManualClock) -> DisruptionController:
    return DisruptionController(core, clock)


def set_pod_state(core: ServerCore, name: str, phase: str = "Running", ready: bool = True) -> Obj:
    pod = core.get(POD, "default", name)
    status = {**pod["status"], "phase": phase,
              "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return core.update_status(POD, {**pod, "status": status})


def pdb_body(name: str = "web-pdb", *, min_available: int | str | None = None,
             max_unavailable: int | str | None = None, labels: dict[str, str] | None = None,
             unhealthy_policy: str | None = None) -> Obj:
    spec: Obj = {"selector": {"matchLabels": dict(labels or LABELS)},
                 **b.not_none(minAvailable=min_available, maxUnavailable=max_unavailable,
                              unhealthyPodEvictionPolicy=unhealthy_policy)}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def eviction(name: str, **delete_options: Any) -> Obj:
    body: Obj = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}}
    if delete_options:
        body["deleteOptions"] = delete_options
    return body


def pdb_status(core: ServerCore, name: str = "web-pdb") -> Obj:
    return core.get(PDB, "default", name).get("status") or {}


@pytest.fixture
def web(core: ServerCore, dc: DisruptionController) -> list[Obj]:
    """Three Running, Ready, bound pods of Deployment web, guarded by web-pdb (minAvailable 2): one disruption."""
    _, _, pods = w.web_chain(core, 3, labels=LABELS, node="n1")
    for p in pods:
        set_pod_state(core, p["metadata"]["name"])
    core.create(PDB, pdb_body(min_available=2))
    dc.sync_once()
    status = pdb_status(core)
    assert (status["currentHealthy"], status["desiredHealthy"], status["disruptionsAllowed"]) == (3, 2, 1)
    return pods


# ------------------------------------------------------------- eviction
def test_allowed_eviction_deletes_gracefully_and_spends_the_budget(core: ServerCore, web: list[Obj],
                                                                   clock: ManualClock) -> None:
    result = evict(core, "default", "web-0", eviction("web-0"))
    assert result == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    pod = core.get(POD, "default", "web-0")
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 30
    target = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert target[0]["reason"] == "EvictionByEvictionAPI" and target[0]["status"] == "True"
    status = pdb_status(core)
    assert status["disruptionsAllowed"] == 0
    assert status["disruptedPods"] == {"web-0": rfc3339(clock.now())}
    cond = next(c for c in status["conditions"] if c["type"] == "DisruptionAllowed")
    assert (cond["status"], cond["reason"]) == ("False", "InsufficientPods")


def test_eviction_honours_delete_options(core: ServerCore, web: list[Obj]) -> None:
    evict(core, "default", "web-0", eviction("web-0", gracePeriodSeconds=0))
    with pytest.raises(errors.StatusError) as exc:
        core.get(POD, "default", "web-0")
    assert exc.value.code == 404


def test_blocked_eviction_is_429_with_the_budget_cause_and_changes_nothing(core: ServerCore, web: list[Obj],
                                                                           dc: DisruptionController) -> None:
    evict(core, "default", "web-0", eviction("web-0"))
    dc.sync_once()  # web-0 is terminating: 2 healthy of the 2 needed
    before_pod, before_pdb = core.get(POD, "default", "web-1"), core.get(PDB, "default", "web-pdb")
    with pytest.raises(errors.StatusError) as exc:
        evict(core, "default", "web-1", eviction("web-1"))
    status = exc.value.to_status()
    assert (status["code"], status["reason"]) == (429, "TooManyRequests")
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"] == [{"reason": "DisruptionBudget", "message":
                                            "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"}]
    assert core.get(POD, "default", "web-1") == before_pod
    assert core.get(PDB, "default", "web-pdb") == before_pdb


def test_two_matching_budgets_are_a_500(core: ServerCore, web: list[Obj]) -> None:
    core.create(PDB, pdb_body("web-pdb-2", max_unavailable=1))
    with pytest.raises(errors.StatusError) as exc:
        evict(core, "default", "web-0", eviction("web-0"))
    assert exc.value.code == 500
    assert exc.value.message == ("This pod has more than one PodDisruptionBudget, which the eviction subresource "
                                 "does not support.")
    assert not core.get(POD, "default", "web-0")["metadata"].get("deletionTimestamp")


@pytest.mark.parametrize(("phase", "deleted_at_once"), [("Succeeded", True), ("Failed", True), ("Pending", False)])
def test_terminal_and_pending_pods_evict_regardless_of_the_budget(core: ServerCore, web: list[Obj],
                                                                   dc: DisruptionController, phase: str,
                                                                   deleted_at_once: bool) -> None:
    evict(core, "default", "web-0", eviction("web-0"))  # spend the only disruption
    dc.sync_once()
    assert pdb_status(core)["disruptionsAllowed"] == 0
    set_pod_state(core, "web-1", phase=phase, ready=False)
    evict(core, "default", "web-1", eviction("web-1"))
    if deleted_at_once:  # a finished pod has no grace period
        with pytest.raises(errors.StatusError):
            core.get(POD, "default", "web-1")
    else:
        assert core.get(POD, "default", "web-1")["metadata"]["deletionTimestamp"]
    assert pdb_status(core)["disruptionsAllowed"] == 0
    assert "web-1" not in pdb_status(core).get("disruptedPods", {})


def test_stale_observed_generation_is_429_until_the_controller_catches_up(core: ServerCore, web: list[Obj],
                                                                          dc: DisruptionController) -> None:
    budget = core.get(PDB, "default", "web-pdb")
    core.update(PDB, {**budget, "spec": {**budget["spec"], "minAvailable": 1}})
    assert core.get(PDB, "default", "web-pdb")["metadata"]["generation"] == 2
    with pytest.raises(errors.StatusError) as exc:
        evict(core, "default", "web-0", eviction("web-0"))
    status = exc.value.to_status()
    assert status["code"] == 429 and status["details"]["retryAfterSeconds"] == 10
    assert status["details"]["causes"][0]["message"] == ("The disruption budget web-pdb is still being processed "
                                                         "by the server.")
    dc.sync_once()
    assert pdb_status(core)["observedGeneration"] == 2 and pdb_status(core)["disruptionsAllowed"] == 2
    evict(core, "default", "web-0", eviction("web-0"))
    assert pdb_status(core)["disruptionsAllowed"] == 1


@pytest.mark.parametrize(("policy", "healthy_enough", "evicts"), [
    (None, True, True),               # IfHealthyBudget: the others already satisfy the budget
    ("IfHealthyBudget", False, False),  # ... and they do not: the eviction would be a disruption
    ("AlwaysAllow", False, True),     # an unhealthy pod may always go
])
def test_unhealthy_pod_eviction_policy(core: ServerCore, dc: DisruptionController, policy: str | None,
                                       healthy_enough: bool, evicts: bool) -> None:
    _, _, pods = w.web_chain(core, 3, labels=LABELS, node="n1")
    for p in pods:
        set_pod_state(core, p["metadata"]["name"], ready=p["metadata"]["name"] != "web-0")
    core.create(PDB, pdb_body(min_available=2 if healthy_enough else 3, unhealthy_policy=policy))
    dc.sync_once()
    before = pdb_status(core)
    assert before["disruptionsAllowed"] == 0
    if evicts:
        evict(core, "default", "web-0", eviction("web-0"))
        assert core.get(POD, "default", "web-0")["metadata"]["deletionTimestamp"]
        assert pdb_status(core) == before  # the budget was not spent on an unhealthy pod
    else:
        with pytest.raises(errors.StatusError) as exc:
            evict(core, "default", "web-0", eviction("web-0"))
        assert exc.value.code == 429
        assert not core.get(POD, "default", "web-0")["metadata"].get("deletionTimestamp")


def test_pods_no_budget_covers_are_simply_deleted(core: ServerCore, web: list[Obj]) -> None:
    core.create(POD, w.owned_pod("other", labels={"app": "other"}, node="n1"))
    set_pod_state(core, "other")
    evict(core, "default", "other", eviction("other"))
    assert core.get(POD, "default", "other")["metadata"]["deletionTimestamp"]
    assert pdb_status(core)["disruptionsAllowed"] == 1


def test_dry_run_checks_but_writes_nothing(core: ServerCore, web: list[Obj]) -> None:
    before_pod, before_pdb = core.get(POD, "default", "web-0"), core.get(PDB, "default", "web-pdb")
    assert evict(core, "default", "web-0", eviction("web-0", dryRun=["All"]))["status"] == "Success"
    assert core.get(POD, "default", "web-0") == before_pod and core.get(PDB, "default", "web-pdb") == before_pdb


@pytest.mark.parametrize(("body", "message"), [
    ({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-1"}},
     "name in URL does not match name in Eviction object"),
    ({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0", "namespace": "kube-system"}},
     "the namespace of the provided object does not match the namespace sent on the request"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"}},
     "the API version in the data (v1) or kind (Pod) does not match the expected policy/v1, Kind=Eviction"),
])
def test_malformed_evictions_are_400(core: ServerCore, web: list[Obj], body: Obj, message: str) -> None:
    with pytest.raises(errors.StatusError) as exc:
        evict(core, "default", "web-0", body)
    assert (exc.value.code, exc.value.message) == (400, message)


def test_evicting_a_missing_pod_is_404(core: ServerCore) -> None:
    with pytest.raises(errors.StatusError) as exc:
        evict(core, "default", "nope", eviction("nope"))
    assert exc.value.code == 404


# ------------------------------------------------------ disruption controller
@pytest.mark.parametrize(("spec", "expected", "desired", "allowed"), [
    # Deployment replicas 6 > ReplicaSet replicas 5 = pods 5, of which 4 Ready.
    ({"min_available": 2}, 5, 2, 2),           # integer: expected = matching pods
    ({"min_available": "50%"}, 6, 3, 1),       # percent of the Deployment's scale, rounded up
    ({"min_available": "55%"}, 6, 4, 0),       # ceil(3.3) = 4
    ({"max_unavailable": 1}, 6, 5, 0),         # maxUnavailable always uses the scale
    ({"max_unavailable": "30%"}, 6, 4, 0),     # 6 - ceil(1.8)
    ({"max_unavailable": "50%"}, 6, 3, 1),
])
def test_pdb_status_over_a_deployment_chain(core: ServerCore, dc: DisruptionController, spec: Obj, expected: int,
                                             desired: int, allowed: int) -> None:
    dep = core.create(DEPLOYMENT, w.deployment("web", 6, LABELS))
    rs = core.create(REPLICASET, w.replica_set("web-rs", 5, LABELS, owner=dep))
    for i in range(5):
        core.create(POD, w.owned_pod(f"web-{i}", [rs], labels=LABELS, node="n1"))
        set_pod_state(core, f"web-{i}", ready=i != 4)
    core.create(PDB, pdb_body(**spec))
    assert dc.sync_once() == 1
    status = pdb_status(core)
    assert (status["expectedPods"], status["desiredHealthy"], status["currentHealthy"],
            status["disruptionsAllowed"]) == (expected, desired, 4, allowed)
    assert status["observedGeneration"] == 1
    cond = next(c for c in status["conditions"] if c["type"] == "DisruptionAllowed")
    wanted = ("True", "SufficientPods") if allowed else ("False", "InsufficientPods")
    assert (cond["status"], cond["reason"]) == wanted
    assert dc.sync_once() == 0  # nothing changed: nothing written


def test_replica_set_without_deployment_counts_its_own_scale(core: ServerCore, dc: DisruptionController) -> None:
    rs = core.create(REPLICASET, w.replica_set("solo", 4, LABELS))
    for i in range(2):
        core.create(POD, w.owned_pod(f"solo-{i}", [rs], labels=LABELS))
        set_pod_state(core, f"solo-{i}")
    core.create(PDB, pdb_body(max_unavailable="25%"))
    dc.sync_once()
    status = pdb_status(core)
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (4, 3, 0)


def test_unmanaged_pods_are_not_counted_in_the_scale(core: ServerCore, dc: DisruptionController) -> None:
    rs = core.create(REPLICASET, w.replica_set("solo", 2, LABELS))
    core.create(POD, w.owned_pod("owned", [rs], labels=LABELS))
    core.create(POD, w.owned_pod("bare", labels=LABELS))
    for name in ("owned", "bare"):
        set_pod_state(core, name)
    core.create(PDB, pdb_body(min_available="50%"))
    dc.sync_once()
    status = pdb_status(core)
    assert (status["expectedPods"], status["desiredHealthy"], status["currentHealthy"]) == (2, 1, 2)


@pytest.mark.parametrize(("owner_kind", "message"), [
    ("DaemonSet", "daemonsets.apps does not implement the scale subresource"),
    ("GoneReplicaSet", 'found no controllers for pod "p"'),
    ("Widget", 'no matches for kind "Widget" in version "example.com/v1"'),  # a kind kemu does not serve
])
def test_pods_without_a_scalable_controller_fail_the_pdb_safe(core: ServerCore, dc: DisruptionController,
                                                               owner_kind: str, message: str) -> None:
    if owner_kind == "DaemonSet":
        ds = core.create(DAEMONSET, {"apiVersion": "apps/v1", "kind": "DaemonSet",
                                     "metadata": {"name": "ds", "namespace": "default"},
                                     "spec": {"selector": {"matchLabels": LABELS},
                                              "template": {"metadata": {"labels": LABELS},
                                                           "spec": {"containers": [{"name": "a", "image": "x"}]}}}})
        ref = w.owner_ref(ds)
    elif owner_kind == "GoneReplicaSet":
        ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "uid": "u-gone", "controller": True}
    else:
        ref = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": "u-w", "controller": True}
    core.create(POD, w.owned_pod("p", labels=LABELS, refs=[ref]))
    set_pod_state(core, "p")
    core.create(PDB, pdb_body(max_unavailable=1))
    dc.sync_once()
    status = pdb_status(core)
    assert status["disruptionsAllowed"] == 0
    cond = next(c for c in status["conditions"] if c["type"] == "DisruptionAllowed")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "SyncFailed", message)


def test_integer_min_available_needs_no_controller(core: ServerCore, dc: DisruptionController) -> None:
    for i in range(3):
        core.create(POD, w.owned_pod(f"bare-{i}", labels=LABELS))
        set_pod_state(core, f"bare-{i}")
    core.create(PDB, pdb_body(min_available=1))
    dc.sync_once()
    assert pdb_status(core)["disruptionsAllowed"] == 2


def test_disrupted_pods_stop_counting_until_two_minutes_pass(core: ServerCore, dc: DisruptionController,
                                                              clock: ManualClock, web: list[Obj]) -> None:
    # An approved eviction whose pod was never deleted (say the evicting client died).
    budget = core.get(PDB, "default", "web-pdb")
    core.update_status(PDB, {**budget, "status": {**budget["status"], "disruptedPods": {
        "web-2": rfc3339(clock.now())}}})
    dc.sync_once()
    status = pdb_status(core)
    assert (status["currentHealthy"], status["disruptionsAllowed"]) == (2, 0)
    assert status["disruptedPods"] == {"web-2": rfc3339(clock.now())}
    clock.advance(119)
    dc.sync_once()
    assert pdb_status(core)["currentHealthy"] == 2
    clock.advance(2)  # past the two-minute DeletionTimeout
    dc.sync_once()
    status = pdb_status(core)
    assert (status["currentHealthy"], status["disruptionsAllowed"]) == (3, 1)
    assert "disruptedPods" not in status


def test_pods_being_deleted_or_unready_are_not_healthy(core: ServerCore, dc: DisruptionController,
                                                       web: list[Obj]) -> None:
    core.delete(POD, "default", "web-0")  # graceful: still there, terminating
    set_pod_state(core, "web-1", ready=False)
    dc.sync_once()
    status = pdb_status(core)
    assert (status["expectedPods"], status["currentHealthy"], status["disruptionsAllowed"]) == (3, 1, 0)


def test_controller_and_eviction_race_is_settled_by_compare_and_set(core: ServerCore, dc: DisruptionController,
                                                                    web: list[Obj]) -> None:
    """The controller writes with the resourceVersion it read: an eviction in between wins, the controller retries."""
    stale = core.get(PDB, "default", "web-pdb")
    set_pod_state(core, "web-0", ready=False)  # the controller would now compute 0 allowed...
    evict(core, "default", "web-1", eviction("web-1"))  # ...but an eviction spends the budget first
    written = dc.sync_budget(stale)  # computed from the stale read
    assert written == 0 and dc.stats.conflicts == 1
    assert pdb_status(core)["disruptedPods"].keys() == {"web-1"}  # the eviction's record survived
    dc.sync_once()
    assert pdb_status(core)["disruptionsAllowed"] == 0


# ------------------------------------------------------- kubectl drain, end to end
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_kubectl_drain_waits_for_the_disruption_budget(redis_url: str, tmp_path: Path) -> None:
    """``kubectl drain n1`` cordons, is refused (429) while web-pdb allows no disruption, and completes once it does.

    The test is the kubelet (it finishes terminating pods with grace 0 and marks pods Running/Ready) and the
    ReplicaSet controller (it replaces evicted pods on n2); the disruption controller runs in a loop thread.
    """
    core = ServerCore(Store.connect(redis_url))  # system clock: the API server process writes with its own
    core.bootstrap()
    token = kubeconfig.generate_token()
    server = ApiServerProcess(ServerSettings(redis_url=redis_url, port=_free_port(), token=token),
                              log_path=tmp_path / "apiserver.log")
    server.start()
    loops: list[ControllerLoop] = []
    try:
        config = kubeconfig.write(tmp_path / "kubeconfig", server.url, token)
        for node in ("n1", "n2"):
            core.create(NODE, b.node(node))
        core.create(DEPLOYMENT, w.deployment("web", 3, LABELS))
        rs = core.create(REPLICASET, w.replica_set("web-rs", 3, LABELS, owner=core.get(DEPLOYMENT, "default", "web")))
        for i, node in enumerate(("n1", "n1", "n2")):
            core.create(POD, w.owned_pod(f"web-{i}", [rs], labels=LABELS, node=node))
            set_pod_state(core, f"web-{i}", ready=i < 2)  # web-2 is still starting: 2 healthy, 2 needed
        core.create(PDB, pdb_body(min_available=2))

        replace = threading.Event()
        lowest_healthy = [3]
        names = iter(range(3, 100))

        def kubelet_and_replicaset() -> None:
            pods = core.list(POD, "default", label_selector="app=web").items
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            healthy = [p for p in live if any(c.get("type") == "Ready" and c.get("status") == "True"
                                               for c in p["status"].get("conditions") or [])]
            lowest_healthy[0] = min(lowest_healthy[0], len(healthy))
            for p in pods:
                if p["metadata"].get("deletionTimestamp"):
                    with contextlib.suppress(errors.StatusError):
                        core.delete(POD, "default", p["metadata"]["name"], grace_period_seconds=0)
            if replace.is_set():
                for _ in range(3 - len(live)):
                    name = f"web-{next(names)}"
                    core.create(POD, w.owned_pod(name, [rs], labels=LABELS, node="n2"))
                    set_pod_state(core, name)

        loops.append(ControllerLoop("disruption", DisruptionController(core), 0.1).start())
        loops.append(ControllerLoop("kubelet", kubelet_and_replicaset, 0.05).start())
        wait_for(lambda: pdb_status(core).get("observedGeneration") == 1, 10, "the PDB's first status")
        assert pdb_status(core)["disruptionsAllowed"] == 0

        drain = subprocess.Popen(["kubectl", "--kubeconfig", str(config), "drain", "n1", "--timeout=120s"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        output: list[str] = []
        reader = threading.Thread(target=lambda: output.extend(iter(drain.stdout.readline, "")), daemon=True)
        reader.start()
        try:
            refused = "Cannot evict pod as it would violate the pod's disruption budget."
            wait_for(lambda: any(refused in line for line in output), 30, "an eviction refused by web-pdb")
            assert core.get(NODE, None, "n1")["spec"].get("unschedulable") is True  # cordoned first
            assert not any(core.get(POD, "default", n)["metadata"].get("deletionTimestamp")
                           for n in ("web-0", "web-1"))
            set_pod_state(core, "web-2")  # the rollout completes: a disruption is allowed again
            replace.set()
            assert drain.wait(timeout=120) == 0, "".join(output)
        finally:
            if drain.poll() is None:
                drain.kill()
                drain.wait()
        reader.join(timeout=10)
        text = "".join(output)
        assert "node/n1 cordoned" in text and "node/n1 drained" in text, text
        assert "pod/web-0 evicted" in text and "pod/web-1 evicted" in text, text
        on_n1 = core.list(POD, field_selector="spec.nodeName=n1").items
        assert on_n1 == []
        assert lowest_healthy[0] >= 2  # the budget held throughout
    finally:
        for loop in loops:
            loop.stop()
        server.stop()
