"""ResourceQuota against a real Redis: admission's 403s and CAS charges, the controller's recomputed status."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from emulator.api import errors
from emulator.api.kinds import CONFIGMAP, DEPLOYMENT, NAMESPACE, POD, PRIORITYCLASS, RESOURCEQUOTA
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager
from emulator.server.core import ServerCore
from emulator.store.store import Store
from tests import builders as b
from tests.integration import test_apiserver_kubectl as base
from tests.integration.test_apiserver_kubectl import Kubectl
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

# The kubectl test's API server process (one per module) and kubectl; ``core`` below is this module's.
server, kubectl = base.server, base.kubectl


@pytest.fixture
def manager(start_manager: Callable[..., ControllerManager]) -> ControllerManager:
    return start_manager("resourcequota")


def quota(name: str, hard: dict[str, str], namespace: str = "default", *, scopes: list[str] | None = None,
          selector: list[Obj] | None = None) -> Obj:
    spec: Obj = {"hard": hard}
    if scopes:
        spec["scopes"] = scopes
    if selector:
        spec["scopeSelector"] = {"matchExpressions": selector}
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


def used(core: ServerCore, name: str, namespace: str = "default") -> dict[str, str]:
    return dict((core.get(RESOURCEQUOTA, namespace, name).get("status") or {}).get("used") or {})


def synced(core: ServerCore, name: str, namespace: str = "default") -> dict[str, str]:
    """Wait until the controller has written status.hard = spec.hard (admission enforces status only)."""
    def ready() -> dict[str, str] | None:
        rq = core.get(RESOURCEQUOTA, namespace, name)
        status = rq.get("status") or {}
        return status.get("used") if status.get("hard") == rq["spec"]["hard"] else None
    return wait_for(ready, 10, f"quota {name} synced")


def refused(fn: Any) -> errors.StatusError:
    with pytest.raises(errors.StatusError) as info:
        fn()
    assert info.value.code == 403
    return info.value


def missing(core: ServerCore, name: str, namespace: str = "default") -> bool:
    try:
        core.get(POD, namespace, name)
    except errors.StatusError as e:
        return e.code == 404
    return False


def test_exceeding_a_quota_is_403_with_upstreams_words_and_creates_nothing(core: ServerCore,
                                                                          manager: ControllerManager) -> None:
    core.create(RESOURCEQUOTA, quota("compute-quota", {"requests.cpu": "10"}))
    assert synced(core, "compute-quota") == {"requests.cpu": "0"}
    core.create(POD, b.pod("big", containers=[b.container(cpu="9")]))
    assert used(core, "compute-quota") == {"requests.cpu": "9"}
    err = refused(lambda: core.create(POD, b.pod("p2", containers=[b.container(cpu="2")])))
    assert err.message == ('pods "p2" is forbidden: exceeded quota: compute-quota, requested: requests.cpu=2, '
                           'used: requests.cpu=9, limited: requests.cpu=10')
    assert missing(core, "p2")
    assert used(core, "compute-quota") == {"requests.cpu": "9"}
    # Exactly the remaining room still fits.
    core.create(POD, b.pod("p3", containers=[b.container(cpu="1")]))
    assert used(core, "compute-quota") == {"requests.cpu": "10"}


def test_a_limits_quota_requires_every_container_to_set_the_limit(core: ServerCore,
                                                                   manager: ControllerManager) -> None:
    core.create(RESOURCEQUOTA, quota("compute-quota", {"limits.cpu": "4", "requests.memory": "1Gi"}))
    synced(core, "compute-quota")
    err = refused(lambda: core.create(POD, b.pod("p", containers=[b.container("app", memory="100Mi"),
                                                                   b.container("side", lim_cpu="1")])))
    assert err.message == ('pods "p" is forbidden: failed quota: compute-quota: must specify limits.cpu for: app; '
                           'requests.memory for: side')
    assert missing(core, "p")
    core.create(POD, b.pod("ok", containers=[b.container("app", memory="100Mi", lim_cpu="1")]))
    assert used(core, "compute-quota") == {"limits.cpu": "1", "requests.memory": "100Mi"}


def test_unsynced_quota_constrains_nothing_and_dry_run_charges_nothing(core: ServerCore) -> None:
    core.create(RESOURCEQUOTA, quota("q", {"pods": "0"}))  # no controller: status never written
    core.create(POD, b.pod("a"))
    assert not missing(core, "a")
    core.update_status(RESOURCEQUOTA, {**core.get(RESOURCEQUOTA, "default", "q"),
                                       "status": {"hard": {"pods": "1"}, "used": {"pods": "0"}}})
    core.create(POD, b.pod("dry"), dry_run=True)
    assert used(core, "q") == {"pods": "0"}
    core.create(POD, b.pod("b"))
    assert used(core, "q") == {"pods": "1"}


BEST_EFFORT = b.pod("x")
BURSTABLE = b.pod("x", containers=[b.container(cpu="100m")])
DEADLINE = b.pod("x", activeDeadlineSeconds=60)
HIGH = b.pod("x", priority_class="high")
LOW = b.pod("x", priority_class="low")


@pytest.mark.parametrize(("scopes", "selector", "matching", "other"), [
    (["BestEffort"], None, BEST_EFFORT, BURSTABLE),
    (["NotBestEffort"], None, BURSTABLE, BEST_EFFORT),
    (["Terminating"], None, DEADLINE, BEST_EFFORT),
    (["NotTerminating"], None, BEST_EFFORT, DEADLINE),
    (["PriorityClass"], None, HIGH, BEST_EFFORT),
    (None, [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}], HIGH, LOW),
    (None, [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}], LOW, HIGH),
    (None, [{"scopeName": "PriorityClass", "operator": "DoesNotExist"}], BEST_EFFORT, HIGH),
], ids=["BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "PriorityClass-scope", "PriorityClass-In",
        "PriorityClass-NotIn", "PriorityClass-DoesNotExist"])
def test_scopes_and_priority_class_selectors_pick_the_pods_a_quota_counts(
        core: ServerCore, manager: ControllerManager, scopes: list[str] | None, selector: list[Obj] | None,
        matching: Obj, other: Obj) -> None:
    core.create(PRIORITYCLASS, b.priority_class("high", 1000))
    core.create(PRIORITYCLASS, b.priority_class("low", 10))
    core.create(RESOURCEQUOTA, quota("scoped", {"pods": "0"}, scopes=scopes, selector=selector))
    synced(core, "scoped")
    err = refused(lambda: core.create(POD, {**matching, "metadata": {**matching["metadata"], "name": "in"}}))
    assert "exceeded quota: scoped, requested: pods=1, used: pods=0, limited: pods=0" in err.message
    core.create(POD, {**other, "metadata": {**other["metadata"], "name": "out"}})
    assert missing(core, "in") and not missing(core, "out")
    assert used(core, "scoped") == {"pods": "0"}


def test_count_quota_of_another_kind(core: ServerCore, manager: ControllerManager) -> None:
    def deployment(name: str) -> Obj:
        labels = {"app": name}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
                "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": [b.container()]}}}}

    core.create(RESOURCEQUOTA, quota("objects", {"count/deployments.apps": "1", "pods": "5"}))
    synced(core, "objects")
    core.create(DEPLOYMENT, deployment("one"))
    err = refused(lambda: core.create(DEPLOYMENT, deployment("two")))
    assert err.message == ('deployments.apps "two" is forbidden: exceeded quota: objects, '
                           'requested: count/deployments.apps=1, used: count/deployments.apps=1, '
                           'limited: count/deployments.apps=1')
    assert used(core, "objects") == {"count/deployments.apps": "1", "pods": "0"}


def test_status_used_follows_creates_deletes_and_finished_pods(core: ServerCore, clock: ManualClock,
                                                               manager: ControllerManager) -> None:
    core.create(RESOURCEQUOTA, quota("q", {"pods": "10", "requests.cpu": "4", "limits.memory": "4Gi",
                                           "count/configmaps": "5"}))
    synced(core, "q")
    core.create(POD, b.pod("a", containers=[b.container(cpu="500m", lim_memory="1Gi")]))
    core.create(POD, b.pod("b", containers=[b.container(cpu="1", lim_memory="512Mi")]))
    core.create(CONFIGMAP, {"metadata": {"name": "cm", "namespace": "default"}, "data": {}})
    assert used(core, "q") == {"pods": "2", "requests.cpu": "1500m", "limits.memory": "1536Mi",
                               "count/configmaps": "1"}
    core.delete(POD, "default", "a")  # unbound: gone at once; the controller gives the room back
    wait_for(lambda: used(core, "q")["pods"] == "1", 10, "pod a released")
    assert used(core, "q") == {"pods": "1", "requests.cpu": "1", "limits.memory": "512Mi", "count/configmaps": "1"}
    pod = core.get(POD, "default", "b")
    core.update_status(POD, {**pod, "status": {**pod["status"], "phase": "Succeeded"}})
    wait_for(lambda: used(core, "q")["pods"] == "0", 10, "finished pod released")
    assert used(core, "q")["requests.cpu"] == "0"
    # A configmap deletion has no trigger: the periodic resync on the cluster clock finds it.
    core.delete(CONFIGMAP, "default", "cm")
    assert used(core, "q")["count/configmaps"] == "1"
    clock.advance(301)
    wait_for(lambda: used(core, "q")["count/configmaps"] == "0", 10, "resync")


def test_charge_of_a_failed_create_is_corrected_by_the_controller(core: ServerCore, clock: ManualClock,
                                                                  manager: ControllerManager) -> None:
    core.create(RESOURCEQUOTA, quota("q", {"pods": "2"}))
    synced(core, "q")
    core.create(POD, b.pod("a"))
    with pytest.raises(errors.StatusError) as exists:
        core.create(POD, b.pod("a"))  # admitted and charged, then refused by the store
    assert exists.value.reason == "AlreadyExists"
    assert used(core, "q") == {"pods": "2"}  # the documented window
    clock.advance(301)
    wait_for(lambda: used(core, "q") == {"pods": "1"}, 10, "recomputed usage")


def race(redis_url: str, clock: ManualClock, namespace: str) -> list[str]:
    """Two pods created at the same moment, each through its own server core (as two API servers would)."""
    barrier = threading.Barrier(2)
    outcomes: list[str] = []
    lock = threading.Lock()

    def create(name: str) -> None:
        mine = ServerCore(Store.connect(redis_url), clock=clock)
        barrier.wait(5)
        try:
            mine.create(POD, b.pod(name, namespace))
            result = "created"
        except errors.StatusError as e:
            result = "refused" if "exceeded quota: one" in e.message else f"other: {e.message}"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=create, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return sorted(outcomes)


def test_two_concurrent_creates_never_both_pass_a_quota_with_room_for_one(core: ServerCore, redis_url: str,
                                                                           clock: ManualClock,
                                                                           manager: ControllerManager) -> None:
    namespaces = [f"race-{i}" for i in range(8)]
    for ns in namespaces:
        core.create(NAMESPACE, b.namespace(ns))
        core.create(RESOURCEQUOTA, quota("one", {"pods": "1"}, ns))
    for ns in namespaces:
        synced(core, "one", ns)
    for ns in namespaces:
        assert race(redis_url, clock, ns) == ["created", "refused"], ns
        assert len(core.list(POD, ns).items) == 1
        assert used(core, "one", ns) == {"pods": "1"}


POD_MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: greedy
spec:
  containers:
  - name: app
    image: nginx:1.27
    resources:
      requests:
        cpu: "2"
      limits:
        cpu: "2"
"""


def test_kubectl_create_quota_get_and_the_403(kubectl: Kubectl, core: ServerCore,
                                               manager: ControllerManager) -> None:
    r = kubectl("create", "quota", "compute", "--hard=pods=2,requests.cpu=1,limits.cpu=2")
    assert r.stdout.strip() == "resourcequota/compute created"
    assert core.get(RESOURCEQUOTA, "default", "compute")["spec"]["hard"] == {
        "pods": "2", "requests.cpu": "1", "limits.cpu": "2"}
    synced(core, "compute")
    out = kubectl("get", "quota", "compute").stdout.splitlines()
    assert out[0].split() == ["NAME", "AGE", "REQUEST", "LIMIT"]
    assert out[1].split()[0] == "compute"
    assert out[1].endswith("pods: 0/2, requests.cpu: 0/1   limits.cpu: 0/2")
    refused_run = kubectl("apply", "-f", "-", stdin=POD_MANIFEST, ok=False)
    assert refused_run.returncode != 0
    # Only the exceeded resource is named (limits.cpu=2 fits its hard 2 exactly).
    assert refused_run.stderr.strip() == (
        'Error from server (Forbidden): error when creating "STDIN": pods "greedy" is forbidden: exceeded quota: '
        'compute, requested: requests.cpu=2, used: requests.cpu=0, limited: requests.cpu=1')
    assert missing(core, "greedy")
