"""Kubelet shard actors on a local Ray: a kemu-style launch, and an actor killed and brought back by Ray.

One local Ray instance serves the module (started once, 2 CPUs, no dashboard, token auth as the
launcher sets it up). The cluster runs at 10x speed, so a node's 10 s lease interval is one wall
second and a lease expires (node NotReady) after 4 wall seconds without renewal. Every wait is a
condition with a deadline, woken by the store's watch (never a sleep).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import ray

from actors.cli import kubelet_runner
from actors.launcher import KubeletLauncher
from emulator.api.kinds import LEASE, NODE, POD
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339
from emulator.cluster import LocalCluster
from emulator.config import Config
from emulator.server.core import ServerCore
from tests import builders as b
from tests.waiting import store_writes, wait_for

pytestmark = pytest.mark.integration

SPEED = 10.0
NODES = 300


@pytest.fixture
def cluster(redis_url: str, local_ray: None, tmp_path: Any) -> Iterator[LocalCluster]:
    cfg = Config(redis_url=redis_url, data_dir=tmp_path, node_shards=4, clock_speed=SPEED, api_enabled=False,
                 controller_managers=0, nodes=NODES, kubelet_shards=2,
                 kubelet={"events": "warnings", "metrics_window": 5})
    c = LocalCluster(cfg, kubelets=kubelet_runner)
    c.start()
    yield c
    c.stop()


def ready(node: Obj) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions") or [])


def running(core: ServerCore) -> dict[str, Obj]:
    return {p["metadata"]["uid"]: p for p in core.list(POD, "default").items
            if p["status"].get("phase") == "Running" and any(
                c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])}


def test_shard_actors_run_hundreds_of_nodes_and_survive_a_kill(cluster: LocalCluster) -> None:
    core = cluster.core
    assert core is not None
    launcher = cluster.kubelets
    assert isinstance(launcher, KubeletLauncher) and launcher.shards == 2
    reports = launcher.health()
    assert sum(r["nodes"] for r in reports) == NODES and all(r["nodes"] > 0 for r in reports)
    nodes = core.list(NODE).items
    assert len(nodes) == NODES and all(ready(n) for n in nodes)

    names = sorted(n["metadata"]["name"] for n in nodes)
    pods = [b.pod(f"p-{i}", node=names[i * 7 % NODES]) for i in range(40)]
    for p in pods:
        p["metadata"]["annotations"] = {"kemu.io/startup-delay": "0s"}
    core.create_many(POD, pods)
    wait_for(lambda: len(running(core)) == 40, 60, "40 pods running", wake=store_writes(core, POD, LEASE))
    before = running(core)

    # Kill shard 0's actor; Ray restarts it (max_restarts) and the new shard object takes over.
    victim = next(r for r in launcher.health() if r["shard"] == 0)
    its_nodes = [n for n in names if core.store.shard_of(n) % 2 == 0]
    assert len(its_nodes) == victim["nodes"]
    killed_at = core.clock.now()
    ray.kill(launcher.actors[0], no_restart=False)
    back = launcher.wait_restarted(0, victim["incarnation"], timeout=60)
    assert back["pid"] != victim["pid"]
    assert back["nodes"] == victim["nodes"] and back["registered"] == 0  # nothing registered twice
    assert back["restored"] == sum(1 for p in before.values() if core.store.shard_of(p["spec"]["nodeName"]) % 2 == 0)

    def renewed_since_kill() -> bool:
        leases = {lease["metadata"]["name"]: lease for lease in core.list(LEASE, "kube-node-lease").items}
        return all(parse_rfc3339(leases[n]["spec"]["renewTime"]) > killed_at for n in its_nodes)

    wait_for(renewed_since_kill, 30, "the restarted shard's leases to be renewed",
             wake=store_writes(core, POD, LEASE))
    # No lease of the killed shard's nodes expired: the longest gap stayed under leaseDurationSeconds.
    leases = {lease["metadata"]["name"]: lease for lease in core.list(LEASE, "kube-node-lease").items}
    assert all(core.clock.now() - parse_rfc3339(leases[n]["spec"]["renewTime"]) < 40 for n in names)
    assert all(ready(n) for n in core.list(NODE).items)

    after = running(core)
    assert set(after) == set(before)  # no pod lost or duplicated
    assert len(core.list(POD).items) == 40
    for uid, pod in after.items():
        was = before[uid]
        assert pod["status"]["podIP"] == was["status"]["podIP"]
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
        assert (pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] ==
                was["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
    total = sum(r["pods"] for r in launcher.health())
    assert total == 40  # each pod handled by exactly one shard

    # A node added and removed at run time through the actor of the shard that owns its name (what a
    # cloud provider's new or deleted instance does).
    extra = "scaled-0"
    owner = launcher.actors[core.store.shard_of(extra) % 2]
    added = ray.get(owner.add_node.remote(b.node(extra, cpu="4", memory="8Gi")), timeout=30)
    assert added["metadata"]["name"] == extra

    def extra_ready() -> bool:
        leases = {lease["metadata"]["name"] for lease in core.list(LEASE, "kube-node-lease").items}
        return extra in leases and ready(core.get(NODE, None, extra))

    wait_for(extra_ready, 30, "the added node to be Ready with a lease", wake=store_writes(core, NODE, LEASE))
    assert ray.get(owner.remove_node.remote(extra), timeout=30) is True
    assert extra not in {n["metadata"]["name"] for n in core.list(NODE).items}
    assert sum(r["nodes"] for r in launcher.health()) == NODES
