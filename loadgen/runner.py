"""``kemu run SCENARIO``: an emulated cluster under load, and its summary.

The run brings up the same cluster ``kemu up`` does, in a private data
directory with a free API port (kubelet shards and schedulers through the
runners the ``kemu`` entry point injects), or with ``--attach`` drives a running
one through its Redis. Then: **plan** (:func:`loadgen.plan.build`), **load**
(the timeline in real time through a :class:`loadgen.drivers.DriverPool`, with
back-pressure: while ``driver.max_backlog`` created pods are unbound the rest of
the timeline shifts by the wait), **observe** (one watcher thread checks the
watch contract and timestamps each pod's ADDED, bind and Running+Ready
arrivals), **settle** (at most ``settle_timeout`` s), **read back** (pods,
Events, scheduler counters, the real ``kubectl``) and **report** (printed, JSON,
HTML via :mod:`loadgen.report`). What the summary holds and how its latencies
are measured is ``docs/scenarios.md`` ("What a run measures").

The exit code is 0 only if every action succeeded, every live pod but the
expected Pending ones got scheduled, and the watch was complete; 2 otherwise.
"""

from __future__ import annotations

import math
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

from emulator import loadtargets
from emulator.api.kinds import EVENT, LEASE, NAMESPACE, NODE, POD, PRIORITYCLASS
from emulator.api.quantity import cpu_millis, to_int
from emulator.clock import SystemClock
from emulator.cluster import LocalCluster
from emulator.config import Config
from emulator.server.core import ServerCore
from emulator.store.store import Store, StoreConfig, WatchEvent
from emulator.supervisor import Supervisor
from loadgen import autoscalers, invariants, keda, nodegroups, scrape
from loadgen import plan as planning
from loadgen.chaos import Injector
from loadgen.drivers import DriverPool, Failure, SinkSpec, execute
from loadgen.queues import QueuePusher
from loadgen.scenario import Scenario, ScenarioError

if TYPE_CHECKING:
    from emulator.cluster import ControllerRunnerFactory, KubeletRunnerFactory, SchedulerRunnerFactory


@dataclass(slots=True)
class PodTimes:
    added: float
    bound: float | None = None
    ready: float | None = None
    gone: bool = False  # deleted, or marked for deletion (Terminating): no longer expected to run


@dataclass
class WatchRecorder:
    """Follows pod events in a thread: the watch contract, and per pod when it was added, bound, Ready.

    ``unbound`` / ``unready`` count live pods (not deleted or terminating) not yet bound / Ready:
    the driver's back-pressure and the settle condition read them.
    """

    core: ServerCore
    since_rv: int
    pods: dict[str, PodTimes] = field(default_factory=dict)
    out_of_order: int = 0
    duplicates: int = 0
    bound: int = 0
    ready: int = 0
    deleted: int = 0
    unbound: int = 0
    unready: int = 0
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
            with self.changed:
                for ev in batch:
                    self._record(ev, last, now)
                    last = ev.rv
                self.changed.notify_all()

    def _record(self, ev: WatchEvent, last: int, now: float) -> None:
        if ev.rv <= last:
            self.out_of_order += 1
        obj = ev.object
        meta = obj["metadata"]
        key = f"{meta.get('namespace')}/{meta['name']}"
        if ev.type == "ADDED":
            if key in self.pods:
                self.duplicates += 1
                return
            self.pods[key] = PodTimes(now)
            self.unbound += 1
            self.unready += 1
        times = self.pods.get(key)
        if times is None or times.gone:
            return
        if times.bound is None and obj["spec"].get("nodeName"):
            times.bound = now
            self.bound += 1
            self.unbound -= 1
        if times.ready is None and _running_and_ready(obj):
            times.ready = now
            self.ready += 1
            self.unready -= 1
        if ev.type == "DELETED" or meta.get("deletionTimestamp"):
            times.gone = True
            self.deleted += ev.type == "DELETED"
            self.unbound -= times.bound is None
            self.unready -= times.ready is None

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
    """The scenario's cluster as kemu configuration: what ``kemu up`` runs for the same pools."""
    pools = scenario.node_pools()
    c = scenario.cluster
    # Node groups need kubelets and schedulers even when they start empty (their nodes come at run time).
    nodes = sum(int(p.get("count", 0)) for p in pools) + len(c.node_groups)
    return replace(cfg, nodes=0, node_pools=pools, node_groups=[dict(g) for g in c.node_groups],
                   cluster_autoscaler=dict(c.cluster_autoscaler or {}),
                   kubelet_shards=(c.kubelet_shards or None) if nodes else 0,
                   schedulers=scenario.schedulers.count if nodes else 0,
                   scheduler_config=(str(scenario.resolve(scenario.schedulers.config))
                                     if scenario.schedulers.config else cfg.scheduler_config),
                   controller_managers=cfg.controller_managers if scenario.controllers else 0,
                   controller_manager={**cfg.controller_manager, **scenario.controller_manager},
                   clock_speed=scenario.clock_speed,
                   # The kubelets' usage draws follow the scenario's seed too: a run repeats.
                   kubelet={"seed": scenario.seed, **cfg.kubelet})


@dataclass
class RunOptions:
    """How ``kemu run`` was asked to run, besides the scenario."""

    seed: int | None = None
    output: str | None = None  # JSON summary path
    report: str | None = None  # HTML report path
    attach: bool = False  # drive the cluster at cfg.redis_url instead of starting one
    driver: str | None = None  # override the scenario's driver.kind
    processes: int | None = None  # override driver.processes
    kubeconfig: str | None = None  # attach + http: where the API server and token are
    compare: bool = False  # run every `compare` variant of the scenario (loadgen.compare)


def run_scenario(path: Path, cfg: Config, options: RunOptions | None = None, *,
                 kubelets: KubeletRunnerFactory | None = None,
                 schedulers: SchedulerRunnerFactory | None = None,
                 controllers: ControllerRunnerFactory | None = None) -> int:
    """Run the scenario at ``path``; print the summary; write JSON and HTML; 0 if every pod was handled.

    ``kubelets`` / ``schedulers`` / ``controllers`` are the runner factories :class:`LocalCluster` takes
    (the ``kemu`` entry point passes Ray-actor runners; ``emulator`` cannot import Ray); ``controllers``
    is used only when the configuration sets ``controllers_on_ray``.
    """
    opts = options or RunOptions()
    if opts.compare:
        if opts.attach:
            print("kemu: error: kemu run --compare starts a fresh cluster per variant: it cannot --attach",
                  file=sys.stderr)
            return 1
        from loadgen.compare import run_compare

        return run_compare(path, cfg, opts, kubelets=kubelets, schedulers=schedulers, controllers=controllers)
    try:
        scenario = Scenario.load(path)
        if opts.seed is not None:
            scenario = replace(scenario, seed=opts.seed)
        if opts.driver or opts.processes:
            scenario = replace(scenario, driver=replace(scenario.driver, kind=opts.driver or scenario.driver.kind,
                                                        processes=opts.processes or scenario.driver.processes))
        plan = planning.build(scenario)
    except (ScenarioError, ValueError, OSError) as e:
        print(f"kemu: error: {e}", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kemu-run-") as tmp:
        if opts.attach:
            summary, series = _run_attached(cfg, scenario, plan, opts, t0)
        else:
            summary, series = _run_local(cfg, scenario, plan, Path(tmp), t0, kubelets=kubelets,
                                         schedulers=schedulers, controllers=controllers)
    summary["wallSeconds"] = round(time.perf_counter() - t0, 2)
    _print_summary(summary)
    _write_outputs(summary, series, scenario, opts)
    return 0 if summary["ok"] else 2


def _run_local(cfg: Config, scenario: Scenario, plan: planning.Plan, tmp: Path, t0: float, *,
               kubelets: KubeletRunnerFactory | None,
               schedulers: SchedulerRunnerFactory | None,
               controllers: ControllerRunnerFactory | None = None) -> tuple[dict[str, Any], Any]:
    cfg = cluster_config(cfg, scenario)
    if not cfg.redis_url:
        cfg = replace(cfg, data_dir=tmp / "redis")
    with LocalCluster(cfg, kubelets=kubelets, schedulers=schedulers, controllers=controllers) as cluster:
        assert cluster.core is not None and cluster.redis_url is not None
        startup_s = time.perf_counter() - t0
        spec = SinkSpec(scenario.driver.kind, cluster.redis_url, cfg.prefix, cluster.api_url or "",
                        cluster.api_token or "", scenario.driver.concurrency, cfg.clock_speed)
        # The run's own processes (redis-server, the API server) are restarted if they die, as under `kemu up`.
        supervisor = Supervisor(cluster.supervised_parts(), cluster.records).start()
        try:
            summary, series = _drive(cluster.core, scenario, plan, spec, cluster=cluster, supervisor=supervisor)
        finally:
            supervisor.stop()
        summary["cluster"]["startupSeconds"] = round(startup_s, 2)
        summary["cluster"]["kubeletShards"] = len(cluster.kubelets.health()) if cluster.kubelets else 0
        _add_scheduler_stats(summary, _scheduler_stats(cluster))
        if cluster.api_url:
            summary["kubectl"] = _show_with_kubectl(cluster.write_kubeconfig(tmp / "kubeconfig"),
                                                    summary["list"]["items"])
    return summary, series


def _run_attached(cfg: Config, scenario: Scenario, plan: planning.Plan, opts: RunOptions,
                  t0: float) -> tuple[dict[str, Any], Any]:
    """Drive a running cluster (docker-compose, ``kemu up``) found at its Redis; start nothing."""
    if not cfg.redis_url:
        raise SystemExit("kemu: error: --attach needs the cluster's Redis (--redis-url or KEMU_REDIS_URL)")
    from emulator.store.redis_server import wait_for_redis

    wait_for_redis(cfg.redis_url, timeout=cfg.redis_timeout)
    store = Store.connect(cfg.redis_url, StoreConfig(prefix=cfg.prefix))
    try:
        core = ServerCore(store, SystemClock(cfg.clock_speed))
        api_url, token = "", ""
        if scenario.driver.kind == "http":
            api_url, token = _read_kubeconfig(opts.kubeconfig)
        spec = SinkSpec(scenario.driver.kind, cfg.redis_url, cfg.prefix, api_url, token,
                        scenario.driver.concurrency, cfg.clock_speed)
        summary, series = _drive(core, scenario, plan, spec)
        summary["cluster"]["startupSeconds"] = round(time.perf_counter() - t0, 2)
        summary["cluster"]["attached"] = cfg.redis_url
        summary["cluster"]["kubeletShards"] = None
        # Someone else started the schedulers: their counters come from their /metrics.
        _add_scheduler_stats(summary, scrape.scheduler_stats(store.redis, cfg.prefix))
        if opts.kubeconfig:
            summary["kubectl"] = _show_with_kubectl(Path(opts.kubeconfig), summary["list"]["items"])
    finally:
        store.close()
    return summary, series


def _add_scheduler_stats(summary: dict[str, Any], stats: list[dict[str, Any]]) -> None:
    """Per replica rows, and across replicas the slowest replica's attempt quantiles (a conservative
    headline) and the total preemptions."""
    summary["schedulers"] = stats
    summary["scheduling"]["attemptLatencyMs"] = {
        q: max((s[f"attempt_{q}_ms"] for s in stats if s[f"attempt_{q}_ms"] is not None), default=None)
        for q in ("p50", "p90", "p99")}
    summary["scheduling"]["preemptions"] = sum(s["preemptions"] or 0 for s in stats)
    from loadgen.compare import merge_effectiveness

    summary["effectiveness"] = merge_effectiveness(stats)


def _read_kubeconfig(path: str | None) -> tuple[str, str]:
    """The API server URL and bearer token of a kubeconfig (its first cluster and user)."""
    import yaml

    if not path:
        raise SystemExit("kemu: error: the http driver with --attach needs --kubeconfig (the API server to call)")
    data = yaml.safe_load(Path(path).read_text())
    server = data["clusters"][0]["cluster"]["server"]
    token = (data.get("users") or [{}])[0].get("user", {}).get("token", "")
    return server, token


def _ensure(core: ServerCore, kind: Any, body: dict[str, Any]) -> None:
    """Create unless it exists (an attached cluster may have it from an earlier run)."""
    from emulator.api.errors import StatusError

    try:
        core.create(kind, body)
    except StatusError as e:
        if e.code != 409:
            raise


def _drive(core: ServerCore, scenario: Scenario, plan: planning.Plan, spec: SinkSpec, *,
           cluster: LocalCluster | None = None, supervisor: Supervisor | None = None) -> tuple[dict[str, Any], Any]:
    for i in range(scenario.namespaces):
        _ensure(core, NAMESPACE, {"metadata": {"name": f"load-{i}"}})
    for p in scenario.priorities:
        _ensure(core, PRIORITYCLASS, {"metadata": {"name": p.name}, "value": p.value,
                                      "description": "created by kemu run for the scenario's priority mix"})
    if scenario.objects:
        autoscalers.apply_objects(core, scenario.objects)
    want_nodes = scenario.node_count()
    nodes_ready = _wait_for_nodes(core, want_nodes, timeout=120.0)

    recorder = WatchRecorder(core, core.store.current_rv())
    watcher = threading.Thread(target=recorder.run, name="pod-watcher", daemon=True)
    watcher.start()
    from loadgen.utilization import UtilizationSampler

    sampler = UtilizationSampler(core).start()
    d = scenario.driver
    results: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    samples: list[str] = []
    failed_creates: set[str] = set()

    def on_result(op: str, n: int, errs: list[Failure]) -> None:
        results[op] += n - len(errs)
        failures[op] += len(errs)
        samples.extend(f"{key}: {msg}" for key, msg in errs[: max(0, 5 - len(samples))])
        if op == planning.CREATE_POD:
            failed_creates.update(key for key, _ in errs)
        if op == planning.CREATE_POD:
            metrics.PODS_CREATED.inc(n - len(errs))
            metrics.CREATE_ERRORS.inc(len(errs))

    from loadgen import metrics

    endpoint = metrics.start(core.store.redis, prefix=core.store.config.prefix)
    autoscaler_sampler = autoscalers.AutoscalerSampler(core).start() if scenario.has_autoscalers() else None
    keda_sampler = keda.KedaSampler(core).start() if scenario.has_keda() else None
    pool = DriverPool(spec, d.processes, on_result)
    t_start = time.perf_counter()

    pusher = QueuePusher(core.store.redis)

    def on_load(kind: str, target: str, value: float) -> None:
        if kind == "push":  # items into a real Redis list, drained by queue-worker pods (loadgen.queues)
            pushed = pusher.push(target, value)
            if keda_sampler is not None:
                keda_sampler.pushed(target, pushed)
            return
        gauge = metrics.HTTP_REQUESTS_PER_SECOND if kind == "http" else metrics.QUEUE_DEPTH
        gauge.labels(target).set(value)
        # The load target itself (emulator.loadtargets): what the pods attached to it serve.
        write = loadtargets.set_rate if kind == "http" else loadtargets.set_queue_depth
        write(core.store.redis, core.store.config.prefix, target, value)

    def backlog() -> int:
        metrics.BACKLOG.set(recorder.unbound)
        return recorder.unbound

    groups = None
    if scenario.cluster.node_groups:  # nodes per group, pending pods and cost over time (loadgen/nodegroups.py)
        groups = nodegroups.NodeGroupSampler(core, lambda: recorder.unbound).start()
    # Without nodes nothing binds: back-pressure would stop the run, so there is none.
    injector = (Injector(core, cluster, supervisor=supervisor, t_start=t_start)
                if plan.count(planning.INJECT_FAULT) else None)
    run = execute(plan.actions, pool, batch=d.batch, max_backlog=d.max_backlog if want_nodes else 0,
                  backlog=backlog, wait=recorder.wait, on_load=on_load,
                  on_fault=injector.on_fault if injector is not None else None)
    pool.close()
    # Faults still held are restored, and every recovery awaited, before the cluster is asked to settle.
    faults = injector.finish() if injector is not None else None
    run_s, throttled, loads = run.seconds, run.throttled, run.loads
    creates = plan.count(planning.CREATE_POD)

    # Settle: every live pod not expected to stay Pending bound and Running (when there are nodes at all).
    expected = plan.expected_pods() - failures[planning.CREATE_POD]
    t_settle = time.perf_counter()
    if want_nodes:
        settled = recorder.wait(lambda: len(recorder.pods) >= expected
                                and recorder.unbound <= scenario.expect_pending
                                and recorder.unready <= scenario.expect_pending, scenario.settle_timeout)
    else:
        settled = recorder.wait(lambda: len(recorder.pods) >= expected, scenario.settle_timeout)
    if keda_sampler is not None:  # and the KEDA lists drained, their ScaledObjects back at their minimum
        keda_sampler.wait_settled(max(0.0, scenario.settle_timeout - (time.perf_counter() - t_settle)))
    settle_s = time.perf_counter() - t_settle
    sampler.stop()
    if groups is not None:
        groups.stop()
    if autoscaler_sampler is not None:
        autoscaler_sampler.stop()
    if keda_sampler is not None:
        keda_sampler.stop()
    recorder.stop.set()
    watcher.join()
    endpoint.stop()

    listed = core.list(POD)
    nodes = core.list(NODE).items
    phases = Counter((p.get("status") or {}).get("phase", "Pending") for p in listed.items)
    scheduled = sum(1 for p in listed.items if p["spec"].get("nodeName"))
    times = list(recorder.pods.values())
    sli = [t.bound - t.added for t in times if t.bound is not None]
    startup = [t.ready - t.added for t in times if t.ready is not None]
    first_added = min((t.added for t in times), default=t_start)
    last_bound = max((t.bound for t in times if t.bound is not None), default=first_added)
    sched_window = last_bound - first_added
    watch_complete = not recorder.duplicates and not recorder.out_of_order and len(recorder.pods) >= expected
    unscheduled = sum(1 for p in listed.items if not p["spec"].get("nodeName")
                      and not p["metadata"].get("deletionTimestamp"))
    failed_total = sum(failures.values())
    checked = invariants.check_all(
        acknowledged=(k for a in plan.actions if a.op == planning.CREATE_POD
                      and (k := f"{a.namespace}/{a.name}") not in failed_creates),
        deleted=(k for k, t in recorder.pods.items() if t.gone), pods=listed.items, nodes=nodes,
        leases=core.list(LEASE, namespace="kube-node-lease").items, now=core.clock.now(),
        received=len(recorder.pods), duplicates=recorder.duplicates, out_of_order=recorder.out_of_order)
    ok = (failed_total == 0 and watch_complete and unscheduled <= scenario.expect_pending and checked["holds"]
          and (faults is None or faults["recovered"] == faults["injected"]))
    for msg in samples:
        print(f"kemu: action failed: {msg}", file=sys.stderr)
    summary = {
        "scenario": scenario.name, "seed": scenario.seed, "ok": ok,
        "cluster": {"nodes": want_nodes, "nodesReady": nodes_ready,
                    "schedulers": scenario.schedulers.count if want_nodes else 0,
                    "namespaces": scenario.namespaces},
        "driver": {"kind": spec.kind, "processes": d.processes, "batch": d.batch, "maxBacklog": d.max_backlog},
        "phases": [{"name": w.name, "kind": w.kind, "start": round(w.start, 2), "end": round(w.end, 2),
                    "actions": w.actions} for w in plan.phases],
        "pods": {"requested": creates, "expected": plan.expected_pods(), "created": results[planning.CREATE_POD],
                 "createFailures": failures[planning.CREATE_POD], "seen": len(recorder.pods),
                 "deleted": results[planning.DELETE_POD], "deletedSeen": recorder.deleted,
                 "scheduled": scheduled, "running": phases.get("Running", 0),
                 "pending": phases.get("Pending", 0), "succeeded": phases.get("Succeeded", 0),
                 "failed": phases.get("Failed", 0), "unscheduled": unscheduled,
                 "expectedPending": scenario.expect_pending, "live": len(listed.items)},
        "actions": {op: {"done": results[op], "failed": failures[op]} for op in sorted(set(results) | set(failures))},
        "create": {"seconds": round(run_s, 3),
                   "podsPerSecond": round(results[planning.CREATE_POD] / run_s, 1) if run_s else 0,
                   "backPressureSeconds": round(throttled, 2)},
        "scheduling": {"podsPerSecond": round(len(sli) / sched_window, 1) if sched_window > 0 else 0,
                       "sliLatencyMs": _quantiles_ms(sli, (0.5, 0.9, 0.99)),
                       "settled": settled, "settleSeconds": round(settle_s, 2)},
        "podStartupMs": _quantiles_ms(startup, (0.5, 0.99)),
        **_events_and_failures(core, listed.items),
        "nodeUtilization": sampler.summary(),
        "podsPerPool": _pods_per_pool(listed.items, nodes),
        "load": {k: {"points": len(v), "min": min(x for _, x in v), "max": max(x for _, x in v),
                     "last": v[-1][1]} for k, v in loads.items()},
        "watch": {"received": len(recorder.pods), "duplicates": recorder.duplicates,
                  "outOfOrder": recorder.out_of_order, "complete": watch_complete},
        "list": {"items": len(listed.items), "resourceVersion": listed.resource_version},
        "invariants": checked,
    }
    if faults is not None:
        summary["chaos"] = faults
    if groups is not None:
        summary["nodeGroups"] = nodegroups.summarize(groups.samples, nodegroups.prices_of(core))
    if autoscaler_sampler is not None:
        summary["autoscaling"] = autoscaler_sampler.summary()
    if keda_sampler is not None:  # a run ends with the queues drained, or it is not OK
        summary["keda"] = keda_sampler.summary()
        summary["ok"] = summary["ok"] and summary["keda"]["drained"]
    series = _series(times, t_start, listed.items, nodes, plan)
    series.utilization = list(sampler.samples)
    return summary, series


def _pods_per_pool(pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> dict[str, int]:
    """Bound pods per node pool (label ``kemu.io/node-pool``): where the scheduler put the load."""
    pool_of = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get("kemu.io/node-pool", "") for n in nodes}
    return dict(sorted(Counter(pool_of.get(p["spec"]["nodeName"], "") for p in pods
                               if p["spec"].get("nodeName")).items()))


def _series(times: list[PodTimes], t_start: float, pods: list[dict[str, Any]], nodes: list[dict[str, Any]],
            plan: planning.Plan) -> Any:
    """What the report's plots need: per-pod times from the start, and each node's requested fraction."""
    from emulator.api.pods import pod_requests
    from loadgen.report import RunSeries

    cpu_req: Counter[str] = Counter()
    mem_req: Counter[str] = Counter()
    for p in pods:
        node = p["spec"].get("nodeName")
        if node and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            req = pod_requests(p)  # millicores and bytes
            cpu_req[node] += req.get("cpu", 0)
            mem_req[node] += req.get("memory", 0)
    node_cpu: dict[str, float] = {}
    node_mem: dict[str, float] = {}
    for n in nodes:
        name = n["metadata"]["name"]
        alloc = (n.get("status") or {}).get("allocatable") or {}
        cpu = cpu_millis(alloc["cpu"]) if "cpu" in alloc else 0
        mem = to_int(alloc["memory"]) if "memory" in alloc else 0
        node_cpu[name] = cpu_req[name] / cpu if cpu else 0.0
        node_mem[name] = mem_req[name] / mem if mem else 0.0

    def rel(x: float | None) -> float | None:
        return None if x is None else x - t_start

    return RunSeries(added=[t.added - t_start for t in times], bound=[rel(t.bound) for t in times],
                     ready=[rel(t.ready) for t in times], node_cpu=node_cpu, node_memory=node_mem,
                     phases=[(w.name, w.start, w.end) for w in plan.phases])


def _write_outputs(summary: dict[str, Any], series: Any, scenario: Scenario, opts: RunOptions) -> None:
    """The summary as JSON and the HTML report: where asked, else under ``kemu-runs/<scenario>-<seed>/``."""
    from loadgen.report import write_json, write_report

    default_dir = Path("kemu-runs") / f"{scenario.name}-{scenario.seed}"
    json_path = Path(opts.output) if opts.output else default_dir / "summary.json"
    html_path = Path(opts.report) if opts.report else json_path.with_name("report.html") if opts.output \
        else default_dir / "report.html"
    for p in (json_path, html_path):
        p.parent.mkdir(parents=True, exist_ok=True)
    write_json(summary, json_path)
    write_report(summary, series, html_path)
    print(f"  written       {json_path} and {html_path}")


def _wait_for_nodes(core: ServerCore, want: int, timeout: float) -> int:
    """Pool nodes register as their kubelet shard starts; pods created before they exist would wait."""
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
    """OOM kills and evictions, from Events (kubelet reasons) and from the pods' own statuses; CPU throttling
    from the kubelet shards' per-pod counts (:func:`emulator.kubelet.usage_publisher.throttling`)."""
    from emulator.kubelet.usage_publisher import throttling

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
            "cpuThrottling": throttling(core.store.redis, core.store.config.prefix),
            "eventsByReason": dict(reasons.most_common(12))}


def _scheduler_stats(cluster: LocalCluster) -> list[dict[str, Any]]:
    """Per scheduler: attempts, binds and bind conflicts, from the runners' health call."""
    if cluster.schedulers is None:
        return []
    out = []
    for s in cluster.schedulers.health():
        row = {k: s.get(k) for k in ("name", "attempts", "scheduled", "unschedulable", "conflicts", "errors",
                                     "preemptions", "attempt_p50_ms", "attempt_p90_ms", "attempt_p99_ms")}
        # Of the binds this replica tried, the fraction another replica's bind beat (assume/forget).
        row["conflictFraction"] = round(s["conflicts"] / max(1, s["scheduled"] + s["conflicts"]), 4)
        if s.get("effectiveness"):
            row["effectiveness"] = s["effectiveness"]  # per profile (emulator.scheduler.effectiveness)
        out.append(row)
    return out


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


def _fmt(q: dict[str, float | None]) -> str:
    return ", ".join(f"{k} {'-' if v is None else f'{v:,.0f}'} ms" for k, v in q.items())


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _print_summary(s: dict[str, Any]) -> None:
    c, p, cr, sc, w = s["cluster"], s["pods"], s["create"], s["scheduling"], s["watch"]
    print(f"\nkemu run: {s['scenario']} (seed {s['seed']})")
    shards = "an attached cluster" if c.get("attached") else f"{c['kubeletShards']} kubelet shard(s)"
    print(f"  cluster       {c['nodes']} nodes ({c['nodesReady']} Ready) on {shards}, "
          f"{c['schedulers']} scheduler(s), {c['namespaces']} namespaces; up in {c['startupSeconds']} s")
    dr = s["driver"]
    print(f"  driver        {dr['kind']} x {dr['processes']} process(es), batches of {dr['batch']}, "
          f"backlog limit {dr['maxBacklog']}")
    for ph in s["phases"]:
        print(f"  phase         {ph['name']:<16} {ph['kind']:<12} {ph['start']:>8.1f} s → {ph['end']:>8.1f} s, "
              f"{ph['actions']} actions")
    by_controllers = f" (+{p['expected'] - p['requested']} from Deployments)" if p["expected"] > p["requested"] else ""
    print(f"  pods          {p['created']} of {p['requested']} created{by_controllers} "
          f"in {cr['seconds']} s ({cr['podsPerSecond']:,.0f} pods/s; back-pressure {cr['backPressureSeconds']} s); "
          f"{p['deleted']} deleted")
    print(f"                scheduled {p['scheduled']}, running {p['running']}, pending {p['pending']}, "
          f"succeeded {p['succeeded']}, failed {p['failed']}")
    print(f"  scheduling    {sc['podsPerSecond']:,.0f} pods/s; SLI latency (created → PodScheduled) "
          f"{_fmt(sc['sliLatencyMs'])}")
    print(f"  pod startup   created → Running and Ready {_fmt(s['podStartupMs'])}")
    for sched in s.get("schedulers") or ():
        attempts = {k[len("attempt_"):-3]: sched.get(k) for k in ("attempt_p50_ms", "attempt_p90_ms",
                                                                 "attempt_p99_ms")}
        print(f"  scheduler     {sched['name']}: {sched['attempts']} attempts ({_fmt(attempts)}), "
              f"{sched['scheduled']} bound, {sched['conflicts']} bind conflicts "
              f"({sched['conflictFraction']:.1%}), {sched['unschedulable']} unschedulable, "
              f"{sched['preemptions']} preemptions")
    for profile, e in (s.get("effectiveness") or {}).items():
        print(f"  effectiveness {profile}: {e['effective_dynamic_schedule_count']:g} of {e['total_schedule_count']} "
              f"binds effective ({_pct(e['effective_schedule_ratio'])}); chosen nodes' utilization cpu "
              f"{_pct(e['cpu_utilization_total_avg'])}, memory {_pct(e['memory_utilization_total_avg'])}")
    u = s.get("nodeUtilization") or {}
    if u.get("samples"):
        print(f"  utilization   cpu p50/p90/max {_pct(u['cpu']['p50'])}/{_pct(u['cpu']['p90'])}/"
              f"{_pct(u['cpu']['max'])} (worst {_pct(u['cpu']['worstMax'])}), memory {_pct(u['memory']['p50'])}/"
              f"{_pct(u['memory']['p90'])}/{_pct(u['memory']['max'])}, mean over {u['samples']} samples")
    print(f"  kubelets      OOM kills {s['oomKills']['events']} (events), {s['oomKills']['containersOOMKilled']} "
          f"containers OOMKilled; evictions {s['evictions']['events']} (events), "
          f"{s['evictions']['podsEvicted']} pods evicted")
    if s.get("cpuThrottling"):
        t = s["cpuThrottling"]
        print(f"  throttling    {t['podsThrottled']} pods CPU-throttled (CFS quota), {t['throttledPeriods']} "
              f"throttled periods")
    for name, series in (s.get("load") or {}).items():
        print(f"  load          {name}: {series['points']} points, {series['min']:g} .. {series['max']:g}")
    a = s.get("nodeGroups")
    if a:
        for name, g in a["groups"].items():
            print(f"  node group    {name}: up to {g['nodesMax']} nodes, {g['nodesLast']} at the end; "
                  f"{g['nodeHours']:.2f} node-hours x {g['pricePerHour']:g}/h = {g['cost']:.3f}")
        ttc = a["timeToCapacitySeconds"]
        print(f"  node groups   cost {a['costTotal']:.3f}; pending up to {a['pendingMax']} pods; "
              f"{ttc['episodes']} pending episode(s), time to capacity max {ttc['max']} s, mean {ttc['mean']} s")
    for line in autoscalers.summary_lines(s.get("autoscaling") or {}):
        print(f"  autoscaling   {line}")
    for line in keda.summary_lines(s.get("keda") or {}):
        print(f"  keda          {line}")
    print(f"  watch         {w['received']} ADDED, {w['duplicates']} duplicates, {w['outOfOrder']} out of order")
    print(f"  list          {s['list']['items']} pods at resourceVersion {s['list']['resourceVersion']}")
    ch = s.get("chaos")
    if ch:
        rec = ch["recoverySeconds"]
        print(f"  chaos         {ch['injected']} faults injected, {ch['recovered']} recovered "
              f"(recovery max {rec['max']} s, mean {rec['mean']} s)")
        for f in ch["faults"]:
            back = f"back in {f['recoverySeconds']} s" if f["recovered"] else f"NOT RECOVERED {f.get('error', '')}"
            print(f"                  {f['at']:>7.1f} s  {f['kind']:<24} {f['target']:<16} {back}")
    inv = s.get("invariants") or {}
    if inv:
        held = [name for name, c in inv.items() if name != "holds" and c["holds"]]
        broken = [name for name, c in inv.items() if name != "holds" and not c["holds"]]
        print(f"  invariants    {len(held)} of {len(held) + len(broken)} hold"
              + (f"; BROKEN: {', '.join(broken)}" if broken else ""))
        for name in broken:
            for example in inv[name]["examples"]:
                print(f"                  {name}: {example}")
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
    elif inv and not inv["holds"]:
        verdict = "INVARIANTS BROKEN"
    elif ch and ch["recovered"] < ch["injected"]:
        verdict = f"NOT OK ({ch['injected'] - ch['recovered']} faults not recovered)"
    elif s.get("keda") and not s["keda"]["drained"]:
        left = sum(q["left"] for q in s["keda"]["queues"].values())
        verdict = f"NOT OK ({left} items left in the KEDA lists)"
    else:
        failed = sum(a["failed"] for a in s["actions"].values())
        verdict = f"NOT OK ({p['unscheduled']} unscheduled, {failed} failed actions)"
    print(f"  result        {verdict} in {s['wallSeconds']} s")
