"""Prometheus metrics of the kubelet shards, with upstream names, at a cardinality a laptop can scrape.

Upstream a kubelet exports its own metrics (``kubelet_running_pods``,
``kubelet_evictions``, ``kubelet_pod_start_sli_duration_seconds`` ...) and,
through cAdvisor, per-container series (``container_cpu_usage_seconds_total``,
``container_cpu_cfs_throttled_periods_total``,
``container_memory_working_set_bytes``, ``container_oom_events_total`` ...).
kemu keeps those names, but 150,000 pods x a dozen container series would be
millions of series from one process: so the **container_* series are summed
per node** (label ``node``; no ``pod``/``container``/``namespace`` labels).
Per-pod usage is still available, through ``metrics.k8s.io``
(:mod:`emulator.kubelet.usage`), which is what HPA/VPA and ``kubectl top``
read anyway. Every series carries ``shard`` (the kubelet shard index), so
several shards in one process never collide.

Cost: per tick the shard folds the cgroup counters of every container into
per-node totals with a few ``numpy`` operations (:meth:`ShardMetrics.update`,
counter resets at container restarts handled as cAdvisor's consumers do:
a counter that went down restarted from zero); the series are produced only
when Prometheus scrapes (:class:`KubeletCollector`), never per tick.

Kubelet-level histograms (pod start latency) are ordinary prometheus-client
histograms shared by the shards of a process.

Allocation, for requested-vs-used panels and the allocation heatmap: per
node, ``kube_node_status_allocatable{resource,unit}`` (kube-state-metrics'
name and units: ``cpu``/``core``, ``memory``/``byte``) and
``kemu_node_resource_requests{resource,unit}`` (the requests of the pods the
kubelet admitted and that have not finished -- what upstream's scheduler
and ``kubectl describe node`` call "allocated"). The shard hands the
collector a function (:attr:`ShardMetrics.allocation`) that reads its node
table when Prometheus scrapes, so this costs nothing per tick.

GPU devices, DCGM-exporter style (:attr:`ShardMetrics.devices`, from the
device manager): ``DCGM_FI_DEV_GPU_UTIL`` (%) and ``DCGM_FI_DEV_FB_USED``
(MiB) per device with dcgm-exporter's labels ``gpu`` (index), ``UUID``,
``modelName`` and ``Hostname``, plus ``kemu_gpu_device_allocated_milli``.
Utilization and memory follow the shares allocated on the device (a share
of 300 milli is 30 % busy and holds 30 % of the memory), not the usage
model -- a simplification listed in docs/architecture.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from emulator.collectors import SourceCollector, registered

# Upstream kubelet buckets for kubelet_pod_start_sli_duration_seconds (pkg/kubelet/metrics/metrics.go).
POD_START_BUCKETS = (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200,
                     1800, 2700, 3600)

POD_START_SLI = Histogram(
    "kubelet_pod_start_sli_duration_seconds",
    "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod "
    "creation timestamp to when all its containers are reported as started and observed via watch",
    buckets=POD_START_BUCKETS)
POD_START = Histogram(
    "kubelet_pod_start_duration_seconds",
    "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
    buckets=POD_START_BUCKETS)
_EVICTION_SIGNALS = {"memory.available": 0, "nodefs.available": 0, "pid.available": 0}
LEASE_RENEWALS = Counter("kemu_kubelet_lease_renewals", "Node Lease renewals written (node heartbeats)", ["shard"])
LEASE_LATE = Counter("kemu_kubelet_lease_late_renewals",
                     "Lease renewals written more than two ticks after they were due", ["shard"])
NODE_STATUS_UPDATES = Counter("kemu_kubelet_node_status_updates", "Node status writes", ["shard"])
POD_STATUS_UPDATES = Counter("kemu_kubelet_pod_status_updates", "Pod status writes", ["shard"])
EVENTS_WRITTEN = Counter("kemu_kubelet_events", "Events written (created or count-incremented)", ["shard"])
EVENTS_DROPPED = Counter("kemu_kubelet_events_dropped", "Events dropped by the spam filter", ["shard"])
ADMISSION_REJECTIONS = Counter("kemu_kubelet_admission_rejections", "Pods rejected at admission", ["shard", "reason"])
TICK_SECONDS = Histogram("kemu_kubelet_tick_duration_seconds", "Wall time of one kubelet shard tick",
                         buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))


class ShardMetrics:
    """One shard's per-node totals, folded from the cgroup arrays every tick, read at scrape time.

    Counters per model row are diffed against what was seen last tick; a value lower than last
    time is a restarted container (fresh cgroup) and counts from zero. :meth:`forget_rows` must be
    called when rows get new containers (their counters restart at zero without a decrease being
    visible if they grew past the old value within one tick).
    """

    _COUNTERS = ("usage_usec", "nr_periods", "nr_throttled", "throttled_usec", "oom_kills")

    def __init__(self, shard: int) -> None:
        self.shard = str(shard)
        self._lock = threading.Lock()
        self._last: dict[str, np.ndarray] = {name: np.zeros(0) for name in self._COUNTERS}
        self.window_usage_usec = np.zeros(0)  # per row, since the last usage snapshot
        self._totals: dict[str, np.ndarray] = {name: np.zeros(0) for name in self._COUNTERS}
        self.evictions: dict[str, int] = {}
        # What the collector reads: replaced whole each tick (never mutated after publication).
        self._view: dict[str, Any] = {"nodes": [], "active": np.zeros(0, dtype=bool)}
        # Set by the shard: (node, allocatable cpu millicores, allocatable memory bytes, requested cpu
        # millicores, requested memory bytes) per node, read at scrape time.
        self.allocation: Callable[[], list[tuple[str, int, int, int, int]]] | None = None
        # Set by the shard: (node, device index, UUID, model, utilization %, memory used MiB, allocated milli)
        # per GPU device, read at scrape time.
        self.devices: Callable[[], list[tuple[str, int, str, str, float, float, int]]] | None = None

    def _grow_rows(self, n: int) -> None:
        for name, arr in self._last.items():
            if len(arr) < n:
                self._last[name] = np.concatenate([arr, np.zeros(n - len(arr))])
        if len(self.window_usage_usec) < n:
            self.window_usage_usec = np.concatenate([self.window_usage_usec, np.zeros(n - len(self.window_usage_usec))])

    def forget_rows(self, rows: list[int] | np.ndarray) -> None:
        """Rows that now hold new containers: their counters start again from zero."""
        if len(rows) == 0:
            return
        idx = np.asarray(rows, dtype=np.int64)
        self._grow_rows(int(idx.max()) + 1)
        for arr in self._last.values():
            arr[idx] = 0.0
        self.window_usage_usec[idx] = 0.0

    def update(self, model: Any, node_names: list[str]) -> None:
        """Fold this tick's counter increments into per-node totals and publish a view for scrapes."""
        cg = model.cgroups
        n_rows = len(cg.node)
        n_nodes = len(node_names)
        self._grow_rows(n_rows)
        node_of = cg.node
        for name in self._COUNTERS:
            current = getattr(cg, name).astype(np.float64, copy=False)
            last = self._last[name][:n_rows]
            delta = np.where(current >= last, current - last, current)
            self._last[name][:n_rows] = current
            totals = self._totals[name]
            if len(totals) < n_nodes:
                totals = self._totals[name] = np.concatenate([totals, np.zeros(n_nodes - len(totals))])
            totals[:n_nodes] += np.bincount(node_of, weights=delta, minlength=n_nodes)[:n_nodes]
            if name == "usage_usec":
                self.window_usage_usec[:n_rows] += delta
        running = model.state == 2  # model.RUNNING
        memory = np.bincount(node_of, weights=np.where(running, cg.memory_current, 0.0), minlength=n_nodes)[:n_nodes]
        containers = np.bincount(node_of, weights=running, minlength=n_nodes)[:n_nodes]
        n_pods = len(model.p_active)
        pod_running = np.bincount(model.c_pod[running], minlength=n_pods) > 0 if n_pods else np.zeros(0, dtype=bool)
        pods = (np.bincount(model.p_node[:n_pods][pod_running], minlength=n_nodes)[:n_nodes] if n_pods
                else np.zeros(n_nodes))
        view = {"nodes": list(node_names), "active": model.n_active[:n_nodes].copy(), "memory": memory,
                "containers": containers, "pods": pods,
                **{name: self._totals[name][:n_nodes].copy() for name in self._COUNTERS},
                "evictions": dict(self.evictions)}
        with self._lock:
            self._view = view

    def take_window(self) -> np.ndarray:
        """Per-row CPU microseconds since the last call (for a usage snapshot), and start a new window."""
        out = self.window_usage_usec.copy()
        self.window_usage_usec[:] = 0.0
        return out

    def view(self) -> dict[str, Any]:
        with self._lock:
            return self._view


class KubeletCollector(SourceCollector):
    """Produces the per-node series of every live :class:`ShardMetrics` of the process at scrape time."""

    def describe(self) -> list[Metric]:
        return []  # series appear and disappear with shards: do not pre-register names

    def collect(self) -> Iterator[Metric]:
        shards: list[ShardMetrics] = self.sources()
        families: dict[str, Metric] = {
            "node_name": GaugeMetricFamily("kubelet_node_name", "The node's name. The count is always 1.",
                                           labels=["shard", "node"]),
            "pods": GaugeMetricFamily("kubelet_running_pods", "Number of pods that have a running pod sandbox",
                                      labels=["shard", "node"]),
            "containers": GaugeMetricFamily("kubelet_running_containers", "Number of containers currently running",
                                            labels=["shard", "node", "container_state"]),
            "usage_usec": CounterMetricFamily("container_cpu_usage_seconds",
                                              "Cumulative cpu time consumed, summed over the node's containers",
                                              labels=["shard", "node"]),
            "nr_periods": CounterMetricFamily("container_cpu_cfs_periods", "Number of elapsed enforcement period "
                                              "intervals, summed over the node's containers", labels=["shard", "node"]),
            "nr_throttled": CounterMetricFamily("container_cpu_cfs_throttled_periods",
                                                "Number of throttled period intervals, summed over the node's "
                                                "containers", labels=["shard", "node"]),
            "throttled_usec": CounterMetricFamily("container_cpu_cfs_throttled_seconds",
                                                  "Total time duration the container has been throttled, summed over "
                                                  "the node's containers", labels=["shard", "node"]),
            "memory": GaugeMetricFamily("container_memory_working_set_bytes",
                                        "Current working set, summed over the node's containers",
                                        labels=["shard", "node"]),
            "oom_kills": CounterMetricFamily("container_oom_events", "Count of out of memory events observed for "
                                             "the node's containers", labels=["shard", "node"]),
        }
        evictions = Metric("kubelet_evictions", "Cumulative number of pod evictions by eviction signal", "counter")
        allocatable = GaugeMetricFamily("kube_node_status_allocatable", "The allocatable of a node for scheduling",
                                        labels=["shard", "node", "resource", "unit"])
        requested = GaugeMetricFamily("kemu_node_resource_requests",
                                      "Sum of the requests of the pods admitted to the node and not finished",
                                      labels=["shard", "node", "resource", "unit"])
        for shard in shards:
            if shard.allocation is not None:
                for node, alloc_cpu, alloc_mem, req_cpu, req_mem in shard.allocation():
                    allocatable.add_metric([shard.shard, node, "cpu", "core"], alloc_cpu / 1000)
                    allocatable.add_metric([shard.shard, node, "memory", "byte"], float(alloc_mem))
                    requested.add_metric([shard.shard, node, "cpu", "core"], req_cpu / 1000)
                    requested.add_metric([shard.shard, node, "memory", "byte"], float(req_mem))
            view = shard.view()
            names: list[str] = view["nodes"]
            if not names:
                continue
            active = view["active"]
            for i, node in enumerate(names):
                if i >= len(active) or not active[i]:
                    continue
                labels = [shard.shard, node]
                families["node_name"].add_metric(labels, 1.0)
                families["pods"].add_metric(labels, float(view["pods"][i]))
                families["containers"].add_metric([*labels, "running"], float(view["containers"][i]))
                families["usage_usec"].add_metric(labels, float(view["usage_usec"][i]) / 1e6)
                families["nr_periods"].add_metric(labels, float(view["nr_periods"][i]))
                families["nr_throttled"].add_metric(labels, float(view["nr_throttled"][i]))
                families["throttled_usec"].add_metric(labels, float(view["throttled_usec"][i]) / 1e6)
                families["memory"].add_metric(labels, float(view["memory"][i]))
                families["oom_kills"].add_metric(labels, float(view["oom_kills"][i]))
            # The signals kemu's eviction manager acts on, at 0 until they fire: a panel shows 0, not "no data".
            for signal, count in sorted({**_EVICTION_SIGNALS, **view["evictions"]}.items()):
                # Upstream's name has no _total suffix (component-base counters): keep it.
                evictions.add_sample("kubelet_evictions", {"shard": shard.shard, "eviction_signal": signal},
                                     float(count))
        yield from families.values()
        yield evictions
        yield allocatable
        yield requested
        yield from _device_families(shards)


def _device_families(shards: list[ShardMetrics]) -> Iterator[Metric]:
    labels = ["gpu", "UUID", "modelName", "Hostname", "shard"]
    util = GaugeMetricFamily("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", labels=labels)
    fb_used = GaugeMetricFamily("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", labels=labels)
    allocated = GaugeMetricFamily("kemu_gpu_device_allocated_milli",
                                  "Milli-GPU of the device allocated to pods by the device manager", labels=labels)
    for shard in shards:
        if shard.devices is None:
            continue
        for node, index, uuid, model, busy, memory, milli in shard.devices():
            values = [str(index), uuid, model, node, shard.shard]
            util.add_metric(values, busy)
            fb_used.add_metric(values, memory)
            allocated.add_metric(values, float(milli))
    yield util
    yield fb_used
    yield allocated


def collector() -> KubeletCollector:
    """The process's collector, registered in the default registry on first use."""
    return registered(KubeletCollector)
