"""Kubelet status reconciliation benchmark: the cost of one ``syncBatch(true)`` pass at scale.

    .venv/bin/python -m loadgen.bench_status_reconcile [--nodes 2000] [--pods 20000] [--passes 5]
                                                       [--overwritten 1000] [--json out.json]

One kubelet shard (in this process, no Ray) on an embedded Redis and a ManualClock runs
``--nodes`` pool nodes and ``--pods`` pods bound to them round robin (images pre-pulled, no
startup delay), ticked until every pod is Running. Then it measures, in wall seconds:

1. **in-sync pass** (``--passes`` times): the periodic reconcile when the store holds what the
   kubelet intends - one pipelined ``HMGET`` of every pod's resourceVersion and an integer
   comparison per pod (:mod:`emulator.kubelet.status_reconcile`);
2. **pass with stale pods**: ``--overwritten`` pods get an old status written back behind the
   kubelet's back; the pass reads those pods whole (one more pipelined ``HMGET``), compares
   them with the intended status and marks them dirty; then the tick that re-writes them;
3. **tick** with nothing to write and no pass due, for scale.

Numbers are for the machine it runs on (a shared 2-core machine in the issue's measurements).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from emulator.api.kinds import NAMESPACE, POD
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.kubelet.shard import KubeletShard, kubelet_shard_config
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig
from emulator.store.store import Store, StoreConfig

IMAGE = "registry.kemu/app:1"
T0 = 1_700_000_000.0


def bench_pod(name: str, node: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "bench", "annotations": {"kemu.io/startup-delay": "0s"}},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": IMAGE, "resources": {
                "requests": {"cpu": "10m", "memory": "16Mi"}}}]}}


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="kemu-bench-reconcile-"))
    server = EmbeddedRedis(RedisServerConfig(data_dir=data / "redis"))
    server.start()
    clock = ManualClock(T0)
    store = Store.connect(server.url, StoreConfig(node_shards=16))
    core = ServerCore(store, clock)
    core.bootstrap()
    pools = [{"name": "node", "count": args.nodes, "images": {IMAGE: "80Mi"}}]
    shard = KubeletShard(core, 0, 1, kubelet_shard_config({"events": "none"}, pools), clock)
    result: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods}
    try:
        shard.start(timeout=120)

        def tick() -> float:
            clock.advance(1.0)
            t = time.perf_counter()
            shard.tick()
            return time.perf_counter() - t

        tick()
        core.create(NAMESPACE, {"metadata": {"name": "bench"}})
        names = [f"node-{i:05d}" for i in range(args.nodes)]
        t = time.perf_counter()
        for start in range(0, args.pods, 1000):
            core.create_many(POD, [bench_pod(f"p-{i}", names[i % args.nodes])
                                   for i in range(start, min(args.pods, start + 1000))])
        assert shard.sync(120), "the shard's informers did not catch up"
        while sum(1 for _n, _node, stage in shard.pods().values() if stage == "Running") < args.pods:
            tick()
            shard.sync(60)
        tick()  # the last statuses written
        result["load_s"] = round(time.perf_counter() - t, 1)
        st = shard.stats
        print(f"{args.pods} pods Running on {args.nodes} nodes after {result['load_s']} s "
              f"({st.pod_status_writes} status writes)", flush=True)

        reconciler = shard.status.reconciler
        in_sync = []
        for _ in range(args.passes):
            t = time.perf_counter()
            stale = reconciler.reconcile(clock.now())
            in_sync.append(time.perf_counter() - t)
            assert stale == 0, f"{stale} pods stale with nothing changed"
        result["in_sync_pass_s"] = {"median": round(statistics.median(in_sync), 4), "min": round(min(in_sync), 4),
                                    "max": round(max(in_sync), 4), "passes": args.passes}
        print(f"in-sync reconcile pass over {args.pods} pods: median {statistics.median(in_sync) * 1000:.1f} ms "
              f"(min {min(in_sync) * 1000:.1f}, max {max(in_sync) * 1000:.1f})", flush=True)

        idle_ticks = [tick() for _ in range(3)]
        result["tick_s_without_pass"] = round(statistics.median(idle_ticks), 4)

        # Overwrite some statuses behind the kubelet's back (an old phase), as a lost write would leave them.
        victims = [f"p-{i}" for i in range(0, args.pods, max(1, args.pods // max(1, args.overwritten)))]
        victims = victims[:args.overwritten]
        pods = [core.get(POD, "bench", n) for n in victims]
        stale_status = {"phase": "Pending", "conditions": [], "containerStatuses": []}
        for start in range(0, len(pods), 1000):
            core.update_status_many(POD, [{**p, "status": stale_status} for p in pods[start:start + 1000]])
        t = time.perf_counter()
        found = reconciler.reconcile(clock.now())
        stale_pass = time.perf_counter() - t
        assert found == len(victims), f"found {found} stale pods of {len(victims)} overwritten"
        writes = st.pod_status_writes
        repair_tick = tick()
        repaired = st.pod_status_writes - writes
        result["stale_pass_s"] = round(stale_pass, 4)
        result["overwritten"] = len(victims)
        result["repair_tick_s"] = round(repair_tick, 4)
        result["repaired_writes"] = repaired
        print(f"reconcile pass with {len(victims)} overwritten pods: {stale_pass * 1000:.1f} ms; the tick that "
              f"re-wrote them ({repaired} writes): {repair_tick * 1000:.1f} ms", flush=True)
        bad = [n for n in victims if (core.get(POD, "bench", n).get("status") or {}).get("phase") != "Running"]
        assert not bad, f"{len(bad)} pods not repaired"

        print(f"a tick with nothing to write and no pass due: {result['tick_s_without_pass'] * 1000:.1f} ms",
              flush=True)
    finally:
        shard.stop()
        store.close()
        server.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--overwritten", type=int, default=1000)
    ap.add_argument("--json", help="also write the results as JSON to this file")
    args = ap.parse_args(argv)
    result = run(args)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
