"""Benchmark: the EndpointSlice controller under pod churn.

On an embedded Redis in a temporary directory: ``--services`` (100) Services, each
selecting ``--pods`` / ``--services`` pods (5,000 in all: 50 a Service), every pod
bound, Running, with an IP and Ready. The EndpointSlice controller (alone in a
controller manager) first builds every slice; then the benchmark changes
``--rate`` (50) pods a second for ``--seconds`` (30) — each change flips one random
pod's Ready condition, the change kube-proxy's endpoints follow most often — and
waits until every slice shows the final readiness. Reported:

* reconcile p50 / p99 (the controller's own per-sync samples, churn phase only),
* reconciles and slice writes (creates + updates + deletes) per second of churn,
* the time from the last change to slices that agree with the pods (convergence).

Run: ``.venv/bin/python -m loadgen.bench_endpointslice [--services 100] [--pods 5000]
[--rate 50] [--seconds 30] [--json out.json]``. Prints numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

from emulator.api.kinds import ENDPOINTSLICE, POD, SERVICE
from emulator.api.types import Obj
from emulator.clock import SystemClock, rfc3339
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.server.core import ServerCore
from loadgen.benchkit import report, server_core


def _service(i: int) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"svc-{i}", "namespace": "default"},
            "spec": {"selector": {"app": f"svc-{i}"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}


def _pod(i: int, services: int) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i:05d}", "namespace": "default", "labels": {"app": f"svc-{i % services}"}},
            "spec": {"nodeName": f"node-{i % 100}", "containers": [{"name": "app", "image": "nginx:1.27"}]}}


def _status(pod: Obj, i: int, ready: bool, now: float) -> Obj:
    ts = rfc3339(now)
    return {**pod, "status": {**pod["status"], "phase": "Running", "podIP": f"10.{i // 65536 + 1}.{i // 256 % 256}."
                                                                            f"{i % 256}",
                              "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                              "lastTransitionTime": ts}]}}


def _ready_in_slices(core: ServerCore) -> dict[str, bool]:
    return {e["targetRef"]["name"]: bool(e["conditions"]["ready"])
            for s in core.list(ENDPOINTSLICE, "default").items for e in s.get("endpoints") or []}


def _wait(condition: Any, timeout: float, what: str) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - start


def run(services: int, pods: int, rate: float, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {"services": services, "pods": pods, "rate": rate, "seconds": seconds}
    with server_core(SystemClock()) as core:
        manager = None
        try:
            for i in range(services):
                core.create(SERVICE, _service(i))
            started = time.monotonic()
            latest: dict[int, Obj] = {}
            for lo in range(0, pods, 500):
                created = core.create_many(POD, [_pod(i, services) for i in range(lo, min(pods, lo + 500))])
                now = core.clock.now()
                stored = core.update_status_many(POD, [_status(p, lo + k, True, now) for k, p in enumerate(created)
                                                       if isinstance(p, dict)])
                latest.update((lo + k, p) for k, p in enumerate(stored) if isinstance(p, dict))
            out["setup_s"] = round(time.monotonic() - started, 2)
            manager = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=("endpointslice",),
                                                            events=False, cluster_state_metrics=False))
            manager.start()
            assert manager.wait_active(120)
            ctrl: Any = manager.controllers()["endpointslice"]
            out["initial_sync_s"] = round(_wait(lambda: len(_ready_in_slices(core)) == pods, 600,
                                                "every pod in a slice"), 2)
            out["slices"] = len(core.list(ENDPOINTSLICE, "default").items)
            # The informers' initial ADD notifications (one per pod, each queueing its Service) drain after
            # the slices are complete; measure only once the controller has been idle for a second.
            last = [ctrl.reconciles, time.monotonic()]

            def idle() -> bool:
                if ctrl.reconciles != last[0] or len(ctrl.queue):
                    last[:] = [ctrl.reconciles, time.monotonic()]
                return time.monotonic() - last[1] > 1.0
            _wait(idle, 300, "the controller to go idle")
            ctrl.reconcile_latency.clear()
            reconciles0, writes0 = ctrl.reconciles, ctrl.slice_writes

            rng = random.Random(1)
            ready = dict.fromkeys(range(pods), True)
            changes = 0
            t0 = time.monotonic()
            while (elapsed := time.monotonic() - t0) < seconds:
                due = int(elapsed * rate) + 1
                batch: dict[int, Obj] = {}
                while changes < due:  # the changes due by now, written in one pipelined round trip
                    i = rng.randrange(pods)
                    ready[i] = not ready[i]
                    batch[i] = _status(batch.get(i, latest[i]), i, ready[i], core.clock.now())
                    changes += 1
                stored = core.update_status_many(POD, list(batch.values()))
                latest.update((i, p) for i, p in zip(batch, stored, strict=True) if isinstance(p, dict))
                time.sleep(max(0.0, (changes / rate) - (time.monotonic() - t0)))
            churn_s = time.monotonic() - t0
            want = {f"pod-{i:05d}": r for i, r in ready.items()}
            out["convergence_s"] = round(_wait(lambda: _ready_in_slices(core) == want, 120,
                                               "slices to agree with the pods"), 2)
            window = churn_s + out["convergence_s"]
            out["changes"] = changes
            out["changes_per_s"] = round(changes / churn_s, 1)
            out["reconciles_per_s"] = round((ctrl.reconciles - reconciles0) / window, 1)
            out["slice_writes_per_s"] = round((ctrl.slice_writes - writes0) / window, 1)
            out["reconcile_p50_ms"] = round(ctrl.reconcile_latency.percentile(50) * 1e3, 2)
            out["reconcile_p99_ms"] = round(ctrl.reconcile_latency.percentile(99) * 1e3, 2)
            out["errors"] = ctrl.errors
        finally:
            if manager is not None:
                manager.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--services", type=int, default=100)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    report(run(args.services, args.pods, args.rate, args.seconds), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
