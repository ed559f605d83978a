"""``kemu run SCENARIO``: an emulated cluster under load, and its summary.

The run brings up the same cluster ``kemu up --nodes N --schedulers S`` does
- Redis, the store, the API server, the controller manager, kubelet shard
actors (Ray, through the runner the ``kemu`` entry point injects) hosting the
scenario's node pool, and S competing schedulers - in a private temporary
data directory with a free API port. Then:

1. **Load.** The pods (:func:`pod_stream`, deterministic for scenario and
   seed) are created through the server core at the scenario's ``rate``
   (constant or Poisson inter-arrival times, :func:`arrival_times`, seeded),
   up to ``batch`` pods per store round trip. Back-pressure: while
   ``max_backlog`` created pods are still unscheduled the driver waits, so a
   cluster that cannot keep up never builds an unbounded backlog (the
   summary then shows a lower achieved create rate, not a runaway queue).
2. **Observe.** One watcher thread follows every pod event from the
   resourceVersion before the first create. It checks the watch contract
   (each ADDED exactly once, resourceVersions strictly increasing) and
   timestamps, *with its own wall clock* (``time.perf_counter`` when the event
   reaches it), the pod's ADDED, the first MODIFIED that carries a
   ``spec.nodeName`` (the bind, which sets PodScheduled=True) and the first
   MODIFIED with phase Running and Ready=True. Scheduling SLI latency is
   bind-arrival minus ADDED-arrival; pod startup latency is Ready-arrival
   minus ADDED-arrival. Both events pass through the same stream and the same
   watcher, so a constant delivery lag cancels out; what remains is a small
   bias from the watcher's own queueing (it shares this process's GIL with
   the driver and the controller manager), typically milliseconds. Upstream
   measures the SLI inside the scheduler from its informer's first sight of
   the pod; this is the client-side view of the same interval.
3. **Settle.** After the last create the run waits (at most
   ``settle_timeout`` s) until every pod that is not expected to stay Pending
   is bound and has been Running.
4. **Read back.** Pods are listed (phases, nodes), Events are counted by
   reason (OOM kills: ``OOMKilling``/``SystemOOM`` plus containers whose last
   termination was ``OOMKilled``; evictions: ``Evicted`` events and pods with
   status reason ``Evicted``), the schedulers report their counters (bind
   conflicts per scheduler, from their health call - no metrics scrape
   needed), and the real ``kubectl`` reads the cluster through the API server.

The exit code is 0 only if every pod was created, every pod but the expected
Pending ones got scheduled, and the watch was complete; 2 otherwise.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from emulator.api.errors import StatusError
from emulator.api.kinds import EVENT, NAMESPACE, POD, PRIORITYCLASS
from emulator.cluster import LocalCluster
from emulator.config import Config
from emulator.server.core import ServerCore
from emulator.store.store import WatchEvent
from loadgen.scenario import Scenario, ScenarioError, WorkloadSpec

if TYPE_CHECKING:
    from emulator.cluster import KubeletRunnerFactory, SchedulerRunnerFactory

PROFILE_ANNOTATION = "kemu.io/profile"  # emulator.kubelet.profiles.PROFILE_ANNOTATION


def pod_manifest(name: str, namespace: str, cpu: str, memory: str, *, profile: str | None = None,
                 priority_class: str | None = None) -> dict[str, Any]:
    container = {"name": "app", "image": "registry.k8s.io/pause:3.9",
                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {"app": "loadgen"}}
    if profile:
        meta["annotations"] = {PROFILE_ANNOTATION: profile}
    spec: dict[str, Any] = {"containers": [container]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": meta, "spec": spec}


def pod_stream(w: WorkloadSpec, seed: int) -> list[dict[str, Any]]:
    """The scenario's pods, deterministic for (scenario, seed)."""
    rng = random.Random(seed)
    names = [p.name for p in w.priorities]
    weights = [p.weight for p in w.priorities]
    pods = []
    for i in range(w.pods):
        # Draw in a fixed order, and only for the features the scenario uses, so adding a
        # priority mix does not reshuffle the requests of a scenario that had none.
        cpu, memory = rng.choice(w.cpu), rng.choice(w.memory)
        profile = rng.choice(w.profile) if w.profile else None
        priority = rng.choices(names, weights)[0] if names else None
        pods.append(pod_manifest(f"pod-{i:06d}", f"load-{i % w.namespaces}", cpu, memory, profile=profile,
                                 priority_class=priority))
    return pods


def arrival_times(w: WorkloadSpec, seed: int) -> list[float]:
    """Seconds after the start at which each pod is due: i/rate, or a Poisson process of that rate.

    Its own random stream (seeded from ``seed``), so the pods' contents and their timing vary
    independently.
    """
    if w.rate <= 0:
        return [0.0] * w.pods
    if w.arrival == "constant":
        return [i / w.rate for i in range(w.pods)]
    rng = random.Random(f"arrivals:{seed}")
    t, out = 0.0, []
    for _ in range(w.pods):
        out.append(t)
        t += rng.expovariate(w.rate)
    return out


@dataclass
class PodTimes:
    added: float
    bound: float | None = None
    ready: float | None = None


@dataclass
class WatchRecorder:
    """Follows pod events in a thread: the watch contract, and per pod when it was added, bound, Ready."""

    core: ServerCore
    since_rv: int
    pods: dict[str, PodTimes] = field(default_factory=dict)
    out_of_order: int = 0
    duplicates: int = 0
    bound: int = 0
    ready: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def run(self) -> None:
        watch = self.core.watch(POD, self.since_rv)
        last = self.since_rv
        while not self.stop.is_set():
            batch = watch.next_batch(timeout=0.2)
            if not batch:
                continue
            now = time.perf_counter()  # one reading per batch: the events arrived together
            for ev in batch:
                self._record(ev, last, now)
                last = ev.rv
            with self.changed:
                self.changed.notify_all()

    def _record(self, ev: WatchEvent, last: int, now: float) -> None:
        if ev.rv <= last:
            self.out_of_order += 1
        meta = ev.object["metadata"]
        key = f"{meta.get('namespace')}/{meta['name']}"
        if ev.type == "ADDED":
            if key in self.pods:
                self.duplicates += 1
                return
            self.pods[key] = PodTimes(now)
        times = self.pods.get(key)
        if times is None or ev.type == "DELETED":
            return
        if times.bound is None and ev.object["spec"].get("nodeName"):
            times.bound = now
            self.bound += 1
        if times.ready is None and _running_and_ready(ev.object):
            times.ready = now
            self.ready += 1

    def wait(self, predicate: Any, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        with self.changed:
            while not predicate():
                left = deadline - time.perf_counter()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.5))
        return True


def _running_and_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cluster_config(cfg: Config, scenario: Scenario) -> Config:
    """The scenario's cluster as kemu configuration: what ``kemu up --nodes N --schedulers S`` runs."""
    c = scenario.cluster
    return replace(cfg, nodes=0, node_pools=[c.node_pool()] if c.nodes else [],
                   kubelet_shards=(c.kubelet_shards or None) if c.nodes else 0,
                   schedulers=scenario.schedulers.count if c.nodes else 0,
                   # The kubelets' usage draws follow the scenario's seed too: a run repeats.
                   kubelet={"seed": scenario.seed, **cfg.kubelet})


def run_scenario(path: Path, cfg: Config, seed: int | None = None, output: str | None = None, *,
                 kubelets: KubeletRunnerFactory | None = None,
                 schedulers: SchedulerRunnerFactory | None = None) -> int:
    """Run the scenario at ``path`` on a private cluster; print the summary; 0 if every pod was handled.

    ``kubelets`` / ``schedulers`` are the runner factories :class:`LocalCluster` takes (the ``kemu``
    entry point passes Ray-actor runners; ``emulator`` cannot import Ray).
    """
    try:
        scenario = Scenario.load(path)
    except ScenarioError as e:
        print(f"kemu: error: {e}", file=sys.stderr)
        return 1
    if seed is not None:
        scenario = replace(scenario, seed=seed)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kemu-run-") as tmp:
        cfg = cluster_config(cfg, scenario)
        if not cfg.redis_url:
            cfg = replace(cfg, data_dir=Path(tmp) / "redis")
        with LocalCluster(cfg, kubelets=kubelets, schedulers=schedulers) as cluster:
            assert cluster.core is not None
            startup_s = time.perf_counter() - t0
            summary = _drive(cluster.core, scenario)
            summary["cluster"]["startupSeconds"] = round(startup_s, 2)
            summary["cluster"]["kubeletShards"] = len(cluster.kubelets.health()) if cluster.kubelets else 0
            summary["schedulers"] = _scheduler_stats(cluster)
            if cluster.api_url:
                summary["kubectl"] = _show_with_kubectl(cluster.write_kubeconfig(Path(tmp) / "kubeconfig"),
                                                        scenario.workload.pods)
    summary["wallSeconds"] = round(time.perf_counter() - t0, 2)
    _print_summary(summary)
    if output:
        Path(output).write_text(json.dumps(summary, indent=2))
    return 0 if summary["ok"] else 2


def _drive(core: ServerCore, scenario: Scenario) -> dict[str, Any]:
    c, w = scenario.cluster, scenario.workload
    for i in range(w.namespaces):
        core.create(NAMESPACE, {"metadata": {"name": f"load-{i}"}})
    for p in w.priorities:
        core.create(PRIORITYCLASS, {"metadata": {"name": p.name}, "value": p.value,
                                    "description": "created by kemu run for the scenario's priority mix"})
    nodes_ready = _wait_for_nodes(core, c.nodes, timeout=60.0)

    recorder = WatchRecorder(core, core.store.current_rv())
    watcher = threading.Thread(target=recorder.run, name="pod-watcher", daemon=True)
    watcher.start()
    pods, due = pod_stream(w, scenario.seed), arrival_times(w, scenario.seed)
    failures, created, throttled = 0, 0, 0.0
    t_create = time.perf_counter()
    with tqdm(total=len(pods), desc="creating pods", unit="pod", file=sys.stderr,
              disable=not sys.stderr.isatty()) as bar:
        while created < len(pods):
            if c.nodes and created - failures - recorder.bound >= w.max_backlog:
                # Back-pressure: the schedulers are behind; wait for binds rather than pile up pods.
                t = time.perf_counter()
                in_flight = created - failures
                recorder.wait(lambda n=in_flight: n - recorder.bound < w.max_backlog, timeout=1.0)
                throttled += time.perf_counter() - t
                continue
            elapsed = time.perf_counter() - t_create
            if due[created] > elapsed:
                time.sleep(min(due[created] - elapsed, 0.05))
                continue
            end = created + 1
            while end < len(pods) and end - created < w.batch and due[end] <= elapsed:
                end += 1
            failures += _count_errors(core.create_many(POD, pods[created:end]))
            bar.update(end - created)
            created = end
    create_s = time.perf_counter() - t_create

    # Settle: every pod not expected to stay Pending bound and Running (when there are nodes at all).
    target = len(pods) - failures - w.expect_pending
    t_settle = time.perf_counter()
    if c.nodes:
        settled = recorder.wait(lambda: recorder.bound >= target and recorder.ready >= target, w.settle_timeout)
    else:
        settled = recorder.wait(lambda: len(recorder.pods) >= len(pods) - failures, w.settle_timeout)
    settle_s = time.perf_counter() - t_settle
    recorder.stop.set()
    watcher.join()

    listed = core.list(POD)
    phases = Counter((p.get("status") or {}).get("phase", "Pending") for p in listed.items)
    scheduled = sum(1 for p in listed.items if p["spec"].get("nodeName"))
    sli = [t.bound - t.added for t in recorder.pods.values() if t.bound is not None]
    startup = [t.ready - t.added for t in recorder.pods.values() if t.ready is not None]
    first_added = min((t.added for t in recorder.pods.values()), default=0.0)
    last_bound = max((t.bound for t in recorder.pods.values() if t.bound is not None), default=first_added)
    sched_window = last_bound - first_added
    watch_complete = (len(recorder.pods) == len(pods) - failures and not recorder.duplicates
                      and not recorder.out_of_order)
    unscheduled = len(listed.items) - scheduled
    ok = failures == 0 and watch_complete and unscheduled <= w.expect_pending
    return {
        "scenario": scenario.name, "seed": scenario.seed, "ok": ok,
        "cluster": {"nodes": c.nodes, "nodesReady": nodes_ready, "schedulers": scenario.schedulers.count if c.nodes
                    else 0, "namespaces": w.namespaces},
        "pods": {"requested": w.pods, "created": len(pods) - failures, "createFailures": failures,
                 "scheduled": scheduled, "running": phases.get("Running", 0), "pending": phases.get("Pending", 0),
                 "succeeded": phases.get("Succeeded", 0), "failed": phases.get("Failed", 0),
                 "unscheduled": unscheduled, "expectedPending": w.expect_pending},
        "create": {"seconds": round(create_s, 3), "targetRate": w.rate, "arrival": w.arrival,
                   "podsPerSecond": round((len(pods) - failures) / create_s, 1) if create_s else 0,
                   "backPressureSeconds": round(throttled, 2)},
        "scheduling": {"podsPerSecond": round(len(sli) / sched_window, 1) if sched_window > 0 else 0,
                       "sliLatencyMs": _quantiles_ms(sli, (0.5, 0.9, 0.99)),
                       "settled": settled, "settleSeconds": round(settle_s, 2)},
        "podStartupMs": _quantiles_ms(startup, (0.5, 0.99)),
        **_events_and_failures(core, listed.items),
        "watch": {"received": len(recorder.pods), "duplicates": recorder.duplicates,
                  "outOfOrder": recorder.out_of_order, "complete": watch_complete},
        "list": {"items": len(listed.items), "resourceVersion": listed.resource_version},
    }


def _wait_for_nodes(core: ServerCore, want: int, timeout: float) -> int:
    """Pool nodes register as their kubelet shard starts; pods created before they exist would wait."""
    from emulator.api.kinds import NODE

    deadline = time.perf_counter() + timeout
    while True:
        ready = sum(1 for n in core.list(NODE).items if any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in (n.get("status") or {}).get(
                "conditions") or ()))
        if ready >= want or time.perf_counter() > deadline:
            return ready
        time.sleep(0.2)  # polling the store: registration happens in other processes


def _quantiles_ms(values: list[float], qs: tuple[float, ...]) -> dict[str, float | None]:
    """Quantiles in ms; None (JSON null) when nothing was measured, never NaN (not valid JSON)."""
    out: dict[str, float | None] = {}
    for q in qs:
        v = percentile(values, q)
        out[f"p{round(q * 100)}"] = None if math.isnan(v) else round(v * 1000, 1)
    return out


def _events_and_failures(core: ServerCore, pods: list[dict[str, Any]]) -> dict[str, Any]:
    """OOM kills and evictions, from Events (kubelet reasons) and from the pods' own statuses."""
    reasons: Counter[str] = Counter()
    for ev in core.list(EVENT).items:
        reasons[ev.get("reason", "")] += int(ev.get("count") or 1)
    oom_containers = sum(
        1 for p in pods for cs in (p.get("status") or {}).get("containerStatuses") or ()
        if ((cs.get("lastState") or {}).get("terminated") or {}).get("reason") == "OOMKilled"
        or ((cs.get("state") or {}).get("terminated") or {}).get("reason") == "OOMKilled")
    evicted_pods = sum(1 for p in pods if (p.get("status") or {}).get("reason") == "Evicted")
    return {"oomKills": {"events": reasons.get("OOMKilling", 0) + reasons.get("SystemOOM", 0),
                         "containersOOMKilled": oom_containers},
            "evictions": {"events": reasons.get("Evicted", 0), "podsEvicted": evicted_pods},
            "eventsByReason": dict(reasons.most_common(12))}


def _scheduler_stats(cluster: LocalCluster) -> list[dict[str, Any]]:
    """Per scheduler: attempts, binds and bind conflicts, from the runners' health call."""
    if cluster.schedulers is None:
        return []
    return [{k: s.get(k) for k in ("name", "attempts", "scheduled", "unschedulable", "conflicts", "errors",
                                   "preemptions")} for s in cluster.schedulers.health()]


def _show_with_kubectl(kubeconfig: Path, pods: int) -> dict[str, Any]:
    """Read the cluster back the way a user would: the real kubectl against kemu's API server."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return {"available": False}

    def run(*args: str) -> tuple[list[str], float]:
        t = time.perf_counter()
        out = subprocess.run([kubectl, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                             timeout=300, check=True).stdout
        return out.splitlines(), time.perf_counter() - t

    nodes, _ = run("get", "nodes", "--no-headers")
    listed, seconds = run("get", "pods", "-A", "--no-headers", "--chunk-size=0")
    sample, _ = run("get", "pods", "-n", "load-0", "-o", "wide", f"--chunk-size={min(pods, 500) or 1}")
    return {"available": True, "nodes": len(nodes), "pods": len(listed), "getPodsSeconds": round(seconds, 2),
            "sample": sample[:4]}


def _count_errors(results: list[Any]) -> int:
    errs = [r for r in results if isinstance(r, StatusError)]
    for e in errs[:3]:
        print(f"kemu: create failed: {e.message}", file=sys.stderr)
    return len(errs)


def _fmt(q: dict[str, float | None]) -> str:
    return ", ".join(f"{k} {'-' if v is None else f'{v:,.0f}'} ms" for k, v in q.items())


def _print_summary(s: dict[str, Any]) -> None:
    c, p, cr, sc, w = s["cluster"], s["pods"], s["create"], s["scheduling"], s["watch"]
    print(f"\nkemu run: {s['scenario']} (seed {s['seed']})")
    print(f"  cluster       {c['nodes']} nodes ({c['nodesReady']} Ready) on {c['kubeletShards']} kubelet shard(s), "
          f"{c['schedulers']} scheduler(s), {c['namespaces']} namespaces; up in {c['startupSeconds']} s")
    print(f"  pods          {p['created']} of {p['requested']} created in {cr['seconds']} s "
          f"({cr['podsPerSecond']:,.0f} pods/s, target {cr['targetRate'] or 'unthrottled'} {cr['arrival']}; "
          f"back-pressure {cr['backPressureSeconds']} s)")
    print(f"                scheduled {p['scheduled']}, running {p['running']}, pending {p['pending']}, "
          f"succeeded {p['succeeded']}, failed {p['failed']}")
    print(f"  scheduling    {sc['podsPerSecond']:,.0f} pods/s; SLI latency (created → PodScheduled) "
          f"{_fmt(sc['sliLatencyMs'])}")
    print(f"  pod startup   created → Running and Ready {_fmt(s['podStartupMs'])}")
    for sched in s.get("schedulers") or ():
        print(f"  scheduler     {sched['name']}: {sched['attempts']} attempts, {sched['scheduled']} bound, "
              f"{sched['conflicts']} bind conflicts, {sched['unschedulable']} unschedulable")
    print(f"  kubelets      OOM kills {s['oomKills']['events']} (events), {s['oomKills']['containersOOMKilled']} "
          f"containers OOMKilled; evictions {s['evictions']['events']} (events), "
          f"{s['evictions']['podsEvicted']} pods evicted")
    print(f"  watch         {w['received']} ADDED, {w['duplicates']} duplicates, {w['outOfOrder']} out of order")
    print(f"  list          {s['list']['items']} pods at resourceVersion {s['list']['resourceVersion']}")
    k = s.get("kubectl") or {}
    if k.get("available"):
        print(f"  kubectl       get nodes: {k['nodes']} nodes; get pods -A: {k['pods']} pods in "
              f"{k['getPodsSeconds']} s; get pods -n load-0 -o wide:")
        for line in k["sample"]:
            print(f"                  {line}")
    if s["ok"]:
        verdict = "OK"
    elif not w["complete"]:
        verdict = "WATCH INCOMPLETE"
    else:
        verdict = f"NOT OK ({p['unscheduled']} unscheduled, {p['createFailures']} create failures)"
    print(f"  result        {verdict} in {s['wallSeconds']} s")
