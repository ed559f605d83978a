"""Benchmark: the KEDA operator with 500 ScaledObjects polling every 30 s of cluster time.

``--scaledobjects`` (500) Deployments (0 replicas, no pods: no Deployment controller runs,
so KEDA's activation only changes ``spec.replicas``) each scaled by one ScaledObject on an
embedded Redis in a temporary directory: 80 % ``redis`` triggers on their own list (every
other list holds 25 items, so half the objects activate 0 -> 1 at their first poll), 10 %
``redis-streams`` (pending entries of a consumer group), 10 % ``kubernetes-workload``. The
operator runs in a controller manager (``keda-operator`` only, unless ``--with-hpa``) on the
system clock at ``--clock-speed`` (1) for ``--seconds`` (120) of cluster time.

Reported, from the operator's own samples: per scaler type the read p50 / p99 (wall ms, one
``metrics_and_activity`` call: a Redis round trip or a cache read); polls; poll lateness
p50 / p99 / max in cluster seconds (start of a poll minus when it was due: KEDA's
``keda_internal_scale_loop_latency_seconds``) and how many polls were late by more than one
``pollingInterval``; and the reaction at 0 -> 1: items pushed onto an idle object's list and
the time until KEDA set its Deployment to 1 replica (cluster and wall seconds) — bounded by
the pollingInterval, as upstream; and, on a separate small cluster with a real kubelet shard,
items pushed -> KEDA's 0 -> 1 -> the first queue-worker pod Ready (cluster and wall seconds).
Run: ``.venv/bin/python -m loadgen.bench_keda
[--scaledobjects 500] [--seconds 120] [--clock-speed 1] [--with-hpa] [--json out.json]``.
Prints numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from emulator.api.kinds import DEPLOYMENT, POD, SCALEDOBJECT
from emulator.clock import SystemClock
from emulator.controllers.manager import ControllerManager, ManagerConfig
from loadgen.benchkit import server_core

Obj = dict[str, Any]
NAMESPACE = "default"
POLLING = 30


def _deployment(i: int) -> Obj:
    labels = {"app": f"w{i}"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"w{i}", "namespace": NAMESPACE},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "worker", "image": "worker:1"}]}}}}


def _trigger(i: int) -> Obj:
    if i % 10 == 8:
        return {"type": "redis-streams", "metadata": {"stream": f"bench-s{i}", "consumerGroup": "g",
                                                       "pendingEntriesCount": "5"}}
    if i % 10 == 9:
        return {"type": "kubernetes-workload", "metadata": {"podSelector": f"app=w{i}", "value": "1"}}
    return {"type": "redis", "metadata": {"listName": f"bench-q{i}", "listLength": "10"}}


def _scaled_object(i: int) -> Obj:
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": f"w{i}", "namespace": NAMESPACE},
            "spec": {"scaleTargetRef": {"name": f"w{i}"}, "minReplicaCount": 0, "maxReplicaCount": 10,
                     "pollingInterval": POLLING, "triggers": [_trigger(i)]}}


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def run(count: int, seconds: float, speed: float, with_hpa: bool) -> dict[str, Any]:
    clock = SystemClock(speed)
    with server_core(clock) as core:
        store = core.store
        r = store.redis
        for i in range(count):
            if i % 10 == 8:
                r.xadd(f"bench-s{i}", {"n": 1})
                r.xgroup_create(f"bench-s{i}", "g", id="0")
            elif i % 2 == 0 and i % 10 != 9:
                r.rpush(f"bench-q{i}", *range(25))
        for start in range(0, count, 100):
            core.create_many(DEPLOYMENT, [_deployment(i) for i in range(start, min(start + 100, count))])
        controllers = ("keda-operator", "horizontalpodautoscaling") if with_hpa else ("keda-operator",)
        manager = ControllerManager(core, ManagerConfig(leader_elect=False, events=True,
                                                        cluster_state_metrics=False, controllers=controllers))
        manager.start()
        assert manager.wait_active(120), "controller manager did not start"
        operator: Any = manager.controllers()["keda-operator"]
        for start in range(0, count, 100):
            core.create_many(SCALEDOBJECT, [_scaled_object(i) for i in range(start, min(start + 100, count))])
        began = clock.now()
        # Reaction at 0 -> 1: an idle object (odd index, redis trigger) gets items half way through.
        probe = next(i for i in range(count // 2, count) if i % 2 == 1 and i % 10 < 8)
        reaction: dict[str, float] = {}
        while clock.now() - began < seconds:
            if not reaction and clock.now() - began >= seconds / 2:
                r.rpush(f"bench-q{probe}", *range(40))
                reaction = {"pushed_cluster": clock.now(), "pushed_wall": time.monotonic()}
            if reaction and "cluster_s" not in reaction and \
                    core.get(DEPLOYMENT, NAMESPACE, f"w{probe}")["spec"].get("replicas") == 1:
                reaction["cluster_s"] = clock.now() - reaction["pushed_cluster"]
                reaction["wall_s"] = time.monotonic() - reaction["pushed_wall"]
            time.sleep(0.05)  # sampling the probe's replicas (the benchmark's own load kept small)
        stats = operator.stats
        lateness = list(stats.lateness)
        active = sum(1 for d in core.list(DEPLOYMENT, NAMESPACE).items if d["spec"].get("replicas"))
        ready = sum(1 for so in core.list(SCALEDOBJECT, NAMESPACE).items
                    if any(c["type"] == "Ready" and c["status"] == "True"
                           for c in (so.get("status") or {}).get("conditions") or []))
        manager.stop()
        out: dict[str, Any] = {
            "scaledobjects": count, "cluster_seconds": seconds, "clock_speed": speed, "with_hpa": with_hpa,
            "polls": stats.polls, "polls_per_cluster_second": stats.polls / seconds,
            "lateness_p50_s": _percentile(lateness, 50), "lateness_p99_s": _percentile(lateness, 99),
            "lateness_max_s": max(lateness, default=0.0),
            "polls_late_by_more_than_interval": sum(1 for x in lateness if x > POLLING),
            "ready": ready, "deployments_active": active,
            "reaction_0_to_1_cluster_s": reaction.get("cluster_s", -1.0),
            "reaction_0_to_1_wall_s": reaction.get("wall_s", -1.0),
        }
        for kind, samples in sorted(stats.reads.items()):
            values = list(samples)
            out[f"read_{kind}_n"] = len(values)
            out[f"read_{kind}_p50_ms"] = _percentile(values, 50) * 1e3
            out[f"read_{kind}_p99_ms"] = _percentile(values, 99) * 1e3
        out["pods"] = len(core.list(POD, NAMESPACE).items)
        return out


def first_worker_ready(speed: float, polling: int = POLLING) -> dict[str, float]:
    """Items pushed -> KEDA's 0 -> 1 -> the first queue-worker pod Ready, on a real kubelet shard.

    One ScaledObject (redis trigger) over a Deployment of ``queue-worker`` pods; the Deployment
    and ReplicaSet controllers create the pod, a binder plays the scheduler, an in-process kubelet
    shard (one node) runs it. The items arrive at a random point of the polling cycle, so the
    reaction is up to one pollingInterval plus the pod's start.
    """
    from emulator.api.kinds import NODE
    from emulator.kubelet.shard import KubeletShard, kubelet_shard_config

    clock = SystemClock(speed)
    with server_core(clock) as core:
        store = core.store
        shard = KubeletShard(core, 0, 1, kubelet_shard_config({}, [{"name": "n", "count": 1}]), clock)
        shard.start(timeout=60)
        body = _deployment(0)
        body["spec"]["template"]["metadata"]["annotations"] = {
            "kemu.io/profile": "queue-worker", "kemu.io/queue": "ready-q", "kemu.io/startup-delay": "1s"}
        core.create(DEPLOYMENT, body)
        manager = ControllerManager(core, ManagerConfig(leader_elect=False, cluster_state_metrics=False,
                                                        controllers=("deployment", "replicaset",
                                                                     "keda-operator")))
        manager.start()
        assert manager.wait_active(120), "controller manager did not start"
        so = _scaled_object(0)
        so["spec"]["triggers"] = [{"type": "redis", "metadata": {"listName": "ready-q", "listLength": "10"}}]
        so["spec"]["pollingInterval"] = polling
        core.create(SCALEDOBJECT, so)
        time.sleep(polling / speed / 3)  # the items arrive a third into a polling cycle
        pushed_cluster, pushed_wall = clock.now(), time.monotonic()
        store.redis.rpush("ready-q", *range(50))
        out: dict[str, float] = {}
        deadline = time.monotonic() + 3 * polling / speed + 60
        while time.monotonic() < deadline and "ready_cluster_s" not in out:
            nodes = [n["metadata"]["name"] for n in core.list(NODE).items]
            for pod in core.list(POD, NAMESPACE).items:
                if nodes and not pod["spec"].get("nodeName"):
                    core.bind(NAMESPACE, pod["metadata"]["name"], nodes[0], uid=pod["metadata"]["uid"])
                ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                            for c in (pod.get("status") or {}).get("conditions") or [])
                if ready:
                    out["ready_cluster_s"] = clock.now() - pushed_cluster
                    out["ready_wall_s"] = time.monotonic() - pushed_wall
            if "scaled_cluster_s" not in out and \
                    core.get(DEPLOYMENT, NAMESPACE, "w0")["spec"].get("replicas") == 1:
                out["scaled_cluster_s"] = clock.now() - pushed_cluster
            shard.tick()
            time.sleep(0.05)  # the kubelet's tick period here; sampling, not a test wait
        manager.stop()
        shard.stop()
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scaledobjects", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=120.0, help="cluster seconds to run")
    parser.add_argument("--clock-speed", type=float, default=1.0)
    parser.add_argument("--with-hpa", action="store_true", help="also run the HPA controller on the KEDA HPAs")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    result = run(args.scaledobjects, args.seconds, args.clock_speed, args.with_hpa)
    for key, value in first_worker_ready(args.clock_speed).items():
        result[f"push_to_{key}"] = value
    for key, value in result.items():
        print(f"{key:36s} {value:.3f}" if isinstance(value, float) else f"{key:36s} {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
