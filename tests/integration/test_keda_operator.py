"""KEDA's operator end to end: a real Redis list, queue-worker pods on a real kubelet shard, the HPA (ManualClock).

A Deployment of ``queue-worker`` pods (each consumes 1 item/s of cluster time from the list
while ready, with real LPOPs) is scaled by a ScaledObject with minReplicaCount 0 on a
``redis`` trigger (listLength 10). Expected behaviour, from KEDA's and the HPA's rules:

* 0 -> 1 at the first poll after items arrive (KEDA's activation: length > activationListLength 0);
* from 1 the HPA takes over with the External metric ``s0-redis-<list>`` (AverageValue 10):
  desired = ceil(depth / 10), bounded by maxReplicaCount; with 500 items that is the max (6)
  as long as more than 50 items wait;
* the workers drain the list; every pushed item is consumed exactly once;
* back to 0 only by KEDA, at the first poll at least cooldownPeriod (300 s) after the last
  poll that saw the list non-empty (``status.lastActiveTime``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from emulator.api import errors
from emulator.api.kinds import DEPLOYMENT, EVENT, HORIZONTALPODAUTOSCALER, POD, SCALEDOBJECT
from emulator.clock import ManualClock, parse_rfc3339
from emulator.controllers.manager import ControllerManager
from emulator.kubelet import queueworker
from emulator.kubelet.shard import KubeletShard, kubelet_shard_config
from emulator.server.core import ServerCore
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

Obj = dict[str, Any]
NODE = "n-00000"
LIST = "keda-jobs"
LIST_LENGTH, MAX_REPLICAS, ITEMS, COOLDOWN, POLLING = 10, 6, 500, 300, 30


@pytest.fixture
def shard(core: ServerCore, clock: ManualClock) -> Iterator[KubeletShard]:
    s = KubeletShard(core, 0, 1, kubelet_shard_config({}, [{"name": "n", "count": 1, "capacity": {"cpu": "64",
                                                             "memory": "256Gi", "pods": "200"}}]), clock)
    s.start(timeout=30)
    yield s
    s.stop()


def worker_deployment(name: str, queue: str) -> Obj:
    labels = {"app": name}
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "replicas": 0, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels, "annotations": {
                "kemu.io/profile": "queue-worker", "kemu.io/queue": queue, "kemu.io/items-per-second": "1",
                "kemu.io/startup-delay": "0s"}},
            "spec": {"containers": [{"name": "worker", "image": "worker:1",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}


def scaled_object(name: str, target: str, triggers: list[Obj], **spec: Any) -> Obj:
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"scaleTargetRef": {"name": target}, "triggers": triggers, **spec}}


def redis_trigger(queue: str, **extra: str) -> Obj:
    return {"type": "redis", "metadata": {"listName": queue, "listLength": str(LIST_LENGTH), **extra}}


def replicas(core: ServerCore, name: str) -> int:
    return int(core.get(DEPLOYMENT, "default", name)["spec"].get("replicas") or 0)


def condition(core: ServerCore, name: str, ctype: str) -> Obj:
    so = core.get(SCALEDOBJECT, "default", name)
    return next((c for c in (so.get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


def events(core: ServerCore, reason: str) -> list[Obj]:
    return [e for e in core.list(EVENT, "default").items if e.get("reason") == reason]


def world(core: ServerCore, clock: ManualClock, shard: KubeletShard | None, seconds: float = 1.0) -> Callable[[], None]:
    """One step of the world: the clock moves, pending pods are bound to the node, the kubelet ticks."""
    def step() -> None:
        clock.advance(seconds)
        if shard is None:
            return
        for pod in core.list(POD, "default").items:
            if not pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp"):
                try:
                    core.bind("default", pod["metadata"]["name"], NODE, uid=pod["metadata"]["uid"])
                except errors.StatusError as e:
                    assert e.code in (404, 409), e
        shard.sync(10)
        shard.tick()
    return step


def test_scale_from_zero_drains_the_list_and_cools_down(
        core: ServerCore, clock: ManualClock, shard: KubeletShard,
        start_manager: Callable[..., ControllerManager]) -> None:
    redis = core.store.redis
    redis.delete(LIST)
    core.create(DEPLOYMENT, worker_deployment("worker", LIST))
    start_manager("deployment", "replicaset", "horizontalpodautoscaling", "keda-operator")
    items = [f"item-{i}" for i in range(ITEMS)]
    redis.rpush(LIST, *items)
    core.create(SCALEDOBJECT, scaled_object("worker", "worker", [redis_trigger(LIST)], minReplicaCount=0,
                                            maxReplicaCount=MAX_REPLICAS, pollingInterval=POLLING,
                                            cooldownPeriod=COOLDOWN))
    step = world(core, clock, shard)

    # The first poll runs at once: active (500 > 0) -> 0 to 1 by KEDA itself.
    wait_for(lambda: replicas(core, "worker") == 1, 20, "KEDA's activation 0 -> 1")
    wait_for(lambda: events(core, "KEDAScaleTargetActivated"), 10, "the activation event")
    activated = events(core, "KEDAScaleTargetActivated")[0]
    assert activated["message"] == "Scaled Deployment default/worker from 0 to 1, triggered by redis"
    hpa = core.get(HORIZONTALPODAUTOSCALER, "default", "keda-hpa-worker")
    assert hpa["spec"]["minReplicas"] == 1 and hpa["spec"]["maxReplicas"] == MAX_REPLICAS
    assert hpa["spec"]["metrics"] == [{"type": "External", "external": {
        "metric": {"name": f"s0-redis-{LIST}", "selector": {"matchLabels": {"scaledobject.keda.sh/name": "worker"}}},
        "target": {"type": "AverageValue", "averageValue": str(LIST_LENGTH)}}}]
    assert condition(core, "worker", "Ready")["status"] == "True"
    assert condition(core, "worker", "Active")["reason"] == "ScalerActive"
    labels = {"namespace": "default", "metric": f"s0-redis-{LIST}", "scaledObject": "worker",
              "scaler": "redisScaler", "triggerIndex": "0", "type": "scaledobject"}
    assert REGISTRY.get_sample_value("keda_scaler_metrics_value", labels) == ITEMS
    assert REGISTRY.get_sample_value("keda_scaler_active", labels) == 1

    # The HPA's count: ceil(depth / 10) bounded by max, while more than max * 10 items wait.
    peak: list[int] = []

    def at_max() -> bool:
        n = replicas(core, "worker")
        peak.append(n)
        return n == min(math.ceil(redis.llen(LIST) / LIST_LENGTH), MAX_REPLICAS) == MAX_REPLICAS
    wait_for(at_max, 120, f"the HPA scaling to min(ceil(depth/{LIST_LENGTH}), {MAX_REPLICAS})", tick=step)
    assert max(peak) == MAX_REPLICAS

    # The workers drain the list.
    wait_for(lambda: redis.llen(LIST) == 0, 240, "the workers draining the list", tick=step)
    emptied_at = clock.now()
    assert queueworker.consumed(redis, core.store.config.prefix)[LIST] == ITEMS
    done = queueworker.done_items(redis, core.store.config.prefix, LIST)
    assert sorted(done) == sorted(items) and len(set(done)) == ITEMS  # none lost, none consumed twice

    # Back to 0 only by KEDA, cooldownPeriod after the last active poll.
    wait_for(lambda: replicas(core, "worker") == 0, 240, "KEDA's deactivation to 0", tick=step)
    wait_for(lambda: events(core, "KEDAScaleTargetDeactivated"), 10, "the deactivation event")
    deactivated = events(core, "KEDAScaleTargetDeactivated")[0]
    assert deactivated["message"].startswith("Deactivated Deployment default/worker from ")
    assert deactivated["message"].endswith(" to 0")
    so = core.get(SCALEDOBJECT, "default", "worker")
    last_active = parse_rfc3339(so["status"]["lastActiveTime"])
    scaled_at = parse_rfc3339(deactivated.get("firstTimestamp") or deactivated["eventTime"])
    assert scaled_at - last_active >= COOLDOWN
    assert scaled_at - emptied_at >= COOLDOWN - POLLING  # the last active poll saw items, <= one interval before
    assert condition(core, "worker", "Active")["reason"] == "ScalerNotActive"
    assert redis.llen(LIST) == 0 and queueworker.consumed(redis, core.store.config.prefix)[LIST] == ITEMS
