"""Benchmark: one VPA recommender pass over many containers, and the admission cost it adds.

On an embedded Redis: ``--vpas`` ReplicaSets of ``--pods-per-vpa`` pods (one
container each) with one VerticalPodAutoscaler each, usage for every pod in the
``metrics.k8s.io`` snapshot the kubelet shards write (random CPU and memory,
seeded), and the real ``vpa-recommender`` controller reading it through its
informers. Each pass advances cluster time by a minute and rewrites the
snapshot; reported: CPU seconds (``process_time``) and wall seconds per pass,
split into the whole pass and the model update + estimation. Then pod creates
per second through the server core with and without a matching VPA, to show the
admission plugin's cost.

Run: ``.venv/bin/python -m loadgen.bench_vpa [--vpas 1000] [--pods-per-vpa 10] [--passes 5]``.
Prints numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

from emulator.api.kinds import POD, REPLICASET, VERTICALPODAUTOSCALER
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.kubelet import usage
from emulator.server.core import ServerCore
from loadgen.benchkit import report, server_core

T0 = 1_700_000_000.0


def _rs(i: int) -> Obj:
    labels = {"app": f"app-{i}"}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": f"rs-{i}", "namespace": "default"},
            "spec": {"replicas": 10, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]}}}}


def _pod(rs: Obj, j: int) -> Obj:
    meta = rs["metadata"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{meta['name']}-{j}", "namespace": "default",
                         "labels": dict(rs["spec"]["selector"]["matchLabels"]),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True}]},
            "spec": {"containers": [{"name": "app", "image": "nginx",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


def _vpa(i: int) -> Obj:
    return {"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
            "metadata": {"name": f"vpa-{i}", "namespace": "default"},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"rs-{i}"},
                     "updatePolicy": {"updateMode": "Off"}}}


def _write_usage(core: ServerCore, pods: list[Obj], now: float, rng: random.Random) -> None:
    pipe = core.store.redis.pipeline(transaction=False)
    usage.write_snapshot(pipe, core.store.config.prefix, timestamp=now, window=15.0, nodes={},
                         pods={("default", p["metadata"]["name"]): [("app", rng.randint(10**7, 2 * 10**9),
                                                                      rng.randint(2**24, 2**30))] for p in pods})
    pipe.execute()


def run(vpas: int, per_vpa: int, passes: int) -> dict[str, Any]:
    rng = random.Random(42)
    clock = ManualClock(T0)
    with server_core(clock) as core:
        sets = [r for r in core.create_many(REPLICASET, [_rs(i) for i in range(vpas)]) if isinstance(r, dict)]
        pods: list[Obj] = []
        for rs in sets:
            pods += [p for p in core.create_many(POD, [_pod(rs, j) for j in range(per_vpa)])
                     if isinstance(p, dict)]
        core.create_many(VERTICALPODAUTOSCALER, [_vpa(i) for i in range(vpas)])
        manager = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=("vpa-recommender",),
                                                        options={"recommender_interval": 1e9},
                                                        cluster_state_metrics=False), clock=clock).start()
        try:
            assert manager.wait_active(120)
            rec: Any = manager.controllers()["vpa-recommender"]
            deadline = time.monotonic() + 120
            while len(rec.pods.indexer.list()) < len(pods) or rec.passes < 1:
                if time.monotonic() > deadline:
                    raise RuntimeError("the recommender's caches did not fill")
                time.sleep(0.05)  # a benchmark's pacing, not a test's synchronisation
            cpu, wall = [], []
            for _ in range(passes):
                clock.advance(60)
                _write_usage(core, pods, clock.now(), rng)
                c0, w0 = time.process_time(), time.perf_counter()
                written = rec.run_once()
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - w0)
            with_recs = sum(bool((v.get("status") or {}).get("recommendation"))
                            for v in core.list(VERTICALPODAUTOSCALER, "default").items)
        finally:
            manager.stop()
        return {"vpas": vpas, "containers": len(pods), "passes": passes,
                "cpu_seconds_per_pass": [round(x, 3) for x in cpu],
                "wall_seconds_per_pass": [round(x, 3) for x in wall],
                "statuses_written_last_pass": written, "vpas_with_recommendation": with_recs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vpas", type=int, default=1000)
    p.add_argument("--pods-per-vpa", type=int, default=10)
    p.add_argument("--passes", type=int, default=5)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    report(run(args.vpas, args.pods_per_vpa, args.passes), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
