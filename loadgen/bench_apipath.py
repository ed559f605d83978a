"""The API path under load: pods created over HTTP with the official client, time from create to bound.

    .venv/bin/python -m loadgen.bench_apipath --nodes 1000 --pods 2000 --shards 2

A smaller reproduction of issue 17's item 10 (5,000 API-created Nodes adopted by
kubelet shards, 10,000 pods created by 4 processes x 4 threads with the official
``kubernetes`` client while another process watches). Starts a cluster as
``kemu run`` does (embedded Redis, the API server process, ``--shards`` kubelet
shards, one scheduler and one controller manager as Ray actors; ``--shards 0``:
no kubelets), creates the Nodes through the API (Ready, with capacity: the
kubelets adopt them, or without kubelets they stay as created), then:

* ``--procs`` x ``--threads`` (default 4 x 4, the issue's) client threads create
  ``--pods`` pods through the API server as fast as they can (``--rate R``: R pods
  a second in all), each noting when its create returned;
* a **client watcher** process holds a watch on the namespace with the official
  client (decoded into its models, as a user's script does) and notes when it saw
  each pod bound (``spec.nodeName`` set);
* a **raw watcher** process holds the same watch over HTTP but parses each line
  with ``json.loads`` only (the API server's delivery, without the models);
* a **store watcher** thread in this process reads the same events straight from
  the store (no HTTP, no model decoding) and notes the same.

The creates start when every child is ready: each creator once its client is
built, each watcher once its watch is open (its first watch asks for the
WatchList protocol's initial-events-end BOOKMARK, which arrives when the server
holds the watch).

``--fanout K`` measures the API server's watch path alone instead: an API server
and Redis only, K raw HTTP watches on the pod stream (each a thread here), and
``--pods`` pods written straight to the store (with the managedFields a create
through the API adds), each then bound and its status written; it reports the
API server's CPU milliseconds per event written and the write -> received
latency over all watches.

``--server-only`` measures the create path alone: Redis, the API server and the
creators, no scheduler: CPU milliseconds per create of the API server, Redis
and the creators (``--watch``: plus one raw HTTP watch, and the seconds from a
create returning to its ADDED arriving there).

It reports create -> bound p50/p99 as each watcher saw it (and the p50 of each
quarter of the pods in creation order: a watcher that cannot keep up shows a
growing lag), and the CPU seconds spent from the first create until every
watcher had seen every pod bound: by the API server (all its workers), by every
process of the benchmark by name (the client processes report their own), by
the whole machine (every process on it, other work included), with the load
average at the end; CPU milliseconds per create and per watch event; and what
the watch events were: per pod, and per event the fields it changed against the
pod's previous event (``--dump-events FILE`` writes one pod's events in full).
The watchers see the same binding: the store watcher's figure is the control
plane's (API server write, scheduler, bind); the raw watcher adds the API
server's watch delivery; the client watcher adds the official client's decoding
into its models, which is the user's process, not kemu. Each figure is when that
watcher's process *saw* the pod bound (its ``time.time()`` on decoding the event), so
the client watcher's includes the queue of events waiting for its own decoding; the
report adds ``clientBehindRaw`` (client seen - raw seen, per pod) and
``boundClientDedicatedCore``: the raw watch's arrivals replayed through one server that
spends the client's measured CPU per event, i.e. the p50 the client would see with a
core of its own.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import multiprocessing.pool
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from actors.cli import controller_runner, kubelet_runner, scheduler_runner
from emulator.api.kinds import POD
from emulator.cluster import LocalCluster
from emulator.config import Config
from loadgen.bench_kubelets import cpu_seconds, process_tree, wait_until

NAMESPACE = "apipath"


def _client(kubeconfig: str) -> Any:
    from kubernetes import client, config  # the official client: what a user's script runs

    return client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))


def node_body(name: str) -> dict[str, Any]:
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": capacity, "allocatable": capacity,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def pod_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"kemu.io/startup-delay": "0s"}},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9",
                                     "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]}}


def _creator(kubeconfig: str, names: list[str], threads: int, start: Any, queues: tuple[Any, Any], *,
             rate: float = 0.0) -> None:
    """One client process: ``threads`` threads creating ``names``; says hello on the first queue when ready,
    then sends {name: when the create returned} on the second. ``rate`` > 0: pod ``p-N`` is not created
    before N / rate seconds after the start (all processes together create ``rate`` pods a second)."""
    hello, out = queues
    api = _client(kubeconfig)
    hello.put(("creator", os.getpid()))  # the client is imported and configured
    done: dict[str, float] = {}
    lock = threading.Lock()

    def work(mine: list[str]) -> None:
        for name in mine:
            if rate > 0:
                time.sleep(max(0.0, t0 + int(name.rsplit("-", 1)[1]) / rate - time.time()))  # the schedule
            api.create_namespaced_pod(NAMESPACE, pod_body(name))
            with lock:
                done[name] = time.time()

    start.wait()
    cpu0, t0 = time.process_time(), time.time()
    workers = [threading.Thread(target=work, args=(names[i::threads],)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put((done, time.process_time() - cpu0))


# The first watch of each watcher asks for the WatchList protocol's initial-events-end BOOKMARK (the
# namespace is empty then, so it is the first line): a watcher reports itself open when it has it.
_OPEN = {"allow_watch_bookmarks": True, "send_initial_events": True, "resource_version_match": "NotOlderThan"}
_INITIAL_END = "k8s.io/initial-events-end"


def _client_watcher(kubeconfig: str, pods: int, hello: Any, out: Any, nice: int = 0) -> None:
    """The user's watcher: the official client's watch (models), noting when each pod is first seen bound.

    ``nice`` (an experiment, ``--client-watcher-nice``): its scheduling priority, e.g. -10 to give it
    the CPU it asks for ahead of everything else on the machine (needs the privilege to lower it).
    """
    from kubernetes import watch

    if nice:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    api = _client(kubeconfig)
    rv = api.list_namespaced_pod(NAMESPACE).metadata.resource_version
    bound: dict[str, float] = {}
    cpu0 = time.process_time()
    events = 0
    w = watch.Watch()
    opening: dict[str, Any] = dict(_OPEN)
    while len(bound) < pods:
        for event in w.stream(api.list_namespaced_pod, NAMESPACE, resource_version=rv, timeout_seconds=600,
                              **opening):
            if event["type"] == "BOOKMARK":  # not decoded by the client: the raw dict
                rv = event["object"]["metadata"]["resourceVersion"]
                if opening and (event["object"]["metadata"].get("annotations") or {}).get(_INITIAL_END):
                    opening = {}
                    hello.put(("client watcher", os.getpid()))
                continue
            pod = event["object"]
            events += 1
            rv = pod.metadata.resource_version
            if pod.spec.node_name and pod.metadata.name not in bound:
                bound[pod.metadata.name] = time.time()
                if len(bound) >= pods:
                    break
    out.put((bound, time.process_time() - cpu0, events))


def _stream_lines(resp: Any) -> Iterator[list[bytes]]:
    """A raw watch response's complete, non-empty lines (one JSON event each), chunk by chunk."""
    buf = b""
    for chunk in resp.stream(65536):
        buf += chunk
        *lines, buf = buf.split(b"\n")
        yield [line for line in lines if line]


def _raw_watcher(kubeconfig: str, pods: int, hello: Any, out: Any) -> None:
    """The same watch over HTTP, parsed with ``json.loads`` only: the API server's delivery without the models.

    It keeps the lines it read and, once every pod was seen bound (its CPU time taken), tells what each
    event changed (:func:`_event_kinds`).
    """
    api = _client(kubeconfig)
    rv = api.list_namespaced_pod(NAMESPACE).metadata.resource_version
    bound: dict[str, float] = {}
    cpu0 = time.process_time()
    lines_read: list[bytes] = []
    arrivals: list[tuple[float, str]] = []  # per pod event: when its line arrived, and the pod if now bound
    opening: dict[str, Any] = dict(_OPEN)
    while len(bound) < pods:
        resp = api.list_namespaced_pod(NAMESPACE, watch=True, resource_version=rv, timeout_seconds=600,
                                       _preload_content=False, **opening)
        for lines in _stream_lines(resp):
            for line in lines:
                event = json.loads(line)
                pod = event["object"]
                rv = pod["metadata"]["resourceVersion"]
                if event["type"] == "BOOKMARK":
                    if opening and (pod["metadata"].get("annotations") or {}).get(_INITIAL_END):
                        opening = {}
                        hello.put(("raw watcher", os.getpid()))
                    continue
                lines_read.append(line)
                now = time.time()
                if (pod.get("spec") or {}).get("nodeName") and pod["metadata"]["name"] not in bound:
                    bound[pod["metadata"]["name"]] = now
                    arrivals.append((now, pod["metadata"]["name"]))
                else:
                    arrivals.append((now, ""))
            if len(bound) >= pods:
                break
        resp.release_conn()
    cpu = time.process_time() - cpu0
    out.put((bound, cpu, len(lines_read), _event_kinds(lines_read), arrivals))


def _added_watcher(kubeconfig: str, pods: int, hello: Any, out: Any) -> None:
    """A raw HTTP watch noting when each pod's ADDED arrived (``--server-only --watch``: nothing binds)."""
    api = _client(kubeconfig)
    rv = api.list_namespaced_pod(NAMESPACE).metadata.resource_version
    seen: dict[str, float] = {}
    resp = api.list_namespaced_pod(NAMESPACE, watch=True, resource_version=rv, timeout_seconds=600,
                                   _preload_content=False, **_OPEN)
    for lines in _stream_lines(resp):
        for line in lines:
            event = json.loads(line)
            if event["type"] == "BOOKMARK":
                hello.put(("added watcher", os.getpid()))
            elif event["type"] == "ADDED":
                seen.setdefault(event["object"]["metadata"]["name"], time.time())
        if len(seen) >= pods:
            break
    resp.release_conn()
    out.put(seen)


def _changed(old: Any, new: Any, path: str, depth: int) -> list[str]:
    """The paths (down to ``depth`` levels) where ``new`` differs from ``old``."""
    if old == new:
        return []
    if depth == 0 or not isinstance(old, dict) or not isinstance(new, dict):
        return [path]
    out = []
    for key in sorted(set(old) | set(new)):
        out += _changed(old.get(key), new.get(key), f"{path}.{key}" if path else key, depth - 1)
    return out


def _event_kinds(lines: list[bytes]) -> dict[str, Any]:
    """What the pod events were: per pod, the count of each event type; per event, the fields it changed
    (against the same pod's previous event; resourceVersion aside) and its size; one pod's events in full."""
    previous: dict[str, Any] = {}
    kinds: dict[str, int] = {}
    size: dict[str, list[int]] = {}
    sample: list[Any] = []
    for line in lines:
        event = json.loads(line)
        pod = event["object"]
        name = pod["metadata"]["name"]
        old = previous.get(name)
        previous[name] = pod
        if old is not None:
            old = {**old, "metadata": {**old["metadata"], "resourceVersion": None}}
        new = {**pod, "metadata": {**pod["metadata"], "resourceVersion": None}}
        what = f'{event["type"]} ' + (",".join(_changed(old, new, "", 2)) if old is not None else "")
        kinds[what] = kinds.get(what, 0) + 1
        size.setdefault(event["type"], []).append(len(line))
        if name == "p-00000":
            sample.append(event)
    pods = max(1, len(previous))
    return {"perPod": round(len(lines) / pods, 2),
            "byChange": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
            "meanBytes": {t: round(sum(v) / len(v)) for t, v in size.items()},
            "sample": sample}


def _dedicated_core(arrivals: list[tuple[float, str]], ms_per_event: float) -> dict[str, float]:
    """When a watcher that spends ``ms_per_event`` of CPU on each event, and has a core to itself, would have
    seen each pod bound: the events queue in arrival order (as the raw watcher received them: the API
    server's delivery) in front of one server taking ``ms_per_event`` each (the official client's decoding,
    one thread). The replay of the client watcher with the CPU it needs, without the machine's other work."""
    seen: dict[str, float] = {}
    free = 0.0
    for arrived, bound in arrivals:
        free = max(free, arrived) + ms_per_event / 1000
        if bound:
            seen.setdefault(bound, free)
    return seen


def _store_watcher(core: Any, since: int, pods: int, bound: dict[str, float], stop: threading.Event) -> None:
    watch = core.store.watch(POD, since, namespace=NAMESPACE)
    try:
        while len(bound) < pods and not stop.is_set():
            for e in watch.next_batch(timeout=0.5):
                name = e.object["metadata"]["name"]
                if (e.object.get("spec") or {}).get("nodeName") and name not in bound:
                    bound[name] = time.time()
    finally:
        watch.close()


def _tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and its living descendants (the API server's workers)."""
    return sum(cpu_seconds(process_tree(pid)).values())


def _names(pids: list[int]) -> dict[int, str]:
    """A short name per process: the executable, or for Python the module or script it runs (Ray: the actor)."""
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if not argv:
            continue
        name = os.path.basename(argv[0]).split(" ")[0]
        if name.startswith("python") and len(argv) > 1:
            rest = [a for a in argv[1:] if not a.startswith("-")]
            name = (argv[argv.index("-m") + 1] if "-m" in argv[:-1] else
                    "multiprocessing child" if any("multiprocessing" in a for a in argv) else
                    os.path.basename(rest[0]) if rest else name)
        out[pid] = name[:40]
    return out


def _cpu_by_name(before: dict[int, float], after: dict[int, float], names: dict[int, str]) -> dict[str, float]:
    by: dict[str, float] = {}
    for pid, cpu in after.items():
        name = names.get(pid, str(pid))
        by[name] = by.get(name, 0.0) + cpu - before.get(pid, 0.0)
    return {k: round(v, 1) for k, v in sorted(by.items(), key=lambda kv: -kv[1]) if v >= 0.1}


def _machine_busy() -> float:
    """CPU seconds the whole machine spent not idle (every process, other work on it included)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    values = sorted(values)

    def q(p: float) -> float:
        return round(values[min(len(values) - 1, int(p * len(values)))], 3)

    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": round(values[-1], 3), "n": len(values)}


def _by_quarter(created: dict[str, float], seen: dict[str, float]) -> list[float]:
    """create -> seen p50 for each quarter of the pods in creation order (does the lag grow through the run?)."""
    order = sorted((t, n) for n, t in created.items() if n in seen)
    quarter = max(1, len(order) // 4)
    return [_percentiles([seen[n] - t for t, n in order[i:i + quarter]]).get("p50", 0.0)
            for i in range(0, quarter * 4, quarter)]


def run(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="kemu-bench-apipath-"))
    cfg = Config(data_dir=data / "redis", nodes=0, api_port=0, kubelet_shards=args.shards or None,
                 schedulers=1, controllers_on_ray=True, controller_managers=1, api_workers=args.api_workers)
    cluster = LocalCluster(cfg, kubelets=kubelet_runner if args.shards else None, schedulers=scheduler_runner,
                           controllers=controller_runner)
    result: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods, "shards": args.shards,
                              "clients": f"{args.procs}x{args.threads}", "rate": args.rate or "closed loop",
                              "clientWatcherNice": args.client_watcher_nice}
    try:
        core = cluster.start()
        kubeconfig = str(cluster.write_kubeconfig(data / "kubeconfig"))
        api = _client(kubeconfig)
        api.create_namespace({"metadata": {"name": NAMESPACE}})
        t0 = time.monotonic()
        names = [f"node-{i:05d}" for i in range(args.nodes)]
        with multiprocessing.pool.ThreadPool(8) as pool:
            pool.map(lambda n: api.create_node(node_body(n)), names)
        if args.shards:
            # Adopted: every node renewed its lease through a kubelet.
            from emulator.api.kinds import LEASE

            wait_until(lambda: len(core.list(LEASE, namespace="kube-node-lease").items) >= args.nodes, 600, poll=1)
        result["nodesSeconds"] = round(time.monotonic() - t0, 1)
        time.sleep(args.settle)  # the first node status writes of the adoption drain
        ctx = multiprocessing.get_context("spawn")
        hello, created_q, bound_q, raw_q, start = ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Event()
        pods = [f"p-{i:05d}" for i in range(args.pods)]
        watcher_args = (kubeconfig, args.pods, hello, bound_q, args.client_watcher_nice)
        children = [ctx.Process(target=_client_watcher, args=watcher_args, daemon=True),
                    ctx.Process(target=_raw_watcher, args=(kubeconfig, args.pods, hello, raw_q), daemon=True),
                    *(ctx.Process(target=_creator, args=(kubeconfig, pods[i::args.procs], args.threads, start,
                                                         (hello, created_q)), kwargs={"rate": args.rate},
                                  daemon=True)
                      for i in range(args.procs))]
        for p in children:
            p.start()
        # Each child says when it is ready: the creators with their client built, the watchers with their
        # watch open (the initial-events-end bookmark received).
        roles = dict(reversed(hello.get(timeout=120)) for _ in children)
        stop = threading.Event()
        store_bound: dict[str, float] = {}
        since = core.store.current_rv()
        store_thread = threading.Thread(target=_store_watcher, args=(core, since, args.pods, store_bound, stop),
                                        daemon=True)
        store_thread.start()
        api_pid = cluster.api.proc.pid if cluster.api is not None and cluster.api.proc is not None else os.getpid()
        api_cpu0, busy0 = _tree_cpu(api_pid), _machine_busy()
        pids0 = process_tree()
        tree0, names0 = cpu_seconds(pids0), _names(pids0)
        t_start = time.time()
        print(f"creating {args.pods} pods", flush=True)  # (a profiler's cue)
        start.set()
        created: dict[str, float] = {}
        creators_cpu = 0.0
        for _ in range(args.procs):
            done, cpu = created_q.get(timeout=args.timeout)
            created.update(done)
            creators_cpu += cpu
        client_bound, client_cpu, client_events = bound_q.get(timeout=args.timeout)
        raw_bound, raw_cpu, raw_events, kinds, arrivals = raw_q.get(timeout=args.timeout)
        store_thread.join(args.timeout)
        stop.set()
        wall = time.time() - t_start
        api_cpu, busy = _tree_cpu(api_pid) - api_cpu0, _machine_busy() - busy0
        pids = process_tree()
        tree1 = cpu_seconds(pids)
        # The client processes report their own CPU (they may have exited by now); the rest by process name.
        tree1 = {pid: cpu for pid, cpu in tree1.items() if pid not in roles}
        by_name = _cpu_by_name(tree0, tree1, {**names0, **_names(pids)})
        by_name.update({"creators (client processes)": round(creators_cpu, 1),
                        "client watcher": round(client_cpu, 1), "raw watcher": round(raw_cpu, 1)})
        by_name = dict(sorted(by_name.items(), key=lambda kv: -kv[1]))
        t_created = max(created.values()) if created else t_start
        dedicated = _dedicated_core(arrivals, 1000 * client_cpu / max(1, client_events))
        sample = kinds.pop("sample")
        result.update(
            createSeconds=round(t_created - t_start, 2),
            createsPerSecond=round(len(created) / max(1e-9, t_created - t_start), 1),
            boundStore=_percentiles([store_bound[n] - created[n] for n in created if n in store_bound]),
            boundRawWatch=_percentiles([raw_bound[n] - created[n] for n in created if n in raw_bound]),
            boundClientWatch=_percentiles([client_bound[n] - created[n] for n in created if n in client_bound]),
            # The client watcher's decoding replayed on a core of its own (its measured CPU per event, the
            # events as the raw watch received them): the p50 it would see given the CPU it needs.
            boundClientDedicatedCore=_percentiles([dedicated[n] - created[n] for n in created if n in dedicated]),
            # How much of the client's figure is its own queue: client seen - raw seen, per pod.
            clientBehindRaw=_percentiles([client_bound[n] - raw_bound[n] for n in created
                                          if n in client_bound and n in raw_bound]),
            clientWatchLag=_percentiles([client_bound[n] - store_bound[n] for n in created
                                         if n in client_bound and n in store_bound]),
            # p50 per quarter of the pods in creation order.
            quartersP50={"rawWatch": _by_quarter(created, raw_bound),
                         "clientWatch": _by_quarter(created, client_bound)},
            # CPU seconds from the first create until every watcher saw every pod bound (wallSeconds).
            wallSeconds=round(wall, 1),
            cpuSeconds={"apiServer": round(api_cpu, 1), "rawWatcher": round(raw_cpu, 1),
                        "clientWatcher": round(client_cpu, 1), "creators": round(creators_cpu, 1),
                        "machine": round(busy, 1),
                        # Every process of the benchmark (cluster, Ray, clients) and by process name.
                        "benchmarkTree": round(sum(tree1.values()) - sum(tree0.get(p, 0.0) for p in tree1)
                                               + creators_cpu + client_cpu + raw_cpu, 1),
                        "byProcess": by_name},
            cpuMs={"perPodByProcess": {k: round(1000 * v / max(1, len(created)), 2) for k, v in by_name.items()},
                   "apiServerPerCreate": round(1000 * api_cpu / max(1, len(created)), 2),
                   "creatorsPerCreate": round(1000 * creators_cpu / max(1, len(created)), 2),
                   "clientWatcherPerEvent": round(1000 * client_cpu / max(1, client_events), 3),
                   "rawWatcherPerEvent": round(1000 * raw_cpu / max(1, raw_events), 3)},
            # Watch events each watcher read until it had seen every pod bound, and what they changed.
            watchEvents={"rawWatcher": raw_events, "clientWatcher": client_events, **kinds},
            loadAverage=[round(x, 1) for x in os.getloadavg()])
        print(json.dumps(result, indent=2))
        if args.dump_events:
            args.dump_events.write_text(json.dumps(sample, indent=1))
    finally:
        cluster.stop()
    return result


def _managed_fields(name: str) -> list[dict[str, Any]]:
    """What the API server's field manager records for a create by the official client (its shape and size)."""
    spec = {"f:containers": {'k:{"name":"app"}': {".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                                                   "f:resources": {".": {}, "f:requests": {".": {}, "f:cpu": {},
                                                                                         "f:memory": {}}},
                                                   "f:terminationMessagePath": {},
                                                   "f:terminationMessagePolicy": {}}},
            "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {},
            "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}
    return [{"manager": "OpenAPI-Generator", "operation": "Update", "apiVersion": "v1",
             "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:kemu.io/startup-delay": {}}}, "f:spec": spec}}]


def _fanout_watcher(url: str, since: int, events_wanted: int, seen: dict[str, float],
                    flags: tuple[threading.Event, threading.Event]) -> None:
    """One raw HTTP watch: sets ``flags[0]`` when open (the initial-events-end bookmark), ``flags[1]`` when done."""
    import httpx

    opened, done = flags
    n = 0
    params = {"watch": "true", "resourceVersion": str(since), "timeoutSeconds": "600", "allowWatchBookmarks": "true",
              "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}
    with httpx.Client(base_url=url, timeout=None) as http, \
            http.stream("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", params=params) as r:
        for line in r.iter_lines():
            if not line:
                continue
            event = json.loads(line)
            obj = event["object"]
            if event["type"] == "BOOKMARK":
                if (obj["metadata"].get("annotations") or {}).get(_INITIAL_END):
                    opened.set()
                continue
            key = f'{event["type"]}/{obj["metadata"]["name"]}/{obj["metadata"]["resourceVersion"]}'
            seen.setdefault(key, time.time())
            n += 1
            if n >= events_wanted:
                break
    done.set()


def run_fanout(args: argparse.Namespace) -> dict[str, Any]:
    from emulator.api.kinds import NAMESPACE as NS
    from emulator.apiserver.process import ApiServerProcess
    from emulator.apiserver.settings import ServerSettings
    from emulator.server.core import ServerCore
    from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig
    from emulator.store.store import Store

    data = Path(tempfile.mkdtemp(prefix="kemu-bench-fanout-"))
    redis_server = EmbeddedRedis(RedisServerConfig(data_dir=data / "redis"))
    redis_server.start()
    server = ApiServerProcess(ServerSettings(redis_url=redis_server.url, port=0, authorization_mode="AlwaysAllow",
                                             workers=args.api_workers))
    server.start()
    try:
        core = ServerCore(Store.connect(redis_server.url))
        core.bootstrap()
        core.create(NS, {"metadata": {"name": NAMESPACE}})
        since = core.store.current_rv()
        events = 3 * args.pods  # ADDED, the binding's MODIFIED, the status write's MODIFIED
        seen: list[dict[str, float]] = [{} for _ in range(args.fanout)]
        flags = [(threading.Event(), threading.Event()) for _ in range(args.fanout)]
        for mine, pair in zip(seen, flags, strict=True):
            threading.Thread(target=_fanout_watcher, args=(server.url, since, events, mine, pair), daemon=True).start()
        for opened, _ in flags:  # every watch open: its initial-events-end bookmark arrived
            if not opened.wait(60):
                raise RuntimeError("a watch did not open within 60 s")
        api_pid = server.proc.pid if server.proc is not None else os.getpid()
        cpu0, busy0, t0 = _tree_cpu(api_pid), _machine_busy(), time.time()
        written: dict[str, float] = {}
        for i in range(args.pods):
            name = f"p-{i:05d}"
            body = pod_body(name)
            body["metadata"].update(namespace=NAMESPACE, managedFields=_managed_fields(name))
            obj = core.create(POD, body)
            written[f'ADDED/{name}/{obj["metadata"]["resourceVersion"]}'] = time.time()
            obj = core.update(POD, {**obj, "spec": {**obj["spec"], "nodeName": f"node-{i % 100:05d}"}})
            written[f'MODIFIED/{name}/{obj["metadata"]["resourceVersion"]}'] = time.time()
            obj = core.update_status(POD, {**obj, "status": {"phase": "Running", "podIP": f"10.0.{i // 250}.{i % 250}",
                                                            "conditions": [{"type": "Ready", "status": "True"}]}})
            written[f'MODIFIED/{name}/{obj["metadata"]["resourceVersion"]}'] = time.time()
            if args.rate:
                time.sleep(max(0.0, t0 + (i + 1) / args.rate - time.time()))
        write_seconds = time.time() - t0
        for _, done in flags:
            done.wait(args.timeout)
        wall = time.time() - t0
        cpu, busy = _tree_cpu(api_pid) - cpu0, _machine_busy() - busy0
        lat = [mine[k] - w for mine in seen for k, w in written.items() if k in mine]
        result = {"pods": args.pods, "watches": args.fanout, "eventsWritten": len(written),
                  "eventsReceived": sum(len(m) for m in seen), "writeSeconds": round(write_seconds, 2),
                  "wallSeconds": round(wall, 2), "writeToReceived": _percentiles(lat),
                  "apiServerCpuSeconds": round(cpu, 2),
                  "apiServerCpuMsPerEventWritten": round(1000 * cpu / max(1, len(written)), 3),
                  "machineCpuSeconds": round(busy, 1), "loadAverage": [round(x, 1) for x in os.getloadavg()]}
        print(json.dumps(result, indent=2))
        return result
    finally:
        server.stop()
        redis_server.stop()


def run_server_only(args: argparse.Namespace) -> dict[str, Any]:
    """The create path alone: Redis and the API server, ``--procs`` x ``--threads`` official-client creators,
    no watch, no scheduler: CPU milliseconds per create of the API server, Redis and the creators."""
    from emulator.api.kinds import NAMESPACE as NS
    from emulator.apiserver import kubeconfig as kc
    from emulator.apiserver.process import ApiServerProcess
    from emulator.apiserver.settings import ServerSettings
    from emulator.server.core import ServerCore
    from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig
    from emulator.store.store import Store

    data = Path(tempfile.mkdtemp(prefix="kemu-bench-create-"))
    redis_server = EmbeddedRedis(RedisServerConfig(data_dir=data / "redis"))
    redis_server.start()
    token = kc.generate_token()
    server = ApiServerProcess(ServerSettings(redis_url=redis_server.url, port=0, authorization_mode="AlwaysAllow",
                                             workers=args.api_workers, token=token))
    server.start()
    try:
        core = ServerCore(Store.connect(redis_server.url))
        core.bootstrap()
        core.create(NS, {"metadata": {"name": NAMESPACE}})
        kubeconfig = str(kc.write(data / "kubeconfig", server.url, token))
        ctx = multiprocessing.get_context("spawn")
        hello, created_q, added_q, start = ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Event()
        pods = [f"p-{i:05d}" for i in range(args.pods)]
        creators = [ctx.Process(target=_creator, args=(kubeconfig, pods[i::args.procs], args.threads, start,
                                                       (hello, created_q)), daemon=True) for i in range(args.procs)]
        watchers = [ctx.Process(target=_added_watcher, args=(kubeconfig, args.pods, hello, added_q), daemon=True)
                    for _ in range(1 if args.watch else 0)]
        for p in creators + watchers:
            p.start()
        for _ in creators + watchers:
            hello.get(timeout=120)
        api_pid = server.proc.pid if server.proc is not None else os.getpid()
        redis_pids = [pid for pid in process_tree() if _names([pid]).get(pid, "").startswith("redis-server")]
        cpu0, redis0 = _tree_cpu(api_pid), sum(cpu_seconds(redis_pids).values())
        busy0, t0 = _machine_busy(), time.time()
        print(f"creating {args.pods} pods", flush=True)  # (a profiler's cue)
        start.set()
        creators_cpu, created, returned = 0.0, 0, {}
        for _ in creators:
            done, cpu = created_q.get(timeout=args.timeout)
            creators_cpu, created = creators_cpu + cpu, created + len(done)
            returned.update(done)
        added = added_q.get(timeout=args.timeout) if watchers else {}
        wall = time.time() - t0
        if created != args.pods:
            raise RuntimeError(f"{args.pods - created} creates failed")
        api_cpu, busy = _tree_cpu(api_pid) - cpu0, _machine_busy() - busy0
        redis_cpu = sum(cpu_seconds(redis_pids).values()) - redis0
        n = max(1, args.pods)
        result = {"pods": args.pods, "clients": f"{args.procs}x{args.threads}", "wallSeconds": round(wall, 2),
                  "createsPerSecond": round(args.pods / max(1e-9, wall), 1),
                  "cpuMsPerCreate": {"apiServer": round(1000 * api_cpu / n, 3), "redis": round(1000 * redis_cpu / n, 3),
                                     "creators": round(1000 * creators_cpu / n, 3)},
                  "machineCpuSeconds": round(busy, 1), "loadAverage": [round(x, 1) for x in os.getloadavg()]}
        if watchers:  # create returned -> its ADDED received by a raw HTTP watch
            result["createToAddedRaw"] = _percentiles([added[n] - returned[n] for n in returned if n in added])
        print(json.dumps(result, indent=2))
        return result
    finally:
        server.stop()
        redis_server.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=2000)
    p.add_argument("--shards", type=int, default=2, help="kubelet shards (0: no kubelets)")
    p.add_argument("--procs", type=int, default=4, help="client processes creating pods")
    p.add_argument("--threads", type=int, default=4, help="threads per client process")
    p.add_argument("--api-workers", type=int, default=1)
    p.add_argument("--settle", type=float, default=10.0, help="seconds between node adoption and the pods")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--fanout", type=int, default=0,
                   help="measure the watch path alone: this many raw watches, pods written to the store")
    p.add_argument("--server-only", action="store_true",
                   help="the create path alone: Redis, the API server and the creators; CPU per create")
    p.add_argument("--watch", action="store_true",
                   help="--server-only: also a raw HTTP watch, reporting create returned -> ADDED received")
    p.add_argument("--rate", type=float, default=0.0,
                   help="pods created (--fanout: written) per second in all (0: as fast as they go, the issue's setup)")
    p.add_argument("--client-watcher-nice", type=int, default=0,
                   help="an experiment: the client watcher's nice value (negative: ahead of everything else)")
    p.add_argument("--out", type=Path)
    p.add_argument("--dump-events", type=Path, help="write the watch events of pod p-00000 here (JSON)")
    args = p.parse_args(argv)
    result = run_fanout(args) if args.fanout else run_server_only(args) if args.server_only else run(args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
