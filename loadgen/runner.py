"""``kemu run SCENARIO``: bring a cluster up, drive its workload, print the summary.

Today's run: the cluster (Redis + store) comes up, nodes and pods are created
through the server core in batches, one watcher follows every pod event and
checks that each ADDED arrives exactly once and in resourceVersion order, the
pods are listed back, and a summary is printed (and written as JSON with
``--output``). Later issues add scheduling, kubelets and controllers to the
same run.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from emulator.api.errors import StatusError
from emulator.api.kinds import NAMESPACE, NODE, POD
from emulator.cluster import LocalCluster
from emulator.config import Config
from emulator.server.core import ServerCore
from emulator.store.store import WatchEvent
from loadgen.scenario import Scenario, ScenarioError, WorkloadSpec


def node_manifest(name: str, cpu: str, memory: str, pods: int, zone: str) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "topology.kubernetes.io/zone": zone, "node.kubernetes.io/instance-type": "kemu.standard"}
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    return {"metadata": {"name": name, "labels": labels}, "spec": {},
            "status": {"capacity": capacity, "allocatable": dict(capacity)}}


def pod_manifest(name: str, namespace: str, cpu: str, memory: str) -> dict[str, Any]:
    container = {"name": "app", "image": "registry.k8s.io/pause:3.9",
                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    return {"metadata": {"name": name, "namespace": namespace, "labels": {"app": "loadgen"}},
            "spec": {"containers": [container]}}


def pod_stream(w: WorkloadSpec, seed: int) -> list[dict[str, Any]]:
    """The scenario's pods, deterministic for (scenario, seed)."""
    rng = random.Random(seed)
    return [pod_manifest(f"pod-{i:06d}", f"load-{i % w.namespaces}", rng.choice(w.cpu), rng.choice(w.memory))
            for i in range(w.pods)]


@dataclass
class WatchRecorder:
    """Follows pod events in a thread; records arrival latencies and ordering violations."""

    core: ServerCore
    since_rv: int
    sent_at: dict[str, float] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)
    out_of_order: int = 0
    duplicates: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    expected: int = 0

    def run(self) -> None:
        watch = self.core.watch(POD, self.since_rv)
        last = self.since_rv
        while not self.stop.is_set():
            for ev in watch.next_batch(timeout=0.2):
                self._record(ev, last)
                last = ev.rv
            if self.expected and len(self.seen) >= self.expected:
                self.done.set()

    def _record(self, ev: WatchEvent, last: int) -> None:
        now = time.perf_counter()
        if ev.rv <= last:
            self.out_of_order += 1
        if ev.type != "ADDED":
            return
        name = ev.object["metadata"]["name"]
        if name in self.seen:
            self.duplicates += 1
        self.seen[name] = ev.rv
        sent = self.sent_at.get(name)
        if sent is not None:
            self.latencies.append(now - sent)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_scenario(path: Path, cfg: Config, seed: int | None = None, output: str | None = None) -> int:
    try:
        scenario = Scenario.load(path)
    except ScenarioError as e:
        print(f"kemu: error: {e}", file=sys.stderr)
        return 1
    if seed is not None:
        scenario = replace(scenario, seed=seed)
    with tempfile.TemporaryDirectory(prefix="kemu-run-") as tmp:
        if not cfg.redis_url:
            cfg = replace(cfg, data_dir=Path(tmp) / "redis")
        with LocalCluster(cfg) as cluster:
            assert cluster.core is not None
            summary = _drive(cluster.core, scenario)
            if cluster.api_url:
                summary["kubectl"] = _show_with_kubectl(cluster.write_kubeconfig(Path(tmp) / "kubeconfig"),
                                                        scenario.workload.pods)
    _print_summary(summary)
    if output:
        Path(output).write_text(json.dumps(summary, indent=2))
    return 0 if summary["watch"]["complete"] else 2


def _drive(core: ServerCore, scenario: Scenario) -> dict[str, Any]:
    c, w = scenario.cluster, scenario.workload
    t0 = time.perf_counter()
    for i in range(w.namespaces):
        core.create(NAMESPACE, {"metadata": {"name": f"load-{i}"}})
    nodes = [node_manifest(f"node-{i:05d}", c.node_cpu, c.node_memory, c.node_pods, f"zone-{chr(97 + i % c.zones)}")
             for i in range(c.nodes)]
    failures = _count_errors(core.create_many(NODE, nodes))

    recorder = WatchRecorder(core, core.store.current_rv(), expected=w.pods)
    watcher = threading.Thread(target=recorder.run, name="pod-watcher", daemon=True)
    watcher.start()
    pods = pod_stream(w, scenario.seed)
    t_create = time.perf_counter()
    with tqdm(total=len(pods), desc="creating pods", unit="pod", file=sys.stderr,
              disable=not sys.stderr.isatty()) as bar:
        for start in range(0, len(pods), w.batch):
            batch = pods[start:start + w.batch]
            now = time.perf_counter()
            for p in batch:
                recorder.sent_at[p["metadata"]["name"]] = now
            failures += _count_errors(core.create_many(POD, batch))
            bar.update(len(batch))
    create_s = time.perf_counter() - t_create
    recorder.done.wait(timeout=30.0)
    recorder.stop.set()
    watcher.join()

    t_list = time.perf_counter()
    listed = core.list(POD)
    list_s = time.perf_counter() - t_list
    lat_ms = [x * 1000 for x in recorder.latencies]
    return {
        "scenario": scenario.name, "seed": scenario.seed,
        "nodes": c.nodes, "namespaces": w.namespaces, "pods": w.pods, "failures": failures,
        "create": {"seconds": round(create_s, 3), "podsPerSecond": round(w.pods / create_s, 1) if create_s else 0},
        "watch": {"received": len(recorder.seen), "duplicates": recorder.duplicates,
                  "outOfOrder": recorder.out_of_order,
                  "complete": len(recorder.seen) == w.pods - failures and not recorder.duplicates
                  and not recorder.out_of_order,
                  "latencyMs": {"p50": round(percentile(lat_ms, 0.50), 2), "p99": round(percentile(lat_ms, 0.99), 2)}},
        "list": {"items": len(listed.items), "seconds": round(list_s, 3), "resourceVersion": listed.resource_version},
        "pending": sum(1 for p in listed.items if not p["spec"].get("nodeName")),
        "wallSeconds": round(time.perf_counter() - t0, 2),
    }


def _show_with_kubectl(kubeconfig: Path, pods: int) -> dict[str, Any]:
    """Read the cluster back the way a user would: the real kubectl against kemu's API server."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return {"available": False}

    def run(*args: str) -> tuple[list[str], float]:
        t = time.perf_counter()
        out = subprocess.run([kubectl, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                             timeout=300, check=True).stdout
        return out.splitlines(), time.perf_counter() - t

    nodes, _ = run("get", "nodes", "--no-headers")
    listed, seconds = run("get", "pods", "-A", "--no-headers", "--chunk-size=0")
    sample, _ = run("get", "pods", "-n", "load-0", "-o", "wide", f"--chunk-size={min(pods, 500) or 1}")
    return {"available": True, "nodes": len(nodes), "pods": len(listed), "getPodsSeconds": round(seconds, 2),
            "sample": sample[:4]}


def _count_errors(results: list[Any]) -> int:
    errs = [r for r in results if isinstance(r, StatusError)]
    for e in errs[:3]:
        print(f"kemu: create failed: {e.message}", file=sys.stderr)
    return len(errs)


def _print_summary(s: dict[str, Any]) -> None:
    w, lat = s["watch"], s["watch"]["latencyMs"]
    print(f"\nkemu run: {s['scenario']} (seed {s['seed']})")
    print(f"  cluster       {s['nodes']} nodes, {s['namespaces']} namespaces")
    print(f"  pods created  {s['pods'] - s['failures']} of {s['pods']} in {s['create']['seconds']} s "
          f"({s['create']['podsPerSecond']:,.0f} pods/s through the store client)")
    print(f"  watch         {w['received']} ADDED events, {w['duplicates']} duplicates, "
          f"{w['outOfOrder']} out of order; write→watcher latency p50 {lat['p50']} ms, p99 {lat['p99']} ms")
    print(f"  list          {s['list']['items']} pods in {s['list']['seconds']} s "
          f"at resourceVersion {s['list']['resourceVersion']}")
    print(f"  pending       {s['pending']} pods (no scheduler runs yet)")
    k = s.get("kubectl") or {}
    if k.get("available"):
        print(f"  kubectl       get nodes: {k['nodes']} nodes; get pods -A: {k['pods']} pods in "
              f"{k['getPodsSeconds']} s; get pods -n load-0 -o wide:")
        for line in k["sample"]:
            print(f"                  {line}")
    print(f"  result        {'OK' if w['complete'] else 'WATCH INCOMPLETE'} in {s['wallSeconds']} s")
