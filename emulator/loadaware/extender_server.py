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

Neither answer depends on the pod (DaemonSet pods aside): per node cache and
cluster second each cached node's part of either answer (its quoted name, its
``FailedNodes`` entry, its ``HostPriority``) is serialised once, and an answer
joins the parts of the requested names -- per pod the server parses the
request and looks the names up, no dict or verdict per node.

The server is a threading TCP server; httptools (the bindings of llhttp,
Node.js's C HTTP/1.1 parser) reads the requests fed from kemu's socket reads
(POST with Content-Length or chunked bodies, ``Expect: 100-continue``,
pipelined requests, keep-alive -- the scheduler's client keeps its
connection -- as ``should_keep_alive`` says, so ``Connection: close`` and
HTTP/1.0 end it); an answer is a status line and three headers kemu writes,
out in one ``sendall``. ``http.server`` parsed every request's headers
through the ``email`` package, which cost more than the answer, and h11's
pure-Python state machine ~0.1 ms a request. Bodies are (de)serialised with
orjson. ``python -m emulator.loadaware.extender_server
--redis-url ... --port 8890`` runs it against a cluster's store.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httptools
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
        self._frags: _Fragments | None = None

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
            table = self._current_table()
            for known, rows, list_id in self._recent:  # the scheduler sends the same few lists every cycle
                if known == names:
                    return table[1], rows, list_id
            index = table[0]
            rows = np.fromiter((index.get(n, -1) for n in names), dtype=np.intp, count=len(names))
            self._list_ids += 1
            self._recent = [(names, rows, self._list_ids), *self._recent[:3]]
            return table[1], rows, self._list_ids

    def _current_table(self) -> tuple[dict[str, int], NodeLoads]:
        """(name -> row, the parsed annotations) of the node cache; the caller holds the lock."""
        table = self._table
        if table is None:
            order = list(self._annotations)
            table = self._table = ({name: i for i, name in enumerate(order)},
                                   NodeLoads.parse([self._annotations[n] for n in order]))
            self._recent = []
        return table

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

        Neither verdict depends on the pod (except DaemonSet pods, never filtered): per node cache and
        cluster second, each cached node's part of either answer -- its quoted name, its ``FailedNodes``
        entry, its ``HostPriority`` -- is serialised once (:meth:`_fragments`), and an answer joins the
        parts of the requested names in C (no Python loop, no dict per node). A list naming a node the
        cache does not know, or full Node objects, is answered the long way.
        """
        names = _field(args, "NodeNames")
        if isinstance(names, list):
            frags = self._fragments()
            try:
                rows = list(map(frags.index.get, names))
            except TypeError:  # an unhashable "name": the long way answers it
                rows = [None]
            if None not in rows:
                if verb == "filter":
                    body = self._filter_body(frags, names, rows, self._is_daemonset_pod(args))
                    if body is not None:
                        return body
                else:
                    return b"[" + b",".join(map(frags.priority.__getitem__, rows)) + b"]"
        compute = self.filter if verb == "filter" else self.prioritize
        return orjson.dumps(compute(args))

    @staticmethod
    def _filter_body(frags: _Fragments, names: list[Any], rows: list[Any], daemonset: bool) -> bytes | None:
        """``ExtenderFilterResult`` for cached nodes; None when a failing node is named twice (a JSON object
        cannot say it twice: the long way dedups)."""
        failing = [] if daemonset else [r for r in rows if frags.failed[r] is not None]
        if not failing:
            return _FILTER_HEAD + orjson.dumps(names) + b',"FailedNodes":{' + _FILTER_TAIL
        if len(set(failing)) != len(failing):
            return None
        failed = frags.failed
        passed = [n for n, r in zip(names, rows, strict=True) if failed[r] is None]
        return (_FILTER_HEAD + orjson.dumps(passed) + b',"FailedNodes":{' +
                b",".join(map(failed.__getitem__, failing)) + _FILTER_TAIL)

    def _fragments(self) -> _Fragments:
        """Every cached node's serialised verdicts for this node cache and cluster second (see :meth:`answer`)."""
        now = self.now()
        key = (self._generation, int(now))
        frags = self._frags
        if frags is not None and frags.key == key:
            return frags
        with self._lock:
            generation = self._generation
            index, loads = self._current_table()
        names = list(index)  # in row order
        quoted = list(map(orjson.dumps, names))
        reason_of = np.full(len(names), -1)
        reasons: list[bytes] = []
        for metric, over in self.policy.overloaded(loads, now):
            first = over & (reason_of < 0)
            reason_of[first] = len(reasons)
            reasons.append(orjson.dumps(overload_reason(metric)))
        failed: list[bytes | None] = [None] * len(names)
        for i in np.flatnonzero(reason_of >= 0).tolist():
            failed[i] = quoted[i] + b":" + reasons[reason_of[i]]
        scores = (self.policy.scores(loads, now, self._local_hot(names, now)) * MAX_EXTENDER_PRIORITY // 100)
        priority = [b'{"Host":%s,"Score":%d}' % pair for pair in zip(quoted, scores.tolist(), strict=True)]
        frags = _Fragments((generation, int(now)), index, failed, priority)
        self._frags = frags
        return frags


@dataclass(frozen=True)
class _Fragments:
    """Per cached node (by row): its ``FailedNodes`` entry (None: it passes) and its ``HostPriority``."""

    key: tuple[int, int]
    index: dict[str, int]
    failed: list[bytes | None]
    priority: list[bytes]


_FILTER_HEAD = b'{"Nodes":null,"NodeNames":'
_FILTER_TAIL = b'},"FailedAndUnresolvableNodes":{},"Error":""}'


class ExtenderServer:
    """``POST <prefix>/filter`` and ``<prefix>/prioritize`` on a local port, served from a thread."""

    def __init__(self, extender: LoadAwareExtender, *, host: str = "127.0.0.1", port: int = 0,
                 prefix: str = "/load-aware") -> None:
        self.extender = extender
        self.prefix = prefix.rstrip("/")
        routes: dict[bytes, Callable[[Any], bytes]] = {
            f"{self.prefix}/filter".encode(): lambda args: extender.answer("filter", args),
            f"{self.prefix}/prioritize".encode(): lambda args: extender.answer("prioritize", args)}

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each answer goes out at once
                requests = _Requests()
                while True:  # one request after another on a kept-alive connection
                    try:
                        request = requests.next(sock)
                    except _BadRequest as e:  # not HTTP/1.1 llhttp can read: 400 (431: too long), close
                        with contextlib.suppress(OSError):  # the client may have gone already
                            sock.sendall(_answer(e.code, orjson.dumps({"Error": e.reason}), keep_alive=False))
                        return
                    except OSError:  # the client went away
                        return
                    if request is None:
                        return
                    method, path, body, keep_alive = request
                    route = routes.get(path)
                    if method != b"POST":
                        code, answer = 405, b'{"Error":"only POST is served"}'
                    elif route is None:
                        code, answer = 404, b'{"Error":"no such verb"}'
                    else:
                        try:
                            code, answer = 200, route(orjson.loads(body))
                        except Exception as e:  # a bad request must not kill the server: tell the scheduler
                            log.exception("load-aware extender: %s failed", path.decode("latin-1"))
                            code, answer = 500, orjson.dumps({"Error": str(e)})
                    sock.sendall(_answer(code, answer, keep_alive=keep_alive))
                    if not keep_alive:  # HTTP/1.0 or Connection: close
                        return

        self._server = socketserver.ThreadingTCPServer((host, port), Handler, bind_and_activate=False)
        self._server.allow_reuse_address = True
        self._server.server_bind()
        self._server.server_activate()
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


_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 405: b"Method Not Allowed",
            431: b"Request Header Fields Too Large", 500: b"Internal Server Error"}
_MAX_HEAD = 65536  # bytes of request line and headers we accept
_RECV = 262144  # bytes per recv: a request naming 5,000 nodes comes in one
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

_IDLE, _HEAD, _BODY = 0, 1, 2  # where the request being read is


class _BadRequest(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


class _Requests:
    """httptools' callbacks for one connection: the requests read off it and not answered yet, in order
    (a client may pipeline them), and the one being read."""

    __slots__ = ("error", "expect", "head", "parser", "parts", "ready", "state", "url")

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.ready: list[tuple[bytes, bytes, bytes, bool]] = []  # (method, target, body, keep alive)
        self.state = _IDLE
        self.url = b""
        self.parts: list[bytes] = []
        self.expect = False  # Expect: 100-continue, not answered yet
        self.head = 0  # bytes read while the request line and headers were not complete
        self.error: _BadRequest | None = None

    def on_message_begin(self) -> None:
        self.state, self.url, self.parts, self.expect, self.head = _HEAD, b"", [], False, 0

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"expect" and value.lower() == b"100-continue":
            self.expect = True

    def on_headers_complete(self) -> None:
        self.state = _BODY

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        parser = self.parser
        self.ready.append((parser.get_method(), self.url, b"".join(self.parts), parser.should_keep_alive()))
        self.state = _IDLE

    def next(self, sock: socket.socket) -> tuple[bytes, bytes, bytes, bool] | None:
        """The next request on the connection: (method, target, body, keep alive); None when the client
        closed it. Raises :class:`_BadRequest` at a request llhttp cannot read, once those before it are
        answered."""
        while not self.ready:
            if self.error is not None:
                raise self.error
            if self.state == _BODY and self.expect:  # every earlier request answered: now the 100, in order
                self.expect = False
                sock.sendall(_CONTINUE)  # the client waits for it before it sends the body
            data = sock.recv(_RECV)
            if not data:  # the client closed its side (in the middle of a request or not)
                return None
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:  # what follows the request is not HTTP: answer it, then close
                if self.ready:
                    method, target, body, _ = self.ready[-1]
                    self.ready[-1] = (method, target, body, False)
                else:
                    self.error = _BadRequest(400, "protocol upgrades are not served")
            except httptools.HttpParserError as e:
                self.error = _BadRequest(400, f"malformed request: {e}")
            if self.state == _HEAD:  # llhttp sets no limit on the head: bound what an unfinished one may take
                self.head += len(data)
                if self.head > _MAX_HEAD and self.error is None:
                    self.error = _BadRequest(431, f"more than {_MAX_HEAD} bytes of request line and headers")
        return self.ready.pop(0)


def _answer(code: int, body: bytes, *, keep_alive: bool) -> bytes:
    """Status line, headers and body of one JSON answer, to go out in one write."""
    return b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        code, _REASONS.get(code, b"Error"), len(body), b"" if keep_alive else b"Connection: close\r\n", body)


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
