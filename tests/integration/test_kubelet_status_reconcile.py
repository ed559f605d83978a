"""Kubelet status reconciliation against a real Redis that really goes away, on a ManualClock.

Upstream's status manager (``pkg/kubelet/status/status_manager.go``) keeps the status it intends
for each pod and reconciles it with the API server every 10 s, so a status write lost to an
outage is written again once the server is back, without restarting the kubelet. These tests
take the store away for real - the redis-server process stopped, or every connection cut by a
TCP relay at the moment the kubelet sends its first pod status write (:mod:`tests.netcut`) - while
a shard starts pods, bring it back, and check that every pod reaches Running in the store. The
cluster clock is a ManualClock the test moves tick by tick, so what happens when is fixed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis

from emulator.api.kinds import NODE, POD
from emulator.api.types import Obj
from emulator.clock import ManualClock, rfc3339
from emulator.kubelet.shard import KUBELET_STORE_RETRIES, KubeletShard, kubelet_shard_config
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig
from emulator.store.store import Store, StoreConfig
from tests import builders as b
from tests.netcut import NetCut
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

T0 = 1_700_000_000.0
NODES = 4
PODS = 24
SYNC_PERIOD = 10.0  # status_manager.go syncPeriod
# Pull time = pull_latency + size / bandwidth = 0.5 + 100Mi / 50Mi = 2.5 s (serialized per node): the pods
# are in ContainerCreating for a few ticks, and start while the store is away.
KUBELET = {"image_sizes": {"app:1": "100Mi"}, "pull_bandwidth": "50Mi", "pull_latency": 0.5}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis of the test's own: the test stops it."""
    redis_server = EmbeddedRedis(RedisServerConfig(data_dir=tmp_path / "redis"))
    redis_server.start()
    yield redis_server
    redis_server.stop()


class Cluster:
    """A store the test reads directly, and one kubelet shard reaching it at ``shard_url``."""

    def __init__(self, server_url: str, shard_url: str) -> None:
        self.clock = ManualClock(T0)
        config = StoreConfig(node_shards=4)
        self.core = ServerCore(Store.connect(server_url, config), self.clock)
        self.core.bootstrap()
        # The shard's client as the kubelet actor configures it (actors/kubelet.py).
        self.shard_core = ServerCore(Store.connect(shard_url, replace(config, retries=KUBELET_STORE_RETRIES)),
                                     self.clock)
        pools = [{"name": "n", "count": NODES}]
        self.shard = KubeletShard(self.shard_core, 0, 1, kubelet_shard_config(KUBELET, pools), self.clock)
        self.shard.start(timeout=30)

    def close(self) -> None:
        self.shard.stop()
        self.shard_core.store.close()
        self.core.store.close()

    def tick(self, seconds: float = 1.0) -> None:
        """Move cluster time and tick; with the store away the tick must carry on, not raise."""
        self.clock.advance(seconds)
        self.shard.tick()

    def step(self, seconds: float = 1.0) -> None:
        """A tick with the informers caught up before and after (the store must be reachable)."""
        assert self.shard.sync(10), "informers did not catch up"
        self.tick(seconds)
        assert self.shard.sync(10), "informers did not catch up"

    def pods(self) -> list[Obj]:
        return [p for p in self.core.list(POD, "default").items if p["metadata"]["name"].startswith("p-")]


def _pod(i: int) -> Obj:
    body = b.pod(f"p-{i:02d}", containers=[b.container(image="app:1")], node=f"n-{i % NODES:05d}")
    body["metadata"]["annotations"] = {"kemu.io/startup-delay": "0s"}
    return body


def _waiting_reason(pod: Obj) -> str | None:
    states = [cs.get("state") or {} for cs in (pod.get("status") or {}).get("containerStatuses") or ()]
    return next(((s.get("waiting") or {}).get("reason") for s in states if "waiting" in s), None)


def _running_and_ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or ())
    return status.get("phase") == "Running" and ready


@pytest.fixture
def cluster(server: EmbeddedRedis) -> Iterator[Cluster]:
    c = Cluster(server.url, server.url)
    yield c
    c.close()


def _start_pods(cluster: Cluster) -> None:
    """Nodes registered, then PODS pods admitted: the store shows each Pending in ContainerCreating."""
    cluster.step()
    assert sorted(cluster.shard.nodes()) == [f"n-{i:05d}" for i in range(NODES)]
    cluster.core.create_many(POD, [_pod(i) for i in range(PODS)])
    cluster.step()
    pods = cluster.pods()
    assert len(pods) == PODS
    assert all(p["status"]["phase"] == "Pending" and _waiting_reason(p) == "ContainerCreating" for p in pods)


@pytest.mark.parametrize("outage", ["redis-server-stopped", "connections-cut-at-the-first-pod-status-write"])
def test_pods_started_during_a_store_outage_reach_running_without_a_restart(
        server: EmbeddedRedis, outage: str) -> None:
    relay = NetCut(server.port)
    cluster = Cluster(server.url, server.url if outage == "redis-server-stopped" else relay.url)
    try:
        _start_pods(cluster)
        shard = cluster.shard
        if outage == "redis-server-stopped":
            server.stop()
            with pytest.raises(redis.ConnectionError):
                cluster.core.store.redis.ping()  # really gone
        else:
            relay.cut_on(b"o:pods")  # the key of every pod write: the first status write of a tick cuts the link
            for _ in range(10):
                cluster.tick()
                if relay.tripped.is_set():
                    break
            assert relay.tripped.is_set(), "no pod status write in 10 ticks"
            assert shard.stats.status_write_errors > 0
        # The store stays away for 15 cluster seconds, ticked every second: every pod starts meanwhile.
        for _ in range(15):
            cluster.tick()
        stages = {uid: stage for uid, (_name, _node, stage) in shard.pods().items()}
        assert len(stages) == PODS and set(stages.values()) == {"Running"}
        assert shard.stats.status_write_errors > 0
        if outage != "redis-server-stopped":
            # What the outage used to leave behind for good: started pods the store shows as ContainerCreating.
            stranded = [p for p in cluster.pods() if not _running_and_ready(p)]
            assert stranded, "every status got through: the relay did not cut the writes"
            relay.restore()
        else:
            server.start()  # same port, the AOF replayed
        # The first tick with the store back writes every status the kubelet kept.
        cluster.tick()
        pods = cluster.pods()
        assert len(pods) == PODS
        assert [p["metadata"]["name"] for p in pods if not _running_and_ready(p)] == []
        assert shard.stats.reconcile_passes >= 1  # the failed writes scheduled a full reconcile
        # The same shard object carries on: its informers are back too (a new pod is started).
        cluster.core.create(POD, _pod(PODS))
        wait_for(lambda: shard.sync(1), 30, "the shard's informers delivering a pod created after the outage")
        for _ in range(10):
            cluster.step()
            if all(_running_and_ready(p) for p in cluster.pods()):
                break
        assert len(cluster.pods()) == PODS + 1 and all(_running_and_ready(p) for p in cluster.pods())
    finally:
        cluster.close()
        relay.close()


def _conditions(**extra: Any) -> list[Obj]:
    return [{"type": "example.com/gate", "status": "True", "lastProbeTime": None,
             "lastTransitionTime": rfc3339(T0), **extra}]


@pytest.mark.parametrize(("overwrite", "repaired"), [
    ("stale-phase", True),  # someone wrote an old status back: the kubelet's is written again
    ("ready-false", True),  # Ready belongs to the kubelet (PodConditionsByKubelet)
    ("foreign-condition-added", False),  # a readiness gate's condition is not the kubelet's: kept, nothing re-written
], ids=["stale-phase", "ready-false", "foreign-condition-added"])
def test_an_out_of_band_status_change_is_repaired_by_the_next_reconcile(
        cluster: Cluster, overwrite: str, repaired: bool) -> None:
    _start_pods(cluster)
    stale = {p["metadata"]["name"]: p["status"] for p in cluster.pods()}  # Pending, ContainerCreating
    for _ in range(15):
        cluster.step()
    target = cluster.core.get(POD, "default", "p-00")
    assert _running_and_ready(target)
    intended = target["status"]
    if overwrite == "stale-phase":
        status = stale["p-00"]
    elif overwrite == "ready-false":
        status = {**intended, "conditions": [{**c, "status": "False"} if c["type"] == "Ready" else c
                                             for c in intended["conditions"]]}
    else:
        status = {**intended, "conditions": [*intended["conditions"], *_conditions()]}
    cluster.core.update_status(POD, {**target, "status": status})
    writes = cluster.shard.stats.pod_status_writes
    passes = cluster.shard.stats.reconcile_passes
    # Nothing else changes about the pod: only the periodic reconcile can notice, within one sync period.
    for _ in range(int(SYNC_PERIOD)):
        cluster.step()
    assert cluster.shard.stats.reconcile_passes > passes
    now = cluster.core.get(POD, "default", "p-00")["status"]
    if repaired:
        assert now["phase"] == "Running" and _running_and_ready({"status": now})
        assert cluster.shard.stats.pod_status_writes == writes + 1
        assert cluster.shard.stats.reconciled >= 1
    else:
        assert now == status  # the foreign condition stays; the kubelet's part was already right
        assert cluster.shard.stats.pod_status_writes == writes


def test_a_node_marked_unknown_while_the_kubelet_runs_is_reported_ready_at_its_next_status_check(
        cluster: Cluster) -> None:
    cluster.step()
    name = "n-00000"
    node = cluster.core.get(NODE, None, name)
    # What the node lifecycle controller writes when it misses heartbeats (the kubelet is in fact fine).
    unknown = [{**c, "status": "Unknown", "reason": "NodeStatusUnknown",
                "message": "Kubelet stopped posting node status."} for c in node["status"]["conditions"]]
    cluster.core.update_status(NODE, {**node, "status": {**node["status"], "conditions": unknown}})
    # nodeStatusUpdateFrequency is 10 s: at the node's next check the stored status differs from the
    # kubelet's (nodeStatusHasChanged), so it is written then, not after nodeStatusReportFrequency (5 min).
    for _ in range(10):
        cluster.step()
    ready = next(c for c in cluster.core.get(NODE, None, name)["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
