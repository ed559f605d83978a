"""Load-driver overhead: how many pods/s the driver itself can emit, with no cluster behind it.

    .venv/bin/python -m loadgen.bench_driver [--pods 200000] [--processes 1,2,4] [--batch 500]

For each process count, a plan of ``--pods`` unthrottled pod creates (a
realistic template: request draws, profiles, a priority mix) is built and
executed through :func:`loadgen.drivers.execute` into a ``null`` sink: the
timeline walk, batching, building every manifest (in the driver, as for a
real sink), and (with several processes)
pickling batches to the workers - everything but the cluster. Reported:
plan build rate and execution rate in pods/s. A cluster run is bounded by
the smaller of this and what the cluster takes; the summary of ``kemu run``
shows which (back-pressure seconds > 0 means the cluster).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from loadgen import plan as planning
from loadgen.drivers import DriverPool, SinkSpec, execute
from loadgen.scenario import Scenario


def scenario(pods: int) -> Scenario:
    return Scenario.from_dict({
        "seed": 1, "namespaces": 8,
        "priorities": [{"name": "high", "value": 1000, "weight": 1}, {"name": "low", "value": 0, "weight": 4}],
        "templates": {"default": {"cpu": ["100m", "250m", "500m", "1"], "memory": ["128Mi", "512Mi", "1Gi"],
                                  "profile": ["default", "web", "batch"]}},
        "phases": [{"name": "flood", "pods": {"count": pods}}]})


def measure(pods: int, processes: int, batch: int) -> dict[str, Any]:
    t = time.perf_counter()
    plan = planning.build(scenario(pods))
    build_s = time.perf_counter() - t
    done = [0]

    def on_result(_op: str, n: int, _errs: list[tuple[str, str]]) -> None:
        done[0] += n

    pool = DriverPool(SinkSpec("null"), processes, on_result)
    try:
        run = execute(plan.actions, pool, batch=batch, progress=False)
    finally:
        pool.close()
    assert done[0] == pods, f"{done[0]} of {pods} acknowledged"
    return {"processes": processes, "pods": pods, "planPodsPerSecond": round(pods / build_s),
            "emitPodsPerSecond": round(pods / run.seconds), "seconds": round(run.seconds, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=200_000)
    ap.add_argument("--processes", default="1,2,4")
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = [measure(args.pods, int(p), args.batch) for p in args.processes.split(",")]
    for r in rows:
        print(f"{r['processes']} process(es): plan {r['planPodsPerSecond']:>9,} pods/s, "
              f"emit {r['emitPodsPerSecond']:>9,} pods/s ({r['pods']:,} pods in {r['seconds']} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
