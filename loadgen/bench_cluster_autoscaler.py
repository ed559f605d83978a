"""Benchmark: one Cluster Autoscaler scan at 5,000 nodes - scale-up with 1,000 pending pods, and scale-down.

On an embedded Redis: ``--groups`` node groups of the emulated cloud holding
``--nodes`` nodes between them (Node objects written directly, Ready; no
kubelets - the scan reads only the API), every node filled to 90% of its cpu by
bound pods of a few ReplicaSets, and ``--pending`` pods of ``--deployments``
controllers that fit no node, marked Unschedulable as the scheduler marks them.
The real ``cluster-autoscaler`` controller reads it all through its informers;
reported: wall and CPU seconds of the first scan (it scales up), of a second
scan (the new nodes are upcoming: the pods must be found schedulable on them,
not answered twice), split into snapshot / filter-out-schedulable / scale-up /
find-unneeded. Then the scale-down case: the same nodes at 10% cpu (one pod
each), every node a candidate, one scan's find-unneeded simulation.

Last, time to capacity (:func:`time_to_capacity`): a burst of ``--burst`` pods
to all Running on new nodes, with a real kubelet shard and the real scheduler,
reported part by part.

Run: ``.venv/bin/python -m loadgen.bench_cluster_autoscaler [--nodes 5000] [--groups 10] [--pending 1000]
[--burst 200] [--skip-scan]``.
Prints JSON, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from emulator.api.kinds import NODE, POD
from emulator.clock import ManualClock, rfc3339
from emulator.cloud.nodegroups import parse_node_groups
from emulator.cloud.provider import Cloud
from emulator.clusterautoscaler.cloudprovider.kemu import _default_allocatable
from emulator.clusterautoscaler.controller import ClusterAutoscaler
from emulator.controllers.runtime import ControllerContext
from emulator.informers import SharedInformerFactory
from emulator.kubelet import nodes as nd
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig
from emulator.store.store import Store

Obj = dict[str, Any]
T0 = 1_700_000_000.0
TYPES = ("m5.xlarge", "m5.2xlarge", "c5.2xlarge", "r5.xlarge", "m5.4xlarge")


def _node(spec: Any, index: int) -> Obj:
    node = nd.new_pool_node(spec.pool(), index, 0, allocatable_of=_default_allocatable)
    node["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                     "lastHeartbeatTime": rfc3339(T0), "lastTransitionTime": rfc3339(T0)}]
    return node


def _pod(name: str, owner: str, cpu_m: int, mem: str, node: str | None = None) -> Obj:
    body: Obj = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": name, "namespace": "default", "labels": {"app": owner},
                              "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                                                   "uid": f"uid-{owner}", "controller": True}]},
                 "spec": {"containers": [{"name": "app", "image": "nginx",
                                          "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": mem}}}]}}
    if node:
        body["spec"]["nodeName"] = node
    return body


def _cluster(core: ServerCore, n_nodes: int, n_groups: int, fill: float) -> tuple[list[Any], int]:
    groups = [{"name": f"g{i}", "min": 0, "max": n_nodes, "instance_type": TYPES[i % len(TYPES)],
               "price_per_hour": 0.1 * (1 + i), "provisioning_delay": "60s"} for i in range(n_groups)]
    specs = parse_node_groups(groups)
    per = n_nodes // n_groups
    specs = [s.__class__(**{**s.__dict__, "initial_size": per}) for s in specs]
    Cloud(core.store.redis, core.store.config.prefix).register_groups(specs, T0)
    nodes = [_node(s, i) for s in specs for i in range(per)]
    for k in range(0, len(nodes), 1000):
        core.create_many(NODE, nodes[k:k + 1000])
    pods: list[Obj] = []
    for node in nodes:
        cpu = nd.resource_amount("cpu", node["status"]["allocatable"]["cpu"])
        name = node["metadata"]["name"]
        share = int(cpu * fill)
        count = 4 if fill > 0.5 else 1
        for j in range(count):
            pods.append(_pod(f"{name}-{j}", f"rs-{j}", share // count, "1Gi", name))
    for k in range(0, len(pods), 2000):
        core.create_many(POD, pods[k:k + 2000])
    return specs, len(pods)


def _pending(core: ServerCore, count: int, deployments: int) -> None:
    bodies = [_pod(f"pending-{i}", f"deploy-{i % deployments}", 2000 + 250 * (i % deployments) % 2000, "4Gi")
              for i in range(count)]
    created = [p for p in core.create_many(POD, bodies) if isinstance(p, dict)]
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastProbeTime": None,
            "lastTransitionTime": rfc3339(T0), "message": "0/5000 nodes are available: 5000 Insufficient cpu."}
    for p in created:
        core.update_status(POD, {**p, "status": {**(p.get("status") or {}), "phase": "Pending",
                                                 "conditions": [cond]}})


def _autoscaler(core: ServerCore, clock: ManualClock, flags: Obj) -> tuple[ClusterAutoscaler, Any]:
    factory = SharedInformerFactory(core.store, clock=clock)
    ca = ClusterAutoscaler(ControllerContext(core, factory, clock, None, {"cluster_autoscaler": flags}))
    factory.start()
    deadline = time.monotonic() + 300
    while not ca.has_synced():
        if time.monotonic() > deadline:
            raise RuntimeError("informers did not sync")
        time.sleep(0.05)  # a benchmark's pacing, not a test's synchronisation
    if not ca.sync(300):
        raise RuntimeError("informers did not catch up")
    return ca, factory


def _warm(ca: ClusterAutoscaler) -> float:
    """Apply the informers' initial lists to the cache (what ``start()`` does before the first scan)."""
    t = time.perf_counter()
    ca.cache.apply_pending()
    return round(time.perf_counter() - t, 3)


def _timed(ca: ClusterAutoscaler) -> dict[str, Any]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = ca.run_once()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "pending": result.pending,
            "schedulable_on_existing_or_upcoming": result.schedulable,
            "increases": result.scale_up.increases if result.scale_up else {},
            "unneeded": len(result.unneeded), "filter_runs": ca.autoscaler.simulator.filter_runs,
            "parts_s": {k: round(v, 3) for k, v in result.seconds.items()}}


def run(n_nodes: int, n_groups: int, n_pending: int, deployments: int) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": n_nodes, "groups": n_groups, "pending": n_pending}
    for case in ("scale_up", "scale_down"):
        with tempfile.TemporaryDirectory() as tmp:
            server = EmbeddedRedis(RedisServerConfig(data_dir=Path(tmp)))
            url = server.start()
            try:
                clock = ManualClock(T0)
                core = ServerCore(Store.connect(url), clock)
                core.bootstrap()
                t = time.perf_counter()
                _, bound = _cluster(core, n_nodes, n_groups, 0.9 if case == "scale_up" else 0.1)
                if case == "scale_up":
                    _pending(core, n_pending, deployments)
                out[f"{case}_setup_s"] = round(time.perf_counter() - t, 1)
                out[f"{case}_bound_pods"] = bound
                flags = {"expander": "least-waste", "scale-down-enabled": case == "scale_down"}
                ca, factory = _autoscaler(core, clock, flags)
                try:
                    out[f"{case}_cache_warmup_s"] = _warm(ca)
                    out[f"{case}_scan_1"] = _timed(ca)
                    clock.advance(10)
                    ca.sync(60)
                    ca.autoscaler.simulator.filter_runs = 0
                    out[f"{case}_scan_2"] = _timed(ca)
                finally:
                    factory.shutdown()
            finally:
                server.stop()
    return out


def time_to_capacity(n_pods: int, delay: float) -> dict[str, Any]:
    """A burst of ``n_pods`` Unschedulable pods to all Running on new nodes, part by part.

    A real kubelet shard (ManualClock, 1 s ticks) boots the instances, the real scheduler (in-process host)
    marks and binds the pods. Cluster-time parts: the wait for the next scan (at most ``scan-interval``), the
    provisioning delay, pod startup after registration; wall-time parts: the scheduler marking the burst
    Unschedulable, the scan itself, the scheduler binding the pods onto the new nodes.
    """
    from emulator.kubelet.shard import KubeletShard, kubelet_shard_config
    from emulator.scheduler.scheduler import SchedulerOptions
    from emulator.scheduler_host import HostSettings, SchedulerHost

    out: dict[str, Any] = {"pods": n_pods, "provisioning_delay_s": delay, "scan_interval_s": 10.0}
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(RedisServerConfig(data_dir=Path(tmp)))
        url = server.start()
        try:
            clock = ManualClock(T0)
            store = Store.connect(url)
            core = ServerCore(store, clock)
            core.bootstrap()
            shard = KubeletShard(core, 0, 1, kubelet_shard_config({}, []), clock)
            shard.start(timeout=60)
            Cloud(store.redis, store.config.prefix).register_groups(parse_node_groups([
                {"name": "web", "min": 0, "max": 200, "instance_type": "m5.xlarge", "price_per_hour": 0.192,
                 "provisioning_delay": f"{delay}s"}]), T0)
            ca, factory = _autoscaler(core, clock, {"expander": "least-waste", "scale-down-enabled": False})
            host = SchedulerHost(HostSettings(url, prefix=store.config.prefix), [SchedulerOptions()])
            host.start(sync_timeout=60)
            try:
                bodies = [_pod(f"burst-{i}", "burst", 500, "1Gi") for i in range(n_pods)]
                for body in bodies:
                    body["metadata"]["annotations"] = {"kemu.io/startup-delay": "0s"}
                t = time.perf_counter()
                core.create_many(POD, bodies)

                def count(pred: Any) -> int:
                    return sum(1 for p in core.list(POD, "default").items if pred(p))

                def unschedulable(p: Obj) -> bool:
                    return any(c.get("reason") == "Unschedulable" for c in p["status"].get("conditions") or ())

                while count(unschedulable) < n_pods:
                    time.sleep(0.01)  # a benchmark's pacing, not a test's synchronisation
                out["scheduler_marks_unschedulable_wall_s"] = round(time.perf_counter() - t, 3)
                ca.sync(60)
                ca.cache.apply_pending()
                t = time.perf_counter()
                result = ca.run_once()
                out["scan_wall_s"] = round(time.perf_counter() - t, 3)
                out["nodes_added"] = result.scale_up.increases if result.scale_up else {}
                start = clock.now()
                while not [n for n in core.list(NODE).items if n["metadata"]["labels"].get("kemu.io/node-group")]:
                    shard.sync(10)
                    clock.advance(1)
                    shard.tick()
                out["provisioning_cluster_s"] = round(clock.now() - start, 1)
                # The scheduler (wall time) binds the burst onto the new nodes; the clock stands still meanwhile.
                wall = time.perf_counter()
                while count(lambda p: bool(p["spec"].get("nodeName"))) < n_pods:
                    time.sleep(0.01)  # a benchmark's pacing, not a test's synchronisation
                out["scheduler_binds_wall_s"] = round(time.perf_counter() - wall, 3)
                registered = clock.now()
                while count(lambda p: p["status"].get("phase") == "Running") < n_pods:
                    shard.sync(10)
                    clock.advance(1)
                    shard.tick()
                out["pod_startup_cluster_s"] = round(clock.now() - registered, 1)
                out["total_cluster_s_worst_case"] = round(out["scan_interval_s"] + out["provisioning_cluster_s"]
                                                          + out["pod_startup_cluster_s"], 1)
            finally:
                host.stop()
                factory.shutdown()
                shard.stop()
        finally:
            server.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--groups", type=int, default=10)
    p.add_argument("--pending", type=int, default=1000)
    p.add_argument("--deployments", type=int, default=20)
    p.add_argument("--burst", type=int, default=200, help="pods of the time-to-capacity case (0: skip it)")
    p.add_argument("--provisioning-delay", type=float, default=60.0)
    p.add_argument("--skip-scan", action="store_true", help="only the time-to-capacity case")
    args = p.parse_args(argv)
    out = {} if args.skip_scan else run(args.nodes, args.groups, args.pending, args.deployments)
    if args.burst:
        out["time_to_capacity"] = time_to_capacity(args.burst, args.provisioning_delay)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
