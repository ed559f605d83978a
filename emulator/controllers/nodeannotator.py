"""The node annotator: measured node load and hot values written as Node annotations, for load-aware scheduling.

crane-scheduler's ``crane-scheduler-controller`` annotator
(``pkg/controller/annotator/node.go``, ``binding.go``, ``event.go``), our own
Python, as a controller of the controller manager (name ``node-annotator``,
off by default: enable it with ``--controllers=*,node-annotator``).

Every ``node_annotator_period`` cluster seconds (default 60) one pass:

1. reads every node's usage from the kubelet shards' ``metrics.k8s.io``
   snapshot (:mod:`emulator.kubelet.usage`: one ``HGETALL``) and turns it into
   utilization -- CPU usage / capacity, memory working set / capacity (as
   node-exporter's ``cpu_usage_active`` and ``mem_usage_active``, which are
   shares of the machine) -- NaN for a node without fresh usage;
2. adds the sample to the history in Redis and gets the six windows
   (:class:`emulator.loadaware.history.RedisHistory`), or, with
   ``prometheus_url`` set, asks that Prometheus
   (:class:`~emulator.loadaware.history.PrometheusSource`);
3. computes each node's hot value from the bindings seen in the last 1, 5 and
   30 minutes (the policy's ``hotValue`` rules) -- a binding is a pod whose
   ``spec.nodeName`` appears, seen through the pod informer (crane reads the
   scheduler's ``Scheduled`` events; the informer sees every scheduler's binds);
4. writes ``<metric>: "<value>,<sample time>"`` and ``node_hot_value`` into
   the annotations of every node that is *due* -- a window moved by
   ``node_annotator_min_change`` (0.005) or more, its hot value changed, or
   its annotations are half-way to stale (half the shortest sync period + 5
   minutes; a non-zero hot value after 2.5 minutes -- a stale one reads as 0) -- in one pipelined round trip
   (each a compare-and-set on the cached node; a node someone changed
   meanwhile gets a metadata-only read-modify-write instead). A steady
   cluster so costs few writes per pass; the cost of a pass is the writes.

A window with no data for a node (NaN) is not written, so the old annotation
ages and the scheduler ignores it once stale. Options: ``node_annotator_period``,
``node_annotator_min_change``, ``prometheus_url``, ``load_aware_policy`` (a ``DynamicSchedulerPolicy`` spec:
only its ``hotValue`` rules matter here).

Metrics: ``kemu_node_annotator_pass_duration_seconds`` (one pass, wall time) and
``kemu_node_annotator_nodes_annotated_total``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np
from prometheus_client import Counter, Histogram

from emulator.api import errors
from emulator.api.kinds import NODE, POD
from emulator.api.quantity import parse_quantity
from emulator.api.types import Obj
from emulator.controllers.runtime import Controller, ControllerContext, object_of
from emulator.informers import ResourceEventHandlerFuncs
from emulator.kubelet import usage
from emulator.loadaware.history import PrometheusSource, RedisHistory, Windows
from emulator.loadaware.hotvalue import BindingRecords
from emulator.loadaware.policy import HOT_VALUE, METRICS, NodeLoads, Policy, format_time

log = logging.getLogger(__name__)

NAME = "node-annotator"
PASS_KEY = "pass"
DEFAULT_PERIOD = 60.0
DEFAULT_MIN_CHANGE = 0.005

PASS_SECONDS = Histogram("kemu_node_annotator_pass_duration_seconds", "Wall time of one node annotator pass",
                         buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
ANNOTATED = Counter("kemu_node_annotator_nodes_annotated", "Node annotation writes by the node annotator")


def _capacity(node: Obj, cache: dict[tuple[str, Any, Any], tuple[float, float]]) -> tuple[float, float]:
    """(cpu nanocores, memory bytes) of the node's capacity (allocatable without one), parsed once per value."""
    status = node.get("status") or {}
    cap = status.get("capacity") or status.get("allocatable") or {}
    key = (node["metadata"]["name"], cap.get("cpu"), cap.get("memory"))
    got = cache.get(key)
    if got is None:
        cpu = parse_quantity(cap["cpu"]).milli_value() * 1e6 if cap.get("cpu") else 0.0
        mem = float(parse_quantity(cap["memory"]).value()) if cap.get("memory") else 0.0
        got = cache[key] = (cpu, mem)
    return got


class NodeAnnotator(Controller):
    """One self-requeuing key runs a pass over every node; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, period: float | None = None,
                 prometheus_url: str | None = None, policy: Policy | None = None) -> None:
        super().__init__(NAME, ctx, workers=1)
        self.period = float(period if period is not None else ctx.option("node_annotator_period", DEFAULT_PERIOD))
        self.policy = policy or Policy.from_dict(ctx.option("load_aware_policy", None))
        url = prometheus_url if prometheus_url is not None else ctx.option("prometheus_url", None)
        self.prometheus = PrometheusSource(url) if url else None
        store = ctx.core.store
        self.redis, self.prefix = store.redis, store.config.prefix
        self.history = RedisHistory(self.redis, self.prefix)
        self.bindings = BindingRecords(self.policy.hot_value_horizon or 1800.0)
        self.node_informer = self.watch(ctx.informers.informer_for(NODE))
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        self.pod_informer.add_event_handler(ResourceEventHandlerFuncs(add=self._pod_added, update=self._pod_updated))
        self._capacities: dict[tuple[str, Any, Any], tuple[float, float]] = {}
        # Rewrite a node only when a window moved this much (utilization fraction) or its annotations are
        # half-way to stale (the scheduler ignores them after the shortest sync period + 5 minutes).
        self.min_change = float(ctx.option("node_annotator_min_change", DEFAULT_MIN_CHANGE))
        ages = [a for a in (self.policy.active_duration(m) for m in METRICS) if a > 0]
        self.refresh_age = min(ages, default=self.period * 4) / 2
        self.passes = 0
        self.last_written = 0
        self.last_pass_seconds = 0.0
        self.last_pass_phases: dict[str, float] = {}

    def start(self) -> NodeAnnotator:
        super().start()
        self.enqueue_key(PASS_KEY)
        return self

    # ------------------------------------------------------------------ bindings (hot value)
    def _pod_added(self, pod: Obj, initial: bool) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not initial:
            self.bindings.add(node, self.clock.now())

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        node = (new.get("spec") or {}).get("nodeName")
        if node and not (object_of(old) or {}).get("spec", {}).get("nodeName"):
            self.bindings.add(node, self.clock.now())

    def hot_values(self, now: float) -> dict[str, int]:
        ranges = [r.time_range for r in self.policy.hot_value]
        return {node: self.policy.hot_value_of(counts) for node, counts in self.bindings.counts(now, ranges).items()}

    # ------------------------------------------------------------------ one pass
    def reconcile(self, key: str) -> float | None:
        self.run_pass()
        return self.period

    def utilization(self, names: list[str], nodes: Mapping[str, Obj], now: float) -> tuple[np.ndarray, np.ndarray]:
        """Per node (in ``names`` order): CPU and memory utilization from the kubelets' usage snapshot (NaN: none)."""
        raw = self.redis.hgetall(self.prefix + usage.NODES_KEY)
        cpu, mem = np.full(len(names), np.nan), np.full(len(names), np.nan)
        for i, name in enumerate(names):
            packed = raw.get(name.encode())
            if packed is None:
                continue
            ts, window, cpu_nano, mem_bytes = msgpack.unpackb(packed, raw=False)
            if now - float(ts) > usage.MAX_AGE_WINDOWS * max(float(window), 1.0):
                continue  # its shard stopped publishing: no sample rather than an old one
            cap_cpu, cap_mem = _capacity(nodes[name], self._capacities)
            if cap_cpu > 0:
                cpu[i] = cpu_nano / cap_cpu
            if cap_mem > 0:
                mem[i] = mem_bytes / cap_mem
        return cpu, mem

    def windows(self, names: list[str], nodes: Mapping[str, Obj], now: float) -> Windows:
        if self.prometheus is not None:
            return self.prometheus.windows(names)
        cpu, mem = self.utilization(names, nodes, now)
        return self.history.record(now, names, cpu, mem)

    def due(self, names: list[str], nodes: Mapping[str, Obj], windows: Windows, hot: Mapping[str, int],
            now: float) -> np.ndarray:
        """Which nodes to write: a window moved by ``min_change`` or more (or appeared), the hot value changed,
        or the written annotations are half-way to stale -- so a steady cluster costs few writes per pass."""
        current = NodeLoads.parse([nodes[n]["metadata"].get("annotations") for n in names])
        new = np.column_stack([windows[m] for m in METRICS])
        known = ~np.isnan(new)
        with np.errstate(invalid="ignore"):
            moved = known & ~(np.abs(new - current.values) < self.min_change)  # NaN current: moved
        aging = known & (now - current.stamps >= self.refresh_age)
        hot_new = np.fromiter((hot.get(n, 0) for n in names), dtype=np.float64, count=len(names))
        # A stale hot value reads as 0, so a 0 never needs refreshing; a positive one does, half-way to stale.
        active = self.policy.hot_value_active_period
        fresh_hot = np.where(now - current.hot_stamp < active, current.hot, 0.0)
        hot_due = (hot_new != fresh_hot) | ((hot_new > 0) & (now - current.hot_stamp >= active / 2))
        return moved.any(axis=1) | aging.any(axis=1) | hot_due

    def run_pass(self) -> int:
        """One pass over every node; returns how many nodes' annotations were written."""
        started = time.perf_counter()
        now = self.clock.now()
        nodes = {n["metadata"]["name"]: n for n in self.node_informer.get_store().list()}
        names = sorted(nodes)
        if not names:
            return 0
        windows = self.windows(names, nodes, now)
        computed = time.perf_counter()
        hot = self.hot_values(now)
        due = self.due(names, nodes, windows, hot, now)
        stamp = format_time(now)
        # The annotation texts, one list per metric (None where the window has no data: NaN).
        columns = [(metric, [None if v != v else f"{v:.5f},{stamp}" for v in windows[metric].tolist()])  # noqa: PLR0124
                   for metric in METRICS]
        changed: list[Obj] = []
        for i in np.flatnonzero(due).tolist():
            name = names[i]
            node = nodes[name]
            current = node["metadata"].get("annotations") or {}
            wanted = dict(current)
            for metric, texts in columns:
                text = texts[i]
                if text is not None:
                    wanted[metric] = text
            wanted[HOT_VALUE] = f"{hot.get(name, 0)},{stamp}"
            if wanted != current:
                changed.append({**node, "metadata": {**node["metadata"], "annotations": wanted}})
        built = time.perf_counter()
        written = self._write(changed)
        self.last_written = written
        self.passes += 1
        done = time.perf_counter()
        self.last_pass_seconds = done - started
        self.last_pass_phases = {"read_and_windows": computed - started, "annotations": built - computed,
                                 "write": done - built}
        PASS_SECONDS.observe(self.last_pass_seconds)
        ANNOTATED.inc(written)
        return written

    def _write(self, objs: list[Obj]) -> int:
        """One pipelined compare-and-set per node; a node changed meanwhile gets a metadata-only update."""
        written = 0
        for obj, result in zip(objs, self.core.store.update_many(NODE, objs) if objs else [], strict=True):
            if not isinstance(result, errors.StatusError):
                written += 1
                continue
            if result.code != 409:
                continue  # 404: the node went away
            ours = {k: v for k, v in obj["metadata"]["annotations"].items() if k in METRICS or k == HOT_VALUE}

            def merge(meta: Obj, ours: dict[str, str] = ours) -> Obj:
                meta["annotations"] = {**(meta.get("annotations") or {}), **ours}
                return meta

            try:
                self.core.update_metadata(NODE, None, obj["metadata"]["name"], merge)
                written += 1
            except errors.StatusError as e:
                if e.code != 404:
                    raise
        return written

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        if self.prometheus is not None:
            self.prometheus.close()


def new_controller(ctx: ControllerContext) -> NodeAnnotator:
    """The controller manager's constructor for this controller."""
    return NodeAnnotator(ctx)
