"""Informer benchmark: multiplexer fan-out throughput, write-to-handler latency, sharded list cost.

    .venv/bin/python -m loadgen.bench_informers [--informers 10] [--events 100000] [--json out.json]

Starts its own embedded Redis in a temporary directory (or uses ``--redis-url``)
and reports:

* **fan-out throughput**: ``--informers`` pod informers of one process on one
  multiplexer, each with a counting handler. The informers sync on an empty
  store, the multiplexer is held, ``--events`` pod creates are written, then
  the multiplexer starts and the clock runs until every handler has seen every
  event. Reported: events/s read from the stream, handler calls/s over all
  informers, XREAD round trips and entries per read.
* **latency**: the same informers in a child process (as a kubelet or
  scheduler process would be), the writer here pacing creates at
  ``--latency-rates``; each handler records ``now - sent`` (a wall-clock
  stamp in an annotation), p50/p99/max over every informer's every event.
  The highest rate runs twice: with CPython's default garbage-collector
  thresholds and with the informer processes' own (:func:`emulator.gctune.tune_for_caches`) in the informer
  process - the long tail at high rates is gen-2 collections walking every
  cached pod, and the second run shows what tuning the collector buys.
* **list cost**: with the pods of the throughput run bound to
  ``--nodes`` nodes, a full paged list by a reflector vs the list of one
  kubelet shard's informer (reads every pod, decodes only its shard's) vs
  that shard list without the byte-level pre-filter (decodes every pod).

With ``--lifecycle-reader`` it runs only the **lifecycle reader** benchmark:
a child process writes pod lifecycles at ``--rate`` pods/s for
``--seconds`` (create; bind 10 ms later; a Running status 200 ms later;
the graceful deletion's mark after ``--lifetime`` s; the final status and
the delete together 100 ms after that: the 6 pod writes per pod a
lifecycle makes), and this process hosts one reader set-up:

* ``controllers``: the controller manager (every controller on by default),
  as ``kemu run`` hosts it;
* ``shard``: a kubelet shard's informers (nodes, and the pods of every node
  shard), without the kubelet;
* ``scheduler-informers``: the informers a scheduler reads (nodes, pods),
  with two no-op handlers on pods, without the scheduler.

Reported: CPU microseconds per pod event read, by thread group of this
process (from ``/proc``, over the steady part of the run), the same per
lifecycle (6 pod events), and the reader's counters.

    .venv/bin/python -m loadgen.bench_informers --lifecycle-reader controllers --rate 100 --seconds 20

Numbers are for the machine it runs on.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import threading
import time
from typing import Any

from emulator import gctune
from emulator.api.kinds import NAMESPACE, POD
from emulator.informers import Multiplexer, ResourceEventHandlerFuncs, SharedInformer
from emulator.informers.delta_fifo import DeltaFIFO
from emulator.informers.reflector import Reflector
from emulator.informers.sharding import shard_object_filter
from emulator.server.core import ServerCore
from emulator.store.store import Store
from loadgen.benchkit import paced, redis_url, save
from loadgen.plan import pod_manifest
from loadgen.runner import percentile

SENT_AT = "kemu.io/bench-sent-at"


class _Counter:
    """A handler counting adds; ``done`` is set when it has seen ``target`` of them."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.seen = 0
        self.done = threading.Event()
        self.latencies: list[float] = []

    def on_add(self, obj: dict[str, Any], initial: bool) -> None:
        self.seen += 1
        if self.seen >= self.target:
            self.done.set()

    def on_add_timed(self, obj: dict[str, Any], initial: bool) -> None:
        sent = float(obj["metadata"]["annotations"][SENT_AT])
        self.latencies.append(time.time() - sent)
        self.on_add(obj, initial)


def _pods(prefix: str, n: int, nodes: int, ns: str = "bench") -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        p = pod_manifest(f"{prefix}-{i:06d}", ns, "100m", "128Mi")
        if nodes:
            p["spec"]["nodeName"] = f"node-{i % nodes:05d}"
        out.append(p)
    return out


def _fresh(url: str) -> ServerCore:
    """An empty store with the system namespaces and ``bench``."""
    Store.connect(url).redis.flushall()
    core = ServerCore(Store.connect(url))
    core.bootstrap()
    core.create(NAMESPACE, {"metadata": {"name": "bench"}})
    return core


def _informers(store: Store, mux: Multiplexer, n: int, handler: Any) -> list[SharedInformer]:
    out = []
    for i in range(n):
        inf = SharedInformer(store, POD, multiplexer=mux, name=f"bench-{i}")
        inf.add_event_handler(handler(i))
        out.append(inf)
    return out


def bench_fanout(url: str, informers: int, events: int, nodes: int) -> dict[str, Any]:
    core = _fresh(url)
    store = Store.connect(url)
    mux = Multiplexer(store)  # not started yet: events pile up in the stream
    counters = [_Counter(events) for _ in range(informers)]
    infs = _informers(store, mux, informers, lambda i: ResourceEventHandlerFuncs(add=counters[i].on_add))
    for inf in infs:
        inf.start()
    for inf in infs:
        if not inf.wait_for_cache_sync(30):
            raise RuntimeError("informer did not sync")
    t = time.perf_counter()
    pods = _pods("fan", events, nodes)
    for i in range(0, events, 1000):
        core.create_many(POD, pods[i:i + 1000])
    write_seconds = time.perf_counter() - t
    t = time.perf_counter()
    mux.start()
    for c in counters:
        c.done.wait(600)
    seconds = time.perf_counter() - t
    reads, entries = mux.reads, mux.entries_read
    for inf in infs:
        inf.stop()
    mux.stop()
    return {"informers": informers, "events": events, "writeSeconds": round(write_seconds, 2),
            "deliverSeconds": round(seconds, 2), "streamEventsPerSecond": round(events / seconds),
            "handlerCallsPerSecond": round(events * informers / seconds), "xreads": reads,
            "entriesPerXread": round(entries / max(reads, 1), 1)}




def _latency_child(url: str, informers: int, n: int, queues: tuple[Any, Any], gc_tuned: bool) -> None:
    ready, out = queues
    if gc_tuned:
        gctune.tune_for_caches()
    store = Store.connect(url)
    mux = Multiplexer(store)
    counters = [_Counter(n) for _ in range(informers)]
    infs = _informers(store, mux, informers, lambda i: ResourceEventHandlerFuncs(add=counters[i].on_add_timed))
    mux.start()
    for inf in infs:
        inf.start()
    for inf in infs:
        inf.wait_for_cache_sync(60)
    ready.put(True)
    for c in counters:
        c.done.wait(600)
    out.put([x for c in counters for x in c.latencies])
    for inf in infs:
        inf.stop()
    mux.stop()


def bench_latency(url: str, informers: int, rate: int, seconds: float, gc_tuned: bool = False) -> dict[str, Any]:
    core = _fresh(url)  # the child lists an empty store: only new events count
    n = int(rate * seconds)
    ctx = multiprocessing.get_context("spawn")
    ready, out = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_latency_child, args=(url, informers, n, (ready, out), gc_tuned))
    child.start()
    ready.get(timeout=120)
    pods = _pods(f"lat{rate}", n, 0)
    start = time.perf_counter()
    for batch in paced(pods, rate, start, SENT_AT):
        core.create_many(POD, batch)
    achieved = n / (time.perf_counter() - start)
    lat = [x * 1000 for x in out.get(timeout=600)]
    child.join()
    return {"informers": informers, "gcTuned": gc_tuned, "targetRate": rate, "achievedRate": round(achieved),
            "samples": len(lat),
            "p50ms": round(percentile(lat, 0.5), 3), "p99ms": round(percentile(lat, 0.99), 3),
            "maxms": round(max(lat), 3)}


def bench_list_cost(url: str) -> dict[str, Any]:
    store = Store.connect(url)
    out: dict[str, Any] = {"nodeShards": store.node_shards}
    for label, shard in (("fullList", None), ("shardList", 0)):
        reflector = Reflector(store, POD, DeltaFIFO(), shard=shard)
        t = time.perf_counter()
        items, _, _ = reflector.list_objects()
        out[label] = {"items": len(items), "seconds": round(time.perf_counter() - t, 3)}
    # The same shard list without the byte-level pre-filter: decode every pod, then keep the shard's.
    keep = shard_object_filter(store.node_shards, 0)
    t = time.perf_counter()
    kept, token = 0, None
    while True:
        page = store.list(POD, limit=1000, continue_token=token)
        kept += sum(1 for o in page.items if keep(o))
        token = page.continue_token
        if not token:
            break
    out["shardListDecodingEverything"] = {"items": kept, "seconds": round(time.perf_counter() - t, 3)}
    return out


# ----------------------------------------------------------------------------- the lifecycle reader

_TICK = 0.01


def _running_status(pod: dict[str, Any]) -> dict[str, Any]:
    """A Running, Ready status as a kubelet writes it (the shape matters: it is what readers decode)."""
    now = "2026-01-01T00:00:00Z"
    conditions = [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
                  for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
    containers = [{"name": c["name"], "ready": True, "restartCount": 0, "image": c.get("image", ""),
                   "imageID": "docker-pullable://" + c.get("image", ""), "containerID": "containerd://" + "0" * 64,
                   "started": True, "state": {"running": {"startedAt": now}}}
                  for c in pod["spec"].get("containers", [])]
    return {"phase": "Running", "conditions": conditions, "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}],
            "podIP": "10.1.0.1", "podIPs": [{"ip": "10.1.0.1"}], "startTime": now, "containerStatuses": containers,
            "qosClass": "Burstable"}


def _lifecycle_writer(url: str, rate: float, seconds: float, lifetime: float, *, nodes: int, go: Any) -> None:
    """Write pod lifecycles (see the module docstring) at ``rate`` pods/s for ``seconds``."""
    import copy
    import heapq

    core = ServerCore(Store.connect(url))
    store = core.store
    per_tick = max(1, int(rate * _TICK))
    total = int(rate * seconds)
    pods = _pods("life", total, 0)
    go.wait()
    start = time.perf_counter()
    due: list[tuple[float, int, str, list[dict[str, Any]]]] = []
    seq = 0
    created = 0
    while created < total or due:
        now = time.perf_counter() - start
        if created < total and created // per_tick * _TICK <= now:
            batch = [p for p in core.create_many(POD, pods[created:created + per_tick]) if isinstance(p, dict)]
            created += per_tick
            seq += 1
            heapq.heappush(due, (now + _TICK, seq, "bind", batch))
            continue
        if due and due[0][0] <= now:
            _, _, step, batch = heapq.heappop(due)
            seq += 1
            if step == "bind":
                out = []
                for p in batch:
                    q = copy.deepcopy(p)
                    q["spec"]["nodeName"] = f"node-{hash(p['metadata']['name']) % nodes:05d}"
                    out.append(q)
                heapq.heappush(due, (now + 0.2, seq, "run", _ok(store.update_many(POD, out))))
            elif step == "run":
                out = []
                for p in batch:
                    q = dict(p)
                    q["status"] = _running_status(p)
                    out.append(q)
                heapq.heappush(due, (now + lifetime, seq, "mark", _ok(store.update_many(POD, out))))
            elif step == "mark":
                out = []
                for p in batch:
                    q = dict(p)
                    q["metadata"] = {**p["metadata"], "deletionTimestamp": "2026-01-01T00:00:30Z",
                                     "deletionGracePeriodSeconds": 30}
                    out.append(q)
                heapq.heappush(due, (now + 0.1, seq, "final", _ok(store.update_many(POD, out))))
            else:
                out = []
                for p in batch:
                    q = dict(p)
                    q["status"] = {**p["status"], "phase": "Succeeded",
                                   "conditions": [{**c, "status": "False"} for c in p["status"]["conditions"]]}
                    out.append(q)
                store.delete_many(POD, _ok(store.update_many(POD, out)))
            continue
        time.sleep(0.001)  # pacing the load, not a test wait


def _ok(results: list[Any]) -> list[dict[str, Any]]:
    return [r for r in results if isinstance(r, dict)]


def _thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process, summed by thread name with digits dropped."""
    import os
    import re

    tick = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: re.sub(r"\d+", "N", t.name) for t in threading.enumerate()}
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = names.get(int(tid), "other")
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def bench_lifecycle_reader(url: str, reader: str, *, rate: float, seconds: float, lifetime: float,
                           nodes: int) -> dict[str, Any]:
    """One reader set-up in this process while a child writes pod lifecycles (see the module docstring)."""
    from emulator.api.kinds import NODE
    from emulator.informers import SharedInformerFactory

    _fresh(url)
    store = Store.connect(url)
    gctune.tune_for_caches()
    stop: list[Any] = []
    mux: Multiplexer | None = None
    if reader == "controllers":
        from emulator.controllers.manager import ControllerManager, ManagerConfig

        manager = ControllerManager(ServerCore(store), ManagerConfig(leader_elect=False))
        manager.start()
        if not manager.wait_active(60):
            raise RuntimeError("controller manager did not start")
        mux = manager._factory.multiplexer
        stop.append(manager.stop)
    else:
        factory = SharedInformerFactory(store, linger_ms=50.0 if reader == "shard" else None)
        factory.informer_for(NODE)
        if reader == "shard":
            for s in range(store.node_shards):
                factory.pod_shard_informer(s).add_event_handler(ResourceEventHandlerFuncs())
        else:
            pods = factory.informer_for(POD)
            pods.add_event_handler(ResourceEventHandlerFuncs())
            pods.add_event_handler(ResourceEventHandlerFuncs())
        factory.start()
        factory.wait_for_cache_sync(30)
        mux = factory.multiplexer
        stop.append(factory.shutdown)
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    child = ctx.Process(target=_lifecycle_writer, args=(url, rate, seconds, lifetime),
                        kwargs={"nodes": nodes, "go": go})
    child.start()
    go.set()
    # The steady window: from when deletions have begun to the last creation.
    time.sleep(lifetime + 1.0)  # the load runs in the child; this only places the measuring window
    window = max(1.0, seconds - lifetime - 1.0)
    before, reads0, entries0 = _thread_cpu(), mux.reads, mux.entries_read
    t0 = time.perf_counter()
    time.sleep(window)  # idem
    after, reads1, entries1 = _thread_cpu(), mux.reads, mux.entries_read
    took = time.perf_counter() - t0
    child.join()
    for fn in stop:
        fn()
    # Per event read (the writer may fall behind its rate on a busy machine: count what was read, not what was
    # meant to be written), and per lifecycle as 6 pod events.
    events = max(1, entries1 - entries0)
    per_thread = {k: round((after.get(k, 0.0) - before.get(k, 0.0)) * 1e6 / events, 1) for k in after}
    per_thread = dict(sorted(((k, v) for k, v in per_thread.items() if v > 0), key=lambda kv: -kv[1]))
    total = sum(per_thread.values())
    reads = max(1, reads1 - reads0)
    return {"reader": reader, "rate": rate, "windowSeconds": round(took, 1), "eventsRead": events,
            "usPerEvent": round(total, 1), "msPerLifecycle": round(total * 6 / 1000, 3),
            "usPerEventByThread": per_thread, "xreadsPerSecond": round(reads / took, 1),
            "eventsPerXread": round(events / reads, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--redis-url")
    ap.add_argument("--informers", type=int, default=10)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--nodes", type=int, default=2000, help="nodes the throughput run's pods are bound to")
    ap.add_argument("--latency-rates", type=int, nargs="*", default=[1000, 5000])
    ap.add_argument("--latency-seconds", type=float, default=5.0)
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--lifecycle-reader", choices=("controllers", "shard", "scheduler-informers"),
                    help="run only the lifecycle reader benchmark with this reader set-up")
    ap.add_argument("--rate", type=float, default=100.0, help="lifecycle reader: pods created per second")
    ap.add_argument("--seconds", type=float, default=20.0, help="lifecycle reader: seconds of creates")
    ap.add_argument("--lifetime", type=float, default=5.0, help="lifecycle reader: seconds from create to delete")
    args = ap.parse_args(argv)
    if args.lifecycle_reader:
        with redis_url(args.redis_url) as url:
            result = bench_lifecycle_reader(url, args.lifecycle_reader, rate=args.rate, seconds=args.seconds,
                                            lifetime=args.lifetime, nodes=min(args.nodes, 500))
        print(json.dumps(result, indent=2), flush=True)
        save({"lifecycleReader": result}, args.json)
        return 0

    results: dict[str, Any] = {}
    with redis_url(args.redis_url) as url:
        results["fanout"] = [bench_fanout(url, 1, args.events, args.nodes),
                             bench_fanout(url, args.informers, args.events, args.nodes)]
        print(json.dumps(results["fanout"], indent=2), flush=True)
        # The last fan-out run left --events pods bound to --nodes nodes: list them.
        results["listCost"] = bench_list_cost(url)
        print(json.dumps(results["listCost"], indent=2), flush=True)
        results["latency"] = [bench_latency(url, args.informers, r, args.latency_seconds)
                              for r in args.latency_rates]
        if args.latency_rates:
            top = max(args.latency_rates)
            results["latency"].append(bench_latency(url, args.informers, top, args.latency_seconds, True))
        print(json.dumps(results["latency"], indent=2), flush=True)
    save(results, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
