"""The dynamic scheduler as an HTTP scheduler extender: LoadAware's filter and score behind filter/prioritize.

kube-scheduler's extender protocol (``k8s.io/kube-scheduler/extender/v1``;
kemu's client side is :mod:`emulator.scheduler.extender`), served with the
policy of :mod:`emulator.loadaware.policy` -- the same numbers as the
in-process ``LoadAware`` plugin -- so any ``KubeSchedulerConfiguration``
(kemu's or a real kube-scheduler's) can add it::

    extenders:
    - urlPrefix: http://127.0.0.1:8890/load-aware
      filterVerb: filter
      prioritizeVerb: prioritize
      weight: 2              # the default weight of the dynamic scheduler's extender
      nodeCacheCapable: true # send node names; the extender keeps its own node cache
      ignorable: true

* ``POST <prefix>/filter`` takes ``ExtenderArgs`` (``Pod`` and ``NodeNames``,
  or ``Nodes.items`` when the scheduler is not ``nodeCacheCapable``) and
  answers ``ExtenderFilterResult``: the names (or nodes) that pass and
  ``FailedNodes`` (name -> ``Load[<metric>] of node is too high``).
* ``POST <prefix>/prioritize`` answers a ``HostPriorityList``; the 0..100
  score becomes 0..10 (``MaxExtenderPriority``) by integer division.

With ``nodeCacheCapable`` the extender reads annotations from its own node
cache (:meth:`LoadAwareExtender.set_node` / :meth:`remove_node`, fed by a node
informer in :func:`main`); the annotation table is parsed once per change.
Hot values: the fresh ``node_hot_value`` annotation or, if higher, the
bindings this process saw through its pod informer in the hot-value windows
(an extender is not told which node won), refreshed once per cluster second.

Neither answer depends on the pod (DaemonSet pods aside), so for an unchanged
node list and node cache the serialised answer is computed once per cluster
second and reused: per pod the server parses the request and compares the
node list, about a millisecond at 5,000 nodes.

The server is the standard library's threading HTTP server with HTTP/1.1
keep-alive (the scheduler's client keeps its connection); bodies are
(de)serialised with orjson. ``python -m emulator.loadaware.extender_server
--redis-url ... --port 8890`` runs it against a cluster's store.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import orjson

from emulator.loadaware.hotvalue import BindingRecords
from emulator.loadaware.policy import NodeLoads, Policy, overload_reason

log = logging.getLogger(__name__)

__all__ = ["ExtenderServer", "LoadAwareExtender", "main"]

MAX_EXTENDER_PRIORITY = 10  # extender/v1 MaxExtenderPriority


def _field(obj: Any, name: str) -> Any:
    """Go's encoding/json matches field names case-insensitively."""
    if not isinstance(obj, dict):
        return None
    if name in obj:
        return obj[name]
    lower = name.lower()
    for key, value in obj.items():
        if key.lower() == lower:
            return value
    return None


class LoadAwareExtender:
    """The extender's logic over a node cache; thread-safe (the server handles requests on several threads)."""

    def __init__(self, policy: Policy | None = None, now: Callable[[], float] = time.time) -> None:
        self.policy = policy or Policy()
        self.now = now
        self.bindings = BindingRecords(self.policy.hot_value_horizon or 1800.0)
        self._lock = threading.Lock()
        self._annotations: dict[str, Mapping[str, str]] = {}
        self._table: tuple[dict[str, int], NodeLoads] | None = None
        # Recent node lists (filter gets every node, prioritize the feasible ones): (names, rows, list id).
        self._recent: list[tuple[list[str], np.ndarray, int]] = []
        self._list_ids = 0
        self._hot: tuple[int, dict[str, int]] | None = None
        self._generation = 0  # bumped when the node cache changes
        self._answers: dict[tuple[str, bool], tuple[tuple[int, int, int], bytes]] = {}

    # ------------------------------------------------------------------ node cache
    def set_node(self, name: str, annotations: Mapping[str, str] | None) -> None:
        with self._lock:
            if self._annotations.get(name) != annotations:
                self._annotations[name] = dict(annotations or {})
                self._table = None
                self._generation += 1

    def remove_node(self, name: str) -> None:
        with self._lock:
            if self._annotations.pop(name, None) is not None:
                self._table = None
                self._generation += 1

    def _rows(self, names: list[str]) -> tuple[NodeLoads, np.ndarray, int]:
        """The annotation table, per requested name its row (-1: a node the cache does not know), and an id of
        the node list (the same for an equal list while the cache is unchanged)."""
        with self._lock:
            table = self._table
            if table is None:
                order = list(self._annotations)
                table = self._table = ({name: i for i, name in enumerate(order)},
                                       NodeLoads.parse([self._annotations[n] for n in order]))
                self._recent = []
            for known, rows, list_id in self._recent:  # the scheduler sends the same few lists every cycle
                if known == names:
                    return table[1], rows, list_id
            index = table[0]
            rows = np.fromiter((index.get(n, -1) for n in names), dtype=np.intp, count=len(names))
            self._list_ids += 1
            self._recent = [(names, rows, self._list_ids), *self._recent[:3]]
            return table[1], rows, self._list_ids

    @staticmethod
    def _loads_of(nodes: Sequence[Mapping[str, Any]]) -> tuple[list[str], NodeLoads]:
        names = [str((n.get("metadata") or {}).get("name") or "") for n in nodes]
        return names, NodeLoads.parse([(n.get("metadata") or {}).get("annotations") for n in nodes])

    def _request(self, args: Any) -> tuple[list[str], NodeLoads, list[Any] | None]:
        """(names, their loads -- unknown nodes have none, the Nodes items when sent) of ``ExtenderArgs``."""
        names = _field(args, "NodeNames")
        if names is not None:
            names = [str(n) for n in names]
            table, rows, _ = self._rows(names)
            known = rows >= 0
            if not len(table):
                return names, NodeLoads.parse([None] * len(names)), None
            loads = table.take(np.where(known, rows, 0))
            if not known.all():  # unknown to the cache: no annotations, like an unannotated node
                loads.values[~known] = np.nan
                loads.stamps[~known] = -np.inf
                loads.hot[~known] = 0.0
                loads.hot_stamp[~known] = -np.inf
            return names, loads, None
        items = list(_field(_field(args, "Nodes"), "items") or [])
        names, loads = self._loads_of(items)
        return names, loads, items

    # ------------------------------------------------------------------ hot value
    def on_bind(self, node: str, ts: float | None = None) -> None:
        self.bindings.add(node, self.now() if ts is None else ts)

    def _local_hot(self, names: list[str], now: float) -> np.ndarray:
        key = int(now)  # refreshed once per second (the answers are cached per second too)
        cached = self._hot
        if cached is None or cached[0] != key:
            ranges = [r.time_range for r in self.policy.hot_value]
            hot = {n: v for n, counts in self.bindings.counts(now, ranges).items()
                   if (v := self.policy.hot_value_of(counts))}
            cached = self._hot = (key, hot)
        out = np.zeros(len(names))
        if cached[1]:
            for i, name in enumerate(names):
                out[i] = cached[1].get(name, 0)
        return out

    # ------------------------------------------------------------------ verbs
    @staticmethod
    def _is_daemonset_pod(args: Any) -> bool:
        meta = (_field(args, "Pod") or {}).get("metadata") or {}
        return any(ref.get("kind") == "DaemonSet" for ref in meta.get("ownerReferences") or ())

    def filter(self, args: Any) -> dict[str, Any]:
        names, loads, items = self._request(args)
        rejected = np.zeros(len(names), dtype=bool)
        failed: dict[str, str] = {}
        if not self._is_daemonset_pod(args):
            for metric, over in self.policy.overloaded(loads, self.now()):
                first = over & ~rejected
                if first.any():
                    reason = overload_reason(metric)
                    for i in np.flatnonzero(first).tolist():
                        failed[names[i]] = reason
                    rejected |= first
        if items is not None:
            return {"Nodes": {"metadata": {}, "items": [it for it, r in zip(items, rejected.tolist(), strict=True)
                                                        if not r]},
                    "NodeNames": None, "FailedNodes": failed, "FailedAndUnresolvableNodes": {}, "Error": ""}
        passed = names if not failed else [n for n, r in zip(names, rejected.tolist(), strict=True) if not r]
        return {"Nodes": None, "NodeNames": passed, "FailedNodes": failed, "FailedAndUnresolvableNodes": {},
                "Error": ""}

    def prioritize(self, args: Any) -> list[dict[str, Any]]:
        names, loads, _ = self._request(args)
        now = self.now()
        scores = self.policy.scores(loads, now, self._local_hot(names, now))
        scaled = (scores * MAX_EXTENDER_PRIORITY // 100).tolist()
        return [{"Host": name, "Score": s} for name, s in zip(names, scaled, strict=True)]


    def answer(self, verb: str, args: Any) -> bytes:
        """The serialised answer to one call of ``verb`` (``filter`` or ``prioritize``).

        Neither verdict depends on the pod (except DaemonSet pods, never filtered): for the same node
        list, node cache and cluster second the answer is the same, so it is computed once and reused --
        a scheduler calls twice per pod with the same few thousand names.
        """
        compute = self.filter if verb == "filter" else self.prioritize
        names = _field(args, "NodeNames")
        if names is None:
            return orjson.dumps(compute(args))  # full Node objects: nothing to key a cache on
        _, _, list_id = self._rows(names)  # JSON names are str already
        key = (self._generation, list_id, int(self.now()))
        slot = (verb, self._is_daemonset_pod(args))
        cached = self._answers.get(slot)
        if cached is not None and cached[0] == key:
            return cached[1]
        body = orjson.dumps(compute(args))
        self._answers[slot] = (key, body)
        return body


class ExtenderServer:
    """``POST <prefix>/filter`` and ``<prefix>/prioritize`` on a local port, served from a thread."""

    def __init__(self, extender: LoadAwareExtender, *, host: str = "127.0.0.1", port: int = 0,
                 prefix: str = "/load-aware") -> None:
        self.extender = extender
        self.prefix = prefix.rstrip("/")
        routes: dict[str, Callable[[Any], bytes]] = {
            f"{self.prefix}/filter": lambda args: extender.answer("filter", args),
            f"{self.prefix}/prioritize": lambda args: extender.answer("prioritize", args)}

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the scheduler calls twice per pod
            disable_nagle_algorithm = True  # TCP_NODELAY: no delayed-ACK stall between header and body writes

            def do_POST(self) -> None:
                route = routes.get(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if route is None:
                    self._reply(404, b'{"Error":"no such verb"}')
                    return
                try:
                    answer = route(orjson.loads(body))
                except Exception as e:  # a bad request must not kill the server: tell the scheduler
                    log.exception("load-aware extender: %s failed", self.path)
                    self._reply(500, orjson.dumps({"Error": str(e)}))
                    return
                self._reply(200, answer)

            def _reply(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                # Headers and body in one write (end_headers would flush the headers alone first).
                self._headers_buffer.append(b"\r\n")
                self._headers_buffer.append(body)
                self.wfile.write(b"".join(self._headers_buffer))
                self._headers_buffer = []

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("load-aware extender: " + format, *args)

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.prefix}"

    def start(self) -> ExtenderServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="load-aware-extender", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)


def attach(extender: LoadAwareExtender, informers: Any, now: Callable[[], float] | None = None) -> None:
    """Feed the extender's node cache and binding records from a ``SharedInformerFactory``."""
    from emulator.api.kinds import NODE, POD
    from emulator.informers import ResourceEventHandlerFuncs

    def node_set(node: Any, *_: Any) -> None:
        extender.set_node(node["metadata"]["name"], node["metadata"].get("annotations"))

    def node_gone(node: Any) -> None:
        obj = node if isinstance(node, dict) else getattr(node, "obj", None)
        if isinstance(obj, dict):
            extender.remove_node(obj["metadata"]["name"])

    def pod_added(pod: Any, initial: bool) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not initial:
            extender.on_bind(node, now() if now is not None else None)

    def pod_updated(old: Any, new: Any) -> None:
        node = (new.get("spec") or {}).get("nodeName")
        if node and not (old.get("spec") or {}).get("nodeName"):
            extender.on_bind(node, now() if now is not None else None)

    informers.informer_for(NODE).add_event_handler(ResourceEventHandlerFuncs(
        add=node_set, update=lambda _old, new: node_set(new), delete=node_gone))
    informers.informer_for(POD).add_event_handler(ResourceEventHandlerFuncs(add=pod_added, update=pod_updated))


def main(argv: list[str] | None = None) -> int:
    """Serve the extender for the cluster whose store is at ``--redis-url``."""
    import yaml

    from emulator.informers import SharedInformerFactory
    from emulator.store.store import Store

    parser = argparse.ArgumentParser(prog="python -m emulator.loadaware.extender_server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8890)
    parser.add_argument("--prefix", default="/load-aware")
    parser.add_argument("--policy", help="a DynamicSchedulerPolicy YAML file (default: crane's default policy)")
    args = parser.parse_args(argv)
    policy = Policy()
    if args.policy:
        with open(args.policy, encoding="utf-8") as f:
            policy = Policy.from_dict(yaml.safe_load(f) or {})
    store = Store.connect(args.redis_url)
    factory = SharedInformerFactory(store)
    extender = LoadAwareExtender(policy)
    attach(extender, factory)
    factory.start()
    server = ExtenderServer(extender, host=args.host, port=args.port, prefix=args.prefix).start()
    print(f"load-aware extender at {server.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        factory.shutdown()
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
