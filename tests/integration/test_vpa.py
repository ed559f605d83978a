"""The Vertical Pod Autoscaler end to end: real kubelet usage → recommender → admission → updater.

A real kubelet shard (ManualClock) runs pods whose CPU and memory are constant
behaviour-profile overrides, so the recommendation the recommender writes can be
worked out here from upstream's formulas; new pods of the target get it through
the admission plugin; the updater evicts out-of-range pods through the Eviction
API and a PodDisruptionBudget stops it. ``kubectl get vpa`` shows the CRD's columns.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from emulator.api import errors
from emulator.api.kinds import PDB, POD, REPLICASET, VERTICALPODAUTOSCALER
from emulator.api.quantity import format_bytes, format_millis
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.kubelet.shard import KubeletShard, kubelet_shard_config
from emulator.server.core import ServerCore
from tests import builders as b
from tests import workloads as w
from tests.kubectl_env import serving_api
from tests.kubelet_standin import running_ready_status
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
LABELS = {"app": "web"}
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def vpa_manifest(name: str = "web-vpa", *, kind: str = "ReplicaSet", target: str = "web", mode: str = "Auto",
                 **spec: Any) -> Obj:
    return {"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target},
                     "updatePolicy": {"updateMode": mode}, **spec}}


def bucket_end(value: float, first: float, ratio: float = 1.05) -> float:
    n = math.floor(math.log(value * (ratio - 1) / first + 1) / math.log(ratio))
    return first * (ratio ** (n + 1) - 1) / (ratio - 1)


def web_pod(rs: Obj, name: str, *, node: str | None = None, cpu: str = "100m", limit: str = "500m") -> Obj:
    body = w.owned_pod(name, [rs], labels=LABELS, node=node)
    body["spec"]["containers"] = [b.container(cpu=cpu, memory="64Mi")]
    body["spec"]["containers"][0]["resources"]["limits"] = {"cpu": limit}
    body["metadata"]["annotations"] = {"kemu.io/startup-delay": "0s", "kemu.io/cpu": "300m",
                                       "kemu.io/memory": "200Mi"}
    return body


# ------------------------------------------------------------------------------------- validation
@pytest.mark.parametrize(("spec", "field"), [
    ({"updatePolicy": {"updateMode": "Sometimes"}}, "spec.updatePolicy.updateMode"),
    ({"updatePolicy": {"minReplicas": 0}}, "spec.updatePolicy.minReplicas"),
    ({"resourcePolicy": {"containerPolicies": [{"containerName": "app", "minAllowed": {"cpu": "2"},
                                                "maxAllowed": {"cpu": "1"}}]}},
     "spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]"),
    ({"resourcePolicy": {"containerPolicies": [{"containerName": "app", "mode": "Sideways"}]}},
     "spec.resourcePolicy.containerPolicies[0].mode"),
    ({"resourcePolicy": {"containerPolicies": [{"containerName": "app", "controlledResources": ["gpu"]}]}},
     "spec.resourcePolicy.containerPolicies[0].controlledResources[0]"),
    ({"resourcePolicy": {"containerPolicies": [{"containerName": "app", "minAllowed": {"cpu": "lots"}}]}},
     "spec.resourcePolicy.containerPolicies[0].minAllowed[cpu]"),
], ids=["update-mode", "min-replicas", "max-below-min", "container-mode", "controlled-resource", "bad-quantity"])
def test_bad_vpa_is_422_naming_the_field_and_stores_nothing(core: ServerCore, spec: Obj, field: str) -> None:
    body = vpa_manifest()
    body["spec"].update(spec)
    with pytest.raises(errors.StatusError) as e:
        core.create(VERTICALPODAUTOSCALER, body)
    assert e.value.code == 422
    assert field in [c.field for c in e.value.causes]
    assert core.list(VERTICALPODAUTOSCALER, "default").items == []


def test_vpa_without_target_ref_is_422(core: ServerCore) -> None:
    body = vpa_manifest()
    del body["spec"]["targetRef"]
    with pytest.raises(errors.StatusError) as e:
        core.create(VERTICALPODAUTOSCALER, body)
    assert e.value.code == 422 and [c.field for c in e.value.causes] == ["spec.targetRef"]


# ------------------------------------------------------------------------------------- recommender + admission
@pytest.fixture
def cluster(env: tuple[ServerCore, ManualClock]) -> Iterator[tuple[ServerCore, ManualClock, KubeletShard,
                                                                   ControllerManager]]:
    core, clock = env
    shard = KubeletShard(core, 0, 1, kubelet_shard_config({}, [{"name": "pool", "count": 2}]), clock)
    shard.start(timeout=30)
    shard.tick()  # registers the pool's nodes
    assert shard.sync(10)
    # The test runs each pass itself (run_once) at known cluster times; the periodic pass only runs at start.
    manager = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=("vpa-recommender",),
                                                    options={"recommender_interval": 1e9},
                                                    cluster_state_metrics=False), clock=clock).start()
    try:
        assert manager.wait_active(20)
        yield core, clock, shard, manager
    finally:
        manager.stop()
        shard.stop()


def test_recommender_follows_usage_and_admission_applies_it(cluster: tuple[ServerCore, ManualClock, KubeletShard,
                                                                           ControllerManager]) -> None:
    core, clock, shard, manager = cluster
    recommender: Any = manager.controllers()["vpa-recommender"]
    rs = core.create(REPLICASET, w.replica_set("web", 2, LABELS))
    nodes = shard.nodes()
    for i in range(2):
        core.create(POD, web_pod(rs, f"web-{i}", node=nodes[i]))
    core.create(VERTICALPODAUTOSCALER, vpa_manifest())

    wait_for(lambda: recommender.passes >= 1, 20, "the recommender's first pass")
    wait_for(lambda: len(recommender.pods.indexer.list()) == 2 and recommender.vpas.indexer.list()
             and recommender.replicasets.indexer.list(), 20, "the recommender's caches")

    def run_pass() -> None:
        # Four kubelet windows of 15 s make one recommender interval of 60 s.
        for _ in range(4):
            assert shard.sync(10)
            clock.advance(15)
            shard.tick()
        recommender.run_once()

    minutes = 5
    for _ in range(minutes):
        run_pass()
    obj = core.get(VERTICALPODAUTOSCALER, "default", "web-vpa")
    rec = obj["status"]["recommendation"]["containerRecommendations"]
    assert [r["containerName"] for r in rec] == ["app"]
    # Both pods use a constant 300m / 200Mi: every sample falls in one bucket.
    cpu = int(bucket_end(0.3, 0.001) * 1000)
    cpu += int(cpu * 0.15)
    mem = int(bucket_end(200 * MIB, 1e7))
    mem += int(mem * 0.15)
    assert rec[0]["target"] == {"cpu": format_millis(max(cpu, 25)), "memory": format_bytes(max(mem, 250 * MIB))}
    conf = (minutes - 1) / 1440  # one sample a minute per container: lifespan minutes-1, 2*minutes samples
    assert rec[0]["upperBound"]["cpu"] == format_millis(int(cpu * (1 + 1 / conf)))
    assert rec[0]["lowerBound"]["cpu"] == format_millis(max(int(cpu * (1 + 0.001 / conf) ** -2), 25))
    provided = [c for c in obj["status"]["conditions"] if c["type"] == "RecommendationProvided"]
    assert provided and provided[0]["status"] == "True"
    # kube-state-metrics' series, computed at scrape time from the VPA cache.
    wait_for(lambda: recommender.vpas.indexer.list()[0].get("status"), 20, "the VPA status in the cache")
    labels = {"namespace": "default", "verticalpodautoscaler": "web-vpa", "target_api_version": "apps/v1",
              "target_kind": "ReplicaSet", "target_name": "web", "container": "app", "resource": "cpu",
              "unit": "core"}
    series = "kube_verticalpodautoscaler_status_recommendation_containerrecommendations_target"
    wait_for(lambda: REGISTRY.get_sample_value(series, labels) == cpu / 1000, 20, "the target series")
    # Beside it, what the matched pods request now (both 100m / 64Mi).
    requests = "kemu_verticalpodautoscaler_container_resource_requests"
    mine = {"namespace": "default", "verticalpodautoscaler": "web-vpa", "container": "app"}
    assert REGISTRY.get_sample_value(requests, {**mine, "resource": "cpu", "unit": "core"}) == 0.1
    assert REGISTRY.get_sample_value(requests, {**mine, "resource": "memory", "unit": "byte"}) == 64 * MIB

    # A new pod of the target is admitted with the recommendation; its limit keeps the 1:5 ratio.
    pod = core.create(POD, web_pod(rs, "web-2"))
    res = pod["spec"]["containers"][0]["resources"]
    assert res["requests"]["cpu"] == format_millis(cpu)
    assert res["limits"]["cpu"] == format_millis(5 * cpu)
    assert res["requests"]["memory"] == format_bytes(max(mem, 250 * MIB))
    assert pod["metadata"]["annotations"]["vpaUpdates"].startswith("Pod resources updated by web-vpa: container 0")
    # A pod of something else is untouched.
    other = core.create(POD, b.pod("loner", containers=[b.container(cpu="100m")], labels=LABELS))
    assert other["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "100m"}


def test_mode_off_recommends_but_admission_leaves_pods_alone(
        cluster: tuple[ServerCore, ManualClock, KubeletShard, ControllerManager]) -> None:
    core, _clock, _shard, _manager = cluster
    rs = core.create(REPLICASET, w.replica_set("web", 1, LABELS))
    obj = core.create(VERTICALPODAUTOSCALER, vpa_manifest(mode="Off"))
    core.update_status(VERTICALPODAUTOSCALER, {**obj, "status": {"recommendation": {"containerRecommendations": [
        {"containerName": "app", "target": {"cpu": "1"}, "lowerBound": {"cpu": "1"}, "upperBound": {"cpu": "1"}}]}}})
    pod = core.create(POD, web_pod(rs, "web-0"))
    assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m"


# ------------------------------------------------------------------------------------- updater
@pytest.fixture
def updater_env(core: ServerCore, clock: ManualClock) -> Iterator[tuple[ServerCore, Any]]:
    manager = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=("vpa-updater", "disruption"),
                                                    cluster_state_metrics=False), clock=clock).start()
    try:
        assert manager.wait_active(20)
        yield core, manager.controllers()["vpa-updater"]
    finally:
        manager.stop()


def _running_pods(core: ServerCore, rs: Obj, count: int, clock: ManualClock) -> None:
    for i in range(count):
        pod = core.create(POD, web_pod(rs, f"web-{i}", node="n1"))
        core.update_status(POD, {**pod, "status": running_ready_status(pod, clock.now())})


def _recommend(core: ServerCore, lower: str, target: str, upper: str, **spec: Any) -> None:
    obj = core.create(VERTICALPODAUTOSCALER, vpa_manifest(**spec))
    core.update_status(VERTICALPODAUTOSCALER, {**obj, "status": {"recommendation": {"containerRecommendations": [
        {"containerName": "app", "target": {"cpu": target}, "lowerBound": {"cpu": lower},
         "upperBound": {"cpu": upper}}]}}})


def _wait_for_updater(upd: Any, pods: int) -> None:
    """Until the updater's caches hold ``pods`` pods and a VPA with a recommendation."""
    wait_for(lambda: len(upd.pods.indexer.list()) == pods and upd.vpas.indexer.list()
             and (upd.vpas.indexer.list()[0].get("status") or {}).get("recommendation"), 20, "updater caches")


def _live(core: ServerCore) -> list[str]:
    return sorted(p["metadata"]["name"] for p in core.list(POD, "default").items
                  if not p["metadata"].get("deletionTimestamp"))


@pytest.mark.parametrize(("pdb_allows", "evicted"), [(0, 0), (1, 1), (3, 2)],
                         ids=["pdb-allows-none", "pdb-allows-one", "tolerance-limits-to-two"])
def test_updater_evicts_out_of_range_pods_within_pdb_and_tolerance(
        updater_env: tuple[ServerCore, Any], clock: ManualClock, pdb_allows: int, evicted: int) -> None:
    core, upd = updater_env
    rs = core.create(REPLICASET, w.replica_set("web", 4, LABELS))
    _running_pods(core, rs, 4, clock)
    core.create(PDB, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"name": "web-pdb", "namespace": "default"},
                      "spec": {"selector": {"matchLabels": LABELS}, "maxUnavailable": pdb_allows}})
    wait_for(lambda: (core.get(PDB, "default", "web-pdb").get("status") or {}).get("disruptionsAllowed") == pdb_allows
             and core.get(PDB, "default", "web-pdb")["status"].get("currentHealthy") == 4, 20, "PDB status")
    _recommend(core, "500m", "600m", "1")  # every pod requests 100m: below the lower bound
    wait_for(lambda: upd.vpas.has_synced() and len(upd.vpas.indexer.list()) == 1
             and (upd.vpas.indexer.list()[0].get("status") or {}).get("recommendation")
             and len(upd.pods.indexer.list()) == 4 and upd.replicasets.indexer.list(), 20, "updater caches")
    assert upd.run_once() == evicted
    assert len(_live(core)) == 4 - evicted


def test_updater_leaves_pods_inside_the_range(updater_env: tuple[ServerCore, Any], clock: ManualClock) -> None:
    core, upd = updater_env
    rs = core.create(REPLICASET, w.replica_set("web", 4, LABELS))
    _running_pods(core, rs, 4, clock)
    _recommend(core, "50m", "110m", "1")
    _wait_for_updater(upd, 4)
    assert upd.run_once() == 0
    assert len(_live(core)) == 4


def test_updater_never_evicts_below_min_replicas(updater_env: tuple[ServerCore, Any], clock: ManualClock) -> None:
    core, upd = updater_env
    rs = core.create(REPLICASET, w.replica_set("web", 1, LABELS))
    _running_pods(core, rs, 1, clock)
    _recommend(core, "500m", "600m", "1")
    _wait_for_updater(upd, 1)
    assert upd.run_once() == 0


# ------------------------------------------------------------------------------------- kubectl
def test_kubectl_get_vpa_shows_the_crd_columns(redis_url: str, core: ServerCore, tmp_path: Path) -> None:
    with serving_api(redis_url, tmp_path, "t", "api.log") as (_server, env):
        _recommend(core, "100m", "250m", "1", mode="Initial")
        obj = core.get(VERTICALPODAUTOSCALER, "default", "web-vpa")
        obj["status"]["recommendation"]["containerRecommendations"][0]["target"]["memory"] = "250Mi"
        obj["status"]["conditions"] = [{"type": "RecommendationProvided", "status": "True",
                                        "lastTransitionTime": "2024-01-01T00:00:00Z"}]
        core.update_status(VERTICALPODAUTOSCALER, obj)
        out = subprocess.run([KUBECTL, "get", "vpa"], env=env, capture_output=True, text=True, timeout=60,
                             check=True).stdout.splitlines()
        assert out[0].split() == ["NAME", "MODE", "CPU", "MEM", "PROVIDED", "AGE"]
        assert out[1].split()[:5] == ["web-vpa", "Initial", "250m", "250Mi", "True"]


def test_a_deployment_target_reaches_pods_through_its_replicaset(
        cluster: tuple[ServerCore, ManualClock, KubeletShard, ControllerManager]) -> None:
    core, _clock, _shard, manager = cluster
    recommender: Any = manager.controllers()["vpa-recommender"]
    _dep, rs, _pods = w.web_chain(core, 3, labels=LABELS)
    core.create(POD, w.owned_pod("stray", labels=LABELS))  # right labels, no controller: not the VPA's
    obj = core.create(VERTICALPODAUTOSCALER, vpa_manifest(kind="Deployment", target="web"))
    wait_for(lambda: len(recommender.pods.indexer.list()) == 4 and recommender.replicasets.indexer.list(), 20,
             "the recommender's caches")
    matched = recommender.match([obj])["default/web-vpa"]
    assert sorted(p["metadata"]["name"] for p in matched) == ["web-0", "web-1", "web-2"]
    core.update_status(VERTICALPODAUTOSCALER, {**core.get(VERTICALPODAUTOSCALER, "default", "web-vpa"), "status": {
        "recommendation": {"containerRecommendations": [
            {"containerName": "app", "target": {"cpu": "321m"}, "lowerBound": {"cpu": "1m"},
             "upperBound": {"cpu": "1"}}]}}})
    new = w.owned_pod("web-3", [rs], labels=LABELS)
    assert core.create(POD, new)["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "321m"
