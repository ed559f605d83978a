"""Scheduler core benchmark: one scheduling cycle (PreFilter, Filter, PreScore, Score, select) per pod.

    .venv/bin/python -m loadgen.bench_scheduler_core [--nodes 1000,5000,20000] [--pods 2000] [--json out.json]

For each cluster size it builds a heterogeneous cluster in a
:class:`~emulator.scheduler.framework.snapshot.Snapshot` (node sizes 8-64
cores, three zones, a tenth of the nodes with 8 GPUs, some PreferNoSchedule
and NoSchedule taints, cached images, four bound background pods per node),
then streams ``--pods`` pods through
``Framework.schedule_one`` with the default profile (every ported plugin),
applying each placement to the snapshot (``Snapshot.assume``) before the
next pod, as a scheduler's cache does. The pods vary: requests from 100m to
4 cores, a twentieth asking for a GPU, some with tolerations, zone
nodeSelectors or preferred zone affinity, images from a small catalogue.

Reported per size: µs per pod (mean, p50, p99) for the cycle alone
(``PodInfo`` built beforehand) and with ``PodInfo`` construction and the
``assume``, pods/s, the process CPU time per pod (steadier than wall time on
a shared machine), how many pods did not fit, and the cost of the pure
``with_pod`` a Cluster Autoscaler simulation uses. ``--reference`` also runs
the per-node (non-vectorised) path on the first size, for the speed-up.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any

import numpy as np

from emulator.scheduler import Snapshot, new_framework
from emulator.scheduler.framework.types import FitError, PodInfo

ZONES = ("zone-a", "zone-b", "zone-c")
IMAGES = (("nginx:1.27", 190 * 2**20), ("python:3.11", 1000 * 2**20), ("redis:7", 130 * 2**20),
          ("pytorch/pytorch:2.3", 6000 * 2**20), ("busybox:1.36", 4 * 2**20))


def make_nodes(n: int, rng: random.Random) -> list[dict[str, Any]]:
    nodes = []
    for i in range(n):
        cpu = rng.choice((8, 16, 32, 64))
        allocatable: dict[str, str] = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110",
                                       "ephemeral-storage": "100Gi"}
        gpu = i % 10 == 0
        if gpu:
            allocatable["nvidia.com/gpu"] = "8"
        spec: dict[str, Any] = {}
        taints = []
        if gpu:
            taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "PreferNoSchedule"})
        if rng.random() < 0.02:
            taints.append({"key": "dedicated", "value": "infra", "effect": "NoSchedule"})
        if taints:
            spec["taints"] = taints
        images = [{"names": [name], "sizeBytes": size} for name, size in IMAGES if rng.random() < 0.3]
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"node-{i:05d}", "labels": {
                "kubernetes.io/hostname": f"node-{i:05d}", "topology.kubernetes.io/zone": ZONES[i % 3],
                "node.kubernetes.io/instance-type": f"m.{cpu}x"}},
            "spec": spec,
            "status": {"capacity": dict(allocatable), "allocatable": allocatable, "images": images},
        })
    return nodes


def make_pod(i: int, rng: random.Random, node: str | None = None) -> dict[str, Any]:
    cpu = rng.choice(("100m", "250m", "500m", "1", "2", "4"))
    memory = rng.choice(("128Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi"))
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    spec: dict[str, Any] = {}
    if rng.random() < 0.05:
        requests["nvidia.com/gpu"] = "1"
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    roll = rng.random()
    if roll < 0.1:
        spec["nodeSelector"] = {"topology.kubernetes.io/zone": rng.choice(ZONES)}
    elif roll < 0.2:
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [rng.choice(ZONES)]}]}}]}}
    if node:
        spec["nodeName"] = node
    image = rng.choice(IMAGES)[0]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i}", "namespace": "bench", "labels": {"app": f"app-{i % 50}"}},
            "spec": {"containers": [{"name": "main", "image": image, "resources": {"requests": requests}}], **spec}}


def build_cluster(n: int, seed: int) -> Snapshot:
    """Nodes plus four background pods per node, bound round-robin (overflowing ones dropped)."""
    rng = random.Random(seed)
    nodes = make_nodes(n, rng)
    background = []
    for i in range(n * 4):
        background.append(make_pod(10**7 + i, rng, node=nodes[(i * 7) % n]["metadata"]["name"]))
    snapshot = Snapshot.build(nodes, background)
    # Drop background pods that overflowed a node, so the snapshot is a valid cluster.
    over = np.flatnonzero(snapshot.requested("cpu") > snapshot.allocatable("cpu"))
    for index in over.tolist():
        while snapshot.requested("cpu")[index] > snapshot.allocatable("cpu")[index]:
            snapshot.forget(snapshot.pods_on(index)[-1], index)
    return snapshot


def bench_size(n: int, pods: int, seed: int, vectorised: bool = True) -> dict[str, Any]:
    snapshot = build_cluster(n, seed)
    rng = random.Random(seed + 1)
    stream = [make_pod(i, rng) for i in range(pods)]
    framework = new_framework(rng=random.Random(seed), vectorised=vectorised)

    # Warm the per-key label columns and taint groups, as a long-running scheduler would have them.
    framework.schedule_one(make_pod(-1, random.Random(0)), snapshot.fork())

    cycle_us: list[float] = []
    unschedulable = 0
    cpu_start = time.process_time()
    start = time.perf_counter()
    for raw in stream:
        info = PodInfo.of(raw)
        t0 = time.perf_counter()
        result = framework.schedule_one(info, snapshot)
        cycle_us.append((time.perf_counter() - t0) * 1e6)
        if isinstance(result, FitError):
            unschedulable += 1
        else:
            snapshot.assume(info, result.node_index)
    total = time.perf_counter() - start
    cpu_total = time.process_time() - cpu_start

    probe = PodInfo.of(make_pod(-2, random.Random(1)))
    t0 = time.perf_counter()
    reps = 200
    for _ in range(reps):
        snapshot.with_pod(probe, 0)
    with_pod_us = (time.perf_counter() - t0) / reps * 1e6

    cycles = np.asarray(cycle_us)
    return {
        "nodes": n,
        "pods": pods,
        "vectorised": vectorised,
        "cycle_us_mean": round(float(cycles.mean()), 1),
        "cycle_us_p50": round(float(np.percentile(cycles, 50)), 1),
        "cycle_us_p99": round(float(np.percentile(cycles, 99)), 1),
        "per_pod_us_with_podinfo_and_assume": round(total / pods * 1e6, 1),
        "pods_per_s": round(pods / total),
        "cpu_us_per_pod": round(cpu_total / pods * 1e6, 1),
        "unschedulable": unschedulable,
        "with_pod_us": round(with_pod_us, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="1000,5000,20000", help="comma-separated cluster sizes")
    ap.add_argument("--pods", type=int, default=2000, help="pods streamed per cluster size")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--reference", action="store_true", help="also time the per-node path on the first size")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args(argv)

    sizes = [int(s) for s in args.nodes.split(",") if s]
    results = []
    for n in sizes:
        row = bench_size(n, args.pods, args.seed)
        results.append(row)
        print(f"{n:>6} nodes: cycle {row['cycle_us_mean']:>7.1f} µs/pod (p50 {row['cycle_us_p50']:.1f}, "
              f"p99 {row['cycle_us_p99']:.1f}); with PodInfo+assume {row['per_pod_us_with_podinfo_and_assume']:.1f} "
              f"µs/pod = {row['pods_per_s']} pods/s (process CPU {row['cpu_us_per_pod']:.1f} µs/pod); "
              f"unschedulable {row['unschedulable']}; "
              f"with_pod {row['with_pod_us']:.1f} µs", flush=True)
    if args.reference and sizes:
        row = bench_size(sizes[0], max(50, args.pods // 10), args.seed, vectorised=False)
        results.append(row)
        print(f"{sizes[0]:>6} nodes, per-node reference path: cycle {row['cycle_us_mean']:.1f} µs/pod "
              f"(p50 {row['cycle_us_p50']:.1f})", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
