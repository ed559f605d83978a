"""Kubelet shards against a real Redis, on a ManualClock: registration, leases, admission, lifecycle, recovery.

The shard runs its informers for real; the test drives cluster time by hand. Every step is
``sync`` (wait until the informers delivered everything written so far - a condition with a
deadline, never a sleep), advance the clock, ``tick``. Expected values are derived here from
the rules (allocatable formula, pull time = latency + size / bandwidth, leak rate vs limit,
eviction threshold), not read back from the implementation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from emulator.api import errors
from emulator.api.kinds import EVENT, LEASE, NODE, POD
from emulator.api.quantity import format_bytes, to_int
from emulator.api.types import Obj
from emulator.clock import ManualClock, SystemClock, parse_rfc3339
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.kubelet import queueworker, usage
from emulator.kubelet.shard import KubeletShard, kubelet_shard_config
from emulator.server.core import ServerCore
from tests import builders as b
from tests.waiting import store_writes, wait_for

pytestmark = pytest.mark.integration

T0 = 1_700_000_000.0
MI = 1024**2


@pytest.fixture
def shards() -> Iterator[list[KubeletShard]]:
    started: list[KubeletShard] = []
    yield started
    for shard in started:
        shard.stop()


@pytest.fixture
def node_lifecycle(env: tuple[ServerCore, ManualClock]) -> Iterator[ControllerManager]:
    """The node lifecycle controller: the owner of the condition taints (the kubelet only sets conditions)."""
    core, clock = env
    manager = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=("nodelifecycle",)),
                                clock=clock).start()
    assert manager.wait_active(20)
    yield manager
    manager.stop()


def start_shard(core: ServerCore, clock: ManualClock, shards: list[KubeletShard], pools: list[Obj] | None = None,
                **kubelet: Any) -> KubeletShard:
    shard = KubeletShard(core, 0, 1, kubelet_shard_config(kubelet, pools or []), clock)
    shard.start(timeout=30)
    shards.append(shard)
    return shard


def step(shard: KubeletShard, clock: ManualClock, seconds: float = 1.0) -> None:
    """Let the informers catch up, move cluster time, tick, and catch up with the tick's own writes."""
    assert shard.sync(10), "informers did not catch up"
    clock.advance(seconds)
    shard.tick()
    assert shard.sync(10), "informers did not catch up"


def run_until(shard: KubeletShard, clock: ManualClock, done: Callable[[], bool], limit: float,
              seconds: float = 1.0) -> float:
    """Step until ``done()``; returns the cluster seconds it took. Fails after ``limit`` cluster seconds."""
    waited = 0.0
    while not done():
        assert waited < limit, f"condition not met after {limit} cluster seconds"
        step(shard, clock, seconds)
        waited += seconds
    return waited


def pod(core: ServerCore, name: str, *, node: str, cpu: str | None = None, memory: str | None = None,
        limits: dict[str, str] | None = None, image: str = "nginx:1.27", annotations: dict[str, str] | None = None,
        **spec: Any) -> Obj:
    container = b.container(cpu=cpu, memory=memory, image=image)
    if limits:
        container["resources"]["limits"] = limits
    body = b.pod(name, containers=[container], node=node, **spec)
    body["metadata"]["annotations"] = {"kemu.io/startup-delay": "0s", **(annotations or {})}
    return body


def get_pod(core: ServerCore, name: str) -> Obj | None:
    try:
        return core.get(POD, "default", name)
    except errors.StatusError as e:
        if e.code == 404:
            return None
        raise


def phase(core: ServerCore, name: str) -> str | None:
    p = get_pod(core, name)
    return None if p is None else (p.get("status") or {}).get("phase")


def is_ready(core: ServerCore, name: str) -> bool:
    p = get_pod(core, name)
    conds = ((p or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def events_for(core: ServerCore, name: str) -> list[Obj]:
    return [e for e in core.list(EVENT).items if e["involvedObject"]["name"] == name]


def condition(obj: Obj, ctype: str) -> Obj:
    return next(c for c in obj["status"]["conditions"] if c["type"] == ctype)


# -------------------------------------------------------------------------------------- nodes


def test_registers_pool_nodes_and_adopts_an_api_created_node(env: tuple[ServerCore, ManualClock],
                                                            shards: list[KubeletShard]) -> None:
    core, clock = env
    manifest = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "custom-1", "labels": {"gpu": "yes"}},
                "spec": {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]},
                "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "20"},
                           "images": [{"names": ["registry.local/model:1"], "sizeBytes": 1234}]}}
    core.create(NODE, manifest)
    pools = [{"name": "pool", "count": 3, "instance_type": "m5.large", "zones": ["z1", "z2"],
              "labels": {"team": "a"}, "taints": [{"key": "pool", "value": "a", "effect": "PreferNoSchedule"}],
              "images": {"busybox:1.36": "2Mi"}}]
    shard = start_shard(core, clock, shards, pools, kube_reserved={"cpu": "100m", "memory": "256Mi"})
    step(shard, clock)
    step(shard, clock)

    assert shard.nodes() == ["custom-1", "pool-00000", "pool-00001", "pool-00002"]
    node = core.get(NODE, None, "pool-00001")
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "pool-00001"
    assert labels["topology.kubernetes.io/zone"] == "z2"  # zones round robin
    assert labels["node.kubernetes.io/instance-type"] == "m5.large" and labels["team"] == "a"
    assert node["spec"]["taints"] == [{"key": "pool", "value": "a", "effect": "PreferNoSchedule"}]
    assert node["status"]["capacity"]["cpu"] == "2" and node["status"]["capacity"]["memory"] == "8Gi"
    # allocatable = capacity - kube-reserved - eviction-hard (memory.available<100Mi, nodefs.available<10%)
    alloc = node["status"]["allocatable"]
    assert alloc["cpu"] == "1900m"
    assert alloc["memory"] == format_bytes(8 * 1024 * MI - 256 * MI - 100 * MI)
    assert to_int(alloc["ephemeral-storage"]) == 100 * 1024 * MI - int(100 * 1024 * MI * 0.1)
    assert alloc["pods"] == "110"
    ready = condition(node, "Ready")
    assert ready["status"] == "True" and ready["reason"] == "KubeletReady"
    assert {condition(node, c)["status"] for c in ("MemoryPressure", "DiskPressure", "PIDPressure")} == {"False"}
    assert any("busybox:1.36" in img["names"] for img in node["status"]["images"])
    assert node["spec"]["podCIDR"].endswith(".0/24")

    adopted = core.get(NODE, None, "custom-1")
    assert adopted["metadata"]["labels"]["gpu"] == "yes"
    assert adopted["metadata"]["labels"]["kubernetes.io/hostname"] == "custom-1"
    assert adopted["spec"]["taints"] == manifest["spec"]["taints"]
    assert adopted["status"]["capacity"] == {"cpu": "4", "memory": "8Gi", "pods": "20"}
    assert adopted["status"]["allocatable"] == {"cpu": "3900m", "memory": format_bytes(8 * 1024 * MI - 356 * MI),
                                                "pods": "20"}
    assert adopted["status"]["images"] == manifest["status"]["images"]
    assert adopted["status"]["nodeInfo"]["kubeletVersion"].startswith("v1.")
    assert condition(adopted, "Ready")["status"] == "True"
    assert shard.stats.registered == 3 and shard.stats.adopted == 1


def test_a_node_deleted_and_created_again_is_run_again(env: tuple[ServerCore, ManualClock],
                                                      shards: list[KubeletShard]) -> None:
    core, clock = env
    shard = start_shard(core, clock, shards)
    core.create(NODE, b.node("kwok-1", cpu="2", memory="4Gi"))
    step(shard, clock)
    assert shard.nodes() == ["kwok-1"]
    core.delete(NODE, None, "kwok-1")
    step(shard, clock)
    assert shard.nodes() == []
    created = core.create(NODE, b.node("kwok-1", cpu="4", memory="8Gi"))
    for _ in range(12):
        step(shard, clock)
    assert shard.nodes() == ["kwok-1"]
    node = core.get(NODE, None, "kwok-1")
    assert condition(node, "Ready")["status"] == "True" and node["status"]["capacity"]["cpu"] == "4"
    lease = core.get(LEASE, "kube-node-lease", "kwok-1")
    assert lease["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    core.create(POD, pod(core, "again", node="kwok-1", cpu="3"))
    run_until(shard, clock, lambda: is_ready(core, "again"), 10)  # the new capacity counts at admission


def test_leases_are_renewed_every_ten_cluster_seconds(env: tuple[ServerCore, ManualClock],
                                                      shards: list[KubeletShard]) -> None:
    core, clock = env
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 2}])
    step(shard, clock)
    node = core.get(NODE, None, "n-00000")
    lease = core.get(LEASE, "kube-node-lease", "n-00000")
    assert lease["spec"]["holderIdentity"] == "n-00000" and lease["spec"]["leaseDurationSeconds"] == 40
    assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    first = parse_rfc3339(lease["spec"]["renewTime"])
    assert first == pytest.approx(clock.now(), abs=1e-3)

    renewals = [first]
    for _ in range(60):
        step(shard, clock)
        t = parse_rfc3339(core.get(LEASE, "kube-node-lease", "n-00000")["spec"]["renewTime"])
        if t != renewals[-1]:
            renewals.append(t)
    # 60 s of cluster time at one renewal per 10 s (the first one sooner: renewals are spread by node name).
    gaps = [later - earlier for earlier, later in itertools.pairwise(renewals)]
    assert len(gaps) in (6, 7), gaps
    assert all(gap <= 10.0 + 1.0 for gap in gaps), gaps
    assert all(gap >= 10.0 for gap in gaps[1:]), gaps
    for name in ("n-00000", "n-00001"):
        renew = parse_rfc3339(core.get(LEASE, "kube-node-lease", name)["spec"]["renewTime"])
        assert clock.now() - renew <= 10.0
    assert shard.stats.late_renewals == 0 and shard.stats.expired_leases == 0


def _manifest_node() -> tuple[Obj, int | None]:
    # No allocatable: the shard fills it in (capacity - eviction-hard), as for any adopted node.
    return ({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "scaled-1", "labels": {"group": "ca"}},
             "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "20"}}}, None)


def _pool_node() -> tuple[Obj, int | None]:
    return ({"name": "group", "instance_type": "m5.large", "labels": {"group": "ca"}}, 7)


@pytest.mark.parametrize(("make", "name", "cpu", "memory", "pods"), [
    (_manifest_node, "scaled-1", "4", 8 * 1024 * MI, "20"),
    (_pool_node, "group-00007", "2", 8 * 1024 * MI, "110"),  # m5.large: 2 vCPU, 8 GiB
], ids=["node-manifest", "pool-node"])
def test_add_node_at_run_time_is_ready_with_a_lease_and_schedulable_capacity(
        env: tuple[ServerCore, ManualClock], shards: list[KubeletShard], make: Callable[[], tuple[Obj, int | None]],
        name: str, cpu: str, memory: int, pods: str) -> None:
    core, clock = env
    shard = start_shard(core, clock, shards)
    step(shard, clock)
    assert shard.nodes() == []

    spec, index = make()
    created = shard.add_node(spec, index)
    assert created["metadata"]["name"] == name
    assert shard.nodes() == [name]  # hosted by the call itself, not at the next tick
    step(shard, clock)

    node = core.get(NODE, None, name)
    assert condition(node, "Ready")["status"] == "True"
    assert not node["spec"].get("unschedulable")
    assert node["metadata"]["labels"]["group"] == "ca"
    # allocatable = capacity - the default hard eviction threshold (memory.available<100Mi).
    alloc = node["status"]["allocatable"]
    assert node["status"]["capacity"]["cpu"] == cpu and to_int(alloc["cpu"]) == int(cpu)
    assert to_int(alloc["memory"]) == memory - 100 * MI
    assert alloc["pods"] == pods
    lease = core.get(LEASE, "kube-node-lease", name)
    assert lease["spec"]["holderIdentity"] == name
    assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    assert parse_rfc3339(lease["spec"]["renewTime"]) == pytest.approx(clock.now(), abs=1e-3)
    # Schedulable: a pod asking for all of its cpu runs there.
    core.create(POD, pod(core, "fits", node=name, cpu=cpu))
    run_until(shard, clock, lambda: is_ready(core, "fits"), 10)
    assert shard.add_node(spec, index)["metadata"]["uid"] == node["metadata"]["uid"]  # twice: the same node


@pytest.mark.parametrize(("spec", "index", "message"), [
    ({"name": "group"}, None, "needs its index"),
    ({"apiVersion": "v1", "kind": "Node", "metadata": {}}, None, "metadata.name"),
], ids=["pool-node-without-index", "manifest-without-name"])
def test_add_node_refuses_what_it_cannot_register(env: tuple[ServerCore, ManualClock], shards: list[KubeletShard],
                                                  spec: Obj, index: int | None, message: str) -> None:
    core, clock = env
    shard = start_shard(core, clock, shards)
    with pytest.raises(ValueError, match=message):
        shard.add_node(spec, index)
    assert shard.nodes() == []


def test_add_node_refuses_a_node_of_another_shard(env: tuple[ServerCore, ManualClock]) -> None:
    core, clock = env
    shard = KubeletShard(core, 0, 2, kubelet_shard_config({}, []), clock)
    shard.start(timeout=30)
    try:
        other = next(f"x-{i}" for i in itertools.count() if not shard.owns(f"x-{i}"))
        with pytest.raises(ValueError, match="hashes to kubelet shard 1"):
            shard.add_node(b.node(other))
        with pytest.raises(ValueError, match="hashes to kubelet shard 1"):
            shard.remove_node(other)
    finally:
        shard.stop()


def test_remove_node_deletes_it_stops_its_lease_and_leaves_no_pod_on_it(env: tuple[ServerCore, ManualClock],
                                                                         shards: list[KubeletShard]) -> None:
    core, clock = env
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 2}])
    step(shard, clock)
    core.create(POD, pod(core, "doomed", node="n-00000", cpu="100m"))
    core.create(POD, pod(core, "survivor", node="n-00001", cpu="100m"))
    run_until(shard, clock, lambda: is_ready(core, "doomed") and is_ready(core, "survivor"), 10)
    renewed = core.get(LEASE, "kube-node-lease", "n-00000")["spec"]["renewTime"]
    since = core.store.current_rv()

    assert shard.remove_node("n-00000") is True
    assert shard.nodes() == ["n-00001"]
    with pytest.raises(errors.StatusError) as gone:
        core.get(NODE, None, "n-00000")
    assert gone.value.code == 404
    assert get_pod(core, "doomed") is None  # not left Running on a ghost node
    # podgc's gcOrphaned: Failed with DisruptionTarget (DeletionByPodGC), then deleted with grace 0.
    seen = [e for e in core.watch(POD, since, namespace="default").next_batch(timeout=5)
            if e.object["metadata"]["name"] == "doomed"]
    assert seen[0].type == "MODIFIED" and seen[-1].type == "DELETED"
    failed = seen[0].object
    assert failed["status"]["phase"] == "Failed"
    target = condition(failed, "DisruptionTarget")
    assert (target["status"], target["reason"], target["message"]) == (
        "True", "DeletionByPodGC", "PodGC: node no longer exists")
    for _ in range(30):  # three renew intervals: events from before the removal must not bring it back
        step(shard, clock)
    assert shard.nodes() == ["n-00001"]
    with pytest.raises(errors.StatusError):
        core.get(NODE, None, "n-00000")
    # No garbage collector runs here, so the Lease stays - but nobody renews it.
    assert core.get(LEASE, "kube-node-lease", "n-00000")["spec"]["renewTime"] == renewed
    survivor = parse_rfc3339(core.get(LEASE, "kube-node-lease", "n-00001")["spec"]["renewTime"])
    assert clock.now() - survivor <= 10.0
    assert is_ready(core, "survivor")
    assert shard.remove_node("n-00000") is False  # already gone


# ---------------------------------------------------------------------------------- admission


def test_second_pod_racing_for_the_node_is_rejected_out_of_cpu(env: tuple[ServerCore, ManualClock],
                                                               shards: list[KubeletShard]) -> None:
    core, clock = env
    shard = start_shard(core, clock, shards, [{"name": "small", "count": 1, "capacity": {"cpu": "1"}}])
    step(shard, clock)
    # Both bound by hand: the store does not check room for pods created with spec.nodeName.
    results = core.create_many(POD, [pod(core, "first", node="small-00000", cpu="600m"),
                                     pod(core, "second", node="small-00000", cpu="600m")])
    assert all(not isinstance(r, errors.StatusError) for r in results)
    run_until(shard, clock, lambda: phase(core, "second") == "Failed" and is_ready(core, "first"), 30)

    rejected = get_pod(core, "second")
    assert rejected is not None
    assert rejected["status"]["reason"] == "OutOfcpu"
    assert rejected["status"]["message"] == ("Pod was rejected: Node didn't have enough resource: cpu, requested: "
                                             "600, used: 600, capacity: 1000")
    assert phase(core, "first") == "Running"
    warning = [e for e in events_for(core, "second") if e["reason"] == "OutOfcpu"]
    assert warning and warning[0]["type"] == "Warning"

    # The failed pod holds no room: a 400m pod still fits next to the first one.
    core.create(POD, pod(core, "third", node="small-00000", cpu="400m"))
    run_until(shard, clock, lambda: is_ready(core, "third"), 30)


def test_node_affinity_mismatch_is_rejected(env: tuple[ServerCore, ManualClock], shards: list[KubeletShard]) -> None:
    core, clock = env
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 1, "labels": {"disk": "hdd"}}])
    step(shard, clock)
    core.create(POD, pod(core, "wants-ssd", node="n-00000", nodeSelector={"disk": "ssd"}))
    run_until(shard, clock, lambda: phase(core, "wants-ssd") == "Failed", 10)
    status = get_pod(core, "wants-ssd")["status"]  # type: ignore[index]
    assert status["reason"] == "NodeAffinity"
    assert status["message"] == ("Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node "
                                 "affinity/selector")


# ---------------------------------------------------------------------------------- lifecycle


def test_second_pod_with_the_same_image_starts_faster(env: tuple[ServerCore, ManualClock],
                                                      shards: list[KubeletShard]) -> None:
    core, clock = env
    size, bandwidth, latency = 500 * MI, 50 * MI, 0.5
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 1}], image_sizes={"example/big:1": "500Mi"},
                        pull_bandwidth="50Mi", pull_latency=latency)
    step(shard, clock)
    core.create(POD, pod(core, "cold", node="n-00000", image="example/big:1"))
    cold = run_until(shard, clock, lambda: is_ready(core, "cold"), 60)
    core.create(POD, pod(core, "warm", node="n-00000", image="example/big:1"))
    warm = run_until(shard, clock, lambda: is_ready(core, "warm"), 60)

    pull = latency + size / bandwidth  # 10.5 s
    assert cold >= pull  # the first pod waited for the pull
    assert warm <= cold - pull + 1.0  # the second did not (ticks are 1 s)
    pulled = [e["message"] for e in events_for(core, "cold") if e["reason"] == "Pulled"]
    assert pulled == [f'Successfully pulled image "example/big:1" in 10.5s (10.5s including waiting). '
                      f"Image size: {size} bytes."]
    assert [e["message"] for e in events_for(core, "warm") if e["reason"] == "Pulled"] == [
        'Container image "example/big:1" already present on machine']
    step(shard, clock, 10.0)  # node status reports changes on its 10 s cadence
    images = core.get(NODE, None, "n-00000")["status"]["images"]
    entry = next(i for i in images if "example/big:1" in i["names"])
    assert entry["sizeBytes"] == size
    status = get_pod(core, "warm")["status"]  # type: ignore[index]
    (cs,) = status["containerStatuses"]
    assert cs["ready"] and cs["state"]["running"] and cs["imageID"].startswith("docker.io/example/big@sha256:")
    assert cs["containerID"].startswith("containerd://")
    assert [c["type"] for c in status["conditions"]] == ["PodReadyToStartContainers", "Initialized", "Ready",
                                                         "ContainersReady", "PodScheduled"]
    assert status["podIP"].startswith("10.") and status["hostIP"].startswith("172.")
    reasons = [e["reason"] for e in sorted(events_for(core, "cold"), key=lambda e: e["metadata"]["name"])]
    assert reasons == ["Pulling", "Pulled", "Created", "Started"]


def test_init_containers_run_in_order_before_the_app(env: tuple[ServerCore, ManualClock],
                                                     shards: list[KubeletShard]) -> None:
    core, clock = env
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 1, "images": {"nginx:1.27": "10Mi",
                                                                                  "busybox:1.36": "1Mi"}}])
    step(shard, clock)
    body = pod(core, "with-init", node="n-00000", annotations={"kemu.io/init-duration.migrate": "5s",
                                                               "kemu.io/init-duration.warm": "3s"})
    body["spec"]["initContainers"] = [b.container("migrate", image="busybox:1.36"),
                                      b.container("warm", image="busybox:1.36")]
    core.create(POD, body)
    step(shard, clock)
    status = get_pod(core, "with-init")["status"]  # type: ignore[index]
    assert status["phase"] == "Pending"
    assert "running" in status["initContainerStatuses"][0]["state"]
    assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "PodInitializing"
    assert condition(get_pod(core, "with-init"), "Initialized")["status"] == "False"  # type: ignore[arg-type]
    took = run_until(shard, clock, lambda: is_ready(core, "with-init"), 30)
    assert 5 + 3 - 1 <= took + 1 <= 5 + 3 + 2
    status = get_pod(core, "with-init")["status"]  # type: ignore[index]
    assert [s["state"]["terminated"]["reason"] for s in status["initContainerStatuses"]] == ["Completed"] * 2


def test_leaking_pod_is_oom_killed_restarted_and_backs_off(env: tuple[ServerCore, ManualClock],
                                                           shards: list[KubeletShard]) -> None:
    core, clock = env
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 1}])
    step(shard, clock)
    # 200Mi + 8Mi/s passes the 256Mi limit after 7 s: OOM-killed on the 8th second of every run.
    core.create(POD, pod(core, "leaky", node="n-00000", limits={"cpu": "500m", "memory": "256Mi"},
                         annotations={"kemu.io/profile": "memory-leak", "kemu.io/memory": "leak(200Mi, 8Mi/s)"}))

    def status() -> Obj:
        return (get_pod(core, "leaky")["status"].get("containerStatuses") or [{}])[0]  # type: ignore[index]

    run_until(shard, clock, lambda: (status().get("lastState") or {}).get("terminated") is not None, 30)
    last = status()["lastState"]["terminated"]
    assert last["exitCode"] == 137 and last["reason"] == "OOMKilled"
    assert status()["restartCount"] >= 1
    run_until(shard, clock, lambda: (status()["state"].get("waiting") or {}).get("reason") == "CrashLoopBackOff",
              60)
    cs = status()
    assert cs["restartCount"] >= 1 and cs["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert "back-off 10s restarting failed container=app pod=leaky_default" in cs["state"]["waiting"]["message"]
    assert phase(core, "leaky") == "Running"  # restartPolicy Always: the pod stays Running while it crash-loops
    assert any(e["reason"] == "BackOff" and e["type"] == "Warning" for e in events_for(core, "leaky"))
    assert shard.metrics.view()["oom_kills"].sum() >= 2


def test_guaranteed_pod_survives_memory_pressure_while_best_effort_is_evicted(
        env: tuple[ServerCore, ManualClock], shards: list[KubeletShard], node_lifecycle: ControllerManager) -> None:
    # The kubelet sets the MemoryPressure condition; the node lifecycle controller owns the taint (as upstream).
    core, clock = env
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 1,
                                               "capacity": {"cpu": "4", "memory": "2Gi"}}])
    step(shard, clock)
    core.create_many(POD, [
        pod(core, "guaranteed", node="n-00000", limits={"cpu": "500m", "memory": "512Mi"},
            annotations={"kemu.io/memory": "400Mi"}),
        pod(core, "besteffort-a", node="n-00000", annotations={"kemu.io/memory": "800Mi"}),
        pod(core, "besteffort-b", node="n-00000", annotations={"kemu.io/memory": "800Mi"}),
    ])
    # 400 + 800 + 800 = 2000Mi of 2048Mi: memory.available = 48Mi < 100Mi at the next 10 s eviction round.
    run_until(shard, clock, lambda: "Failed" in (phase(core, "besteffort-a"), phase(core, "besteffort-b")), 30)
    evicted = [n for n in ("besteffort-a", "besteffort-b") if phase(core, n) == "Failed"]
    assert len(evicted) == 1
    status = get_pod(core, evicted[0])["status"]  # type: ignore[index]
    assert status["reason"] == "Evicted"
    assert status["message"].startswith("The node was low on resource: memory. Threshold quantity: 100Mi")
    assert any(e["reason"] == "Evicted" and e["type"] == "Warning" for e in events_for(core, evicted[0]))
    assert get_pod(core, "guaranteed")["status"]["qosClass"] == "Guaranteed"  # type: ignore[index]
    for _ in range(20):  # more eviction rounds: the remaining 1.2Gi leaves enough memory
        step(shard, clock)
    assert is_ready(core, "guaranteed")
    survivors = [n for n in ("besteffort-a", "besteffort-b") if n not in evicted]
    assert phase(core, survivors[0]) == "Running"
    node = core.get(NODE, None, "n-00000")
    assert condition(node, "MemoryPressure")["status"] == "True"  # held for the 5 min transition period

    def pressure_taint() -> Obj | None:
        taints = core.get(NODE, None, "n-00000")["spec"].get("taints") or ()
        return next((t for t in taints if t["key"] == "node.kubernetes.io/memory-pressure"), None)

    taint = wait_for(pressure_taint, 20, "the node lifecycle controller's memory-pressure taint",
                     wake=store_writes(core, NODE))
    assert {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}.items() <= taint.items()
    assert shard.metrics.view()["evictions"] == {"memory.available": 1}


def test_graceful_deletion_waits_for_the_app_and_kills_at_the_grace_period(
        env: tuple[ServerCore, ManualClock], shards: list[KubeletShard]) -> None:
    core, clock = env
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 1}])
    step(shard, clock)
    core.create_many(POD, [
        pod(core, "polite", node="n-00000", annotations={"kemu.io/termination-delay": "5s"}),
        pod(core, "stubborn", node="n-00000", annotations={"kemu.io/termination-delay": "60s"},
            terminationGracePeriodSeconds=3),
    ])
    run_until(shard, clock, lambda: is_ready(core, "polite") and is_ready(core, "stubborn"), 20)
    since = core.store.current_rv()
    core.delete(POD, "default", "polite")
    core.delete(POD, "default", "stubborn")
    step(shard, clock)
    assert get_pod(core, "polite") is not None  # terminating: it has 30 s, the app needs 5
    assert any(e["reason"] == "Killing" and e["message"] == "Stopping container app"
               for e in events_for(core, "polite"))
    took_stubborn = run_until(shard, clock, lambda: get_pod(core, "stubborn") is None, 20)
    took_polite = took_stubborn + run_until(shard, clock, lambda: get_pod(core, "polite") is None, 20)
    assert 1 <= took_stubborn + 1 <= 4  # killed at the 3 s grace period
    assert 4 <= took_polite + 1 <= 7  # stopped by itself after 5 s

    final: dict[str, Obj] = {}
    for event in core.store.watch(POD, since).next_batch(timeout=0.1):
        if event.type == "MODIFIED" and event.object["status"].get("phase") in ("Succeeded", "Failed"):
            final[event.object["metadata"]["name"]] = event.object["status"]
    assert final["polite"]["phase"] == "Succeeded"
    assert final["polite"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert final["stubborn"]["phase"] == "Failed"
    assert final["stubborn"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
    step(shard, clock)  # the deletions reach the shard
    assert shard.pods() == {}


QUEUE, RATE = "jobs", 2  # a queue worker's list and items per cluster second


@pytest.mark.parametrize(("grace", "delay"), [(30, "10s"), (4, "60s")],
                         ids=["stops-by-itself-after-10s", "killed-at-a-4s-grace-period"])
def test_a_queue_worker_takes_no_item_once_its_deletion_sends_sigterm(
        env: tuple[ServerCore, ManualClock], shards: list[KubeletShard], grace: int, delay: str) -> None:
    """A worker takes RATE items per cluster second from the tick that started it to the tick that sends it
    SIGTERM; it stays Ready while its container runs on (upstream's prober keeps a running container without
    a readiness probe ready during termination), but a worker that got SIGTERM takes no new item."""
    core, clock = env
    redis = core.store.redis
    redis.delete(QUEUE)
    redis.rpush(QUEUE, *[f"item-{i}" for i in range(500)])
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 1}])
    step(shard, clock)
    core.create(POD, pod(core, "worker", node="n-00000", cpu="100m", memory="64Mi", terminationGracePeriodSeconds=grace,
                         annotations={"kemu.io/profile": "queue-worker", "kemu.io/queue": QUEUE,
                                      "kemu.io/items-per-second": str(RATE), "kemu.io/termination-delay": delay}))

    def consumed() -> int:
        return queueworker.consumed(redis, core.store.config.prefix).get(QUEUE, 0)
    run_until(shard, clock, lambda: is_ready(core, "worker"), 20)
    assert consumed() == 0  # the tick that started it: it works from there on
    for _ in range(3):
        step(shard, clock)
    assert consumed() == 3 * RATE
    core.delete(POD, "default", "worker")
    step(shard, clock)  # the tick that sees the deletion: the second up to it worked, then SIGTERM
    assert any(e["reason"] == "Killing" for e in events_for(core, "worker"))
    assert consumed() == 4 * RATE
    step(shard, clock)
    assert is_ready(core, "worker") and consumed() == 4 * RATE  # Ready, running, and idle
    run_until(shard, clock, lambda: get_pod(core, "worker") is None, 70)
    assert consumed() == 4 * RATE
    assert redis.llen(QUEUE) == 500 - 4 * RATE


def test_the_shards_own_writes_reach_its_informers_undecoded_as_the_store_holds_them(
        env: tuple[ServerCore, ManualClock], shards: list[KubeletShard]) -> None:
    """The status writes and the final delete come back through the watch as the objects written (not decoded)."""
    core, clock = env
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 1}])
    step(shard, clock)
    assert shard.factory is not None
    mux = shard.factory.multiplexer
    core.create(POD, pod(core, "p", node="n-00000"))
    run_until(shard, clock, lambda: is_ready(core, "p"), 20)
    hits = mux.own_hits
    assert hits >= 1  # the shard's Running + Ready status write
    informer = shard.factory.pod_shard_informer(core.store.shard_of("n-00000"))
    assert informer.indexer.get_by_key("default/p") == get_pod(core, "p")
    assert shard.factory.informer_for(NODE).indexer.get_by_key("n-00000") == core.get(NODE, None, "n-00000")
    core.delete(POD, "default", "p")
    run_until(shard, clock, lambda: get_pod(core, "p") is None, 40)
    step(shard, clock)  # the deletion reaches the shard
    assert mux.own_hits >= hits + 2  # the final status and the grace-0 delete
    assert informer.indexer.get_by_key("default/p") is None
    assert shard.pods() == {}


def test_usage_is_published_for_metrics_api(env: tuple[ServerCore, ManualClock], shards: list[KubeletShard]) -> None:
    core, clock = env
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 1}], metrics_window=15)
    step(shard, clock)
    busy = pod(core, "busy", node="n-00000", annotations={"kemu.io/cpu": "250m", "kemu.io/memory": "64Mi"})
    busy["metadata"]["labels"] = {"app": "busy"}
    core.create_many(POD, [busy, pod(core, "idle", node="n-00000", annotations={"kemu.io/profile": "idle"})])
    run_until(shard, clock, lambda: is_ready(core, "busy"), 10)
    for _ in range(32):
        step(shard, clock)
    prefix = core.store.config.prefix
    listed = usage.answer(core.store, "pods", namespace="default", label_selector="app=busy", now=clock.now())
    assert listed["kind"] == "PodMetricsList"
    (pm,) = listed["items"]
    assert pm["kind"] == "PodMetrics" and pm["metadata"]["name"] == "busy" and pm["window"] == "15s"
    assert usage.answer(core.store, "pods", namespace="default", name="busy", now=clock.now()) == pm
    assert {p["metadata"]["name"] for p in usage.pod_metrics(core.store.redis, prefix, None, now=clock.now())} == {
        "busy", "idle"}
    (c,) = pm["containers"]
    assert c["name"] == "app"
    assert to_int(c["usage"]["memory"]) == 64 * MI
    assert int(c["usage"]["cpu"][:-1]) == pytest.approx(250_000_000, rel=0.02)  # 250m in nanocores
    (nm,) = usage.node_metrics(core.store.redis, prefix, now=clock.now())
    # The node's usage is its pods' (the idle profile uses a little memory and no CPU).
    idle = usage.answer(core.store, "pods", namespace="default", name="idle", now=clock.now())
    assert nm["metadata"]["name"] == "n-00000"
    assert to_int(nm["usage"]["memory"]) == 64 * MI + to_int(idle["containers"][0]["usage"]["memory"])
    assert usage.node_metrics(core.store.redis, prefix, now=clock.now() + 3600) == []  # stale entries are not served
    with pytest.raises(errors.StatusError) as missing:
        usage.answer(core.store, "nodes", name="no-such-node", now=clock.now())
    assert missing.value.code == 404
    core.delete(POD, "default", "busy")
    run_until(shard, clock, lambda: "busy" not in {p["metadata"]["name"] for p in usage.pod_metrics(
        core.store.redis, prefix, "default", now=clock.now())}, 30)  # a deleted pod's usage goes away


def test_cpu_throttled_pods_are_counted_for_run_summaries(env: tuple[ServerCore, ManualClock],
                                                           shards: list[KubeletShard]) -> None:
    """``kemu run``'s throttled-pod count: a pod wanting 900m under a 500m CPU limit is throttled in every 100 ms
    CFS period (quota 50 ms < demand 90 ms); one wanting 300m under the same limit never is."""
    from emulator.kubelet.usage_publisher import throttling

    core, clock = env
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 1}], metrics_window=15)
    step(shard, clock)
    core.create_many(POD, [pod(core, "hot", node="n-00000", limits={"cpu": "500m"},
                               annotations={"kemu.io/cpu": "900m"}),
                           pod(core, "cool", node="n-00000", limits={"cpu": "500m"},
                               annotations={"kemu.io/cpu": "300m"})])
    run_until(shard, clock, lambda: is_ready(core, "hot") and is_ready(core, "cool"), 10)
    prefix = core.store.config.prefix
    run_until(shard, clock, lambda: throttling(core.store.redis, prefix)["podsThrottled"] > 0, 40)
    first = throttling(core.store.redis, prefix)
    for _ in range(15):  # exactly one metrics window to the next snapshot
        step(shard, clock)
    second = throttling(core.store.redis, prefix)
    assert first["podsThrottled"] == second["podsThrottled"] == 1
    assert second["throttledPeriods"] - first["throttledPeriods"] == 15 * 10  # 15 s of 100 ms periods, all throttled


# ----------------------------------------------------------------------------------- recovery


def test_a_new_shard_object_takes_over_without_losing_or_duplicating_pods(
        env: tuple[ServerCore, ManualClock], shards: list[KubeletShard]) -> None:
    core, clock = env
    pools = [{"name": "n", "count": 3}]
    first = start_shard(core, clock, shards, pools)
    step(first, clock)
    names = [f"web-{i}" for i in range(6)]
    core.create_many(POD, [pod(core, name, node=f"n-{i % 3:05d}", cpu="100m") for i, name in enumerate(names)])
    core.create(POD, pod(core, "crasher", node="n-00000", annotations={"kemu.io/duration": "3s",
                                                                         "kemu.io/exit-code": "1"}))
    run_until(first, clock, lambda: all(is_ready(core, n) for n in names), 20)
    run_until(first, clock, lambda: get_pod(core, "crasher")["status"]["containerStatuses"][0]  # type: ignore[index]
              ["restartCount"] >= 1, 20)
    before = {n: get_pod(core, n)["status"] for n in [*names, "crasher"]}  # type: ignore[index]
    lease_before = parse_rfc3339(core.get(LEASE, "kube-node-lease", "n-00002")["spec"]["renewTime"])
    uids = {p["metadata"]["uid"] for p in core.list(POD).items}
    first.stop()
    shards.remove(first)

    clock.advance(5)
    second = start_shard(core, clock, shards, pools)
    for _ in range(15):
        step(second, clock)
    assert second.stats.registered == 0 and second.nodes() == ["n-00000", "n-00001", "n-00002"]
    assert second.stats.restored == 7
    assert set(second.pods()) == uids  # every pod handled exactly once
    assert {p["metadata"]["uid"] for p in core.list(POD).items} == uids  # none lost, none created
    for n in names:
        now = get_pod(core, n)["status"]  # type: ignore[index]
        assert now["phase"] == "Running" and is_ready(core, n)
        assert now["podIP"] == before[n]["podIP"] and now["startTime"] == before[n]["startTime"]
        cs, was = now["containerStatuses"][0], before[n]["containerStatuses"][0]
        assert cs["state"]["running"]["startedAt"] == was["state"]["running"]["startedAt"]
        assert cs["restartCount"] == was["restartCount"] == 0
    assert get_pod(core, "crasher")["status"]["containerStatuses"][0][  # type: ignore[index]
        "restartCount"] >= before["crasher"]["containerStatuses"][0]["restartCount"]
    assert parse_rfc3339(core.get(LEASE, "kube-node-lease", "n-00002")["spec"]["renewTime"]) > lease_before

    # A pod created after the take-over gets an IP nobody else has.
    core.create(POD, pod(core, "late", node="n-00000"))
    run_until(second, clock, lambda: is_ready(core, "late"), 10)
    ips = [get_pod(core, n)["status"]["podIP"] for n in [*names, "crasher", "late"]]  # type: ignore[index]
    assert len(set(ips)) == len(ips)


@pytest.mark.parametrize(("speed", "tick", "expected_ms"), [
    (1.0, 1.0, 50.0),  # the cap: 5 % of a one-second tick
    (10.0, 1.0, 5.0),  # a faster clock ticks more often in wall time: 5 % of 100 ms
    (1.0, 0.2, 10.0),
    (100.0, 1.0, 0.5),
], ids=["real-time", "speed-10", "short-tick", "speed-100"])
def test_a_shard_asks_its_multiplexer_for_a_linger_of_5_percent_of_a_tick(
        env: tuple[ServerCore, ManualClock], speed: float, tick: float, expected_ms: float) -> None:
    core, _ = env
    config = kubelet_shard_config({"tick_interval": tick}, [])
    shard = KubeletShard(core, 0, 1, config, SystemClock(speed=speed))
    assert shard._watch_linger_ms() == pytest.approx(expected_ms)
