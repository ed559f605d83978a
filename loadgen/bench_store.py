"""Store benchmark: pod creates/s, watch delivery latency, list of 100k pods.

    .venv/bin/python -m loadgen.bench_store [--pods 20000] [--list-pods 100000] [--json out.json]
        [--durability everysec|strict] [--data-dir DIR] [--creates-only]

Starts its own embedded Redis in a temporary directory (or uses ``--redis-url``)
and reports:

* pod creates/s through the server core (defaulting, validation, admission,
  the commit script), one process one-at-a-time, one process batched
  (``create_many``), and 4 processes batched;
* watch delivery latency from "about to write" to "watcher decoded it" at a
  paced 1,000 and 10,000 writes/s, the watcher in another process;
* listing 100,000 pods: wall time and the peak memory the list adds.

Numbers are for the machine it runs on; the issue's targets are for the 2-core
reference machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import time
from typing import Any

from emulator.api.kinds import NAMESPACE, POD
from emulator.cluster import APPENDFSYNC
from emulator.server.core import ServerCore
from emulator.store.store import Store
from loadgen.benchkit import paced, redis_url, save
from loadgen.plan import pod_manifest
from loadgen.runner import percentile

SENT_AT = "kemu.io/bench-sent-at"


def _core(url: str) -> ServerCore:
    return ServerCore(Store.connect(url))


def _pods(prefix: str, n: int, ns: str = "bench") -> list[dict[str, Any]]:
    return [pod_manifest(f"{prefix}-{i}", ns, "100m", "128Mi") for i in range(n)]


def bench_single(url: str, n: int) -> float:
    core = _core(url)
    pods = _pods("single", n)
    t = time.perf_counter()
    for p in pods:
        core.create(POD, p)
    return n / (time.perf_counter() - t)


def bench_batched(url: str, n: int, prefix: str = "batch", batch: int = 500) -> float:
    core = _core(url)
    pods = _pods(prefix, n)
    t = time.perf_counter()
    for i in range(0, n, batch):
        core.create_many(POD, pods[i:i + batch])
    return n / (time.perf_counter() - t)


def _batched_worker(url: str, n: int, prefix: str, out: Any) -> None:
    out.put(bench_batched(url, n, prefix))


def bench_processes(url: str, n: int, procs: int = 4) -> float:
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    workers = [ctx.Process(target=_batched_worker, args=(url, n // procs, f"proc{w}", q)) for w in range(procs)]
    t = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return n / (time.perf_counter() - t)


def _watcher(url: str, since: int, n: int, out: Any) -> None:
    watch = _core(url).watch(POD, since)
    lat: list[float] = []
    while len(lat) < n:
        for ev in watch.next_batch(timeout=1.0):
            sent = float(ev.object["metadata"]["annotations"][SENT_AT])
            lat.append(time.time() - sent)
    out.put(lat)


def bench_watch_latency(url: str, rate: int, seconds: float) -> dict[str, float]:
    """Write ``rate`` pods/s for ``seconds`` in 1 ms-granular ticks; a watcher process measures delivery."""
    core = _core(url)
    n = int(rate * seconds)
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    watcher = ctx.Process(target=_watcher, args=(url, core.store.current_rv(), n, q))
    watcher.start()
    time.sleep(1.0)  # benchmark warm-up: let the watcher process import and block in XREAD
    per_tick = max(1, int(rate * 0.01))
    pods = _pods(f"w{rate}", n)
    start = time.perf_counter()
    for batch in paced(pods, rate, start, SENT_AT):
        if per_tick == 1:
            core.create(POD, batch[0])
        else:
            core.create_many(POD, batch)
    achieved = n / (time.perf_counter() - start)
    lat = [x * 1000 for x in q.get(timeout=120)]
    watcher.join()
    return {"targetRate": rate, "achievedRate": round(achieved), "p50ms": round(percentile(lat, 0.5), 3),
            "p99ms": round(percentile(lat, 0.99), 3), "maxms": round(max(lat), 3)}


def bench_list(url: str, n: int) -> dict[str, float]:
    core = _core(url)
    have = len(core.list(POD).items)
    if have < n:
        bench_batched(url, n - have, prefix="list")
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    items = core.list(POD).items
    seconds = time.perf_counter() - t
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"items": len(items), "seconds": round(seconds, 3), "peakRssGrowthMiB": round((rss1 - rss0) / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--redis-url")
    ap.add_argument("--pods", type=int, default=20_000, help="pods per create benchmark")
    ap.add_argument("--list-pods", type=int, default=100_000)
    ap.add_argument("--watch-seconds", type=float, default=5.0)
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--durability", choices=sorted(APPENDFSYNC), default="everysec",
                    help="the embedded Redis's AOF fsync, as `kemu up --durability` (strict: appendfsync always)")
    ap.add_argument("--data-dir", help="put the embedded Redis's AOF under this directory (default: a temporary "
                                       "one; fsync costs depend on the file system: tmpfs has none)")
    ap.add_argument("--creates-only", action="store_true", help="only the creates/s benchmarks")
    args = ap.parse_args(argv)

    with redis_url(args.redis_url, appendfsync=APPENDFSYNC[args.durability], data_dir=args.data_dir) as url:
        core = _core(url)
        core.store.redis.flushall()
        core = _core(url)
        core.bootstrap()
        core.create(NAMESPACE, {"metadata": {"name": "bench"}})
        results: dict[str, Any] = {}
        results["createsPerSecond"] = {
            "oneProcessSingle": round(bench_single(url, min(args.pods, 5000))),
            "oneProcessBatched": round(bench_batched(url, args.pods)),
            "fourProcessesBatched": round(bench_processes(url, args.pods)),
        }
        results["durability"] = args.durability
        print(json.dumps(results, indent=2), flush=True)
        if not args.creates_only:
            results["watchLatency"] = [bench_watch_latency(url, r, args.watch_seconds) for r in (1000, 10000)]
            print(json.dumps(results["watchLatency"], indent=2), flush=True)
            core.store.redis.flushall()
            core = _core(url)
            core.bootstrap()
            core.create(NAMESPACE, {"metadata": {"name": "bench"}})
            results["list"] = bench_list(url, args.list_pods)
            print(json.dumps(results["list"], indent=2), flush=True)
    save(results, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
