"""Descheduler benchmark: one descheduling pass over a large cluster.

    .venv/bin/python -m loadgen.bench_descheduler [--nodes 5000] [--pods 100000] [--passes 3] [--plugins A,B]
        [--churn 0.01] [--python-gc] [--json out.json]

Builds a heterogeneous cluster as the pod informer would hold it (every pod
with a uid and resourceVersion): nodes of 8-64 cores in three zones, 2 %
tainted ``dedicated=maintenance:NoSchedule``; pods of ReplicaSets of ten
replicas, 100m-2 cpu each, a tenth of the nodes "hot" (three times the pods),
some pods with required zone affinity, some with a zone topology spread
constraint, some with required hostname anti-affinity, a few with many
restarts or Failed; priorities 0-1000. Then runs a policy with every plugin a
production profile would enable (RemovePodsViolatingNodeTaints,
RemovePodsViolatingNodeAffinity, RemovePodsViolatingInterPodAntiAffinity,
RemovePodsHavingTooManyRestarts, RemoveFailedPods; RemoveDuplicates,
LowNodeUtilization, RemovePodsViolatingTopologySpreadConstraint) in dry-run
mode (the evictor counts, posts nothing: this measures the descheduler, not
the store), ``--passes`` times on the same caches, as the controller does
every interval.

The garbage collector is set as in the controller manager's own process, which
hosts the descheduler (:mod:`emulator.gctune`): raised thresholds, and the
caches frozen out of the collector's walk once built, as the manager does once
its informers have synced. ``--python-gc`` keeps CPython's defaults instead:
then a warm pass that sets off a full collection over the 100,000 cached pods
pays ~0.5-1 s for it (about every second pass). Reported: the snapshot build
(grouping the informer's pods by node), each pass's wall time and process CPU
time (steadier on a shared machine; the first pass computes every pod's
requests, later ones reuse the (uid, resourceVersion) cache, and each node
whose pods are the same objects at the same versions reuses what the last pass
derived for it: the descheduler's PodIndex swaps only the changed nodes' parts
of its cross-node indexes), how many nodes each pass indexed again, per-plugin
wall seconds of the last pass, and how many pods each plugin would evict.
``--churn F`` replaces that fraction of the pods before every warm pass with a
new object at a new resourceVersion (the same content, so the evictions stay
the same), as the informer does for pods updated between two passes.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from collections import Counter
from typing import Any

from emulator import gctune
from emulator.clock import ManualClock, rfc3339
from emulator.descheduler.api import load_policy
from emulator.descheduler.descheduler import Descheduler
from emulator.descheduler.framework import ClusterSnapshot

ZONES = ("zone-a", "zone-b", "zone-c")
T0 = 1_700_000_000.0

POLICY: dict[str, Any] = {
    "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
    "profiles": [{
        "name": "bench",
        "pluginConfig": [
            {"name": "DefaultEvictor", "args": {"evictLocalStoragePods": True}},
            {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 20, "memory": 20, "pods": 20},
                                                    "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50}}},
            {"name": "RemovePodsHavingTooManyRestarts", "args": {"podRestartThreshold": 100}},
        ],
        "plugins": {
            "deschedule": {"enabled": ["RemovePodsViolatingNodeTaints", "RemovePodsViolatingNodeAffinity",
                                       "RemovePodsViolatingInterPodAntiAffinity", "RemovePodsHavingTooManyRestarts",
                                       "RemoveFailedPods"]},
            "balance": {"enabled": ["RemoveDuplicates", "LowNodeUtilization",
                                    "RemovePodsViolatingTopologySpreadConstraint"]},
        },
    }],
}


def make_nodes(n: int, rng: random.Random) -> list[dict[str, Any]]:
    nodes = []
    for i in range(n):
        cpu = rng.choice((8, 16, 32, 64))
        alloc = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"}
        spec: dict[str, Any] = {}
        if rng.random() < 0.02:
            spec["taints"] = [{"key": "dedicated", "value": "maintenance", "effect": "NoSchedule"}]
        nodes.append({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": f"node-{i:05d}", "uid": f"n-{i}", "resourceVersion": "1",
                                   "labels": {"topology.kubernetes.io/zone": ZONES[i % 3],
                                              "kubernetes.io/hostname": f"node-{i:05d}"}},
                      "spec": spec, "status": {"capacity": dict(alloc), "allocatable": alloc,
                                               "conditions": [{"type": "Ready", "status": "True"}]}})
    return nodes


def make_pods(n: int, nodes: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    names = [nd["metadata"]["name"] for nd in nodes]
    hot = names[: max(1, len(names) // 10)]
    pods = []
    for i in range(n):
        rs = i // 10
        node = rng.choice(hot) if rng.random() < 0.25 else rng.choice(names)
        cpu_m = rng.choice((100, 250, 500, 1000, 2000))
        labels = {"app": f"app-{rs}"}
        spec: dict[str, Any] = {
            "nodeName": node, "priority": rng.choice((0, 0, 100, 1000)),
            "containers": [{"name": "app", "image": f"img-{rs % 50}:1",
                            "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": f"{cpu_m * 2}Mi"}}}]}
        r = rng.random()
        if r < 0.05:
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                                             "values": [rng.choice(ZONES)]}]}]}}}
        elif r < 0.10:
            spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                  "whenUnsatisfiable": "DoNotSchedule",
                                                  "labelSelector": {"matchLabels": labels}}]
        elif r < 0.12:
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": labels}}]}}
        phase = "Failed" if rng.random() < 0.002 else "Running"
        restarts = 150 if rng.random() < 0.002 else 0
        pods.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"pod-{i:06d}", "namespace": f"ns-{rs % 20}", "uid": f"p-{i}",
                                  "resourceVersion": str(i + 10), "labels": labels,
                                  "creationTimestamp": rfc3339(T0 - rng.uniform(0, 86400)),
                                  "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                       "name": f"rs-{rs}", "uid": f"rs-{rs}", "controller": True}]},
                     "spec": spec,
                     "status": {"phase": phase, "startTime": rfc3339(T0 - 3600),
                                "containerStatuses": [{"name": "app", "restartCount": restarts, "ready": True}]}})
    return pods


def updated(pod: dict[str, Any]) -> dict[str, Any]:
    """The informer's copy of ``pod`` after an update that changed nothing the descheduler reads."""
    meta = {**pod["metadata"], "resourceVersion": pod["metadata"]["resourceVersion"] + "1"}
    return {**pod, "metadata": meta}


def strategy_seconds() -> dict[str, float]:
    from prometheus_client import REGISTRY

    out: dict[str, float] = {}
    for metric in REGISTRY.collect():
        if metric.name == "descheduler_descheduler_strategy_duration_seconds":
            for s in metric.samples:
                if s.name.endswith("_sum"):
                    out[s.labels["strategy"]] = s.value
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--pods", type=int, default=100_000)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--plugins", help="comma-separated plugins to keep from the policy (default: all of them), "
                                     "e.g. LowNodeUtilization for the utilization classification alone")
    p.add_argument("--churn", type=float, default=0.0,
                   help="fraction of the pods replaced by a new version (same content) before every warm pass")
    p.add_argument("--python-gc", action="store_true",
                   help="CPython's collector defaults instead of the controller manager process's settings")
    p.add_argument("--json", help="write the results to this file")
    args = p.parse_args(argv)
    if not args.python_gc:
        gctune.tune_for_caches()
    rng = random.Random(args.seed)
    nodes = make_nodes(args.nodes, rng)
    pods = make_pods(args.pods, nodes, rng)
    clock = ManualClock(T0)
    policy = json.loads(json.dumps(POLICY))
    if args.plugins:
        keep = set(args.plugins.split(","))
        for point in policy["profiles"][0]["plugins"].values():
            point["enabled"] = [name for name in point["enabled"] if name in keep]
    descheduler = Descheduler(load_policy(policy), clock, dry_run=True)
    if not args.python_gc:
        gctune.freeze_synced_caches()  # the nodes and pods are the informers' synced caches

    started = time.perf_counter()
    snapshot = ClusterSnapshot.build(nodes, pods)
    build = time.perf_counter() - started
    passes: list[float] = []
    cpu_s: list[float] = []
    by_plugin: Counter[str] = Counter()
    per_plugin: dict[str, float] = {}
    reindexed: list[int] = []
    churn_rng = random.Random(args.seed + 1)
    for n in range(args.passes):
        if n and args.churn > 0:
            for i in churn_rng.sample(range(len(pods)), int(len(pods) * args.churn)):
                pods[i] = updated(pods[i])
        snapshot = ClusterSnapshot.build(nodes, pods)
        before = strategy_seconds()
        started, cpu = time.perf_counter(), time.process_time()
        result = descheduler.run_once(snapshot)
        passes.append(time.perf_counter() - started)
        cpu_s.append(time.process_time() - cpu)
        reindexed.append(descheduler.pod_index.changed_nodes)
        after = strategy_seconds()
        per_plugin = {k: round(v - before.get(k, 0.0), 4) for k, v in after.items()}
        by_plugin = Counter(e.strategy for e in result.evicted)
    out = {"nodes": args.nodes, "pods": args.pods, "plugins": args.plugins or "all", "gc_threshold": gc.get_threshold(),
           "snapshot_build_s": round(build, 4),
           "pass_s": [round(s, 4) for s in passes], "first_pass_s": round(passes[0], 4),
           "best_pass_s": round(min(passes), 4), "pass_cpu_s": [round(s, 4) for s in cpu_s],
           "warm_cpu_median_s": round(statistics.median(cpu_s[1:]), 4) if len(cpu_s) > 1 else None,
           "churn": args.churn, "nodes_reindexed": reindexed, "evictions": len(result.evicted),
           "plugin_s_last_pass": per_plugin,
           "evictions_per_plugin": dict(by_plugin), "errors": result.errors}
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
