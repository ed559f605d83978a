"""Usage publishing: every metrics window, per-node and per-container CPU and memory for ``metrics.k8s.io``.

Upstream counterpart: the kubelet's resource metrics endpoint (``pkg/kubelet/server/stats``,
``/metrics/resource``) that metrics-server scrapes every ``metrics_window`` (15 s, its
resolution). kemu pushes instead of being scraped: each shard writes one snapshot of its nodes
and containers - CPU averaged over the window, memory working set - through
:func:`emulator.kubelet.usage.write_snapshot`, and :mod:`emulator.kubelet.usage` answers the
``metrics.k8s.io/v1beta1`` requests from it. The same snapshot carries the load-target pods'
``http_requests_per_second`` and latency (:mod:`emulator.kubelet.load`), kemu's own series for
``custom.metrics.k8s.io``.

The same pass counts CFS throttling per pod for run summaries (``kemu run``, ``--compare``): the
container_* Prometheus series are summed per node, so which *pods* were throttled is kept here, in
one small hash (:data:`THROTTLED_KEY`: ``pods`` -- pods seen throttled at least once -- and
``periods`` -- throttled CFS periods, cgroup ``cpu.stat`` ``nr_throttled``), cumulative over the
cluster's life; :func:`throttling` reads it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from emulator.kubelet import load, usage
from emulator.kubelet.state import ShardState

THROTTLED_KEY = "kubelet:cpu-throttling"


def throttling(redis: Any, prefix: str) -> dict[str, int]:
    """``{"podsThrottled": pods CPU-throttled at least once, "throttledPeriods": their throttled CFS periods}``."""
    raw = redis.hgetall(prefix + THROTTLED_KEY)
    return {"podsThrottled": int(raw.get(b"pods", 0)), "throttledPeriods": int(raw.get(b"periods", 0))}


class UsagePublisher:
    """Writes the shard's usage snapshot once per metrics window, and drops pods and nodes that are gone."""

    def __init__(self, state: ShardState) -> None:
        self.state = state
        self._gone_usage: list[tuple[str, str]] = []
        self._gone_nodes: list[str] = []
        self._next_usage: float | None = None
        self._last_usage: float | None = None
        # Per pod seen throttled: its containers' nr_throttled total at the last snapshot.
        self._throttled: dict[tuple[str, str], int] = {}

    def pod_gone(self, key: tuple[str, str]) -> None:
        """(namespace, name) of a pod that finished or was deleted: removed at the next snapshot."""
        self._gone_usage.append(key)
        self._throttled.pop(key, None)

    def node_gone(self, name: str) -> None:
        self._gone_nodes.append(name)

    def publish(self, now: float) -> None:
        state = self.state
        window = state.config.metrics_window
        if self._next_usage is None:
            self._next_usage = now + window
            self._last_usage = now
            state.metrics.take_window()
            return
        if now < self._next_usage:
            return
        span = max(now - (self._last_usage or now), 1e-9)
        self._last_usage = now
        self._next_usage = now + window
        cpu_usec = state.metrics.take_window()
        memory = state.model.cgroups.memory_current
        node_of = state.model.cgroups.node
        running = state.model.state == 2
        n_nodes = len(state.idx_names)
        node_cpu = np.bincount(node_of, weights=cpu_usec[: len(node_of)], minlength=n_nodes)
        node_mem = np.bincount(node_of, weights=np.where(running, memory, 0.0), minlength=n_nodes)
        nodes = {name: (int(node_cpu[node.idx] * 1000 / span), int(node_mem[node.idx]))
                 for name, node in state.nodes.items()}
        nr_throttled = state.model.cgroups.nr_throttled
        new_pods = new_periods = 0
        pods: dict[tuple[str, str], list[usage.ContainerUsage]] = {}
        for rec in state.pods.values():
            if not rec.in_model:
                continue
            key = (rec.ns, rec.name)
            pods[key] = [(name, int(cpu_usec[row] * 1000 / span) if row < len(cpu_usec) else 0,
                          int(memory[row]) if running[row] else 0) for name, row in rec.rows]
            periods = int(sum(int(nr_throttled[row]) for _, row in rec.rows if row < len(nr_throttled)))
            if periods:
                last = self._throttled.get(key)
                if last is None:
                    new_pods += 1
                # A restarted container's cgroup counts from zero again.
                new_periods += periods - last if last is not None and periods >= last else periods
                self._throttled[key] = periods
        gone = [key for key in self._gone_usage if key not in pods]
        self._gone_usage = []
        gone_nodes, self._gone_nodes = self._gone_nodes, []
        store = state.core.store
        pipe = store.redis.pipeline(transaction=False)
        app = load.app_series(state.model, state.pods)  # load-target pods' http_requests_per_second, latency
        usage.write_snapshot(pipe, store.config.prefix, timestamp=now, window=span, nodes=nodes, pods=pods,
                             gone_pods=gone, gone_nodes=gone_nodes, app=app)
        if new_pods:
            pipe.hincrby(store.config.prefix + THROTTLED_KEY, "pods", new_pods)
        if new_periods:
            pipe.hincrby(store.config.prefix + THROTTLED_KEY, "periods", new_periods)
        pipe.execute()
