"""Node utilization over a run: how evenly the measured load is spread, sampled from the kubelets' usage.

The load-aware comparison (``loadgen/scenarios/loadaware.yaml``) is judged by
how hot the hottest nodes get, not by requests: a sampler thread reads the
kubelet shards' ``metrics.k8s.io`` snapshot (:mod:`emulator.kubelet.usage`,
``P mu:nodes``: CPU nanocores and memory working set per node) every
``interval`` seconds and records, across the nodes with fresh usage, the
p50 / p90 / max of CPU and memory utilization (usage / capacity). The
summary gives the mean of each over the samples and the worst max; the
series goes to the report's plot.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import msgpack
import numpy as np

from emulator.api.kinds import NODE
from emulator.api.quantity import cpu_millis, to_int
from emulator.kubelet import usage
from emulator.server.core import ServerCore

__all__ = ["UtilizationSampler"]


class UtilizationSampler:
    """Samples node utilization in a thread between :meth:`start` and :meth:`stop`."""

    def __init__(self, core: ServerCore, interval: float = 2.0) -> None:
        self.core = core
        self.interval = interval
        # (seconds since start, cpu p50, p90, max, memory p50, p90, max)
        self.samples: list[tuple[float, ...]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._capacity: dict[str, tuple[float, float]] = {}
        self._t0 = time.perf_counter()

    def _capacities(self) -> dict[str, tuple[float, float]]:
        out = {}
        for node in self.core.list(NODE).items:
            status = node.get("status") or {}
            cap = status.get("capacity") or status.get("allocatable") or {}
            out[node["metadata"]["name"]] = (cpu_millis(cap["cpu"]) * 1e6 if "cpu" in cap else 0.0,
                                             float(to_int(cap["memory"])) if "memory" in cap else 0.0)
        return out

    def sample(self) -> tuple[float, ...] | None:
        store = self.core.store
        raw = store.redis.hgetall(store.config.prefix + usage.NODES_KEY)
        if len(raw) != len(self._capacity):
            self._capacity = self._capacities()
        now = self.core.clock.now()
        cpu, mem = [], []
        for key, packed in raw.items():
            ts, window, cpu_nano, mem_bytes = msgpack.unpackb(packed, raw=False)
            cap = self._capacity.get(key.decode())
            if cap is None or now - float(ts) > usage.MAX_AGE_WINDOWS * max(float(window), 1.0):
                continue
            if cap[0] > 0 and cap[1] > 0:
                cpu.append(cpu_nano / cap[0])
                mem.append(mem_bytes / cap[1])
        if not cpu:
            return None
        c, m = np.asarray(cpu), np.asarray(mem)
        row = (round(time.perf_counter() - self._t0, 2), *(float(x) for x in np.percentile(c, [50, 90, 100])),
               *(float(x) for x in np.percentile(m, [50, 90, 100])))
        self.samples.append(row)
        return row

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):  # a sampler must never take the run down
                self.sample()

    def start(self) -> UtilizationSampler:
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="utilization-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def summary(self) -> dict[str, Any]:
        """Mean over the samples of the p50/p90/max across nodes, and the worst max, for CPU and memory."""
        if not self.samples:
            return {"samples": 0}
        a = np.asarray(self.samples)
        out: dict[str, Any] = {"samples": len(self.samples)}
        for name, base in (("cpu", 1), ("memory", 4)):
            out[name] = {"p50": round(float(a[:, base].mean()), 4), "p90": round(float(a[:, base + 1].mean()), 4),
                         "max": round(float(a[:, base + 2].mean()), 4),
                         "worstMax": round(float(a[:, base + 2].max()), 4)}
        return out
