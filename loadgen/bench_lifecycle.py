"""CPU per pod lifecycle, per component: where a pod's create → bind → start → status → delete is paid.

    .venv/bin/python -m loadgen.bench_lifecycle --nodes 1000 --pods 5000 --rate 100 --lifetime 10

Starts a cluster as ``kemu run`` does (embedded Redis, the API server process,
kubelet shards, schedulers and controller managers as Ray actors), waits for
the nodes, then measures twice over the same process tree, reading each
process's user+system CPU from ``/proc``:

1. **idle**: ``--idle`` seconds with no pods moving (leases, node status,
   ticks, informer resyncs): the cluster's floor, as a rate per component;
2. **lifecycle**: ``--pods`` pods created at ``--rate``/s through the store
   (as the ``store`` driver of ``kemu run`` does), each deleted ``--lifetime``
   s after its creation, until the last is gone from the store.

A component's cost per lifecycle is its lifecycle CPU minus its idle rate over
the same window, divided by the pods. Components are named from each
process's command line: ``redis-server``, the API server, Ray actors by class
(``KubeletShardActor``, ``SchedulerActor``, ``ControllerManagerActor``), Ray's
own daemons and idle workers, and this driver (creates, deletes, the watch
that sees pods go). Prints a table and writes JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from actors.cli import controller_runner, kubelet_runner, scheduler_runner
from emulator.api.kinds import EVENT, LEASE, NAMESPACE, NODE, POD
from emulator.cluster import LocalCluster
from emulator.config import Config
from loadgen.bench_kubelets import count_ready_nodes, cpu_seconds, process_tree, wait_until

COMPONENTS = ("redis", "api-server", "scheduler", "kubelet-shards", "controller-manager", "driver", "ray")


def component_of(pid: int, me: int) -> str:
    """Which part of kemu a process is, from its command line (Ray sets ``ray::<ActorClass>`` titles)."""
    if pid == me:
        return "driver"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if "redis-server" in argv:
        return "redis"
    if "KubeletShard" in argv:
        return "kubelet-shards"
    if "SchedulerActor" in argv:
        return "scheduler"
    if "ControllerManager" in argv:
        return "controller-manager"
    if "apiserver" in argv or "uvicorn" in argv:
        return "api-server"
    return "ray"  # raylet, GCS, dashboard, log monitor, idle workers


class CpuMeter:
    """Cumulative CPU per process of this tree, by component; a process that exits keeps its last reading."""

    def __init__(self) -> None:
        self.me = os.getpid()
        self.kind: dict[int, str] = {}

    def read(self) -> dict[int, float]:
        pids = process_tree()
        for pid in pids:
            if pid not in self.kind:
                self.kind[pid] = component_of(pid, self.me)
        return cpu_seconds(pids)

    def by_component(self, before: dict[int, float], after: dict[int, float]) -> dict[str, float]:
        out = dict.fromkeys(COMPONENTS, 0.0)
        for pid, t in after.items():
            kind = self.kind.get(pid, "ray")
            out[kind] = out.get(kind, 0.0) + t - before.get(pid, 0.0)
        return out


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "bench", "annotations": {"kemu.io/startup-delay": "0s"}},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9",
                                     "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]}}


def drive(core: Any, pods: int, rate: float, lifetime: float) -> float:
    """Create ``pods`` at ``rate``/s, delete each ``lifetime`` s later; seconds until the last is gone."""
    t0 = time.monotonic()
    due: list[tuple[float, str]] = []  # (delete at, name), in creation order
    created = deleted = 0
    batch = max(1, int(rate / 10))  # ten create round trips a second
    while deleted < pods:
        now = time.monotonic() - t0
        if created < pods and created < now * rate:
            names = [f"p-{i}" for i in range(created, min(pods, created + batch))]
            core.create_many(POD, [pod(n) for n in names])
            due += [(now + lifetime, n) for n in names]
            created += len(names)
        end = deleted
        while end < len(due) and due[end][0] <= now:
            end += 1
        if end > deleted:  # the pods due now, deleted as one batch (as the store driver's sink does)
            core.delete_named_many(POD, [("bench", name) for _, name in due[deleted:end]])
            deleted = end
        time.sleep(0.01)  # pacing the open-loop timeline
    while core.list(POD, namespace="bench").items:
        time.sleep(0.2)  # the kubelets finish terminating the last pods in other processes
    return time.monotonic() - t0


def writes_by_kind(store: Any, since_rv: int) -> dict[str, int]:
    """Watch events (= writes) after ``since_rv`` on each kind's stream, the kinds a lifecycle writes."""
    out: dict[str, int] = {}
    for kind in (POD, EVENT, NODE, LEASE):
        n = len(store.redis.xrange(store.stream_key(kind), min=f"({since_rv}-0", max="+"))
        out[kind.resource] = n
    out["total"] = store.current_rv() - since_rv
    return out


def table(rows: Iterable[tuple[str, float, float, float]], pods: int) -> list[str]:
    lines = [f"{'component':<20} {'lifecycle CPU s':>16} {'idle CPU s':>11} {'ms per pod':>11}"]
    for name, total, idle, per_pod in rows:
        lines.append(f"{name:<20} {total:>16.2f} {idle:>11.2f} {per_pod:>11.2f}")
    return lines


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="kemu-bench-lifecycle-"))
    cfg = Config(data_dir=data / "redis", nodes=args.nodes, api_port=0, kubelet_shards=args.shards,
                 schedulers=args.schedulers, controllers_on_ray=True, controller_managers=1)
    cluster = LocalCluster(cfg, kubelets=kubelet_runner, schedulers=scheduler_runner, controllers=controller_runner)
    result: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods, "rate": args.rate, "lifetime": args.lifetime}
    try:
        core = cluster.start()
        wait_until(lambda: count_ready_nodes(core) >= args.nodes, 300, poll=0.5)
        core.create(NAMESPACE, {"metadata": {"name": "bench"}})
        meter = CpuMeter()
        time.sleep(5)  # let start-up work (informer lists, first status writes) drain before the idle window
        c0, w0 = meter.read(), time.monotonic()
        threading.Event().wait(args.idle)  # the idle window itself
        c1, w1 = meter.read(), time.monotonic()
        idle_rate = {k: v / (w1 - w0) for k, v in meter.by_component(c0, c1).items()}
        print(f"idle floor measured; driving {args.pods} pods at {args.rate:g}/s", flush=True)  # (a profiler's cue)
        rv0 = core.store.current_rv()
        seconds = drive(core, args.pods, args.rate, args.lifetime)
        c2 = meter.read()
        writes = writes_by_kind(core.store, rv0)
        busy = meter.by_component(c1, c2)
        rows = []
        for name in sorted(busy, key=lambda k: -busy[k]):
            idle = idle_rate.get(name, 0.0) * seconds
            rows.append((name, busy[name], idle, max(0.0, busy[name] - idle) / args.pods * 1000))
        total = sum(r[3] for r in rows)
        result.update(seconds=round(seconds, 1), msPerPod={r[0]: round(r[3], 3) for r in rows},
                      totalMsPerPod=round(total, 2), idleCores={k: round(v, 3) for k, v in idle_rate.items()},
                      lifecycleCpuSeconds={k: round(v, 2) for k, v in busy.items()},
                      podsPerCoreSecond=round(1000 / total, 1) if total else None,
                      writesPerPod={k: round(v / args.pods, 2) for k, v in writes.items()})
        print("\n".join(table(rows, args.pods)))
        print(f"{'total':<20} {'':>16} {'':>11} {total:>11.2f}   ({args.pods} pods in {seconds:.1f} s; "
              f"{1000 / total if total else 0:.0f} lifecycles per CPU second)")
        print("store writes per pod: " + ", ".join(f"{k} {v / args.pods:.2f}" for k, v in writes.items()))
    finally:
        cluster.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=5000)
    p.add_argument("--rate", type=float, default=100.0, help="pods created per second")
    p.add_argument("--lifetime", type=float, default=10.0, help="seconds from a pod's creation to its deletion")
    p.add_argument("--idle", type=float, default=20.0, help="seconds of the idle window")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--schedulers", type=int, default=1)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    result = run(args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
