"""Load-aware scheduling benchmark: a node annotator pass, and the scheduler's cost per pod with the dynamic scheduler.

    .venv/bin/python -m loadgen.bench_loadaware [--nodes 5000] [--passes 5] [--pods 300] [--stale] [--json out.json]

1. **Annotator pass** (target: < 1 s at 5,000 nodes). An embedded Redis in a
   temporary directory; ``--nodes`` Node objects in the store and one
   kubelet usage snapshot entry each (``P mu:nodes``, what kubelet shards
   publish); the node annotator (:mod:`emulator.controllers.nodeannotator`)
   on real informers runs ``--passes`` passes one cluster minute apart
   (so its Redis history grows: samples, 5-minute and hour buckets) with
   fresh random usage each time (every node due: the worst case), then seven
   passes with the same usage again (a steady cluster: the 5-minute average
   moves for five passes while it forgets the random samples, then settles
   and almost nothing is due). Reported: wall
   seconds per pass (first and the rest, and its phases), and how many nodes
   each pass annotated.
2. **Per pod** (target: the extender adds < 2 ms per pod at 5,000 nodes).
   The annotated nodes in a :class:`~emulator.scheduler.framework.snapshot.Snapshot`
   at a cluster time half a minute after the annotator's last pass (fresh
   annotations: about a third of the nodes run too hot and are filtered out,
   the rest score apart; ``--stale`` schedules hours later instead, when every
   annotation is ignored), ``--pods`` pods through ``Framework.schedule_pod`` with (a) the default
   profile, (b) default + the ``LoadAware`` plugin, (c) default + the HTTP
   extender (``nodeCacheCapable``, served by
   :mod:`emulator.loadaware.extender_server` on a local port, called over
   :class:`~emulator.extender_http.HTTPTransport`; the server in a process of
   its own, as deployed). Reported: µs per pod for
   each and the differences (b - a, c - a; mean and median), this process's
   CPU per pod (the scheduler's cost, unaffected by other work on the
   machine) and its difference, plus the extender server's own handling time
   per pod (the answers alone) and its process's whole CPU per pod (HTTP and
   JSON too; from /proc, 10 ms ticks).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from emulator.api.kinds import NODE
from emulator.clock import ManualClock
from emulator.controllers.nodeannotator import NodeAnnotator
from emulator.controllers.runtime import ControllerContext
from emulator.extender_http import HTTPTransport
from emulator.informers import SharedInformerFactory
from emulator.kubelet import usage
from emulator.loadaware.extender_server import ExtenderServer, LoadAwareExtender
from emulator.scheduler import in_tree_registry
from emulator.scheduler.config import build_frameworks, parse_configuration
from emulator.scheduler.framework.interface import CycleState
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig
from emulator.store.store import Store

T0 = 1_800_000_000.0


def _node(name: str, cpu: int) -> dict[str, Any]:
    alloc = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"zone-{hash(name) % 3}"}},
            "spec": {}, "status": {"capacity": dict(alloc), "allocatable": alloc}}


def _publish_usage(core: ServerCore, names: list[str], cpus: list[int], now: float, rng: random.Random, *,
                   shares: list[tuple[float, float]] | None = None) -> list[tuple[float, float]]:
    """One usage snapshot entry per node: random shares of capacity, or ``shares`` (a steady cluster)."""
    shares = shares or [(rng.uniform(0.05, 0.9), rng.uniform(0.1, 0.8)) for _ in names]
    pipe = core.store.redis.pipeline(transaction=False)
    usage.write_snapshot(pipe, core.store.config.prefix, timestamp=now, window=15.0, pods={}, nodes={
        name: (int(cpu * 1e9 * c), int(cpu * 4 * 2**30 * m))
        for name, cpu, (c, m) in zip(names, cpus, shares, strict=True)})
    pipe.execute()
    return shares


def bench_annotator(url: str, nodes: int, passes: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rng = random.Random(0)
    clock = ManualClock(T0)
    core = ServerCore(Store.connect(url), clock)
    core.bootstrap()
    names = [f"node-{i:05d}" for i in range(nodes)]
    cpus = [rng.choice((8, 16, 32, 64)) for _ in names]
    for i in range(0, nodes, 500):
        core.create_many(NODE, [_node(n, c) for n, c in zip(names[i:i + 500], cpus[i:i + 500], strict=True)])
    factory = SharedInformerFactory(core.store, clock=clock)
    annotator = NodeAnnotator(ControllerContext(core, factory, clock))
    factory.start()
    assert all(factory.wait_for_cache_sync(120).values())
    seconds, written, phases = [], [], []
    shares: list[tuple[float, float]] = []
    for _ in range(passes):
        clock.advance(60)
        shares = _publish_usage(core, names, cpus, clock.now(), rng)
        # The informer must see the previous pass's writes first (else every write conflicts and retries).
        _wait_informer(core, factory)
        start = time.perf_counter()
        written.append(annotator.run_pass())
        seconds.append(time.perf_counter() - start)
        phases.append({k: round(v, 3) for k, v in annotator.last_pass_phases.items()})
    # A steady cluster: the same usage again. Every window is where it was, so little is due.
    steady, steady_written = [], []
    for _ in range(7):  # the 5-minute average takes 5 passes to forget the random samples
        clock.advance(60)
        _publish_usage(core, names, cpus, clock.now(), rng, shares=shares)
        _wait_informer(core, factory)
        start = time.perf_counter()
        steady_written.append(annotator.run_pass())
        steady.append(time.perf_counter() - start)
    _wait_informer(core, factory)
    annotated = list(factory.informer_for(NODE).get_store().list())
    factory.shutdown()
    return ({"last_pass_at": clock.now(), "nodes": nodes, "passes": passes, "first_pass_s": round(seconds[0], 3),
             "later_pass_mean_s": round(statistics.mean(seconds[1:]), 3) if passes > 1 else None,
             "later_pass_max_s": round(max(seconds[1:]), 3) if passes > 1 else None,
             "nodes_written_per_pass": written, "phases_s": phases,
             "steady_pass_s": [round(x, 3) for x in steady], "steady_nodes_written": steady_written}, annotated)


def _wait_informer(core: ServerCore, factory: SharedInformerFactory) -> None:
    """Until the node informer has caught up with the store (its last resourceVersion)."""
    target = core.store.current_rv()
    informer = factory.informer_for(NODE)
    deadline = time.monotonic() + 60
    while int(informer.last_sync_resource_version or 0) < target and time.monotonic() < deadline:
        time.sleep(0.01)


def _pods(n: int, rng: random.Random) -> list[PodInfo]:
    out = []
    for i in range(n):
        cpu = rng.choice(("100m", "250m", "500m", "1"))
        mem = rng.choice(("128Mi", "256Mi", "512Mi", "1Gi"))
        out.append(PodInfo.of({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"p{i}", "namespace": "default", "uid": f"uid-{i}"}, "spec": {"containers": [
                {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}}))
    return out


def _cycle_us(fwk: Any, snapshot: Snapshot, pods: list[PodInfo]) -> list[float]:
    out = []
    for pod in pods:
        start = time.perf_counter()
        fwk.schedule_pod(CycleState(), pod, snapshot)
        out.append((time.perf_counter() - start) * 1e6)
    return out


def _serve_extender(nodes: list[dict[str, Any]], now: float, port: Any, stop: Any, handled: Any) -> None:
    """The extender in its own process (as deployed: the scheduler's GIL is not the server's)."""
    extender = LoadAwareExtender(now=lambda: now)
    for node in nodes:
        extender.set_node(node["metadata"]["name"], node["metadata"].get("annotations"))
    original = extender.answer

    def timed(verb: str, args: Any) -> bytes:
        start = time.perf_counter()
        try:
            return original(verb, args)
        finally:
            with handled.get_lock():
                handled.value += time.perf_counter() - start

    extender.answer = timed  # type: ignore[method-assign]
    server = ExtenderServer(extender).start()
    port.put(server.url)
    stop.wait()
    server.close()


def _process_cpu(pid: int | None) -> float:
    """Seconds of CPU (user + system) process ``pid`` has used, from /proc (0 where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_per_pod(annotated_nodes: list[dict[str, Any]], pods: int, now: float) -> dict[str, Any]:
    """Pods through the three profiles at cluster time ``now`` (annotations older than their active period are
    ignored: pass a time shortly after the annotator's last pass to filter and score on fresh ones)."""
    rng = random.Random(1)
    snapshot = Snapshot.build(annotated_nodes)
    pod_list = _pods(pods, rng)
    registry = in_tree_registry()
    ctx = multiprocessing.get_context("fork")
    urls, stop, handled = ctx.Queue(), ctx.Event(), ctx.Value("d", 0.0)
    process = ctx.Process(target=_serve_extender, args=(annotated_nodes, now, urls, stop, handled),
                          daemon=True)
    process.start()
    url = urls.get(timeout=120)
    transport = HTTPTransport()
    kube = "kubescheduler.config.k8s.io/v1"
    configs = {
        "default": {"apiVersion": kube, "kind": "KubeSchedulerConfiguration"},
        "plugin": {"apiVersion": kube, "kind": "KubeSchedulerConfiguration", "profiles": [{
            "schedulerName": "default-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": "LoadAware", "weight": 2}]}}}]},
        "extender": {"apiVersion": kube, "kind": "KubeSchedulerConfiguration", "extenders": [{
            "urlPrefix": url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 2,
            "nodeCacheCapable": True}]},
    }
    out: dict[str, Any] = {"nodes": len(annotated_nodes), "pods": pods}
    try:
        for name, doc in configs.items():
            fwk = build_frameworks(parse_configuration(doc, available=list(registry)), registry,
                                   transport=transport)["default-scheduler"]
            clock_fwk: Any = fwk
            clock_fwk.clock = ManualClock(now)
            _cycle_us(fwk, snapshot, pod_list[:20])  # warm up (JIT-free, but caches and connections)
            handled.value = 0.0
            server_cpu = _process_cpu(process.pid)
            cpu = time.process_time()
            samples = _cycle_us(fwk, snapshot, pod_list)
            # This process's CPU per pod: what the scheduler pays, whatever else the machine runs.
            out[f"{name}_cpu_us_per_pod"] = round((time.process_time() - cpu) * 1e6 / len(pod_list), 1)
            out[f"{name}_us_mean"] = round(statistics.mean(samples), 1)
            out[f"{name}_us_p50"] = round(float(np.percentile(samples, 50)), 1)
            out[f"{name}_us_p99"] = round(float(np.percentile(samples, 99)), 1)
            if name == "extender":
                out["extender_server_handling_us_per_pod"] = round(handled.value * 1e6 / len(pod_list), 1)
                # The server process's whole CPU (HTTP parsing, JSON, the answer; user + system) per pod.
                out["extender_server_cpu_us_per_pod"] = round(
                    (_process_cpu(process.pid) - server_cpu) * 1e6 / len(pod_list), 1)
    finally:
        stop.set()
        process.join(10)
        transport.close()
    out["plugin_adds_us"] = round(out["plugin_us_mean"] - out["default_us_mean"], 1)
    out["extender_adds_us"] = round(out["extender_us_mean"] - out["default_us_mean"], 1)
    out["extender_adds_us_p50"] = round(out["extender_us_p50"] - out["default_us_p50"], 1)
    out["extender_adds_cpu_us"] = round(out["extender_cpu_us_per_pod"] - out["default_cpu_us_per_pod"], 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--stale", action="store_true",
                        help="schedule long after the annotator's passes (every annotation stale, nothing filtered)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(RedisServerConfig(data_dir=Path(tmp)))
        url = server.start()
        try:
            annotator, nodes = bench_annotator(url, args.nodes, args.passes)
        finally:
            server.stop()
    print(json.dumps({"annotator": annotator}), flush=True)
    # Fresh annotations (half a minute after the last pass) unless --stale: then every annotation is past its
    # active period and ignored, every node passes and scores alike (the cheapest answers).
    per_pod = bench_per_pod(nodes, args.pods, T0 + 10_000 if args.stale else annotator["last_pass_at"] + 30)
    per_pod["annotations"] = "stale" if args.stale else "fresh"
    result = {"annotator": annotator, "per_pod": per_pod}
    print(json.dumps({"per_pod": per_pod}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
