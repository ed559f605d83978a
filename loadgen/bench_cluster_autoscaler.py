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

Run: ``.venv/bin/python -m loadgen.bench_cluster_autoscaler [--nodes 5000] [--groups 10] [--pending 1000]``.
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--groups", type=int, default=10)
    p.add_argument("--pending", type=int, default=1000)
    p.add_argument("--deployments", type=int, default=20)
    args = p.parse_args(argv)
    print(json.dumps(run(args.nodes, args.groups, args.pending, args.deployments), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
