"""Run-report cost: how long ``loadgen.report.write_report`` takes, and how big the page is, for large runs.

    .venv/bin/python -m loadgen.bench_report [--pods 10000,100000] [--nodes 5000]

The run is synthetic (:func:`synthetic_run`, also the unit tests' fixture): Poisson-ish arrivals
at 500 pods/s, log-normal scheduling and startup latencies, 2 % of pods never bound. Reported per
pod count: seconds to render the HTML (matplotlib PNGs inlined) and the page size. The report
samples and rasterises its scatter plots, so both should stay nearly flat as pods grow; a per-pod
plotting loop would take minutes at 100,000 pods.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.report import RunSeries, write_report


def synthetic_run(pods: int = 5_000, nodes: int = 300, seed: int = 7) -> tuple[dict[str, Any], RunSeries]:
    """A plausible run: Poisson-ish arrivals at 500/s, log-normal SLI and startup latencies, 2% never bound."""
    rng = np.random.default_rng(seed)
    span = pods / 500
    added = np.sort(rng.uniform(0, span, pods))
    bound = added + rng.lognormal(math.log(0.02), 1.0, pods)
    ready = bound + rng.lognormal(math.log(1.5), 0.3, pods)
    never = rng.choice(pods, pods // 50, replace=False)
    bound_l: list[float | None] = bound.tolist()
    ready_l: list[float | None] = ready.tolist()
    for i in never:
        bound_l[i] = ready_l[i] = None
    cpu = {f"node-{i}": float(x) for i, x in enumerate(rng.beta(5, 2, nodes) * 1.1)}
    memory = {k: v * 0.7 for k, v in cpu.items()}
    summary: dict[str, Any] = {
        "scenario": "steady", "seed": seed, "ok": True, "wallSeconds": round(span + 5, 2),
        "cluster": {"nodes": nodes, "nodesReady": nodes, "schedulers": 2, "namespaces": 10},
        "pods": {"requested": pods, "created": pods, "scheduled": pods - len(never), "running": pods - len(never),
                 "pending": len(never), "failed": 0},
        "scheduling": {"podsPerSecond": 497.3, "sliLatencyMs": {"p50": 20.1, "p90": 71.2, "p99": 201.0}},
        "podStartupMs": {"p50": 1520.0, "p99": 2990.5},
        "oomKills": {"events": 3, "containersOOMKilled": 3},
        "evictions": {"events": 0, "podsEvicted": 0},
        "schedulers": [{"name": f"kemu-scheduler-{i}", "attempts": pods // 2 + 40 + i, "scheduled": pods // 2,
                        "conflicts": 40 + i} for i in range(2)],
        "kubectl": {"available": True, "server": "https://127.0.0.1:6443",  # text, not a resource to fetch
                    "sample": ["NAME         READY   STATUS", "pod-000000   1/1     Running"]},
    }
    phases = [("ramp", 0.0, span * 0.2), ("steady", span * 0.2, span), ("settle", span, span + 3)]
    # Node utilization sampled every 2 s: (t, cpu p50, p90, max, memory p50, p90, max), rising with the load.
    times = np.arange(0.0, span, 2.0)
    level = np.clip(0.2 + 0.5 * times / max(span, 1.0) + rng.normal(0, 0.02, len(times)), 0, 1)
    utilization = [(float(t), u * 0.8, u, min(1.0, u * 1.3), u * 0.6, u * 0.75, min(1.0, u)) for t, u in
                   zip(times, level, strict=True)]
    return summary, RunSeries(added.tolist(), bound_l, ready_l, cpu, memory, phases, utilization=utilization)


def measure(pods: int, nodes: int) -> dict[str, Any]:
    summary, series = synthetic_run(pods=pods, nodes=nodes)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        page = write_report(summary, series, Path(tmp) / "report.html")
        seconds = time.perf_counter() - t
        size = page.stat().st_size
    return {"pods": pods, "nodes": nodes, "seconds": round(seconds, 2), "bytes": size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", default="10000,100000", help="comma-separated pod counts")
    ap.add_argument("--nodes", type=int, default=5_000)
    args = ap.parse_args()
    for pods in (int(p) for p in args.pods.split(",")):
        r = measure(pods, args.nodes)
        print(f"{r['pods']:>9,} pods, {r['nodes']:,} nodes: report in {r['seconds']:.2f} s, "
              f"{r['bytes'] / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
