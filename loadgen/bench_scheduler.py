"""Scheduler benchmark: upstream scheduler_perf's workloads re-created, with 1..N competing schedulers.

    .venv/bin/python -m loadgen.bench_scheduler [--workload SchedulingBasic] [--nodes 5000]
        [--init-pods 1000] [--pods 10000] [--schedulers 1,2] [--mode process|ray|thread]
        [--bind-workers 4] [--json out.json]

``--workload`` picks one of :data:`WORKLOADS` (sizes default to the workload's own):

* **SchedulingBasic** (default; described below): plain pods, 5,000 nodes.
* **TopologySpreading**: 5,000 nodes in 3 zones (``topology.kubernetes.io/zone``);
  the measured pods carry ``color: blue`` and a zone spread constraint over
  ``color in (blue)`` with maxSkew 1, DoNotSchedule -- PodTopologySpread's
  filter and score run on every pod, and every bind changes the next pod's
  skew counts. Upstream's CI floor: 460 pods/s.
* **PodAntiAffinity**: 5,000 nodes labelled by ``kubernetes.io/hostname``;
  every pod (initial and measured) is in one label group (``color: green``)
  with *required* anti-affinity to that group on the hostname -- one group
  pod per node, and InterPodAffinity must account for every existing group
  pod's term. Upstream's CI floor: 60 pods/s.
* **Preemption**: 4-cpu nodes filled by low-priority pods (900m, four per
  node), then high-priority pods of 900m that fit nowhere without evicting
  one low-priority pod each (DefaultPreemption's dry runs over candidate
  nodes, the victims' deletion, the nominated pod's second attempt). There
  is no kubelet in the benchmark, so a stand-in thread finishes every
  graceful deletion at once (delete with grace 0), as a kubelet would once
  the containers stopped; completion is counted per measured pod (victims
  leave the bound count, so it is not monotone). Defaults are scheduler_perf's
  500-node PreemptionBasic size (2,000 low + 500 high pods).
* **PreemptionBasic** (``default_preemption/performance-config.yaml``,
  ``1000Nodes``): 1,000 ``node-default`` nodes, 4,000 ``pod-low-priority``
  pods (900m, priority 0) filling them, then 1,000 measured
  ``pod-high-priority`` pods (3000m, priority 10): each must preempt three
  of its node's four low-priority pods.
* **PreemptionAsync** (``5000Nodes``): 5,000 nodes, 20,000 low-priority
  pods, then 5,000 measured ``pod-default`` pods (100m, always schedulable)
  while a ``pod-high-priority`` preemptor is created every 200 ms (the
  ``churn`` op). Upstream's threshold: 570 pods/s.
* **Unschedulable** (misc, ``5kNodes/20kInit/10kPods``): 5,000 nodes,
  20,000 ``pod-default`` pods, then 10,000 measured ones while a
  ``pod-high-priority-large-cpu`` pod (9 cpu: fits nowhere, even with every
  other pod preempted) is created every 200 ms. Upstream's threshold: 600 pods/s.

The workload is ``test/integration/scheduler_perf/misc/performance-config.yaml``'s
SchedulingBasic ``5000Nodes_10000Pods`` re-created: ``--nodes`` nodes of
``node-default.yaml`` (4 cpu, 32Gi, 110 pods), ``--init-pods`` pods of
``pod-default.yaml`` (100m cpu, 500Mi) scheduled first and not measured, then
``--pods`` measured pods created as fast as the store takes them (batches
of 500) while the schedulers run. Upstream's CI floor for this workload is
680 pods/s.

For each scheduler count in ``--schedulers`` the run starts from an empty
store (its own embedded Redis, or ``--redis-url``), brings the schedulers up
-- each in its own process (``--mode process``, plain Python), in a Ray actor
(``--mode ray``), or all in this process (``--mode thread``) -- as replicas
of the default profile that split the pods by uid hash (see
:mod:`emulator.scheduler.scheduler`), and measures:

* **throughput**: measured pods / seconds from the first measured create to
  the last measured bind (the store's count of bound pods is polled every
  20 ms), and the median of per-second samples as scheduler_perf reports;
* **attempt latency** p50 / p99: ``scheduler_scheduling_attempt_duration_seconds``
  of the successful attempts (cycle + bind), from every scheduler's raw
  samples;
* **SLI duration** p99: ``scheduler_pod_scheduling_sli_duration_seconds``, queue
  entry to bind (it includes the time a pod waits behind the others);
* **conflict fraction**: bind conflicts / successful binds, over all
  schedulers (Omega's definition);
* **busyness**: the fraction of the measured interval each scheduler's
  scheduling thread spent in scheduling cycles (the rest it waited for pods).

Numbers are for the machine the benchmark runs on; every scheduler shares
its cores with Redis and the pod creator.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.api.errors import StatusError
from emulator.api.kinds import NODE, POD, PRIORITYCLASS
from emulator.scheduler.scheduler import SchedulerOptions
from emulator.scheduler_host import HostSettings, SchedulerHost
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig
from emulator.store.store import Store, StoreConfig
from loadgen.scheduler_trace import Tracer

PREFIX = "kemu:"
NAMESPACE = "default"


def node_default(i: int) -> dict[str, Any]:
    """scheduler_perf ``templates/node-default.yaml``."""
    capacity = {"pods": "110", "cpu": "4", "memory": "32Gi"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"scheduler-perf-{i:05d}"}, "spec": {},
            "status": {"capacity": capacity, "allocatable": dict(capacity),
                       "conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"}}


def pod_default(name: str) -> dict[str, Any]:
    """scheduler_perf ``templates/pod-default.yaml``."""
    resources = {"cpu": "100m", "memory": "500Mi"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
                                     "ports": [{"containerPort": 80}],
                                     "resources": {"limits": dict(resources), "requests": dict(resources)}}]}}


ZONE_KEY = "topology.kubernetes.io/zone"
HOSTNAME_KEY = "kubernetes.io/hostname"


def node_labelled(i: int) -> dict[str, Any]:
    """``node-default`` with the labels a kubelet sets and scheduler_perf's ``labelNodePrepareStrategy`` adds:
    hostname, and one of 3 zones round-robin (so zones differ in size by at most one node)."""
    node = node_default(i)
    name = node["metadata"]["name"]
    node["metadata"]["labels"] = {HOSTNAME_KEY: name, ZONE_KEY: f"zone-{i % 3}"}
    return node


def pod_topology_spread(name: str) -> dict[str, Any]:
    """scheduler_perf ``pod-with-topology-spreading.yaml``: a zone spread constraint over its own label group."""
    pod = pod_default(name)
    pod["metadata"]["labels"] = {"color": "blue"}
    pod["spec"]["topologySpreadConstraints"] = [{
        "maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchExpressions": [{"key": "color", "operator": "In", "values": ["blue"]}]}}]
    return pod


def pod_anti_affinity(name: str) -> dict[str, Any]:
    """scheduler_perf ``pod-with-pod-anti-affinity.yaml``: required anti-affinity to its group per hostname."""
    pod = pod_default(name)
    pod["metadata"]["labels"] = {"color": "green"}
    pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchExpressions": [{"key": "color", "operator": "In", "values": ["green"]}]},
        "topologyKey": HOSTNAME_KEY}]}}
    return pod


def _prioritised(name: str, priority_class: str, cpu: str) -> dict[str, Any]:
    pod = pod_default(name)
    pod["spec"]["priorityClassName"] = priority_class
    resources = pod["spec"]["containers"][0]["resources"]
    resources["requests"]["cpu"] = resources["limits"]["cpu"] = cpu
    return pod


def pod_low_priority(name: str) -> dict[str, Any]:
    """Fills nodes: four of these (3.6 cpu) on each 4-cpu node leave 400m free."""
    return _prioritised(name, "low-priority", "900m")


def pod_high_priority(name: str) -> dict[str, Any]:
    """Needs 900m: fits nowhere on a filled cluster until one low-priority pod on its node is preempted."""
    return _prioritised(name, "high-priority", "900m")


def pod_perf_low_priority(name: str) -> dict[str, Any]:
    """scheduler_perf ``templates/pod-low-priority.yaml``: 900m, no priority (0), terminationGracePeriodSeconds 0."""
    pod = pod_default(name)
    pod["spec"]["terminationGracePeriodSeconds"] = 0
    resources = pod["spec"]["containers"][0]["resources"]
    resources["requests"]["cpu"] = resources["limits"]["cpu"] = "900m"
    return pod


def pod_perf_high_priority(name: str) -> dict[str, Any]:
    """scheduler_perf ``templates/pod-high-priority.yaml``: 3000m at priority 10 (upstream sets
    ``spec.priority: 10``; kemu's Priority admission wants it from a PriorityClass of that value)."""
    return _prioritised(name, "perf-priority-10", "3000m")


def pod_perf_high_priority_large_cpu(name: str) -> dict[str, Any]:
    """scheduler_perf ``templates/pod-high-priority-large-cpu.yaml``: 9 cpu at priority 10 -- fits no 4-cpu node,
    even with every other pod preempted, so it stays pending (and preemption visits every node for it)."""
    pod = _prioritised(name, "perf-priority-10", "9")
    del pod["spec"]["containers"][0]["resources"]["limits"]
    return pod


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value}


@dataclass(frozen=True)
class Workload:
    """One scheduler_perf-style workload: how its nodes and pods look, and its default sizes.

    ``preempts``: measured (or churn) pods evict others, so the run needs the
    deletion-confirming stand-in kubelet and per-pod completion counting.
    ``churn``: scheduler_perf's ``churn`` op in ``create`` mode -- while the
    measured pods are created and scheduled, one of these pods is created
    every ``churn_interval`` seconds (not measured).
    ``threshold``: upstream's CI threshold (pods/s) for this workload at its default size.
    """

    name: str
    node: Callable[[int], dict[str, Any]]
    init_pod: Callable[[str], dict[str, Any]]
    pod: Callable[[str], dict[str, Any]]
    nodes: int
    init_pods: int
    pods: int
    setup: tuple[tuple[Any, dict[str, Any]], ...] = field(default=())
    preempts: bool = False
    floor: str = ""
    churn: Callable[[str], dict[str, Any]] | None = None
    churn_interval: float = 0.2


_PERF_PRIORITY = ((PRIORITYCLASS, priority_class("perf-priority-10", 10)),)

WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("SchedulingBasic", node_default, pod_default, pod_default, 5000, 1000, 10000,
             floor="680-810 pods/s"),
    Workload("TopologySpreading", node_labelled, pod_default, pod_topology_spread, 5000, 1000, 10000,
             floor="460 pods/s"),
    Workload("PodAntiAffinity", node_labelled, pod_anti_affinity, pod_anti_affinity, 5000, 1000, 1000,
             floor="60 pods/s"),
    Workload("Preemption", node_labelled, pod_low_priority, pod_high_priority, 500, 2000, 500,
             setup=((PRIORITYCLASS, priority_class("low-priority", 100)),
                    (PRIORITYCLASS, priority_class("high-priority", 1000))), preempts=True),
    # default_preemption/performance-config.yaml and misc's Unschedulable, at their performance sizes.
    Workload("PreemptionBasic", node_default, pod_perf_low_priority, pod_perf_high_priority, 1000, 4000, 1000,
             setup=_PERF_PRIORITY, preempts=True),
    Workload("PreemptionAsync", node_default, pod_perf_low_priority, pod_default, 5000, 20000, 5000,
             setup=_PERF_PRIORITY, preempts=True, churn=pod_perf_high_priority, floor="570 pods/s"),
    Workload("Unschedulable", node_default, pod_default, pod_default, 5000, 20000, 10000,
             setup=_PERF_PRIORITY, churn=pod_perf_high_priority_large_cpu, floor="600 pods/s"),
)}


class DeletionConfirmer:
    """The kubelets' part of a graceful pod deletion: once a pod is marked for deletion, delete it with grace 0.

    It follows the store's pod watch on a thread of its own, so a preemption
    completes as fast as the scheduler drives it (a real kubelet would add
    the containers' termination time, which is not what this measures).
    """

    def __init__(self, url: str) -> None:
        # A connection of its own: the main thread keeps creating pods through the benchmark's.
        self.core = ServerCore(Store.connect(url, StoreConfig(prefix=PREFIX)))
        core = self.core
        self.confirmed = 0
        self.deleted: set[str] = set()  # names of the pods it finished deleting (read by the main thread)
        self._stop = threading.Event()
        self._watch = core.store.watch(POD, core.store.current_rv())
        self._thread = threading.Thread(target=self._run, name="deletion-confirmer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for event in self._watch.next_batch(timeout=0.1):
                meta = event.object.get("metadata") or {}
                if event.type != "MODIFIED" or not meta.get("deletionTimestamp"):
                    continue
                try:
                    self.core.delete(POD, meta.get("namespace"), meta["name"], grace_period_seconds=0)
                    self.confirmed += 1
                    self.deleted.add(meta["name"])
                except StatusError as e:
                    if e.code != 404:  # already gone: another event for the same deletion
                        raise

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._watch.close()
        self.core.store.close()


class Churn:
    """scheduler_perf's ``churn`` op, ``create`` mode: one pod from ``template`` every ``interval`` seconds
    (wall clock: the measured phase is timed in wall seconds) until stopped."""

    def __init__(self, url: str, template: Callable[[str], dict[str, Any]], interval: float) -> None:
        self.core = ServerCore(Store.connect(url, StoreConfig(prefix=PREFIX)))
        self.template = template
        self.interval = interval
        self.created = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="churn", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_at = time.perf_counter()
        while not self._stop.wait(max(0.0, next_at - time.perf_counter())):
            self.core.create(POD, self.template(f"churn-{self.created:06d}"))
            self.created += 1
            next_at += self.interval

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.core.store.close()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


# -- scheduler runners ------------------------------------------------------------------------------------------


def replica_options(n: int, *, bind_workers: int = 1, bind_linger: float | None = None) -> list[SchedulerOptions]:
    """``n`` competing replicas of the default profile, keeping latency samples."""
    linger = SchedulerOptions().bind_linger if bind_linger is None else bind_linger
    return [SchedulerOptions(name=f"kemu-scheduler-{i}", replica=i, replicas=n, bind_workers=bind_workers,
                             keep_samples=True, seed=i, bind_linger=linger) for i in range(n)]


def _child(conn: Any, settings: HostSettings, options: SchedulerOptions) -> None:
    """A scheduler process: start a host, report readiness, answer stats requests until told to stop."""
    host = SchedulerHost(settings, [options])
    try:
        host.start()
        conn.send(("ready", None))
        while True:
            command = conn.recv()
            if command == "stats":
                conn.send(("stats", (host.stats(), host.samples())))
            elif command == "consistency":
                conn.send(("consistency", host.consistency()))
            elif command == "stop":
                break
    except Exception as e:
        conn.send(("error", repr(e)))
        raise
    finally:
        host.stop()


class ProcessSchedulers:
    """Each scheduler in a child process of its own (spawned: a clean interpreter, its own GIL).

    ``config`` is a KubeSchedulerConfiguration document every replica runs. Also used by the tests.
    """

    def __init__(self, url: str, options: list[SchedulerOptions], config: dict[str, Any] | None = None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conns = []
        self.procs = []
        for opts in options:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_child, args=(child, HostSettings(url, PREFIX, config=config, tune_gc=True),
                                                    opts), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)
        for conn in self.conns:
            kind, payload = conn.recv()
            if kind != "ready":
                raise RuntimeError(f"scheduler process failed: {payload}")

    def _ask(self, command: str) -> list[Any]:
        for conn in self.conns:
            conn.send(command)
        return [conn.recv()[1] for conn in self.conns]

    def stats(self) -> tuple[list[dict[str, Any]], list[dict[str, list[float]]]]:
        stats, samples = [], []
        for st, sm in self._ask("stats"):
            stats.extend(st)
            samples.extend(sm)
        return stats, samples

    def consistency(self) -> list[dict[str, Any]]:
        return [c for cs in self._ask("consistency") for c in cs]

    def stop(self) -> None:
        for conn in self.conns:
            conn.send("stop")
        for proc in self.procs:
            proc.join(30)


class ThreadSchedulers:
    """Every scheduler in this process (one host: shared informers, one GIL)."""

    def __init__(self, url: str, options: list[SchedulerOptions], config: dict[str, Any] | None = None) -> None:
        self.host = SchedulerHost(HostSettings(url, PREFIX, config=config), options).start()

    def stats(self) -> tuple[list[dict[str, Any]], list[dict[str, list[float]]]]:
        return self.host.stats(), self.host.samples()

    def consistency(self) -> list[dict[str, Any]]:
        return self.host.consistency()

    def stop(self) -> None:
        self.host.stop()


class RaySchedulers:
    """Each scheduler in a Ray actor (``actors.scheduler``)."""

    def __init__(self, url: str, options: list[SchedulerOptions], config: dict[str, Any] | None = None) -> None:
        import ray

        from actors.scheduler import start_scheduler_actors

        self.ray = ray
        self.actors = start_scheduler_actors(url, len(options), prefix=PREFIX, config=config,
                                             bind_workers=options[0].bind_workers, keep_samples=True,
                                             bind_linger=options[0].bind_linger)

    def stats(self) -> tuple[list[dict[str, Any]], list[dict[str, list[float]]]]:
        stats, samples = [], []
        for st, sm in self.ray.get([a.stats_and_samples.remote() for a in self.actors]):
            stats.extend(st)
            samples.extend(sm)
        return stats, samples

    def consistency(self) -> list[dict[str, Any]]:
        return [c for cs in self.ray.get([a.consistency.remote() for a in self.actors]) for c in cs]

    def stop(self) -> None:
        from actors.scheduler import stop_scheduler_actors

        stop_scheduler_actors(self.actors)


RUNNERS = {"process": ProcessSchedulers, "thread": ThreadSchedulers, "ray": RaySchedulers}


# -- the workload ---------------------------------------------------------------------------------------------


def _create(core: ServerCore, bodies: list[dict[str, Any]], kind: Any = POD, batch: int = 500) -> None:
    for start in range(0, len(bodies), batch):
        for result in core.create_many(kind, bodies[start:start + batch]):
            if not isinstance(result, dict):
                raise RuntimeError(f"create failed: {result}")


def _redis_cpu(store: Store) -> float:
    info = store.redis.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def _wait_bound(store: Store, target: int, timeout: float, samples: list[tuple[float, int]] | None = None) -> float:
    """Poll the store's count of bound pods until it reaches ``target``; the time it did (perf_counter)."""
    deadline = time.perf_counter() + timeout
    key = f"{PREFIX}acct"
    while True:
        bound = int(store.redis.hlen(key))
        now = time.perf_counter()
        if samples is not None:
            samples.append((now, bound))
        if bound >= target:
            return now
        if now > deadline:
            raise TimeoutError(f"only {bound} of {target} pods bound after {timeout:g} s")
        time.sleep(0.02)  # polling a counter in Redis: the benchmark must not add a watcher's load


def _wait_named(store: Store, names: list[str], timeout: float,
                samples: list[tuple[float, int]] | None = None, offset: int = 0, *,
                gone: set[str] | None = None) -> float:
    """Poll until every pod in ``names`` is bound (its accounting entry exists); the time it was (perf_counter).

    For workloads whose bound count is not monotone (preemption deletes bound pods). ``samples`` get
    ``offset`` + bound measured pods, comparable with :func:`_wait_bound`'s. A measured pod in ``gone``
    (preempted after it was bound, and deleted) counts as done.
    """
    deadline = time.perf_counter() + timeout
    fields = [f"pods|{NAMESPACE}/{name}" for name in names]
    key = f"{PREFIX}acct"
    while True:
        bound = sum(v is not None or name in (gone or ())
                    for name, v in zip(names, store.redis.hmget(key, fields), strict=True))
        now = time.perf_counter()
        if samples is not None:
            samples.append((now, offset + bound))
        if bound >= len(names):
            return now
        if now > deadline:
            raise TimeoutError(f"only {bound} of {len(names)} measured pods bound after {timeout:g} s")
        time.sleep(0.05)  # one HMGET of every measured pod per poll: keep it rare next to the schedulers' load


def run_once(url: str, n: int, args: argparse.Namespace) -> dict[str, Any]:
    workload = WORKLOADS[args.workload]
    store = Store.connect(url, StoreConfig(prefix=PREFIX))
    store.redis.flushdb()
    store = Store.connect(url, StoreConfig(prefix=PREFIX))
    core = ServerCore(store)
    core.bootstrap()
    for kind, body in workload.setup:
        core.create(kind, body)
    _create(core, [workload.node(i) for i in range(args.nodes)], NODE)
    runner = RUNNERS[args.mode](url, replica_options(n, bind_workers=args.bind_workers,
                                                     bind_linger=args.bind_linger))
    confirmer = DeletionConfirmer(url) if workload.preempts else None
    try:
        _create(core, [workload.init_pod(f"init-{i:06d}") for i in range(args.init_pods)])
        _wait_bound(store, args.init_pods, args.timeout)
        base_stats, _ = runner.stats()
        bodies = [workload.pod(f"pod-{i:06d}") for i in range(args.pods)]
        samples: list[tuple[float, int]] = []
        redis_cpu0 = _redis_cpu(store)
        bench_cpu0 = time.process_time()
        churn = Churn(url, workload.churn, workload.churn_interval) if workload.churn is not None else None
        tracer = Tracer(runner, args.trace, args.profile, args.timeout) if args.trace or args.profile else None
        try:
            start = time.perf_counter()
            _create(core, bodies)
            created = time.perf_counter()
            if workload.preempts or churn is not None:
                end = _wait_named(store, [b["metadata"]["name"] for b in bodies], args.timeout, samples,
                                  offset=args.init_pods, gone=confirmer.deleted if confirmer is not None else None)
            else:
                end = _wait_bound(store, args.init_pods + args.pods, args.timeout, samples)
        finally:
            if tracer is not None:
                tracer.stop()
            churned = churn.created if churn is not None else 0
            if churn is not None:
                churn.stop()
        bench_cpu = time.process_time() - bench_cpu0
        redis_cpu = _redis_cpu(store) - redis_cpu0
        stats, raw = runner.stats()
        consistency = runner.consistency() if args.check else []
    finally:
        if confirmer is not None:
            confirmer.stop()
        runner.stop()
        store.close()
    elapsed = end - start
    attempts = [x for r in raw for x in r["attempt_seconds"]][args.init_pods:] if n == 1 else \
        [x for r in raw for x in r["attempt_seconds"]]
    slis = [x for r in raw for x in r["sli_seconds"]]
    scheduled = sum(s["scheduled"] for s in stats) - sum(s["scheduled"] for s in base_stats)
    conflicts = sum(s["conflicts"] for s in stats) - sum(s["conflicts"] for s in base_stats)
    busy = [(s["busy_seconds"] - b["busy_seconds"]) / elapsed for s, b in zip(stats, base_stats, strict=True)]
    per_second = []
    for (t0, c0), (t1, c1) in itertools.pairwise(samples):
        if t1 > t0:
            per_second.append((c1 - c0) / (t1 - t0))
    # scheduler_perf samples throughput once a second; do the same over the polled counts.
    second_rates = []
    mark_t, mark_c = start, args.init_pods
    for t, c in samples:
        if t - mark_t >= 1.0:
            second_rates.append((c - mark_c) / (t - mark_t))
            mark_t, mark_c = t, c
    return {
        "workload": workload.name, "schedulers": n, "mode": args.mode, "nodes": args.nodes,
        "init_pods": args.init_pods, "pods": args.pods,
        "seconds": round(elapsed, 3), "create_seconds": round(created - start, 3),
        "throughput_pods_per_s": round(args.pods / elapsed, 1),
        "throughput_median_per_second_sample": round(statistics.median(second_rates), 1) if second_rates else None,
        "attempt_p50_ms": round(percentile(attempts, 50) * 1e3, 2),
        "attempt_p99_ms": round(percentile(attempts, 99) * 1e3, 2),
        "sli_p99_s": round(percentile(slis[-args.pods:], 99), 3),
        "scheduled": scheduled, "conflicts": conflicts,
        "conflict_fraction": round(conflicts / scheduled, 4) if scheduled else None,
        "busyness": [round(b, 3) for b in busy],
        "cpu_seconds": {"redis": round(redis_cpu, 2), "pod_creator": round(bench_cpu, 2),
                        "schedulers": [round(s["process_cpu_seconds"] - b["process_cpu_seconds"], 2)
                                       for s, b in zip(stats, base_stats, strict=True)],
                        "scheduler_threads": [
                            {k: round(v - b.get("thread_cpu_seconds", {}).get(k, 0.0), 2)
                             for k, v in s.get("thread_cpu_seconds", {}).items() if v - b.get(
                                 "thread_cpu_seconds", {}).get(k, 0.0) >= 0.01}
                            for s, b in zip(stats, base_stats, strict=True)]},
        "per_scheduler": [{k: v for k, v in s.items() if k in ("name", "scheduled", "conflicts", "attempts")}
                          for s in stats],
        "victims_deleted": confirmer.confirmed if confirmer is not None else 0,
        "churn_pods_created": churned,
        "preemptions": sum(s.get("preemptions", 0) for s in stats) - sum(s.get("preemptions", 0) for s in base_stats),
        # Every scheduler process's CPU over the measured phase, per measured pod: comparable across runs on a
        # shared machine, where pods/s follows the machine's load.
        "scheduler_cpu_ms_per_pod": round(1e3 * sum(s["process_cpu_seconds"] - b["process_cpu_seconds"]
                                                    for s, b in zip(stats, base_stats, strict=True)) / args.pods, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "consistent": all(not any(v for k, v in c.items() if k != "name") for c in consistency) if consistency
        else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="SchedulingBasic")
    parser.add_argument("--nodes", type=int, help="default: the workload's")
    parser.add_argument("--init-pods", type=int, help="default: the workload's")
    parser.add_argument("--pods", type=int, help="measured pods; default: the workload's")
    parser.add_argument("--schedulers", default="1,2", help="comma-separated scheduler counts, one run each")
    parser.add_argument("--mode", choices=sorted(RUNNERS), default="process")
    parser.add_argument("--bind-workers", type=int, default=1, help="bind threads per scheduler (each binds "
                                                                    "batches in one round trip)")
    parser.add_argument("--bind-linger", type=float, default=SchedulerOptions().bind_linger,
                        help="seconds a bind thread waits for more pods to batch (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--check", action="store_true", help="compare every cache with the store afterwards")
    parser.add_argument("--redis-url", help="use this Redis (it is flushed!) instead of an embedded one")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--trace", help="append each scheduler's queue sizes, holds and API writer timings every "
                                        "0.5 s of the measured phase to this file (JSON lines)")
    parser.add_argument("--profile", help="py-spy (--gil and --idle, raw) each scheduler process over the measured "
                                          "phase into this directory (--mode process)")
    args = parser.parse_args(argv)
    workload = WORKLOADS[args.workload]
    args.nodes = workload.nodes if args.nodes is None else args.nodes
    args.init_pods = workload.init_pods if args.init_pods is None else args.init_pods
    args.pods = workload.pods if args.pods is None else args.pods
    counts = [int(x) for x in args.schedulers.split(",") if x]
    if args.mode == "ray":
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    server = None
    url = args.redis_url
    if url is None:
        server = EmbeddedRedis(RedisServerConfig(data_dir=Path(tempfile.mkdtemp(prefix="kemu-bench-sched-"))))
        url = server.start()
    results = []
    try:
        for n in counts:
            result = run_once(url, n, args)
            results.append(result)
            print(json.dumps(result), flush=True)
    finally:
        if server is not None:
            server.stop()
    base = next((r for r in results if r["schedulers"] == 1), None)
    if base is not None:
        for r in results:
            r["speedup_vs_1"] = round(r["throughput_pods_per_s"] / base["throughput_pods_per_s"], 2)
    floor = f", upstream CI floor {workload.floor} at 5,000 nodes" if workload.floor else ""
    print(f"\n{workload.name} {args.nodes} nodes, {args.init_pods} initial + {args.pods} measured pods, "
          f"mode {args.mode}, {os.cpu_count()} cores{floor}")
    print(f"{'sched':>5} {'pods/s':>8} {'x1':>5} {'CPU ms/pod':>10} {'p50 ms':>8} {'p99 ms':>8} {'SLI p99 s':>9} "
          f"{'conflicts':>9} {'fraction':>8} {'preempt':>7}  busyness  load")
    for r in results:
        print(f"{r['schedulers']:>5} {r['throughput_pods_per_s']:>8} {r.get('speedup_vs_1', ''):>5} "
              f"{r['scheduler_cpu_ms_per_pod']:>10} {r['attempt_p50_ms']:>8} {r['attempt_p99_ms']:>8} "
              f"{r['sli_p99_s']:>9} {r['conflicts']:>9} {r['conflict_fraction']:>8} {r['preemptions']:>7}  "
              f"{r['busyness']}  {r['load_average'][0]}")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "args": vars(args)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
