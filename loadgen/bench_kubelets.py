"""Kubelet shards benchmark: nodes to Ready, pods running with profiles, leases on time, startup latency.

    .venv/bin/python -m loadgen.bench_kubelets [--nodes 5000] [--pods 20000] [--shards K] [--steady 60]
                                               [--latency-pods 1000] [--rate 100] [--json out.json]

Brings a whole local emulator up the way ``kemu up --nodes N`` does
(:class:`~emulator.cluster.LocalCluster` with the Ray kubelet runner: embedded
Redis, the API server, a local Ray instance, K kubelet shard actors) and
measures, on the machine it runs on:

1. **launch → N nodes Ready**: wall time from the call that starts the cluster
   until every Node exists with ``Ready=True`` (Ray start-up included, and
   reported on its own);
2. **P pods running with usage profiles**: P pods bound to the nodes by
   ``spec.nodeName`` (round robin; the profiles ``default``, ``web``,
   ``diurnal``, ``spiky`` in turn; images pre-pulled on every node), created
   as fast as ``create_many`` goes; time until all are Running and Ready;
3. **steady state** for ``--steady`` seconds with all P pods running: CPU
   (cores busy, summed over every process of the emulator - this driver,
   Redis, the API server, Ray's own processes and the actors) and memory (RSS
   and PSS summed over the same processes; PSS does not double-count pages
   shared between processes, such as Ray's object store), also without this
   driver process, which is mostly the load generator (its creates and its
   watch of every pod event);
4. **leases on time** over the whole run: renewals the shards wrote late
   (more than two ticks after due), leases that expired (no renewal within
   leaseDurationSeconds: the node would go NotReady) and the longest gap
   between two renewals of one node; plus nodes whose lease is older than
   40 s at the end;
5. **pod startup latency at ``--rate`` pods/s**: ``--latency-pods`` more pods,
   created one at a time at the given rate on top of the P running ones, with
   ``kemu.io/startup-delay: 0s`` and a pre-pulled image, so what is measured is
   the emulator's own pipeline (create → shard informer → admission → model →
   status write → watch) and not a modelled delay or image pull: from just
   before the create call to the moment this process's watch sees the pod
   Ready. Reported as p50 / p99 / max.

Events are recorded for Warnings only by default (``--events all`` records
every kubelet event: about four more writes per pod start). Numbers are for
the machine it runs on; the issue's targets are for the 2-core reference
machine: 5,000 nodes Ready < 30 s, 150,000 pods < 12 GiB RSS in total,
startup p99 < 5 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from typing import Any

from actors.cli import kubelet_runner
from emulator.api.kinds import LEASE, NAMESPACE, NODE, POD
from emulator.clock import parse_rfc3339
from emulator.cluster import LocalCluster
from emulator.config import Config
from emulator.server.core import ServerCore
from loadgen.benchkit import report
from loadgen.runner import percentile

PROFILES = ("default", "web", "diurnal", "spiky")
IMAGES = {"registry.kemu/app:1": "80Mi", "registry.kemu/web:2": "120Mi"}
_CLK_TCK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------ process tree


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry))
    return out


def process_tree(root: int | None = None) -> list[int]:
    """This process and every descendant (Redis, the API server, Ray's processes and actors)."""
    root = os.getpid() if root is None else root
    children = _children()
    pids, stack = [], [root]
    while stack:
        pid = stack.pop()
        pids.append(pid)
        stack.extend(children.get(pid, ()))
    return pids


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[pid] = (int(fields[11]) + int(fields[12])) / _CLK_TCK
        except OSError:
            continue
    return out


def memory(pids: list[int]) -> tuple[int, int, dict[str, int]]:
    """(RSS, PSS) in bytes summed over ``pids``, and PSS by process name (for the report)."""
    rss = pss = 0
    by_name: dict[str, int] = {}
    for pid in pids:
        try:
            mine = 0
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        mine = int(line.split()[1]) * 1024
                        pss += mine
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        name = os.path.basename(argv[0].decode(errors="replace")) or str(pid)
        if name.startswith("python") and len(argv) > 1:
            name = " ".join(a.decode(errors="replace") for a in argv[1:3])[:60]
        by_name[name] = by_name.get(name, 0) + mine
    return rss, pss, by_name


# ------------------------------------------------------------------------------------ pods


def bench_pod(name: str, node: str, profile: str, *, instant: bool = False) -> dict[str, Any]:
    annotations = {"kemu.io/profile": profile}
    if instant:
        annotations["kemu.io/startup-delay"] = "0s"
    image = list(IMAGES)[zlib.crc32(name.encode()) % len(IMAGES)] if not instant else next(iter(IMAGES))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "bench", "annotations": annotations},
            "spec": {"nodeName": node, "containers": [{
                "name": "app", "image": image,
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                              "limits": {"cpu": "500m", "memory": "512Mi"}}}]}}


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


class ReadyWatcher:
    """Follows the pod stream; records the first wall time each pod is seen Ready."""

    def __init__(self, core: ServerCore, since_rv: int) -> None:
        self.core = core
        self.watch = core.store.watch(POD, since_rv)
        self.ready_at: dict[str, float] = {}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="bench-ready-watch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for event in self.watch.next_batch(timeout=0.2):
                if event.type != "DELETED" and _ready(event.object):
                    name = event.object["metadata"]["name"]
                    self.ready_at.setdefault(name, time.time())

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(5)


def count_ready_nodes(core: ServerCore) -> int:
    return sum(1 for n in core.list(NODE).items
               if any(c.get("type") == "Ready" and c.get("status") == "True"
                      for c in (n.get("status") or {}).get("conditions") or ()))


def wait_until(check: Any, timeout: float, poll: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(poll)  # polling other processes' progress
    return check()


# ------------------------------------------------------------------------------------ main


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="kemu-bench-kubelets-"))
    pools = [{"name": "node", "count": args.nodes, "images": IMAGES}]
    cfg = Config(data_dir=data / "redis", node_shards=16, api_enabled=not args.no_api, api_port=0,
                 controller_managers=args.controllers, kubelet_shards=args.shards, node_pools=pools,
                 kubelet={"events": args.events, **({"tick_interval": args.tick} if args.tick else {})},
                 stream_cap=args.stream_cap)
    result: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods}
    cluster = LocalCluster(cfg, kubelets=kubelet_runner)
    t0 = time.time()
    try:
        cluster.start()
        started = time.time()
        core = cluster.core
        assert core is not None and cluster.kubelets is not None
        launcher: Any = cluster.kubelets
        result["shards"] = launcher.shards
        wait_until(lambda: count_ready_nodes(core) >= args.nodes, 300, poll=0.2)
        ready = time.time()
        result["launch_to_nodes_ready_s"] = round(ready - t0, 2)
        result["cluster_start_call_s"] = round(started - t0, 2)
        print(f"{args.nodes} nodes Ready {ready - t0:.1f} s after launch ({launcher.shards} shards; "
              f"start call {started - t0:.1f} s)", flush=True)

        core.create(NAMESPACE, {"metadata": {"name": "bench"}})
        names = [f"node-{i:05d}" for i in range(args.nodes)]
        watcher = ReadyWatcher(core, core.store.current_rv())
        t = time.time()
        batch = 1000
        for start in range(0, args.pods, batch):
            chunk = [bench_pod(f"p-{i}", names[i % args.nodes], PROFILES[i % len(PROFILES)])
                     for i in range(start, min(args.pods, start + batch))]
            core.create_many(POD, chunk)
        created = time.time()
        ok = wait_until(lambda: len(watcher.ready_at) >= args.pods, args.timeout)
        running = time.time()
        result["pods_create_s"] = round(created - t, 2)
        result["pods_all_running_s"] = round(running - t, 2) if ok else None
        print(f"{args.pods} pods created in {created - t:.1f} s, all Running+Ready after {running - t:.1f} s "
              f"({len(watcher.ready_at)} ready)", flush=True)

        # Steady state.
        pids = process_tree()
        cpu0, w0 = cpu_seconds(pids), time.time()
        time.sleep(args.steady)  # the measurement window itself
        pids2 = process_tree()
        cpu1, w1 = cpu_seconds(pids2), time.time()
        busy = sum(cpu1[p] - cpu0[p] for p in cpu1 if p in cpu0)
        rss, pss, by_name = memory(pids2)
        # This process is the load generator (creates, watches) as much as the emulator: reported apart.
        driver_rss, driver_pss, _ = memory([os.getpid()])
        result["emulator_rss_gib"] = round((rss - driver_rss) / 2**30, 3)
        result["emulator_pss_gib"] = round((pss - driver_pss) / 2**30, 3)
        result["driver_pss_gib"] = round(driver_pss / 2**30, 3)
        result["pss_by_process_mib"] = {k: round(v / 2**20) for k, v in sorted(by_name.items(), key=lambda kv: -kv[1])}
        result["steady_cpu_cores"] = round(busy / (w1 - w0), 3)
        result["steady_rss_gib"] = round(rss / 2**30, 3)
        result["steady_pss_gib"] = round(pss / 2**30, 3)
        result["processes"] = len(pids2)
        print(f"steady {args.steady} s with {args.pods} pods: {busy / (w1 - w0):.2f} cores, RSS {rss / 2**30:.2f} "
              f"GiB, PSS {pss / 2**30:.2f} GiB over {len(pids2)} processes (without this driver: RSS "
              f"{result['emulator_rss_gib']:.2f} GiB, PSS {result['emulator_pss_gib']:.2f} GiB)", flush=True)

        # Startup latency at a paced rate.
        latencies: list[float] = []
        if args.latency_pods:
            sent: dict[str, float] = {}
            interval = 1.0 / args.rate
            next_at = time.monotonic()
            for i in range(args.latency_pods):
                name = f"lat-{i}"
                body = bench_pod(name, names[(i * 7919) % args.nodes], "default", instant=True)
                now = time.monotonic()
                if now < next_at:
                    time.sleep(next_at - now)  # pacing the create rate
                next_at += interval
                sent[name] = time.time()
                core.create(POD, body)
            wait_until(lambda: all(n in watcher.ready_at for n in sent), 120)
            latencies = sorted(watcher.ready_at[n] - s for n, s in sent.items() if n in watcher.ready_at)
            result["startup_latency_s"] = {"p50": round(percentile(latencies, 0.5), 3),
                                           "p99": round(percentile(latencies, 0.99), 3),
                                           "max": round(latencies[-1], 3), "n": len(latencies),
                                           "rate_per_s": args.rate}
            print(f"startup latency at {args.rate}/s ({len(latencies)} pods): p50 {percentile(latencies, 0.5):.3f} s"
                  f", p99 {percentile(latencies, 0.99):.3f} s, max {latencies[-1]:.3f} s", flush=True)
        watcher.stop()

        health = launcher.health()
        leases = core.list(LEASE, "kube-node-lease").items
        now = core.clock.now()
        stale = sum(1 for lease in leases if now - parse_rfc3339(lease["spec"]["renewTime"]) > 40)
        result["leases"] = {"renewals": sum(h["leaseRenewals"] for h in health),
                            "late": sum(h["lateRenewals"] for h in health),
                            "expired": sum(h["expiredLeases"] for h in health),
                            "max_gap_s": max(h["maxRenewGap"] for h in health),
                            "stale_at_end": stale, "leases": len(leases)}
        result["shard_max_tick_s"] = max(h["maxTickSeconds"] for h in health)
        result["shard_last_tick_s"] = [h["lastTickSeconds"] for h in health]
        print(f"leases: {result['leases']}; slowest tick {result['shard_max_tick_s']:.2f} s", flush=True)
    finally:
        cluster.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--shards", type=int, default=None, help="kubelet shards (default: one per 1,250 nodes)")
    ap.add_argument("--steady", type=float, default=30.0, help="seconds of steady-state measurement")
    ap.add_argument("--latency-pods", type=int, default=500)
    ap.add_argument("--rate", type=float, default=100.0, help="create rate of the latency pods, per second")
    ap.add_argument("--events", choices=("all", "warnings", "none"), default="warnings")
    ap.add_argument("--tick", type=float, default=None, help="kubelet tick interval, cluster seconds (default 1)")
    ap.add_argument("--controllers", type=int, default=0, help="controller managers to run alongside (default 0)")
    ap.add_argument("--no-api", action="store_true", help="do not start the HTTP API server")
    ap.add_argument("--stream-cap", type=int, default=200_000)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for all pods to run")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    args = ap.parse_args(argv)
    result = run(args)
    report(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
