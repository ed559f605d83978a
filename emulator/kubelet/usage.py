"""Resource usage for ``metrics.k8s.io/v1beta1``: what kubelet shards publish and what the API server serves.

Upstream, metrics-server scrapes every kubelet's ``/metrics/resource`` (CPU
as a cumulative counter, memory working set) every 15 s and serves
``NodeMetrics`` and ``PodMetrics`` through the aggregated
``metrics.k8s.io`` API, which ``kubectl top`` and the HPA read. kemu has no
metrics-server: each kubelet shard computes the same numbers from its cgroup
model and writes a compact snapshot to Redis once per window, and
:func:`node_metrics` / :func:`pod_metrics` turn the snapshot into the API
shapes. Whoever serves ``/apis/metrics.k8s.io/v1beta1/...`` (the API server)
only calls :func:`answer` (one request: list or get, label selector applied)
and lists :data:`RESOURCE_LIST` in discovery (``kubectl top`` first checks
that the group is served).

Layout (``P`` the store's key prefix)::

    P mu:nodes         hash  node name -> msgpack [timestamp, window, cpu nanocores, memory bytes]
    P mu:pods:<ns>     hash  pod name  -> msgpack [timestamp, window, [[container, cpu nanocores, memory bytes], ...]]
    P mu:app:<ns>      hash  pod name  -> msgpack [timestamp, window, {series name: value}]

The ``mu:app`` entries are kemu's own application series of pods that serve
a load target (:mod:`emulator.kubelet.load`): :data:`REQUESTS_SERIES` (mean
requests/s over the window) and :data:`LATENCY_SERIES` (mean request latency,
seconds), what a real pod would export for Prometheus and what
``custom.metrics.k8s.io`` serves (:mod:`emulator.metricsapi.adapter`), read
with :func:`pod_series`.

CPU is the average over the window (cumulative usage difference / window,
as metrics-server computes it), memory the working set at the window's end.
A namespace's pods are one hash so ``kubectl top pods -n NS`` is one
``HGETALL``; listing every namespace scans the ``mu:pods:*`` keys. Entries of
pods that went away are deleted by the shard that published them; entries a
dead shard left behind expire by age (:data:`MAX_AGE_WINDOWS` windows old
and they are not served), as metrics-server drops nodes it cannot scrape.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import msgpack
import redis

from emulator.api import errors
from emulator.api.kinds import NODE, POD
from emulator.api.quantity import format_bytes
from emulator.api.selectors import parse_label_selector
from emulator.api.types import Obj
from emulator.clock import rfc3339
from emulator.store.store import Store

API_VERSION = "metrics.k8s.io/v1beta1"
NODES_KEY = "mu:nodes"
PODS_KEY = "mu:pods:"
APP_KEY = "mu:app:"
REQUESTS_SERIES = "http_requests_per_second"
LATENCY_SERIES = "http_request_duration_seconds"
# An entry older than this many windows is stale (its shard stopped publishing).
MAX_AGE_WINDOWS = 4.0

# One pod's usage: [(container name, cpu nanocores, memory bytes)].
ContainerUsage = tuple[str, int, int]


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def write_snapshot(pipe: redis.client.Pipeline, prefix: str, *, timestamp: float, window: float,
                   nodes: Mapping[str, tuple[int, int]], pods: Mapping[tuple[str, str], list[ContainerUsage]],
                   gone_pods: Iterable[tuple[str, str]] = (), gone_nodes: Iterable[str] = (),
                   app: Mapping[tuple[str, str], Mapping[str, float]] | None = None) -> None:
    """Queue one shard's snapshot on ``pipe`` (the caller executes it): nodes, pods, their app series, removals."""
    if nodes:
        pipe.hset(prefix + NODES_KEY, mapping={name: _pack([timestamp, window, cpu, mem])
                                               for name, (cpu, mem) in nodes.items()})
    by_ns: dict[str, dict[str, bytes]] = {}
    for (ns, name), containers in pods.items():
        by_ns.setdefault(ns, {})[name] = _pack([timestamp, window, [list(c) for c in containers]])
    for ns, mapping in by_ns.items():
        pipe.hset(prefix + PODS_KEY + ns, mapping=mapping)
    app_by_ns: dict[str, dict[str, bytes]] = {}
    for (ns, name), series in (app or {}).items():
        app_by_ns.setdefault(ns, {})[name] = _pack([timestamp, window, dict(series)])
    for ns, mapping in app_by_ns.items():
        pipe.hset(prefix + APP_KEY + ns, mapping=mapping)
    gone: dict[str, list[str]] = {}
    for ns, name in gone_pods:
        gone.setdefault(ns, []).append(name)
    for ns, names in gone.items():
        pipe.hdel(prefix + PODS_KEY + ns, *names)
        pipe.hdel(prefix + APP_KEY + ns, *names)
    gone_node_list = list(gone_nodes)
    if gone_node_list:
        pipe.hdel(prefix + NODES_KEY, *gone_node_list)


def _fresh(entry: list[Any], now: float) -> bool:
    timestamp, window = float(entry[0]), float(entry[1])
    return now - timestamp <= MAX_AGE_WINDOWS * max(window, 1.0)


def _usage(cpu_nanocores: int, memory: int) -> dict[str, str]:
    # metrics-server: resource.NewScaledQuantity(nanocores, Nano) and resource.NewQuantity(bytes, BinarySI).
    return {"cpu": f"{int(cpu_nanocores)}n", "memory": format_bytes(int(memory))}


def _window(seconds: float) -> str:
    return f"{seconds:g}s"


def node_metrics_object(name: str, entry: list[Any], labels: Mapping[str, str] | None = None) -> Obj:
    timestamp, window, cpu, memory = entry
    meta: Obj = {"name": name, "creationTimestamp": rfc3339(time.time())}
    if labels:
        meta["labels"] = dict(labels)
    return {"kind": "NodeMetrics", "apiVersion": API_VERSION, "metadata": meta, "timestamp": rfc3339(timestamp),
            "window": _window(window), "usage": _usage(cpu, memory)}


def pod_metrics_object(namespace: str, name: str, entry: list[Any]) -> Obj:
    timestamp, window, containers = entry
    return {"kind": "PodMetrics", "apiVersion": API_VERSION,
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": rfc3339(time.time())},
            "timestamp": rfc3339(timestamp), "window": _window(window),
            "containers": [{"name": c[0], "usage": _usage(c[1], c[2])} for c in containers]}


def node_metrics(client: redis.Redis, prefix: str = "kemu:", name: str | None = None, *,
                 now: float | None = None) -> list[Obj]:
    """``NodeMetrics`` of every node with fresh usage (or of ``name``: [] if it has none), by name.

    ``now`` is cluster time (the publishers' timestamps are cluster time); default: wall time.
    """
    now = time.time() if now is None else now
    if name is not None:
        raw = client.hget(prefix + NODES_KEY, name)
        items = {name.encode(): raw} if raw is not None else {}
    else:
        items = client.hgetall(prefix + NODES_KEY)
    out = []
    for key in sorted(items):
        entry = msgpack.unpackb(items[key], raw=False)
        if _fresh(entry, now):
            out.append(node_metrics_object(key.decode() if isinstance(key, bytes) else key, entry))
    return out


def _namespaces(client: redis.Redis, key_prefix: str, namespace: str | None) -> list[str]:
    """``[namespace]``, or (None) every namespace with a hash under ``key_prefix``, sorted."""
    if namespace is not None:
        return [namespace]
    return [k[len(key_prefix):] for k in sorted(k.decode() for k in client.scan_iter(match=key_prefix + "*",
                                                                                      count=1000))]


def pod_metrics(client: redis.Redis, prefix: str = "kemu:", namespace: str | None = None, name: str | None = None,
                *, now: float | None = None) -> list[Obj]:
    """``PodMetrics`` of the pods with fresh usage in ``namespace`` (None: all namespaces), or of one pod."""
    now = time.time() if now is None else now
    namespaces = _namespaces(client, prefix + PODS_KEY, namespace)
    pipe = client.pipeline(transaction=False)
    for ns in namespaces:
        if name is not None:
            pipe.hget(prefix + PODS_KEY + ns, name)
        else:
            pipe.hgetall(prefix + PODS_KEY + ns)
    out = []
    for ns, reply in zip(namespaces, pipe.execute() if namespaces else [], strict=True):
        if reply is None:
            continue
        items = {name.encode(): reply} if name is not None else reply
        for key in sorted(items):
            entry = msgpack.unpackb(items[key], raw=False)
            if _fresh(entry, now):
                out.append(pod_metrics_object(ns, key.decode(), entry))
    return out


def pod_series(client: redis.Redis, prefix: str = "kemu:", namespace: str | None = None, *,
               now: float | None = None) -> list[tuple[str, str, float, float, dict[str, float]]]:
    """Fresh app series of pods in ``namespace`` (None: all): ``(ns, pod, timestamp, window, {series: value})``."""
    now = time.time() if now is None else now
    namespaces = _namespaces(client, prefix + APP_KEY, namespace)
    pipe = client.pipeline(transaction=False)
    for ns in namespaces:
        pipe.hgetall(prefix + APP_KEY + ns)
    out = []
    for ns, reply in zip(namespaces, pipe.execute() if namespaces else [], strict=True):
        for key in sorted(reply or {}):
            timestamp, window, series = msgpack.unpackb(reply[key], raw=False)
            if _fresh([timestamp, window], now):
                out.append((ns, key.decode(), float(timestamp), float(window), dict(series)))
    return out


def metrics_list(kind: str, items: list[Obj]) -> Obj:
    """A ``NodeMetricsList`` / ``PodMetricsList`` around ``items``."""
    return {"kind": f"{kind}List", "apiVersion": API_VERSION, "metadata": {}, "items": items}


def get_node_metrics(client: redis.Redis, prefix: str, name: str, *, now: float | None = None) -> Obj:
    """One node's ``NodeMetrics``; 404 NotFound (as metrics-server answers) when it has no fresh usage."""
    found = node_metrics(client, prefix, name, now=now)
    if not found:
        raise errors.not_found("nodes", name, "metrics.k8s.io")
    return found[0]


def get_pod_metrics(client: redis.Redis, prefix: str, namespace: str, name: str, *,
                    now: float | None = None) -> Obj:
    found = pod_metrics(client, prefix, namespace, name, now=now)
    if not found:
        raise errors.not_found("pods", name, "metrics.k8s.io")
    return found[0]


# Discovery for /apis/metrics.k8s.io/v1beta1 (what metrics-server registers through its APIService).
RESOURCE_LIST: Obj = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": API_VERSION,
    "resources": [
        {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics", "verbs": ["get", "list"]},
        {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics", "verbs": ["get", "list"]},
    ],
}


def answer(store: Store, resource: str, *, namespace: str | None = None, name: str | None = None,
           label_selector: str | None = None, now: float | None = None) -> Obj:
    """The response to one ``metrics.k8s.io/v1beta1`` request, as metrics-server gives it.

    ``resource`` is ``nodes`` or ``pods``; ``name`` set: a get (404 when there is no fresh
    usage), else a list (``namespace`` None: every namespace), filtered by ``label_selector``
    on the node's or pod's labels (read from the store, as metrics-server reads its informers).
    ``now`` is cluster time (default: wall time).
    """
    client, prefix = store.redis, store.config.prefix
    if resource == "nodes":
        if name is not None:
            return get_node_metrics(client, prefix, name, now=now)
        items = node_metrics(client, prefix, now=now)
        if label_selector:
            selector = parse_label_selector(label_selector)
            wanted = {n["metadata"]["name"]: n["metadata"].get("labels") or {}
                      for n in store.list(NODE, label_selector=selector).items}
            items = [{**i, "metadata": {**i["metadata"], "labels": wanted[i["metadata"]["name"]]}}
                     for i in items if i["metadata"]["name"] in wanted]
        return metrics_list("NodeMetrics", items)
    if resource == "pods":
        if name is not None:
            if namespace is None:
                raise errors.bad_request("a pod's metrics are read in its namespace")
            return get_pod_metrics(client, prefix, namespace, name, now=now)
        items = pod_metrics(client, prefix, namespace, now=now)
        if label_selector:
            selector = parse_label_selector(label_selector)
            wanted_pods = {(p["metadata"].get("namespace"), p["metadata"]["name"])
                           for p in store.list(POD, namespace, label_selector=selector).items}
            items = [i for i in items if (i["metadata"]["namespace"], i["metadata"]["name"]) in wanted_pods]
        return metrics_list("PodMetrics", items)
    raise errors.not_found(resource, name or "", "metrics.k8s.io")


def pod_usage_entries(client: redis.Redis, prefix: str, namespaces: Iterable[str], *,
                      now: float) -> dict[tuple[str, str], tuple[float, float, list[ContainerUsage]]]:
    """Raw fresh pod usage of ``namespaces``: (namespace, pod) -> (timestamp, window, [(container, cpu, mem)]).

    For in-process readers that need every container's numbers at once (the VPA recommender
    reads ``metrics.k8s.io`` PodMetrics of whole namespaces) without building API objects.
    """
    names = list(namespaces)
    pipe = client.pipeline(transaction=False)
    for ns in names:
        pipe.hgetall(prefix + PODS_KEY + ns)
    out: dict[tuple[str, str], tuple[float, float, list[ContainerUsage]]] = {}
    for ns, reply in zip(names, pipe.execute() if names else [], strict=True):
        for key, raw in (reply or {}).items():
            entry = msgpack.unpackb(raw, raw=False)
            if _fresh(entry, now):
                pod = key.decode() if isinstance(key, bytes) else key
                out[(ns, pod)] = (float(entry[0]), float(entry[1]), [(c[0], int(c[1]), int(c[2]))
                                                                      for c in entry[2]])
    return out
