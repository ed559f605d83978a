"""Kubelet model benchmark: microseconds per container-tick, pod admission cost.

    .venv/bin/python -m loadgen.bench_kubelet_model [--containers 10000 30000 100000] [--ticks 60] [--json out.json]

For each size it builds one :class:`~emulator.kubelet.model.KubeletModel` with
110 single-container pods per node (the kubelet's default max-pods), a mix of
the built-in profiles (web, spiky, diurnal, batch, default, memory-leak,
crashloop — so starts, exits, OOM kills, back-offs and eviction rounds all
happen), then ticks it once per emulated second and reports:

* admission: µs per ``add_pod`` (profile resolution and row set-up, Python);
* tick: mean / p50 / max wall time per steady-state tick (after the first
  8 s, in which every container starts), and µs per container-tick;
  eviction rounds (every 10th tick) are included in the figures and also
  shown on their own;
* parts: ``CurveSet.evaluate`` for one resource and ``CgroupTable.tick``
  alone, to show where a tick's time goes.

The target for the kubelet shard is 30,000 containers well under 10 ms per
tick. Numbers are for the machine it runs on.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from emulator.kubelet.model import KubeletConfig, KubeletModel
from loadgen.benchkit import save

PODS_PER_NODE = 110
STARTUP_TICKS = 8
T0 = 1_700_000_000.0
PROFILES = ["web", "web", "spiky", "diurnal", "batch", "default", "default", "memory-leak", "crashloop"]


def _pod(i: int, node: str) -> dict[str, Any]:
    profile = PROFILES[i % len(PROFILES)]
    resources: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "128Mi"},
                                 "limits": {"cpu": "500m", "memory": "512Mi"}}
    if i % 7 == 0:
        resources = {}  # some BestEffort pods
    return {
        "metadata": {"name": f"p{i}", "namespace": "bench", "uid": f"bench-{i}",
                     "annotations": {"kemu.io/profile": profile}},
        "spec": {"nodeName": node, "restartPolicy": "Always",
                 "containers": [{"name": "app", "image": "bench", "resources": resources}]},
    }


def bench(containers: int, ticks: int) -> dict[str, Any]:
    nodes = max(1, -(-containers // PODS_PER_NODE))
    model = KubeletModel(KubeletConfig(seed=1), capacity=containers)
    for n in range(nodes):
        model.add_node(f"node-{n}", cpu="32", memory="64Gi")
    t0 = time.perf_counter()
    for i in range(containers):
        model.add_pod(_pod(i, f"node-{i % nodes}"), T0)
    admit = time.perf_counter() - t0

    times: list[float] = []
    startup: list[float] = []
    eviction_ticks: list[float] = []
    events = 0
    for k in range(ticks):
        now = T0 + k
        t0 = time.perf_counter()
        report = model.tick(now)
        elapsed = time.perf_counter() - t0
        events += len(report.events)
        if k < STARTUP_TICKS:
            startup.append(elapsed)  # every container starting (startup delays up to 6 s): admission work
            continue
        times.append(elapsed)
        if k % 10 == 0:
            eviction_ticks.append(elapsed)

    t_local = np.full(model.cpu_curve.capacity, 30.0)
    t0 = time.perf_counter()
    for _ in range(20):
        model.cpu_curve.evaluate(t_local)
    curve = (time.perf_counter() - t0) / 20

    running = model.state == 2
    cpu = model.cpu_curve.evaluate(t_local)
    mem = model.memory_curve.evaluate(t_local)
    t0 = time.perf_counter()
    for _ in range(20):
        model.cgroups.tick(1.0, running, cpu_demand=cpu, memory_demand=mem * 0, node_cpu_millis=model.n_cpu,
                           node_memory=model.n_memory)
    cgroup = (time.perf_counter() - t0) / 20

    mean = statistics.fmean(times)
    return {
        "containers": containers,
        "nodes": nodes,
        "admit_us_per_pod": admit / containers * 1e6,
        "tick_ms_mean": mean * 1e3,
        "tick_ms_p50": statistics.median(times) * 1e3,
        "tick_ms_max": max(times) * 1e3,
        "eviction_tick_ms_mean": statistics.fmean(eviction_ticks) * 1e3 if eviction_ticks else None,
        "us_per_container_tick": mean / containers * 1e6,
        "startup_tick_ms_max": max(startup) * 1e3,
        "us_per_container_start": sum(startup) / containers * 1e6,
        "curve_evaluate_ms": curve * 1e3,
        "cgroup_tick_ms": cgroup * 1e3,
        "events": events,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--containers", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    parser.add_argument("--ticks", type=int, default=68)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    results = []
    for size in args.containers:
        r = bench(size, args.ticks)
        results.append(r)
        evict = r["eviction_tick_ms_mean"]
        print(f"{size:>7} containers on {r['nodes']:>4} nodes: tick mean {r['tick_ms_mean']:.2f} ms "
              f"(p50 {r['tick_ms_p50']:.2f}, max {r['tick_ms_max']:.2f}, eviction rounds "
              f"{evict:.2f} ms) = {r['us_per_container_tick']:.3f} us/container-tick; "
              f"curve {r['curve_evaluate_ms']:.2f} ms, cgroups {r['cgroup_tick_ms']:.2f} ms; "
              f"admission {r['admit_us_per_pod']:.1f} us/pod + start-up ticks "
              f"{r['us_per_container_start']:.1f} us/container (max tick {r['startup_tick_ms_max']:.0f} ms); "
              f"{r['events']} events", flush=True)
    save(results, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
