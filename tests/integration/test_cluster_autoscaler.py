"""The Cluster Autoscaler against a real Redis: the emulated cloud, a kubelet shard that boots and removes its
instances, and (for scale-up) the real scheduler.

Cluster time is a ManualClock the test moves; every step lets the informers catch up (``sync``, a condition
with a deadline) before the shard ticks or the autoscaler scans. Expected node counts, reasons and costs are
worked out here from the rules (allocatable formula, first-fit packing, upstream's messages).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from emulator import chaos
from emulator.api.kinds import (
    CONFIGMAP,
    DEPLOYMENT,
    EVENT,
    HORIZONTALPODAUTOSCALER,
    NAMESPACE,
    NODE,
    PDB,
    POD,
    PRIORITYCLASS,
)
from emulator.api.quantity import cpu_millis, to_int
from emulator.api.types import Obj
from emulator.clock import ManualClock, SystemClock, rfc3339
from emulator.cloud.nodegroups import NodeGroupSpec, parse_node_groups
from emulator.cloud.provider import SLOW_BOOT_FACTOR, Cloud
from emulator.cluster import KubeletLaunch, LocalCluster
from emulator.clusterautoscaler.cloudprovider.kemu import _default_allocatable
from emulator.clusterautoscaler.controller import ClusterAutoscaler
from emulator.clusterautoscaler.core.scaledown import TO_BE_DELETED_TAINT
from emulator.config import Config
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.controllers.runtime import ControllerContext, EventRecorder
from emulator.informers import SharedInformerFactory
from emulator.kubelet.nodes import INSTANCE_TYPES
from emulator.kubelet.shard import KubeletShard, kubelet_shard_config
from emulator.scheduler.scheduler import SchedulerOptions
from emulator.scheduler_host import HostSettings, SchedulerHost
from emulator.server.core import ServerCore
from emulator.store.store import Store, StoreConfig
from loadgen import drivers, nodegroups
from loadgen import plan as planning
from loadgen.drivers import StoreSink
from loadgen.scenario import Scenario
from tests import builders as b
from tests import workloads as w

pytestmark = pytest.mark.integration

GI = 1024**3


class Cluster:
    """A kubelet shard, the cloud, and an autoscaler built by hand (scans run when the test says)."""

    def __init__(self, core: ServerCore, clock: ManualClock) -> None:
        self.core = core
        self.clock = clock
        self.cloud = Cloud(core.store.redis, core.store.config.prefix)
        self.shard = KubeletShard(core, 0, 1, kubelet_shard_config({}, []), clock)
        self.shard.start(timeout=30)
        self.factory: SharedInformerFactory | None = None
        self.ca: ClusterAutoscaler | None = None

    def autoscaler(self, groups: list[dict[str, Any]], **flags: Any) -> ClusterAutoscaler:
        self.cloud.register_groups(parse_node_groups(groups), self.clock.now())
        self.factory = SharedInformerFactory(self.core.store, clock=self.clock)
        ctx = ControllerContext(self.core, self.factory, self.clock, EventRecorder(self.core, "test"),
                                {"cluster_autoscaler": flags})
        self.ca = ClusterAutoscaler(ctx)
        self.factory.start()
        deadline = time.monotonic() + 20
        while not self.ca.has_synced():
            assert time.monotonic() < deadline, "autoscaler informers did not sync"
            self.shard.sync(0.01)
        return self.ca

    def step(self, seconds: float = 1.0) -> None:
        """Informers catch up, time moves, the shard ticks (registers booted instances, runs pods)."""
        assert self.shard.sync(10)
        self.clock.advance(seconds)
        self.shard.tick()
        assert self.shard.sync(10)

    def scan(self) -> Any:
        assert self.ca is not None
        assert self.shard.sync(10)
        assert self.ca.sync(10), "autoscaler informers did not catch up"
        return self.ca.run_once()

    def stop(self) -> None:
        if self.factory is not None:
            self.factory.shutdown()
        self.shard.stop()


@pytest.fixture
def cluster(env: tuple[ServerCore, ManualClock]) -> Iterator[Cluster]:
    c = Cluster(*env)
    yield c
    c.stop()


def wait_for(done: Callable[[], bool], timeout: float, what: str, between: Callable[[], None] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        if between is not None:
            between()


def app_pod(name: str, cpu: str, memory: str, *, owner: str = "web", node: str | None = None,
            labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **spec: Any) -> Obj:
    body = b.owned_by(b.pod(name, containers=[b.container(cpu=cpu, memory=memory)], node=node,
                            labels={"app": owner, **(labels or {})}, **spec), "ReplicaSet", owner)
    body["metadata"]["annotations"] = {"kemu.io/startup-delay": "0s", **(annotations or {})}
    return body


def pending(core: ServerCore, body: Obj) -> Obj:
    """Create a pod and mark it as the scheduler marks a pod no node fits (for tests without a scheduler)."""
    created = core.create(POD, body)
    status = {**(created.get("status") or {}), "phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastProbeTime": None,
         "lastTransitionTime": rfc3339(core.clock.now()), "message": "0/1 nodes are available"}]}
    return core.update_status(POD, {**created, "status": status})


def events(core: ServerCore, name: str, reason: str) -> list[Obj]:
    return [e for e in core.list(EVENT).items if e["involvedObject"]["name"] == name and e["reason"] == reason]


def group_nodes(core: ServerCore, group: str) -> list[Obj]:
    return [n for n in core.list(NODE).items if n["metadata"]["labels"].get("kemu.io/node-group") == group]


def status_map(core: ServerCore) -> tuple[Obj, list[Obj]]:
    cm = core.get(CONFIGMAP, "kube-system", "cluster-autoscaler-status")
    return yaml.safe_load(cm["data"]["status"]), yaml.safe_load(cm["data"]["unremovableNodes"])


def allocatable(instance_type: str) -> tuple[int, int, int]:
    alloc = _default_allocatable(INSTANCE_TYPES[instance_type])
    return cpu_millis(alloc["cpu"]), to_int(alloc["memory"]), int(alloc["pods"])


# ------------------------------------------------------------------------------------------- scale-up


def test_fifty_pending_pods_grow_the_matching_group_by_the_binpacked_count(cluster: Cluster, redis_url: str) -> None:
    core = cluster.core
    groups = [{"name": "web", "min": 0, "max": 20, "instance_type": "m5.xlarge", "labels": {"tier": "web"},
               "price_per_hour": 0.192, "provisioning_delay": "30s"},
              {"name": "batch", "min": 0, "max": 20, "instance_type": "c5.xlarge", "labels": {"tier": "batch"},
               "price_per_hour": 0.17, "provisioning_delay": "30s"}]
    cluster.autoscaler(groups, expander="least-waste")
    core.create(NODE, b.node("base", cpu="2", memory="4Gi", labels={"tier": "system"}))
    host = SchedulerHost(HostSettings(redis_url, prefix=core.store.config.prefix), [SchedulerOptions()])
    host.start(sync_timeout=30)
    try:
        for i in range(50):
            core.create(POD, app_pod(f"web-{i}", "500m", "1Gi", nodeSelector={"tier": "web"}))
        core.create(POD, app_pod("gpu-job", "1", "1Gi", owner="gpu", nodeSelector={"tier": "gpu"}))

        def unschedulable() -> int:
            return sum(1 for p in core.list(POD, "default").items
                       if any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                              for c in p["status"].get("conditions") or ()))

        wait_for(lambda: unschedulable() == 51, 30, "the scheduler to mark every pod Unschedulable")
        # m5.xlarge: 4 cpu, 16Gi; allocatable memory = 16Gi - 100Mi (eviction-hard). Per node:
        # min(4000m // 500m, (16Gi - 100Mi) // 1Gi, 110 pods) = 8 pods -> ceil(50 / 8) = 7 nodes.
        cpu, mem, max_pods = allocatable("m5.xlarge")
        per_node = min(cpu // 500, mem // GI, max_pods)
        expected = math.ceil(50 / per_node)
        result = cluster.scan()
        assert result.scale_up is not None
        assert result.scale_up.increases == {"web": (0, expected)}
        assert cluster.cloud.target_size("web") == expected and cluster.cloud.target_size("batch") == 0
        # The second scan counts the booting nodes: the same burst is not answered twice.
        again = cluster.scan()
        assert again.schedulable == 50 and (again.scale_up is None or not again.scale_up.increases)
        msg = ("pod didn't trigger scale-up: 2 node(s) didn't match Pod's node affinity/selector")
        wait_for(lambda: bool(events(core, "gpu-job", "NotTriggerScaleUp")), 10, "NotTriggerScaleUp")
        assert events(core, "gpu-job", "NotTriggerScaleUp")[0]["message"] == msg
        trig = events(core, "web-0", "TriggeredScaleUp")
        assert trig and trig[0]["message"] == f"pod triggered scale-up: [{{web 0->{expected} (max: 20)}}]"
        # Boot: nothing registers before the 30 s provisioning delay, then all of them at once.
        for _ in range(29):
            cluster.step()
        assert group_nodes(core, "web") == []
        cluster.step()
        nodes = group_nodes(core, "web")
        assert len(nodes) == expected

        def all_running() -> bool:
            pods = [p for p in core.list(POD, "default").items if p["metadata"]["name"].startswith("web-")]
            return all(p["status"].get("phase") == "Running" for p in pods)

        wait_for(all_running, 60, "the 50 pods to run on the new nodes", between=cluster.step)
        names = {n["metadata"]["name"] for n in nodes}
        for p in core.list(POD, "default").items:
            if p["metadata"]["name"].startswith("web-"):
                assert p["spec"]["nodeName"] in names
        assert all(any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
                   for n in group_nodes(core, "web"))
        assert core.get(POD, "default", "gpu-job")["spec"].get("nodeName") is None
    finally:
        host.stop()


# ------------------------------------------------------------------------------------------- scale-down


def test_underused_node_is_drained_and_removed_after_the_unneeded_time_and_blocked_nodes_stay(
        cluster: Cluster) -> None:
    core, clock = cluster.core, cluster.clock
    cluster.autoscaler([{"name": "pool", "min": 1, "max": 10, "initial_size": 5, "instance_type": "m5.xlarge",
                              "price_per_hour": 0.192}], expander="random")
    wait_for(lambda: len(group_nodes(core, "pool")) == 5, 20, "the initial nodes", between=cluster.step)
    n = sorted(x["metadata"]["name"] for x in group_nodes(core, "pool"))
    # n[0]: one small movable pod. n[1]: safe-to-evict=false. n[2]: an emptyDir. n[3]: a pod whose PDB allows
    # no disruption. n[4]: 60% of its cpu taken (not underutilized), room for the movable pod.
    core.create(POD, app_pod("mover", "500m", "512Mi", owner="mover", node=n[0]))
    core.create(POD, app_pod("pinned", "200m", "256Mi", owner="pinned", node=n[1],
                             annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}))
    core.create(POD, app_pod("scratch", "200m", "256Mi", owner="scratch", node=n[2],
                             volumes=[{"name": "tmp", "emptyDir": {}}]))
    core.create(POD, app_pod("guarded", "200m", "256Mi", owner="guarded", node=n[3]))
    budget = core.create(PDB, b.pdb("guarded", {"app": "guarded"}, 0))
    core.update_status(PDB, {**budget, "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
                                                  "expectedPods": 1, "observedGeneration": 1}})
    core.create(POD, app_pod("big", "2400m", "2Gi", owner="big", node=n[4]))
    wait_for(lambda: all(p["status"].get("phase") == "Running" for p in core.list(POD, "default").items), 30,
             "the pods to run", between=cluster.step)
    first = cluster.scan()
    assert first.unneeded == [n[0]]
    _, unremovable = status_map(core)
    reasons = {u["node"]: (u["reason"], (u.get("blockingPod") or {}).get("reason")) for u in unremovable}
    assert reasons[n[1]] == ("BlockedByPod", "NotSafeToEvictAnnotation")
    assert reasons[n[2]] == ("BlockedByPod", "LocalStorageRequested")
    assert reasons[n[3]] == ("BlockedByPod", "NotEnoughPdb")
    assert reasons[n[4]] == ("NotUnderutilized", None)
    assert reasons[n[0]] == ("NotUnneededLongEnough", None)
    # Scans every 10 s: nothing happens to n[0] before 10 minutes of being unneeded.
    for _ in range(59):
        cluster.step(10)
        assert cluster.scan().deleted == []
        assert not any(t["key"] == TO_BE_DELETED_TAINT for t in core.get(NODE, None, n[0])["spec"].get("taints") or ())
    cluster.step(10)
    cluster.scan()  # 600 s: tainted and drained through the eviction API
    taints = core.get(NODE, None, n[0])["spec"].get("taints") or []
    assert [t["key"] for t in taints] == [TO_BE_DELETED_TAINT]

    def gone() -> bool:
        cluster.step(1)
        if clock.now() % 10 < 1:
            cluster.scan()
        return n[0] not in {x["metadata"]["name"] for x in core.list(NODE).items}

    wait_for(gone, 60, "the drained node to be deleted")
    assert sorted(x["metadata"]["name"] for x in group_nodes(core, "pool")) == n[1:]
    assert cluster.cloud.target_size("pool") == 4
    cluster.scan()
    status, unremovable = status_map(core)
    assert {u["node"] for u in unremovable} == set(n[1:])
    assert next(g for g in status["nodeGroups"] if g["name"] == "pool")["health"]["cloudProviderTarget"] == 4
    assert events(core, n[0], "ScaleDown")


# ------------------------------------------------------------------------------------------ provider faults


def test_a_group_whose_instances_never_boot_is_backed_off_and_another_group_is_used(cluster: Cluster) -> None:
    core = cluster.core
    cluster.autoscaler(
        [{"name": "cheap", "min": 0, "max": 10, "instance_type": "m5.xlarge", "price_per_hour": 0.1,
          "failure_probability": 1.0, "provisioning_delay": "60s"},
         {"name": "pricey", "min": 0, "max": 10, "instance_type": "m5.xlarge", "price_per_hour": 0.5,
          "provisioning_delay": "60s"}], expander="price")
    pending(core, app_pod("job", "1", "1Gi"))
    first = cluster.scan()
    assert first.scale_up is not None and first.scale_up.increases == {"cheap": (0, 1)}
    # Scans every 10 s; the instance never registers. After max-node-provision-time (15 min) it is deleted
    # and the group backed off, so the next scan takes the other group.
    for _ in range(90):
        cluster.step(10)
        result = cluster.scan()
        assert result.scale_up is None or not result.scale_up.increases
    cluster.step(10)
    result = cluster.scan()
    assert result.scale_up is not None and result.scale_up.increases == {"pricey": (0, 1)}
    status, _ = status_map(core)
    cheap = next(g for g in status["nodeGroups"] if g["name"] == "cheap")
    assert cheap["scaleUp"]["status"] == "Backoff"
    assert cheap["scaleUp"]["backoffInfo"]["errorCode"] == "timeout"
    assert cluster.cloud.target_size("cheap") == 0


def test_out_of_quota_fault_backs_the_group_off(cluster: Cluster) -> None:
    core = cluster.core
    cluster.autoscaler(
        [{"name": "cheap", "min": 0, "max": 10, "instance_type": "m5.xlarge", "price_per_hour": 0.1},
         {"name": "pricey", "min": 0, "max": 10, "instance_type": "m5.xlarge", "price_per_hour": 0.5}],
        expander="price")
    chaos.set_fault(core.store.redis, core.store.config.prefix, "nodegroup/cheap", chaos.OUT_OF_QUOTA)
    pending(core, app_pod("job", "1", "1Gi"))
    first = cluster.scan()
    assert first.scale_up is not None and first.scale_up.increases == {}
    assert "quota" in first.scale_up.error
    cluster.step(10)
    second = cluster.scan()
    assert second.scale_up is not None and second.scale_up.increases == {"pricey": (0, 1)}
    status, _ = status_map(core)
    cheap = next(g for g in status["nodeGroups"] if g["name"] == "cheap")
    assert (cheap["scaleUp"]["status"], cheap["scaleUp"]["backoffInfo"]["errorCode"]) == ("Backoff", "QuotaExceeded")


def test_node_group_spec_survives_in_redis(cluster: Cluster) -> None:
    spec = NodeGroupSpec.from_dict({"name": "g", "min": 1, "max": 3, "provisioning_delay": {"min": "10s",
                                                                                         "max": "20s"}})
    cluster.cloud.register_groups([spec], cluster.clock.now())
    again = Cloud(cluster.core.store.redis, cluster.core.store.config.prefix)
    assert again.groups() == {"g": spec}
    assert [i.name for i in again.instances("g")] == ["g-00000"]


# ------------------------------------------------------------------------------- in the controller manager


def test_runs_in_the_controller_manager_and_removes_empty_nodes_down_to_min(cluster: Cluster) -> None:
    """The manager's cluster-autoscaler scans on its own every scan-interval of cluster time: two empty nodes
    above min 1 go after scale-down-unneeded-time, in one bulk (ScaleDownEmpty); the third stays at min."""
    core, clock = cluster.core, cluster.clock
    cluster.cloud.register_groups(parse_node_groups([{"name": "idle", "min": 1, "max": 5, "initial_size": 3,
                                                      "instance_type": "m5.large"}]), clock.now())
    wait_for(lambda: len(group_nodes(core, "idle")) == 3, 20, "the initial nodes", between=cluster.step)
    before = REGISTRY.get_sample_value("cluster_autoscaler_scaled_down_nodes_total", {"reason": "empty"}) or 0.0
    manager = ControllerManager(core, ManagerConfig(
        leader_elect=False, controllers=("cluster-autoscaler",),
        options={"cluster_autoscaler": {"scale-down-unneeded-time": "2m", "scan-interval": "10s"}}),
        clock=clock).start()
    try:
        assert manager.wait_active(20)

        def scanned(n: int) -> Callable[[], bool]:
            return lambda: manager.controllers()["cluster-autoscaler"].autoscaler.scans >= n  # type: ignore[attr-defined]

        wait_for(scanned(1), 20, "the first scan")
        # Before two minutes nothing goes; each 10 s step lets one more scan run (scan k at 10 * (k - 1) s).
        for k in range(2, 13):
            cluster.step(10)
            wait_for(scanned(k), 20, f"scan {k}")
            assert len(group_nodes(core, "idle")) == 3
        cluster.step(10)  # 120 s: both empty nodes are due
        wait_for(lambda: cluster.cloud.target_size("idle") == 1, 20, "the empty nodes to be deleted")
        wait_for(lambda: len(group_nodes(core, "idle")) == 1, 20, "the nodes to go", between=cluster.step)
        assert REGISTRY.get_sample_value("cluster_autoscaler_scaled_down_nodes_total",
                                         {"reason": "empty"}) == before + 2
        def empty_events(kind: str) -> list[Obj]:
            return [e for e in core.list(EVENT).items
                    if e["reason"] == "ScaleDownEmpty" and e["involvedObject"]["kind"] == kind]

        # On each node, and (upstream's LogRecorder) on the status ConfigMap.
        wait_for(lambda: len(empty_events("Node")) == 2 and len(empty_events("ConfigMap")) == 2, 20,
                 "ScaleDownEmpty events")
        assert {e["message"] for e in empty_events("ConfigMap")} == \
            {f'Scale-down: removing empty node "{e["involvedObject"]["name"]}"' for e in empty_events("Node")}
        assert status_map(core)[0]["autoscalerStatus"] == "Running"
        last = group_nodes(core, "idle")[0]["metadata"]["name"]
        for _ in range(13):
            cluster.step(10)
        wait_for(lambda: {u["node"]: u["reason"] for u in status_map(core)[1]}.get(last) == "NodeGroupMinSizeReached",
                 20, "the last node to be kept at min size")
        assert len(group_nodes(core, "idle")) == 1
    finally:
        manager.stop()


# ------------------------------------------------------------------------------------- scale-up table

XL = {"instance_type": "m5.xlarge", "min": 0, "max": 10}


@pytest.mark.parametrize(("groups", "flags", "pods", "increases", "message"), [
    # A group at its max: no option, and the pod hears why.
    ([{"name": "full", **XL, "max": 2, "initial_size": 2}], {}, [("p", "2", {})], {},
     "pod didn't trigger scale-up: 1 max node group size reached"),
    # --max-nodes-total 2 with 2 nodes: upstream's one-line reason.
    ([{"name": "g", **XL, "initial_size": 2}], {"max-nodes-total": 2}, [("p", "2", {})], {},
     "pod didn't trigger scale-up: max total nodes in cluster reached"),
    # --cores-total 0:10 with 2 x 4 cores: one more 4-core node would make 12.
    ([{"name": "g", **XL, "initial_size": 2}], {"cores-total": "0:10"}, [("p", "2", {})], {},
     "pod didn't trigger scale-up: 1 max cluster cpu limit reached"),
    # Six pods that each need a whole 4-cpu node (3.5 cpu), two groups alike but for the zone, balanced: 3 + 3.
    ([{"name": "a", **XL, "zones": ["zone-a"]}, {"name": "b", **XL, "zones": ["zone-b"]}],
     {"balance-similar-node-groups": True}, [(f"p{i}", "3500m", {}) for i in range(6)],
     {"a": (0, 3), "b": (0, 3)}, None),
    # The priority expander reads the ConfigMap: on-demand outranks the cheaper spot group.
    ([{"name": "spot", **XL, "price_per_hour": 0.05}, {"name": "on-demand", **XL, "price_per_hour": 0.2}],
     {"expander": "priority,price"}, [("p", "1", {})], {"on-demand": (0, 1)}, None),
    # The same groups with price alone: the cheapest.
    ([{"name": "spot", **XL, "price_per_hour": 0.05}, {"name": "on-demand", **XL, "price_per_hour": 0.2}],
     {"expander": "price"}, [("p", "1", {})], {"spot": (0, 1)}, None),
    # Expendable (priority -20 < cutoff -10) and nominated pods are not pending for the autoscaler.
    ([{"name": "g", **XL}], {}, [("low", "1", {"priorityClassName": "low"}), ("nom", "1", {"nominated": True})],
     None, None),
], ids=["max-size", "max-nodes-total", "cores-total", "balance-similar", "priority-configmap", "price",
        "expendable-and-nominated"])
def test_scale_up_table(cluster: Cluster, groups: list[dict[str, Any]], flags: dict[str, Any],
                        pods: list[tuple[str, str, dict[str, Any]]], increases: dict[str, tuple[int, int]] | None,
                        message: str | None) -> None:
    core = cluster.core
    core.create(CONFIGMAP, {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
                            "data": {"priorities": "10:\n  - .*\n50:\n  - ^on-demand$\n"}})
    core.create(PRIORITYCLASS, b.priority_class("low", -20))
    cluster.autoscaler(groups, **flags)
    want = sum(g.get("initial_size", 0) for g in groups)
    wait_for(lambda: len(core.list(NODE).items) == want, 20, "the initial nodes", between=cluster.step)
    for node in core.list(NODE).items:  # 3 of the 4 cpus taken: the 2-cpu pods fit no existing node
        core.create(POD, app_pod(f"filler-{node['metadata']['name']}", "3", "1Gi", owner="filler",
                                 node=node["metadata"]["name"]))
    for name, cpu, extra in pods:
        body = app_pod(name, cpu, "1Gi", owner=name if len(pods) == 1 else "burst")
        if "priorityClassName" in extra:
            body["spec"]["priorityClassName"] = extra["priorityClassName"]
        created = pending(core, body)
        if extra.get("nominated"):
            core.update_status(POD, {**created, "status": {**created["status"], "nominatedNodeName": "somewhere"}})
    result = cluster.scan()
    if increases is None:
        assert result.pending == 0 and result.scale_up is None
        return
    assert result.scale_up is not None
    assert result.scale_up.increases == increases
    if message is not None:
        assert all(m == message for m in result.scale_up.remaining.values()) and result.scale_up.remaining
        wait_for(lambda: bool(events(core, pods[0][0], "NotTriggerScaleUp")), 10, "NotTriggerScaleUp")
        assert events(core, pods[0][0], "NotTriggerScaleUp")[0]["message"] == message


def test_provider_state_survives_a_restart_of_the_kubelet_shard_and_the_autoscaler(cluster: Cluster) -> None:
    """Instances asked for before a restart boot after it; a new autoscaler counts them as upcoming."""
    core, clock = cluster.core, cluster.clock
    groups = [{"name": "web", **XL, "provisioning_delay": "30s"}]
    cluster.autoscaler(groups)
    for i in range(3):
        pending(core, app_pod(f"p{i}", "3", "1Gi"))
    first = cluster.scan()
    assert first.scale_up is not None and first.scale_up.increases == {"web": (0, 3)}
    cluster.step(10)
    # Both processes die; new ones start from what Redis holds.
    assert cluster.factory is not None
    cluster.factory.shutdown()
    cluster.shard.stop()
    cluster.shard = KubeletShard(core, 0, 1, kubelet_shard_config({}, []), clock)
    cluster.shard.start(timeout=30)
    cluster.autoscaler(groups)  # the groups are declared again: their instances stay
    assert cluster.scan().schedulable == 3  # upcoming: not answered twice
    assert cluster.cloud.target_size("web") == 3
    for _ in range(19):
        cluster.step()
    assert group_nodes(core, "web") == []
    cluster.step()
    assert len(group_nodes(core, "web")) == 3


def test_slow_boot_fault_multiplies_the_boot_delay(cluster: Cluster) -> None:
    cloud, now = cluster.cloud, cluster.clock.now()
    cloud.register_groups(parse_node_groups([{"name": "g", **XL, "provisioning_delay": "30s"}]), now)
    chaos.set_fault(cluster.core.store.redis, cluster.core.store.config.prefix, "nodegroup/g", chaos.SLOW_BOOT)
    [slow] = cloud.increase_size("g", 1, now)
    chaos.clear(cluster.core.store.redis, cluster.core.store.config.prefix, "nodegroup/g")
    [normal] = cloud.increase_size("g", 1, now)
    assert (slow.ready - now, normal.ready - now) == (30 * SLOW_BOOT_FACTOR, 30)


# ------------------------------------------------------------------------------------ at clock speed


class ThreadKubelets:
    """A kubelet runner for LocalCluster: one real kubelet shard on a thread of this process (the ``kemu``
    entry point runs the same class in a Ray actor), ticking every cluster second."""

    def __init__(self, launch: KubeletLaunch) -> None:
        cfg = launch.config
        self.clock = SystemClock(cfg.clock_speed, launch.clock_start + (time.time() - launch.clock_wall)
                                 * cfg.clock_speed)
        self.store = Store.connect(launch.redis_url, StoreConfig(prefix=cfg.prefix, node_shards=cfg.node_shards))
        self.shard = KubeletShard(ServerCore(self.store, self.clock), 0, 1, kubelet_shard_config({}, []), self.clock)
        self.period = 1.0 / cfg.clock_speed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.period):  # the tick loop's pacing (as the actor's), not a test's wait
            self.shard.tick()

    def start(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        self.shard.start(timeout)
        self._thread.start()
        return self.health()

    def health(self, timeout: float = 10.0) -> list[dict[str, Any]]:
        return [self.shard.health()]

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        self.shard.stop()
        self.store.close()


def test_kemu_cluster_grows_for_a_deployment_and_shrinks_after_it_scales_to_zero(redis_url: str,
                                                                                  tmp_path: Path) -> None:
    """LocalCluster as ``kemu up --node-groups`` starts it, at 60x clock speed: a Deployment of four 1-cpu pods
    grows the group; scaled to zero, the empty nodes go after scale-down-delay-after-add and
    scale-down-unneeded-time (cluster time)."""
    speed = 60.0
    groups = [{"name": "web", "min": 0, "max": 5, "instance_type": "m5.large", "price_per_hour": 0.096,
               "provisioning_delay": "30s"}]
    cfg = Config(data_dir=tmp_path / "data", redis_url=redis_url, api_enabled=False, metrics=False,
                 clock_speed=speed, node_groups=groups,
                 cluster_autoscaler={"scale-down-delay-after-add": "1m", "scale-down-unneeded-time": "1m"})
    cluster = LocalCluster(cfg, kubelets=ThreadKubelets)
    core = cluster.start()
    try:
        assert "cluster-autoscaler" in cluster.controller_managers[0].enabled
        labels = {"app": "web"}
        body = w.deployment("web", 4, labels)
        body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
        core.create(DEPLOYMENT, body)
        # m5.large allocatable: 2 cpu -> two 1-cpu pods per node: 4 pods -> 2 nodes. A node with one of them is
        # at 50% - not below the threshold - so no node is unneeded while the pods exist.
        cpu, _, _ = allocatable("m5.large")
        expected = math.ceil(4 / (cpu // 1000))

        def running() -> int:
            return sum(1 for p in core.list(POD, "default").items if p["status"].get("phase") == "Running")

        wait_for(lambda: running() == 4, 60, "the Deployment's pods to run on new nodes")
        assert len(group_nodes(core, "web")) == expected
        ca: Any = cluster.controller_managers[0].controllers()["cluster-autoscaler"]
        wait_for(lambda: ca.cache.pods() and sum(1 for st in ca.cache.pods().values() if st.node) == 4, 20,
                 "the autoscaler's cache to count the pods on their nodes")
        current = core.get(DEPLOYMENT, "default", "web")
        meta = {k: v for k, v in current["metadata"].items() if k != "resourceVersion"}  # unconditional write
        core.update(DEPLOYMENT, {**current, "metadata": meta, "spec": {**current["spec"], "replicas": 0}})
        try:
            wait_for(lambda: not group_nodes(core, "web"), 60, "the empty nodes to be removed")
        except AssertionError:
            pods = [(p["metadata"]["name"], p["status"].get("phase"), p["metadata"].get("deletionTimestamp"))
                    for p in core.list(POD, "default").items]
            raise AssertionError(f"nodes not removed; status: {status_map(core)}; pods: {pods}") from None
        assert Cloud(core.store.redis, core.store.config.prefix).target_size("web") == 0
    finally:
        cluster.stop()


# --------------------------------------------------------------------------------------- the scenario


def test_day_night_scenario_creates_deployments_with_hpas_and_samples_node_groups(cluster: Cluster) -> None:
    """The scenario's plan creates each Deployment and its HPA through the store driver (the API validates the
    HPA); the run's sampler counts nodes per group and prices them."""
    scenario = Scenario.load(Path(__file__).resolve().parents[2] / "loadgen" / "scenarios" / "day-night.yaml")
    plan = planning.build(scenario)
    core = cluster.core
    core.create(NAMESPACE, b.namespace("load-0"))
    sink = StoreSink(core)
    for op in (planning.CREATE_DEPLOYMENT, planning.CREATE_HPA):
        items = [drivers.item(a) for a in plan.actions if a.op == op]
        assert len(items) == 3 and sink.run(op, items) == [None] * 3
    hpas = core.list(HORIZONTALPODAUTOSCALER, "load-0").items
    assert sorted((h["spec"]["scaleTargetRef"]["name"], h["spec"]["minReplicas"], h["spec"]["maxReplicas"])
                  for h in hpas) == [(f"web-{i:03d}", 2, 30) for i in range(3)]
    cluster.cloud.register_groups(parse_node_groups(scenario.cluster.node_groups), cluster.clock.now())
    wait_for(lambda: len(group_nodes(core, "on-demand-medium")) == 1, 20, "the min-size node", between=cluster.step)
    sampler = nodegroups.NodeGroupSampler(core, lambda: 0)
    sampler.sample()
    cluster.clock.advance(3600)
    sampler.sample()
    summary = nodegroups.summarize(sampler.samples, nodegroups.prices_of(core))
    # One medium node for one hour at 0.192/h; the other groups cost nothing.
    assert summary["groups"]["on-demand-medium"]["nodeHours"] == 1.0
    assert summary["costTotal"] == 0.192 and summary["groups"]["spot-small"]["cost"] == 0.0
