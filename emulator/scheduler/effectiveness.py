"""How well a scheduler places pods by real load: the dynamic scheduler's effectiveness metrics.

Tencent TKE's dynamic-scheduler evaluation counts, at every bind, whether the
chosen node was a *cool* one. kemu computes the same numbers in every
scheduler (whatever its profile, so a default profile and a load-aware one
can be compared on one workload), from the load annotations the node
annotator writes (``cpu_usage_avg_5m`` and ``mem_usage_avg_5m`` of
:mod:`emulator.loadaware.policy`) as the scheduling cycle's snapshot
carries them at the moment the node is chosen:

* ``cpu_utilization_total_avg`` -- the mean CPU utilization of the chosen
  nodes over every bind (binds to a node without the annotation are left
  out of the mean); ``memory_utilization_total_avg`` likewise;
* ``effective_dynamic_schedule_count`` -- +0.5 when the chosen node's CPU
  utilization is below the median over all nodes (that have the annotation),
  +0.5 likewise for memory;
* ``total_schedule_count`` -- binds; ``effective_schedule_ratio`` = effective / total.

The sample is taken in the scheduling cycle (node chosen, snapshot
consistent) and counted when the bind succeeds (a failed bind counts
nothing). The per-node annotation table and the medians depend on the node
objects only, so they are computed once per node set (``Snapshot.node_memo``)
and a bind costs a few lookups. The annotation values are taken as they are
(their age is not checked: the latest known load is what the chosen node
"had").

Kept per profile (a scheduler with a default and a load-aware profile
compares both on one run). Exported as ``kemu_scheduler_<name>{scheduler,profile}``
gauges and in :meth:`Scheduler.snapshot_stats` under ``effectiveness``
(profile -> the five values; the ``kemu run`` summary).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from prometheus_client import Gauge

from emulator.loadaware.policy import CPU_AVG_5M, MEM_AVG_5M
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.plugins.load_aware import node_loads

__all__ = ["SAMPLE_KEY", "Effectiveness", "Sample", "sample"]

SAMPLE_KEY = "kemu/effectiveness"
NAMES = ("cpu_utilization_total_avg", "memory_utilization_total_avg", "effective_dynamic_schedule_count",
         "total_schedule_count", "effective_schedule_ratio")
_GAUGES = {name: Gauge(f"kemu_scheduler_{name}", f"Load-aware scheduling effectiveness: {name}",
                       ["scheduler", "profile"]) for name in NAMES}


@dataclass(frozen=True)
class Sample:
    """The chosen node's CPU and memory utilization (NaN: not annotated) and whether each is below the median."""

    cpu: float
    mem: float
    cpu_below_median: bool
    mem_below_median: bool


def _medians(snapshot: Snapshot) -> tuple[np.ndarray, np.ndarray, float, float]:
    def compute() -> tuple[np.ndarray, np.ndarray, float, float]:
        loads = node_loads(snapshot)
        cpu, mem = loads.column(CPU_AVG_5M), loads.column(MEM_AVG_5M)
        cpu_ok, mem_ok = cpu[~np.isnan(cpu)], mem[~np.isnan(mem)]
        return (cpu, mem, float(np.median(cpu_ok)) if len(cpu_ok) else math.nan,
                float(np.median(mem_ok)) if len(mem_ok) else math.nan)

    return snapshot.node_memo(("effectiveness", "medians"), compute)  # type: ignore[no-any-return]


def sample(snapshot: Snapshot, node: str) -> Sample | None:
    """The effectiveness sample of placing a pod on ``node`` (None: not in the snapshot)."""
    i = snapshot.index_of(node)
    if i is None:
        return None
    cpu, mem, cpu_median, mem_median = _medians(snapshot)
    c, m = float(cpu[i]), float(mem[i])
    return Sample(c, m, c < cpu_median, m < mem_median)  # NaN compares False: not effective


class Effectiveness:
    """The running totals of one scheduler profile; :meth:`observe` one sample per successful bind."""

    def __init__(self, scheduler: str, profile: str = "default-scheduler") -> None:
        self.scheduler = scheduler
        self.profile = profile
        self._lock = threading.Lock()
        self.total = 0
        self.effective = 0.0
        self._cpu = [0.0, 0]  # sum, count
        self._mem = [0.0, 0]
        self._gauges = {name: g.labels(scheduler, profile) for name, g in _GAUGES.items()}

    def observe(self, s: Sample | None) -> None:
        with self._lock:
            self.total += 1
            if s is not None:
                for acc, value in ((self._cpu, s.cpu), (self._mem, s.mem)):
                    if not math.isnan(value):
                        acc[0] += value
                        acc[1] += 1
                self.effective += 0.5 * s.cpu_below_median + 0.5 * s.mem_below_median
            summary = self._summary()
        for name, value in summary.items():
            if value is not None:
                self._gauges[name].set(value)

    def _summary(self) -> dict[str, Any]:
        return {
            "cpu_utilization_total_avg": self._cpu[0] / self._cpu[1] if self._cpu[1] else None,
            "memory_utilization_total_avg": self._mem[0] / self._mem[1] if self._mem[1] else None,
            "effective_dynamic_schedule_count": self.effective,
            "total_schedule_count": self.total,
            "effective_schedule_ratio": self.effective / self.total if self.total else None,
        }

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return self._summary()
