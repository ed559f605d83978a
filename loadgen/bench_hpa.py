"""Benchmark: the HorizontalPodAutoscaler controller with 1,000 HPAs.

``--hpas`` (1,000) Deployments of ``--pods`` (10) Running, Ready pods each, one HPA per
Deployment (CPU utilization target 50 %), on an embedded Redis in a temporary directory.
Objects are written straight to the store (as ``bench_controllers`` does); no Deployment
controller runs, so a rescale only changes ``spec.replicas``. A publisher thread plays the
kubelets' part: every 15 s it writes the pods' usage snapshot (``mu:pods:<ns>``, what
``metrics.k8s.io`` serves), 50 % of the request for most pods and 90 % for every tenth
Deployment (those scale up once, then hold at the ``max(2n, 4)`` limit... until their max).

The controller runs in a controller manager on the system clock at speed 1 for
``--seconds`` (60) and the benchmark reports, from the controller's own samples: reconcile
duration p50 / p99, queue wait p50 / p99, the number of reconciles, and — sampling each
HPA's last reconcile time every 0.2 s — the largest gap between two reconciles of one HPA
and how many HPAs ever went longer than their 15 s period (plus 1 s of slack for the
sampling and the queue) without one.

With ``--stagger S`` the HPAs are created over S seconds (as a real cluster's are, over
time) instead of at one instant, which otherwise makes every period start with a burst of
all of them. Run: ``.venv/bin/python -m loadgen.bench_hpa [--hpas 1000] [--pods 10]
[--seconds 60] [--stagger 0] [--json out.json]``. Prints numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

from emulator.api.kinds import DEPLOYMENT, HORIZONTALPODAUTOSCALER, POD
from emulator.api.types import Obj
from emulator.clock import SystemClock, rfc3339
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.kubelet import usage
from emulator.store.store import Store
from loadgen.benchkit import report, server_core

NAMESPACE = "default"
REQUEST_M = 100
PERIOD = 15.0
SLACK = 1.0


def _deployment(i: int, pods: int) -> Obj:
    labels = {"app": f"d{i}"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"d{i}", "namespace": NAMESPACE},
            "spec": {"replicas": pods, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "app", "image": "nginx:1.27",
                          "resources": {"requests": {"cpu": f"{REQUEST_M}m"}}}]}}}}


def _pod(i: int, j: int, now: float) -> Obj:
    started = rfc3339(now - 3600)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"d{i}-{j}", "namespace": NAMESPACE, "labels": {"app": f"d{i}"}},
            "spec": {"nodeName": f"node-{j}", "containers": [
                {"name": "app", "image": "nginx:1.27", "resources": {"requests": {"cpu": f"{REQUEST_M}m"}}}]},
            "status": {"phase": "Running", "startTime": started,
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": started}]}}


def _hpa(i: int, pods: int) -> Obj:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": f"d{i}", "namespace": NAMESPACE},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"d{i}"},
                     "minReplicas": 1, "maxReplicas": pods * 3,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 50}}}]}}


class Publisher:
    """The kubelets' usage snapshot, rewritten every period (usage entries go stale after 4 windows)."""

    def __init__(self, store: Store, hpas: int, pods: int) -> None:
        self.store, self.hpas, self.pods = store, hpas, pods
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="usage-publisher", daemon=True)

    def publish(self) -> None:
        now = time.time()
        usage_of = {}
        for i in range(self.hpas):
            millis = REQUEST_M * 9 // 10 if i % 10 == 0 else REQUEST_M // 2
            for j in range(self.pods):
                usage_of[(NAMESPACE, f"d{i}-{j}")] = [("app", millis * 1_000_000, 64 * 1024**2)]
        pipe = self.store.redis.pipeline(transaction=False)
        usage.write_snapshot(pipe, self.store.config.prefix, timestamp=now, window=PERIOD, nodes={}, pods=usage_of)
        pipe.execute()

    def _run(self) -> None:
        while not self._stop.wait(PERIOD):
            self.publish()

    def start(self) -> Publisher:
        self.publish()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def run(hpas: int, pods: int, seconds: float, stagger: float = 0.0) -> dict[str, Any]:
    with server_core(SystemClock()) as core:
        store = core.store
        now = time.time()
        for start in range(0, hpas, 100):
            batch = range(start, min(start + 100, hpas))
            core.create_many(DEPLOYMENT, [_deployment(i, pods) for i in batch])
            core.create_many(POD, [_pod(i, j, now) for i in batch for j in range(pods)])
        publisher = Publisher(store, hpas, pods).start()
        manager = ControllerManager(core, ManagerConfig(leader_elect=False, events=True,
                                                        cluster_state_metrics=False,
                                                        controllers=("horizontalpodautoscaling",)))
        manager.start()
        assert manager.wait_active(120), "controller manager did not start"
        controller: Any = manager.controllers()["horizontalpodautoscaling"]
        created = time.time()
        batches = range(0, hpas, 100)
        for start in batches:
            core.create_many(HORIZONTALPODAUTOSCALER, [_hpa(i, pods) for i in range(start, min(start + 100,
                                                                                                hpas))])
            if stagger:
                time.sleep(stagger / len(batches))  # HPAs created over a while, not all at one instant
        # Sample each HPA's last reconcile time to find the gaps between its reconciles (the first gap
        # is measured from the end of the creations: an HPA's first sync is a period after its add event).
        created = time.time()
        seen: dict[str, float] = {}
        max_gap: dict[str, float] = {}
        end = created + seconds
        while time.time() < end:
            for key, last in list(controller.last_reconciled.items()):
                previous = seen.get(key, created)
                if last != previous:
                    max_gap[key] = max(max_gap.get(key, 0.0), last - previous)
                    seen[key] = last
            time.sleep(0.2)
        final = time.time()
        for key in [f"{NAMESPACE}/d{i}" for i in range(hpas)]:
            # The time since the last reconcile counts too (an HPA that stopped being reconciled).
            max_gap[key] = max(max_gap.get(key, 0.0), final - seen.get(key, created) - SLACK)
        reconciles = controller.reconciles
        samples = controller.reconcile_latency
        queue_wait = controller.queue.queue_latency
        manager.stop()
        publisher.stop()
        late = sorted(k for k, gap in max_gap.items() if gap > PERIOD + SLACK)
        scaled = sum(1 for d in core.list(DEPLOYMENT, NAMESPACE).items if d["spec"]["replicas"] != pods)
        return {
            "hpas": hpas, "pods_per_deployment": pods, "seconds": seconds, "stagger_seconds": stagger,
            "reconciles": reconciles,
            "reconciles_per_second": reconciles / seconds,
            "reconcile_p50_ms": samples.percentile(50) * 1e3, "reconcile_p99_ms": samples.percentile(99) * 1e3,
            "queue_wait_p50_ms": queue_wait.percentile(50) * 1e3,
            "queue_wait_p99_ms": queue_wait.percentile(99) * 1e3,
            "max_gap_seconds": max(max_gap.values(), default=0.0),
            "hpas_late": len(late), "every_hpa_within_period": not late, "deployments_rescaled": scaled,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hpas", type=int, default=1_000)
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--stagger", type=float, default=0.0,
                        help="spread the HPAs' creation over this many seconds (0: all at once, one burst per period)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    report(run(args.hpas, args.pods, args.seconds, args.stagger), args.json, key_width=28)
    return 0


if __name__ == "__main__":
    sys.exit(main())
