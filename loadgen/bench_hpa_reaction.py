"""Benchmark: how long a load step takes to become Ready replicas, against upstream's 15 s sync + pod startup.

A whole small cluster in this process, as ``kemu up`` composes it but without Ray: an embedded
Redis, the controller manager (Deployment, ReplicaSet, HPA controllers ...), one in-process
scheduler and one kubelet shard ticking on its own thread (the loop ``actors/kubelet.py`` runs),
all on one cluster clock at ``--clock-speed``. A Deployment's pods serve load target ``web``
(``kemu.io/load-target``) and export ``http_requests_per_second``; an HPA of type Pods targets
100 per pod (``behavior.scaleUp``: one step may go to the new count, no up window). At the low
rate the Deployment holds ``ceil(low / 100)`` replicas; each cycle steps the rate to the high one
and measures, in cluster and wall seconds:

* **decision**: load step -> the HPA writes the new ``spec.replicas`` (waiting for the kubelets'
  next 15 s metrics window to carry the new rate, then for the HPA's next 15 s sync);
* **ready**: that write -> the Deployment reports at least ``ceil(high / 100)`` replicas, all Ready
  (ReplicaSet controller, scheduler, kubelet admission and the profile's startup delay, readiness;
  when the first rescale fell short, also the next sync's);
* **total**: step -> ``ceil(high / 100)`` (or more) replicas Ready.

then (unless it was the last cycle) steps back down and waits out the 300 s scale-down window.
Upstream's expectation for the same chain is one metrics resolution (metrics-server / adapter,
15 s) plus at most one sync period (15 s) plus pod startup: ``total <= 30 s + startup``, with the
decision alone between 0 and 30 s depending on where the step falls in the two periods.

Run: ``.venv/bin/python -m loadgen.bench_hpa_reaction [--clock-speed 10] [--cycles 3]
[--low 150] [--high 1000] [--json out.json]``. Prints numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from emulator import loadtargets
from emulator.api.kinds import DEPLOYMENT, HORIZONTALPODAUTOSCALER
from emulator.api.types import Obj
from emulator.clock import SystemClock
from emulator.cluster import KubeletLaunch, LocalCluster
from emulator.config import Config
from emulator.kubelet.config import kubelet_shard_config
from emulator.kubelet.shard import KubeletShard
from emulator.server.core import ServerCore
from emulator.store.store import Store, StoreConfig

TARGET = 100  # averageValue of http_requests_per_second per pod
SYNC, WINDOW, DOWN_WINDOW = 15.0, 15.0, 300.0  # upstream's HPA sync, metrics resolution, scale-down window


class InProcessKubelets:
    """A kubelet runner hosting the shards as threads here (``actors/kubelet.py``'s tick loop, without Ray)."""

    def __init__(self, launch: KubeletLaunch) -> None:
        self.launch = launch
        self.shards: list[KubeletShard] = []
        self.stores: list[Store] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        cfg = self.launch.config
        clock = SystemClock(cfg.clock_speed, start=self.launch.clock_start
                            + (time.time() - self.launch.clock_wall) * cfg.clock_speed)
        config = kubelet_shard_config(cfg.kubelet, cfg.node_pools)
        store = Store.connect(self.launch.redis_url, StoreConfig(prefix=cfg.prefix, node_shards=cfg.node_shards))
        shard = KubeletShard(ServerCore(store, clock), 0, 1, config, clock)
        shard.start(timeout)
        self.stores.append(store)
        self.shards.append(shard)
        interval = config.tick_interval / clock.speed
        thread = threading.Thread(target=self._run, args=(shard, interval), name="kubelet-shard-0", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self.health()

    def _run(self, shard: KubeletShard, interval: float) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            shard.tick()
            next_at += interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def health(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        return [{"shard": i} for i in range(len(self.shards))]

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout)
        for shard in self.shards:
            shard.stop()
        for store in self.stores:
            store.close()


def _deployment(replicas: int) -> Obj:
    labels = {"app": "web"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels, "annotations": {
                         "kemu.io/load-target": "web", "kemu.io/cpu": "10m"}},
                         "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                                                  "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}


def _hpa(min_replicas: int, max_replicas: int) -> Obj:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": min_replicas, "maxReplicas": max_replicas,
                     "metrics": [{"type": "Pods", "pods": {"metric": {"name": "http_requests_per_second"},
                                                           "target": {"type": "AverageValue",
                                                                      "averageValue": str(TARGET)}}}],
                     "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0, "policies": [
                         {"type": "Percent", "value": 1000, "periodSeconds": 15}]}}}}


def _wait(core: ServerCore, condition: Any, timeout: float, what: str) -> tuple[float, float]:
    """Poll ``condition(deployment)`` every 20 ms of wall time; (cluster, wall) time when it first held."""
    deadline = time.monotonic() + timeout
    while True:
        dep = core.get(DEPLOYMENT, "default", "web")
        if condition(dep):
            return core.clock.now(), time.perf_counter()
        if time.monotonic() > deadline:
            hpa = core.get(HORIZONTALPODAUTOSCALER, "default", "web").get("status") or {}
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}: Deployment {dep['spec']['replicas']}"
                               f" wanted, status {dep.get('status')}; HPA {hpa}")
        time.sleep(0.02)


def _ready(n: int, *, at_least: bool = False) -> Any:
    """``n`` replicas wanted and Ready (``at_least``: ``n`` or more; a sync that still sees part of the old,
    higher per-pod rate in the metrics window may overshoot, and 1,000 / 11 is within the tolerance)."""
    def check(dep: Obj) -> bool:
        status = dep.get("status") or {}
        want = dep["spec"]["replicas"]
        if not (want >= n if at_least else want == n):
            return False
        return status.get("readyReplicas", 0) == want and status.get("updatedReplicas", 0) == want \
            and status.get("replicas", 0) == want
    return check


def run(speed: float, cycles: int, low: float, high: float) -> dict[str, Any]:
    n_low, n_high = max(1, math.ceil(low / TARGET)), math.ceil(high / TARGET)
    with tempfile.TemporaryDirectory(prefix="kemu-bench-hpa-") as tmp:
        cfg = Config(data_dir=Path(tmp) / "redis", api_enabled=False, metrics=False, clock_speed=speed,
                     node_pools=[{"name": "node", "count": 4, "capacity": {"cpu": "16", "memory": "64Gi",
                                                                            "pods": "110"}}],
                     kubelet_shards=1, schedulers=1, kubelet={"metrics_window": WINDOW})
        cfg = replace(cfg, nodes=0)
        with LocalCluster(cfg, kubelets=InProcessKubelets) as cluster:
            core = cluster.core
            assert core is not None
            prefix, redis = core.store.config.prefix, core.store.redis
            loadtargets.set_rate(redis, prefix, "web", low)
            core.create(DEPLOYMENT, _deployment(n_low))
            core.create(HORIZONTALPODAUTOSCALER, _hpa(n_low, n_high * 2))
            _wait(core, _ready(n_low), 120, f"{n_low} Ready replicas")
            # Settle: the HPA has read the metric and holds n_low.
            deadline = time.monotonic() + 120
            while not (core.get(HORIZONTALPODAUTOSCALER, "default", "web").get("status") or {}).get("currentMetrics"):
                if time.monotonic() > deadline:
                    raise TimeoutError("the HPA never read its metric")
                time.sleep(0.05)
            results = []
            for _ in range(cycles):
                step_c, step_w = core.clock.now(), time.perf_counter()
                loadtargets.set_rate(redis, prefix, "web", high)
                dec_c, dec_w = _wait(core, lambda d: d["spec"]["replicas"] != n_low, 600 / speed + 60,
                                     "the HPA's rescale")
                new = int(core.get(DEPLOYMENT, "default", "web")["spec"]["replicas"])
                ready_c, ready_w = _wait(core, _ready(n_high, at_least=True), 600 / speed + 60,
                                         f"{n_high} Ready replicas")
                reached = int(core.get(DEPLOYMENT, "default", "web")["spec"]["replicas"])
                results.append({"firstRescaleTo": new, "readyAt": reached,
                                "decision": {"cluster": round(dec_c - step_c, 2), "wall": round(dec_w - step_w, 3)},
                                "ready": {"cluster": round(ready_c - dec_c, 2), "wall": round(ready_w - dec_w, 3)},
                                "total": {"cluster": round(ready_c - step_c, 2),
                                          "wall": round(ready_w - step_w, 3)}})
                print(f"  cycle {len(results)}: step {low:g} -> {high:g} req/s: rescale to {new} after "
                      f"{dec_c - step_c:.1f} s cluster ({dec_w - step_w:.2f} s wall), {reached} Ready "
                      f"{ready_c - dec_c:.1f} s later; total {ready_c - step_c:.1f} s cluster "
                      f"({ready_w - step_w:.2f} s wall)", flush=True)
                if len(results) == cycles:
                    break  # no need to wait out the scale-down after the last step
                loadtargets.set_rate(redis, prefix, "web", low)
                # Down in up to two windows: the first low sync may still see part of the high rate.
                _wait(core, _ready(n_low), (2 * DOWN_WINDOW + 120) / speed + 120, f"back to {n_low} replicas")
    def stats(part: str, unit: str) -> dict[str, float]:
        values = sorted(r[part][unit] for r in results)
        return {"min": values[0], "mean": round(sum(values) / len(values), 3), "max": values[-1]}

    return {"clockSpeed": speed, "cycles": cycles, "low": low, "high": high, "replicas": [n_low, n_high],
            "upstreamBound": {"decisionMax": WINDOW + SYNC, "note": "metrics resolution + HPA sync; + pod startup"},
            **{part: {unit: stats(part, unit) for unit in ("cluster", "wall")}
               for part in ("decision", "ready", "total")}, "runs": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clock-speed", type=float, default=10.0)
    parser.add_argument("--cycles", type=int, default=3)
    # 150, not 200: at 200 a Deployment coming down through 3 pods stays there, since 200 / 3 is 66.667 and
    # upstream's ceil(3 * 0.66667) is 3; from 150 every count comes back to ceil(150 / 100) = 2.
    parser.add_argument("--low", type=float, default=150.0)
    parser.add_argument("--high", type=float, default=1000.0)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    out = run(args.clock_speed, args.cycles, args.low, args.high)
    print(f"load step {args.low:g} -> {args.high:g} req/s, replicas {out['replicas'][0]} -> {out['replicas'][1]}, "
          f"clock speed {args.clock_speed:g}, {args.cycles} cycles (min / mean / max):")
    for part in ("decision", "ready", "total"):
        c, w = out[part]["cluster"], out[part]["wall"]
        print(f"  {part:<9} cluster {c['min']:.1f} / {c['mean']:.1f} / {c['max']:.1f} s   "
              f"wall {w['min']:.2f} / {w['mean']:.2f} / {w['max']:.2f} s")
    print(f"  upstream: decision within {WINDOW + SYNC:g} s (one {WINDOW:g} s metrics resolution + one {SYNC:g} s "
          f"sync), then pod startup")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
