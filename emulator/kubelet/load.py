"""Load-driven behaviour: pods that serve a load target's requests, as arrays.

Upstream, a Service's endpoints get the clients' requests only while the pod
is Ready, and a pod's CPU follows the requests it serves. kemu's kubelet
model has no requests, so it keeps, beside the behaviour curves, a small
table (:class:`LoadTable`): for each pod its load target (``kemu.io/load-target``,
:mod:`emulator.loadtargets`) and base request latency, for each container its
CPU cost of one request per second (profile field ``cost-per-request``).

Every tick, given each target's *share* — its request rate divided by its
ready pods cluster-wide (:func:`emulator.loadtargets.exchange`, which the
model's tick calls once that tick's container starts and exits are known, so
the pods counted are the pods that serve) — every ready
pod of the target serves ``share`` requests/s, and each of its containers
demands ``cpu curve + share * cost-per-request`` millicores (the profile's
``cpu`` curve is the base, with whatever noise or shape it has). The cgroup
model then grants, shares or throttles that demand like any other. Scale the
target out and every pod's share, and so its CPU, drops.

Each ready pod's request latency is an M/M/1 queue's response time over its
CPU: ``latency = base / (1 - rho)``, with ``rho`` the loaded containers' CPU
demand over their CPU limit (their request when they have no limit; rho = 0
with neither), capped at :data:`MAX_UTILISATION` so a throttled pod reports
a large but finite latency. Served requests and latency are accumulated over
the metrics window (:meth:`LoadTable.take_window`): what the kubelet shard
publishes as the pod's ``http_requests_per_second`` and
``http_request_duration_seconds`` (:mod:`emulator.kubelet.usage`), which
``custom.metrics.k8s.io`` serves.

Everything is vectorised: a tick costs a few array operations over all
container rows, and nothing at all while no pod has a load target.

The same per-pod series are exported for Prometheus by the shard's process
(:class:`AppSeriesCollector`, at scrape time, from the last published window;
one series per load-target pod, not per pod of the cluster), so
``--prometheus-url`` pointed at a Prometheus that scrapes kemu serves the same
custom metrics through the same rules.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from prometheus_client.core import GaugeMetricFamily, Metric

from emulator.collectors import SourceCollector, registered
from emulator.kubelet.usage import LATENCY_SERIES, REQUESTS_SERIES

if TYPE_CHECKING:
    from emulator.kubelet.model import KubeletModel

__all__ = ["MAX_UTILISATION", "LoadTable", "LoadWindow", "app_series"]

# rho is capped here: latency at most base / (1 - 0.95) = 20 * base (a throttled pod's queue grows without bound).
MAX_UTILISATION = 0.95


class LoadWindow:
    """Per pod row, over one metrics window: requests/s served, and their mean latency (seconds)."""

    __slots__ = ("latency", "rate")

    def __init__(self, rate: np.ndarray, latency: np.ndarray) -> None:
        self.rate = rate
        self.latency = latency


def _grow(a: np.ndarray, size: int, fill: float) -> np.ndarray:
    extra = size - len(a)
    if extra <= 0:
        return a
    return np.concatenate([a, np.full(extra, fill, dtype=a.dtype)])


class LoadTable:
    """Load targets of pod rows and request costs of container rows (see the module docstring)."""

    def __init__(self, rows: int, pods: int) -> None:
        # Container rows.
        self.cost = np.zeros(rows)  # millicores per request/s
        self.cpu_capacity = np.zeros(rows)  # millicores: the limit, else the request, else 0
        # Pod rows.
        self.p_target = np.full(pods, -1, dtype=np.int64)  # -1: no target
        self.p_base_latency = np.zeros(pods)
        self.rate = np.zeros(pods)  # requests/s each pod served in the last tick
        self.latency = np.zeros(pods)  # seconds, last tick
        self._served = np.zeros(pods)  # requests over the window
        self._latency_sum = np.zeros(pods)  # request-seconds over the window
        self._window = 0.0
        # Targets: ids index _share, whose extra last slot (0) is what p_target == -1 reads.
        self._ids: dict[str, int] = {}
        self._names: list[str] = []
        self._share = np.zeros(1)
        self._pods_with_target = 0
        # The last window's app series by (namespace, pod), for the Prometheus collector.
        self.published: dict[tuple[str, str], dict[str, float]] = {}

    @property
    def active(self) -> bool:
        """Whether any pod serves a target (nothing to do per tick otherwise)."""
        return self._pods_with_target > 0

    def targets(self) -> list[str]:
        return list(self._names)

    def grow(self, rows: int, pods: int) -> None:
        self.cost = _grow(self.cost, rows, 0.0)
        self.cpu_capacity = _grow(self.cpu_capacity, rows, 0.0)
        if pods > len(self.p_target):
            self.p_target = _grow(self.p_target, pods, -1)
            for name in ("p_base_latency", "rate", "latency", "_served", "_latency_sum"):
                setattr(self, name, _grow(getattr(self, name), pods, 0.0))

    def assign_row(self, row: int, cost: float, cpu_limit: float, cpu_request: float) -> None:
        self.cost[row] = cost
        self.cpu_capacity[row] = cpu_limit if cpu_limit > 0 else cpu_request

    def clear_rows(self, rows: np.ndarray) -> None:
        self.cost[rows] = 0.0
        self.cpu_capacity[rows] = 0.0

    def assign_pod(self, p_row: int, target: str, base_latency: float) -> None:
        self.clear_pod(p_row)
        if target:
            tid = self._ids.get(target)
            if tid is None:
                tid = self._ids[target] = len(self._names)
                self._names.append(target)
                self._share = np.zeros(len(self._names) + 1)
            self.p_target[p_row] = tid
            self._pods_with_target += 1
        self.p_base_latency[p_row] = base_latency

    def clear_pod(self, p_row: int) -> None:
        if self.p_target[p_row] >= 0:
            self._pods_with_target -= 1
        self.p_target[p_row] = -1
        self.rate[p_row] = self.latency[p_row] = 0.0
        self._served[p_row] = self._latency_sum[p_row] = 0.0

    def set_shares(self, shares: Mapping[str, float]) -> None:
        """Each target's requests/s per ready pod (targets missing from ``shares`` get none)."""
        share = np.zeros(len(self._names) + 1)
        for name, value in shares.items():
            tid = self._ids.get(name)
            if tid is not None:
                share[tid] = value
        self._share = share

    def share(self, target: str) -> float:
        tid = self._ids.get(target)
        return float(self._share[tid]) if tid is not None else 0.0

    def ready_counts(self, pod_ready: np.ndarray) -> dict[str, int]:
        """Ready pods per target among ``pod_ready`` (a bool per pod row); every known target, zeros included."""
        n = len(pod_ready)
        targets = self.p_target[:n]
        counts = np.bincount(targets[pod_ready & (targets >= 0)], minlength=len(self._names))
        return {name: int(counts[tid]) for name, tid in self._ids.items()}

    def demand(self, c_pod: np.ndarray, pod_ready: np.ndarray, running: np.ndarray) -> np.ndarray:
        """Extra CPU demand (millicores) per container row: the pod's share * the container's cost."""
        pod_share = np.where(pod_ready, self._share[self.p_target[: len(pod_ready)]], 0.0)
        return np.where(running, pod_share[c_pod] * self.cost, 0.0)

    def account(self, dt: float, c_pod: np.ndarray, pod_ready: np.ndarray, cpu_demand: np.ndarray,
                running: np.ndarray) -> None:
        """After the tick's CPU demand is known: each pod's served rate and latency, added to the window."""
        n = len(pod_ready)
        rate = np.where(pod_ready, self._share[self.p_target[:n]], 0.0)
        loaded = running & (self.cost > 0)
        demand = np.bincount(c_pod, weights=np.where(loaded, cpu_demand, 0.0), minlength=n)[:n]
        capacity = np.bincount(c_pod, weights=np.where(loaded, self.cpu_capacity, 0.0), minlength=n)[:n]
        rho = np.minimum(np.divide(demand, capacity, out=np.zeros(n), where=capacity > 0), MAX_UTILISATION)
        latency = np.where(self.p_target[:n] >= 0, self.p_base_latency[:n] / (1.0 - rho), 0.0)
        self.rate[:n] = rate
        self.latency[:n] = latency
        self._served[:n] += rate * dt
        self._latency_sum[:n] += rate * dt * latency
        self._window += dt

    def take_window(self) -> LoadWindow:
        """Mean requests/s and mean request latency per pod row since the last call; starts a new window.

        A pod that served nothing reports the latency of its last tick (its idle latency).
        """
        window = self._window
        rate = self._served / window if window > 0 else np.zeros_like(self._served)
        latency = np.divide(self._latency_sum, self._served, out=self.latency.copy(), where=self._served > 0)
        self._served = np.zeros_like(self._served)
        self._latency_sum = np.zeros_like(self._latency_sum)
        self._window = 0.0
        return LoadWindow(rate, latency)


def app_series(model: KubeletModel, pods: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, float]]:
    """The window's app series of the load-target pods among ``pods`` (uid -> a record with ``ns`` and ``name``).

    Also what the process exports for Prometheus until the next window (:class:`AppSeriesCollector`).
    """
    out = {}
    for uid, (rate, latency) in model.take_load_window().items():
        record = pods.get(uid)
        if record is not None:
            out[(record.ns, record.name)] = {REQUESTS_SERIES: rate, LATENCY_SERIES: latency}
    if out or model.load.published:
        model.load.published = out
        collector().add(model.load)
    return out


class AppSeriesCollector(SourceCollector):
    """``http_requests_per_second`` / ``http_request_duration_seconds`` {namespace, pod} of the process's shards."""

    def describe(self) -> list[Metric]:
        return []  # series come and go with load-target pods

    def collect(self) -> Iterator[Metric]:
        rate = GaugeMetricFamily(REQUESTS_SERIES, "Requests per second the pod served over the last metrics window "
                                 "(its share of its load target's rate)", labels=["namespace", "pod"])
        latency = GaugeMetricFamily(LATENCY_SERIES, "Mean latency of the pod's requests over the last metrics "
                                    "window, in seconds", labels=["namespace", "pod"])
        merged: dict[tuple[str, str], dict[str, float]] = {}
        for table in self.sources():
            merged.update(table.published)  # a pod is one series even if two shards of the process saw it
        for (ns, pod), series in merged.items():
            rate.add_metric([ns, pod], series[REQUESTS_SERIES])
            latency.add_metric([ns, pod], series[LATENCY_SERIES])
        yield rate
        yield latency


def collector() -> AppSeriesCollector:
    """The process's app series collector, registered in the default registry on first use."""
    return registered(AppSeriesCollector)
