"""Load drivers: where a run's creates and deletes go, from how many processes.

A **sink** executes batches of plan actions against one destination and
reports, per action, ``None`` (done) or an error message:

* :class:`StoreSink` - the server core over Redis (defaults, validation,
  admission, one Lua commit per batch of creates): the fastest path, what
  kemu's own components use.
* :class:`HttpSink` - kemu's Kubernetes API server over HTTP, exactly like any
  client (JSON bodies, bearer token), ``concurrency`` requests in flight.
* :class:`NullSink` - nowhere: measures the driver's own overhead.

:func:`execute` runs a plan's timeline in real time through a pool. A
:class:`DriverPool` runs one sink in this process (``processes: 1``) or one
per worker process (``multiprocessing`` spawn: no forked Redis connections or
threads). Actions are routed to workers by the crc32 of their object name, so
one pod's create and its later delete are issued by the same process, in
order. Each worker has a small bounded inbox: when workers fall behind,
:meth:`DriverPool.submit` blocks - the driver never builds an unbounded
backlog of its own. The cluster-side back-pressure (pods created but not yet
bound) is the runner's (:mod:`loadgen.runner`).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
import sys
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from tqdm import tqdm

from loadgen.plan import (
    CREATE_DEPLOYMENT,
    CREATE_HPA,
    CREATE_POD,
    DELETE_POD,
    INJECT_FAULT,
    RESTORE_FAULT,
    SCALE_DEPLOYMENT,
    SET_LOAD,
    Action,
)

# A batch crosses process boundaries as (op, [(namespace, name, body-or-replicas)]).
Item = tuple[str, str, Any]


class Sink(Protocol):
    def run(self, op: str, items: Sequence[Item]) -> list[str | None]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class SinkSpec:
    """Everything a worker process needs to build its sink (picklable)."""

    kind: str  # store | http | null
    redis_url: str = ""
    prefix: str = "kemu:"
    api_url: str = ""
    token: str = ""
    concurrency: int = 8
    clock_speed: float = 1.0

    def build(self) -> Sink:
        if self.kind == "store":
            return StoreSink.connect(self)
        if self.kind == "http":
            return HttpSink(self.api_url, self.token, self.concurrency)
        return NullSink()


class NullSink:
    def run(self, op: str, items: Sequence[Item]) -> list[str | None]:
        return [None] * len(items)

    def close(self) -> None:
        pass


class StoreSink:
    """Creates and deletes in batches (:meth:`ServerCore.create_many`, ``delete_named_many``); scales one by one."""

    def __init__(self, core: Any, own_store: bool = False) -> None:
        self.core = core
        self._own_store = own_store

    @classmethod
    def connect(cls, spec: SinkSpec) -> StoreSink:
        from emulator.clock import SystemClock
        from emulator.server.core import ServerCore
        from emulator.store.store import Store, StoreConfig

        store = Store.connect(spec.redis_url, StoreConfig(prefix=spec.prefix))
        return cls(ServerCore(store, SystemClock(spec.clock_speed)), own_store=True)

    def run(self, op: str, items: Sequence[Item]) -> list[str | None]:
        from emulator.api.errors import StatusError
        from emulator.api.kinds import DEPLOYMENT, HORIZONTALPODAUTOSCALER, POD

        if op == CREATE_POD:
            return [r.message if isinstance(r, StatusError) else None
                    for r in self.core.create_many(POD, [body for _, _, body in items])]
        if op == DELETE_POD:  # each as a DELETE of its own would do it, in two store round trips per batch
            return [r.message if isinstance(r, StatusError) else None
                    for r in self.core.delete_named_many(POD, [(ns, name) for ns, name, _ in items])]
        out: list[str | None] = []
        for ns, name, arg in items:
            try:
                if op == CREATE_DEPLOYMENT:
                    self.core.create(DEPLOYMENT, arg)
                elif op == CREATE_HPA:
                    self.core.create(HORIZONTALPODAUTOSCALER, arg)
                elif op == SCALE_DEPLOYMENT:
                    self._scale(ns, name, int(arg))
                out.append(None)
            except StatusError as e:
                out.append(e.message)
        return out

    def _scale(self, ns: str, name: str, replicas: int) -> None:
        from emulator.api.errors import StaleResourceVersion
        from emulator.api.kinds import DEPLOYMENT

        while True:  # the scale subresource's read-modify-write; retried only on a stale resourceVersion
            obj = self.core.get(DEPLOYMENT, ns, name)
            obj["spec"]["replicas"] = replicas
            try:
                self.core.update(DEPLOYMENT, obj)
                return
            except StaleResourceVersion:
                continue

    def close(self) -> None:
        if self._own_store:
            self.core.store.close()


class HttpSink:
    """The API server, as any client: one request per object, ``concurrency`` in flight."""

    def __init__(self, api_url: str, token: str = "", concurrency: int = 8) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=api_url, headers=headers, timeout=60.0, verify=False,
                                   limits=httpx.Limits(max_connections=concurrency,
                                                       max_keepalive_connections=concurrency))
        self.pool = ThreadPoolExecutor(concurrency, thread_name_prefix="http-driver")

    def _one(self, op: str, item: Item) -> str | None:
        ns, name, arg = item
        if op == CREATE_POD:
            r = self.client.post(f"/api/v1/namespaces/{ns}/pods", json=arg)
        elif op == DELETE_POD:
            r = self.client.delete(f"/api/v1/namespaces/{ns}/pods/{name}")
        elif op == CREATE_DEPLOYMENT:
            r = self.client.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=arg)
        elif op == CREATE_HPA:
            r = self.client.post(f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers", json=arg)
        else:
            r = self.client.patch(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}/scale",
                                  json={"spec": {"replicas": int(arg)}},
                                  headers={"Content-Type": "application/merge-patch+json"})
        if r.status_code < 300:
            return None
        try:
            return str(r.json().get("message") or r.text)
        except ValueError:
            return f"HTTP {r.status_code}: {r.text[:200]}"

    def run(self, op: str, items: Sequence[Item]) -> list[str | None]:
        import httpx

        def one(item: Item) -> str | None:
            try:
                return self._one(op, item)
            except httpx.HTTPError as e:
                return f"{type(e).__name__}: {e}"

        return list(self.pool.map(one, items))

    def close(self) -> None:
        self.pool.shutdown()
        self.client.close()


# One failed item of a batch: ("namespace/name", the API's message).
Failure = tuple[str, str]


def failed(items: Sequence[Item], errs: Sequence[str | None]) -> list[Failure]:
    """The items of a batch whose action failed, by key, with the error each got."""
    return [(f"{ns}/{name}", e) for (ns, name, _), e in zip(items, errs, strict=True) if e is not None]


def item(action: Action) -> Item:
    """The wire form of one action."""
    if action.op in (CREATE_POD, CREATE_DEPLOYMENT, CREATE_HPA):
        return action.namespace, action.name, action.body()
    if action.op == SCALE_DEPLOYMENT:
        return action.namespace, action.name, int(action.value)
    return action.namespace, action.name, None


def _worker(spec: SinkSpec, inbox: mp.Queue, results: mp.Queue) -> None:
    sink = spec.build()
    try:
        while True:
            job = inbox.get()
            if job is None:
                return
            op, items = job
            results.put((op, len(items), failed(items, sink.run(op, items))))
    finally:
        sink.close()


class DriverPool:
    """Runs batches on one in-process sink or on ``processes`` worker processes (see the module docstring).

    ``on_result(op, done, failures)`` is called (from one thread) for every finished batch; ``failures`` are
    the batch's failed items as ``(namespace/name, message)``: every other item was acknowledged.
    """

    def __init__(self, spec: SinkSpec, processes: int, on_result: Callable[[str, int, list[Failure]], None], *,
                 sink: Sink | None = None, inbox_batches: int = 4) -> None:
        self.processes = processes
        self.on_result = on_result
        self._lock = threading.Lock()
        self.submitted = 0
        self.completed = 0
        self._workers: list[Any] = []
        self._inboxes: list[Any] = []
        self._collector: threading.Thread | None = None
        if processes <= 1:
            self._sink = sink or spec.build()
            return
        ctx = mp.get_context("spawn")
        self._results: Any = ctx.Queue()
        for _ in range(processes):
            inbox = ctx.Queue(maxsize=inbox_batches)
            proc = ctx.Process(target=_worker, args=(spec, inbox, self._results), daemon=True)
            proc.start()
            self._inboxes.append(inbox)
            self._workers.append(proc)
        self._collector = threading.Thread(target=self._collect, name="driver-results", daemon=True)
        self._collector.start()

    def in_flight(self) -> int:
        with self._lock:
            return self.submitted - self.completed

    def submit(self, op: str, items: list[Item]) -> None:
        """Run (or hand to the workers) one batch; blocks while a worker's inbox is full."""
        with self._lock:
            self.submitted += len(items)
        if self.processes <= 1:
            self._done(op, len(items), failed(items, self._sink.run(op, items)))
            return
        parts: list[list[Item]] = [[] for _ in range(self.processes)]
        for it in items:
            parts[zlib.crc32(it[1].encode()) % self.processes].append(it)
        for inbox, part in zip(self._inboxes, parts, strict=True):
            if part:
                inbox.put((op, part))

    def _done(self, op: str, n: int, errs: list[Failure]) -> None:
        with self._lock:
            self.completed += n
        self.on_result(op, n, errs)

    def _collect(self) -> None:
        while True:
            try:
                res = self._results.get(timeout=0.5)
            except queue.Empty:
                if not any(p.is_alive() for p in self._workers):
                    return
                continue
            if res is None:
                return
            self._done(*res)

    def close(self, timeout: float = 60.0) -> None:
        if self.processes <= 1:
            self._sink.close()
            return
        for inbox in self._inboxes:
            inbox.put(None)
        for p in self._workers:
            p.join(timeout)
            if p.is_alive():
                p.terminate()
        self._results.put(None)
        if self._collector is not None:
            self._collector.join(timeout)
        for q in (*self._inboxes, self._results):
            with contextlib.suppress(Exception):
                q.close()


@dataclass
class Execution:
    """How executing a timeline went."""

    seconds: float = 0.0
    throttled: float = 0.0  # seconds spent waiting for the cluster (back-pressure)
    loads: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # "kind/target" -> (t, value)


def execute(actions: Sequence[Action], pool: DriverPool, *, batch: int, max_backlog: int = 0,
            backlog: Callable[[], int] | None = None, wait: Callable[[Callable[[], bool], float], bool] | None = None,
            on_load: Callable[[str, str, float], None] | None = None,
            on_fault: Callable[[Action], None] | None = None, progress: bool = True) -> Execution:
    """Run ``actions`` at their due times; consecutive due actions of one op go out as one batch.

    Back-pressure: with ``backlog`` (pods created but not bound, as the caller observes them) at
    ``max_backlog``, pod creates wait (``wait(predicate, timeout)`` blocks until the predicate holds
    or the timeout passes) and every remaining action's due time shifts by the wait, so the timeline
    keeps its shape, later. ``on_load(kind, target, value)`` receives load-series points, ``on_fault(action)``
    the chaos phases' injections and restores (it must not block: faults run beside the load).
    """
    out = Execution()
    t_start = time.perf_counter()
    delay = 0.0
    i = 0

    def full() -> bool:
        return backlog is not None and max_backlog > 0 and backlog() + pool.in_flight() >= max_backlog

    with tqdm(total=len(actions), desc="running phases", unit="action", file=sys.stderr,
              disable=not (progress and sys.stderr.isatty())) as bar:
        while i < len(actions):
            a = actions[i]
            now = time.perf_counter() - t_start
            due = a.t + delay
            if due > now:
                time.sleep(min(due - now, 0.05))
                continue
            if a.op == CREATE_POD and full():
                t = time.perf_counter()
                if wait is not None:
                    wait(lambda: not full(), 1.0)
                else:
                    time.sleep(0.01)  # nothing to block on: poll the caller's backlog
                waited = time.perf_counter() - t
                out.throttled += waited
                delay += waited
                continue
            j = i + 1
            while j < len(actions) and j - i < batch and actions[j].op == a.op and actions[j].t + delay <= now:
                j += 1
            if a.op in (INJECT_FAULT, RESTORE_FAULT):
                for x in actions[i:j]:
                    if on_fault is not None:
                        on_fault(x)
            elif a.op == SET_LOAD:
                for x in actions[i:j]:
                    kind = dict(x.detail)["kind"]
                    out.loads.setdefault(f"{kind}/{x.name}", []).append((now, x.value))
                    if on_load is not None:
                        on_load(kind, x.name, x.value)
            else:
                pool.submit(a.op, [item(x) for x in actions[i:j]])
            bar.update(j - i)
            i = j
    out.seconds = time.perf_counter() - t_start
    return out
