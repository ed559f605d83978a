"""Benchmark: the Deployment and ReplicaSet controllers at scale.

Two measurements, on an embedded Redis in a temporary directory:

1. **Rollout at scale.** A Deployment of ``--replicas`` (10,000) on ``--nodes``
   (5,000) nodes: time from the create to every pod stored, seen by a watcher,
   and reported available by the Deployment. Pods run on a stand-in
   kubelet+scheduler in its own process (following the pod watch: bind round
   robin through the atomic bind, then mark Running and Ready) — the same store
   writes a kubelet shard and a scheduler make, without their models.
2. **Reconcile latency under churn.** With the Deployment settled, pods are
   deleted at a steady rate chosen so the pod stream carries about ``--churn``
   (100) events per second (a deletion makes about five: graceful delete,
   final delete, replacement create, bind, Ready); per controller, the p50 / p99
   of reconcile duration and of queue wait are reported from the controllers'
   own samples, plus the events/s actually observed. A PodDisruptionBudget
   covering the Deployment keeps the disruption controller busy too.

Run: ``.venv/bin/python -m loadgen.bench_controllers [--replicas 10000] [--nodes 5000]
[--churn 100] [--churn-seconds 20] [--json out.json]``. Prints numbers, asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from emulator.api import errors
from emulator.api.kinds import DEPLOYMENT, NODE, PDB, POD
from emulator.api.types import Obj
from emulator.clock import SystemClock, rfc3339
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig
from emulator.store.store import Store


def _node(name: str) -> Obj:
    cap = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"capacity": cap, "allocatable": dict(cap),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _deployment(replicas: int) -> Obj:
    labels = {"app": "bench"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bench", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "app", "image": "nginx:1.27",
                          "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}


def _kubelet_process(url: str, nodes: list[str], target: int, *, stop: Any, created: Any, all_created_at: Any,
                     events: Any, ready: Any) -> None:
    """The stand-in kubelet+scheduler, in its own process (as kubelet shards and schedulers are).

    Follows the pod watch: binds new pods round robin through the atomic bind, marks them
    Running+Ready, confirms graceful deletions. Reports through shared counters.
    """
    core = ServerCore(Store.connect(url), SystemClock())
    watch = core.watch(POD, since_rv=core.store.current_rv())
    turn = 0
    while not stop.is_set():
        for event in watch.next_batch(timeout=0.1):
            events.value += 1
            pod, meta = event.object, event.object["metadata"]
            try:
                if event.type == "DELETED":
                    continue
                if meta.get("deletionTimestamp"):
                    core.delete(POD, meta["namespace"], meta["name"], grace_period_seconds=0)
                    continue
                if event.type == "ADDED":
                    created.value += 1
                    if created.value == target:
                        all_created_at.value = time.time()
                if pod["spec"].get("nodeName"):
                    continue
                bound = core.bind(meta["namespace"], meta["name"], nodes[turn % len(nodes)], uid=meta["uid"])
                turn += 1
                core.update_status(POD, {**bound, "status": _ready(bound, core.clock.now())})
                ready.value += 1
            except errors.StatusError as e:
                if e.code not in (404, 409):
                    raise
    watch.close()


class StandInKubelet:
    """Starts :func:`_kubelet_process` and reads its counters."""

    def __init__(self, url: str, nodes: list[str], target: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._stop = ctx.Event()
        self._created = ctx.Value("q", 0, lock=False)
        self._all_created_at = ctx.Value("d", 0.0, lock=False)
        self._events = ctx.Value("q", 0, lock=False)
        self._ready = ctx.Value("q", 0, lock=False)
        self._proc = ctx.Process(target=_kubelet_process, args=(url, nodes, target), daemon=True,
                                 kwargs={"stop": self._stop, "created": self._created,
                                         "all_created_at": self._all_created_at, "events": self._events,
                                         "ready": self._ready})

    def start(self) -> StandInKubelet:
        self._proc.start()
        return self

    @property
    def events(self) -> int:
        return int(self._events.value)

    @property
    def all_created_at(self) -> float | None:
        return float(self._all_created_at.value) or None

    def stop(self) -> None:
        self._stop.set()
        self._proc.join(10)


def _ready(pod: Obj, now: float) -> Obj:
    ts = rfc3339(now)
    status = dict(pod.get("status") or {})
    status.update(phase="Running", startTime=ts, conditions=[
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
        for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")])
    return status


def _wait(condition: Any, timeout: float, what: str) -> float:
    start = time.perf_counter()
    tick = threading.Event()
    while not condition():
        if time.perf_counter() - start > timeout:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        tick.wait(0.05)
    return time.perf_counter()


def run(replicas: int, nodes: int, churn: float, churn_seconds: float,
        controllers: tuple[str, ...] = ("*",)) -> dict[str, Any]:
    gc.set_threshold(50_000, 20, 1000)  # a process full of informer caches (see shared_informer.py)
    out: dict[str, Any] = {"replicas": replicas, "nodes": nodes}
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(RedisServerConfig(data_dir=Path(tmp)))
        url = server.start()
        try:
            core = ServerCore(Store.connect(url), SystemClock())
            core.bootstrap()
            names = [f"node-{i:05d}" for i in range(nodes)]
            for i in range(0, nodes, 500):
                core.create_many(NODE, [_node(n) for n in names[i:i + 500]])
            manager = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=controllers)).start()
            assert manager.wait_active(60)
            core.create(PDB, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                              "metadata": {"name": "bench", "namespace": "default"},
                              "spec": {"minAvailable": "90%", "selector": {"matchLabels": {"app": "bench"}}}})
            kubelet = StandInKubelet(url, names, replicas).start()
            # The kubelet process subscribes from the store's position when it starts: let it.
            threading.Event().wait(2.0)

            def available() -> bool:
                s = core.get(DEPLOYMENT, "default", "bench").get("status") or {}
                return s.get("availableReplicas") == replicas and s.get("updatedReplicas") == replicas

            t0, wall0 = time.perf_counter(), time.time()
            core.create(DEPLOYMENT, _deployment(replicas))
            pods_key = core.store.objects_key(POD)
            t_stored = _wait(lambda: core.store.redis.hlen(pods_key) >= replicas, 900, "every pod stored")
            out["create_to_all_pods_stored_s"] = round(t_stored - t0, 2)
            _wait(lambda: kubelet.all_created_at is not None, 900, "every pod created")
            t_ready = _wait(available, 900, "every replica available")
            assert kubelet.all_created_at is not None
            out["create_to_all_pods_created_s"] = round(kubelet.all_created_at - wall0, 2)
            out["create_to_all_available_s"] = round(t_ready - t0, 2)
            out["pods_per_s_to_available"] = round(replicas / (t_ready - t0), 1)

            # -------------------------------------------------------------- churn
            controllers = manager.controllers()
            for c in controllers.values():
                for samples in (getattr(c, "reconcile_latency", None), getattr(getattr(c, "queue", None),
                                                                               "queue_latency", None)):
                    if samples is not None:
                        samples.clear()
            deletions_per_s = churn / 5.0  # about five pod events per replaced pod
            rng = random.Random(1)
            events_before = kubelet.events
            start = time.perf_counter()
            next_at = start
            deleted = 0
            # Victims come from one list taken now: a list per deletion would cost more than the churn itself.
            pool = [p["metadata"]["name"] for p in core.list(POD, "default").items]
            rng.shuffle(pool)
            while time.perf_counter() - start < churn_seconds and pool:
                next_at += 1.0 / deletions_per_s
                pause = next_at - time.perf_counter()
                if pause > 0:
                    threading.Event().wait(pause)
                victim = pool.pop()
                try:
                    core.delete(POD, "default", victim)
                    deleted += 1
                except errors.StatusError:
                    pass
            elapsed = time.perf_counter() - start
            _wait(available, 120, "the Deployment to settle after churn")
            out["churn_pod_events_per_s"] = round((kubelet.events - events_before) / elapsed, 1)
            out["churn_deletions"] = deleted
            per: dict[str, Any] = {}
            for name, c in controllers.items():
                rec = getattr(c, "reconcile_latency", None)
                if rec is None or not len(rec):
                    continue
                per[name] = {"reconciles": len(rec),
                             "reconcile_p50_ms": round(rec.percentile(50) * 1e3, 2),
                             "reconcile_p99_ms": round(rec.percentile(99) * 1e3, 2),
                             "queue_wait_p99_ms": round(c.queue.queue_latency.percentile(99) * 1e3, 2)}
            out["controllers_under_churn"] = per
            kubelet.stop()
            manager.stop()
        finally:
            server.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--churn", type=float, default=100.0, help="target pod events/s during the churn phase")
    parser.add_argument("--churn-seconds", type=float, default=20.0)
    parser.add_argument("--controllers", default="*",
                        help="the manager's --controllers selection (default *: every controller on by default)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    result = run(args.replicas, args.nodes, args.churn, args.churn_seconds, tuple(args.controllers.split(",")))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
