"""The VPA recommender's model of usage: aggregate container states over decaying histograms.

Upstream (kubernetes/autoscaler ``vertical-pod-autoscaler/pkg/recommender/model``):
``container.go`` keeps per container instance the last CPU sample time and the
memory peak of the current aggregation interval (24 h): within an interval only
its peak counts (a higher sample replaces it: subtract the old, add the new);
``aggregate_container_state.go`` adds CPU samples weighted by the container's
request (at least 0.1 core, so raising a request makes old history decay faster)
and memory peaks weighted 1, and counts CPU samples and their time span (the
recommendation's confidence); ``aggregations_config.go`` holds the constants;
``RecordOOM`` adds an artificial peak of max(used + 100 MiB, used * 1.2).

kemu aggregates per (VPA, container name) rather than per (namespace, container,
pod labels) and merges at recommendation time (a simplification listed in
docs/architecture.md: one VPA per pod, so the result is the same). Every state
is a row or slot in numpy arrays and :meth:`UsageModel.add_samples` takes one
batch per metrics window, so a pass over 10,000 containers is a handful of
vectorised operations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emulator.controllers.vpa.histogram import ExponentialOptions, HistogramBank

DAY = 86_400.0
MEMORY_AGGREGATION_INTERVAL = DAY  # DefaultMemoryAggregationInterval
MEMORY_AGGREGATION_INTERVAL_COUNT = 8  # DefaultMemoryAggregationIntervalCount
HALF_LIFE = DAY  # Default{CPU,Memory}HistogramDecayHalfLife
MIN_SAMPLE_WEIGHT = 0.1  # cores
EPSILON = 0.001 * MIN_SAMPLE_WEIGHT
OOM_BUMP_UP_RATIO = 1.2
OOM_MIN_BUMP_UP = 100 * 1024 * 1024  # bytes
BUCKET_GROWTH = 0.05
CPU_OPTIONS = ExponentialOptions(1000.0, 0.001, 1 + BUCKET_GROWTH, EPSILON)  # cores
MEMORY_OPTIONS = ExponentialOptions(1e12, 1e7, 1 + BUCKET_GROWTH, EPSILON)  # bytes


@dataclass(frozen=True, slots=True)
class Samples:
    """One batch: per container slot, the sample's start time, CPU cores, memory bytes and CPU request cores."""

    slots: np.ndarray
    times: np.ndarray
    cpu: np.ndarray
    memory: np.ndarray
    cpu_request: np.ndarray


class UsageModel:
    """Aggregates (rows) and container instances (slots); see the module docstring."""

    def __init__(self) -> None:
        self.cpu = HistogramBank(CPU_OPTIONS, HALF_LIFE)
        self.memory = HistogramBank(MEMORY_OPTIONS, HALF_LIFE)
        self._rows: dict[tuple[str, str], int] = {}
        self._by_vpa: dict[str, dict[str, int]] = {}  # vpa key -> container -> row
        self._free_rows: list[int] = []
        self.first_sample = np.zeros(self.cpu.capacity)
        self.last_sample = np.zeros(self.cpu.capacity)
        self.sample_count = np.zeros(self.cpu.capacity)
        self._slots: dict[tuple[str, str], int] = {}
        self._free_slots: list[int] = []
        cap = 64
        self.slot_row = np.full(cap, -1, dtype=np.int64)
        self.last_cpu = np.zeros(cap)
        self.last_memory = np.zeros(cap)
        self.window_end = np.zeros(cap)
        self.peak = np.zeros(cap)
        self.oom_peak = np.zeros(cap)

    # -------------------------------------------------------------- rows and slots
    def row(self, aggregate: tuple[str, str]) -> int:
        """The row of (vpa key, container name), created empty on first use."""
        r = self._rows.get(aggregate)
        if r is None:
            r = self._free_rows.pop() if self._free_rows else len(self._rows)
            self._rows[aggregate] = r
            self._by_vpa.setdefault(aggregate[0], {})[aggregate[1]] = r
            if r >= self.cpu.capacity:
                self.cpu.grow(r + 1)
                self.memory.grow(r + 1)
                extra = self.cpu.capacity - len(self.first_sample)
                self.first_sample, self.last_sample, self.sample_count = (
                    np.concatenate([a, np.zeros(extra)]) for a in (self.first_sample, self.last_sample,
                                                                    self.sample_count))
        return r

    def rows_of(self, vpa_key: str) -> dict[str, int]:
        """Container name -> row for every aggregate of ``vpa_key``."""
        return dict(self._by_vpa.get(vpa_key, {}))

    def vpa_keys(self) -> list[str]:
        return list(self._by_vpa)

    def _free_row(self, aggregate: tuple[str, str]) -> int:
        r = self._rows.pop(aggregate)
        rows = self._by_vpa.get(aggregate[0], {})
        rows.pop(aggregate[1], None)
        if not rows:
            self._by_vpa.pop(aggregate[0], None)
        self.cpu.clear(np.array([r]))
        self.memory.clear(np.array([r]))
        self.first_sample[r] = self.last_sample[r] = self.sample_count[r] = 0.0
        self._free_rows.append(r)
        return r

    def drop_vpa(self, vpa_key: str) -> None:
        freed = {self._free_row((vpa_key, c)) for c in list(self._by_vpa.get(vpa_key, {}))}
        for key in [k for k, s in self._slots.items() if int(self.slot_row[s]) in freed]:
            self.drop_container(key)

    def slot(self, container: tuple[str, str], row: int) -> int:
        """The slot of container instance (pod uid, container name), attached to aggregate ``row``."""
        s = self._slots.get(container)
        if s is None:
            s = self._free_slots.pop() if self._free_slots else len(self._slots)
            self._slots[container] = s
            if s >= len(self.slot_row):
                n = max(s + 1, 2 * len(self.slot_row))
                grow = n - len(self.slot_row)
                self.slot_row = np.concatenate([self.slot_row, np.full(grow, -1, dtype=np.int64)])
                self.last_cpu, self.last_memory, self.window_end, self.peak, self.oom_peak = (
                    np.concatenate([a, np.zeros(grow)]) for a in (self.last_cpu, self.last_memory,
                                                                  self.window_end, self.peak, self.oom_peak))
            self.last_cpu[s] = self.last_memory[s] = self.window_end[s] = self.peak[s] = self.oom_peak[s] = 0.0
        self.slot_row[s] = row
        return s

    def drop_container(self, container: tuple[str, str]) -> None:
        s = self._slots.pop(container, None)
        if s is not None:
            self.slot_row[s] = -1
            self._free_slots.append(s)

    def containers(self) -> list[tuple[str, str]]:
        return list(self._slots)

    # -------------------------------------------------------------- samples
    def add_samples(self, batch: Samples) -> None:
        """``ContainerState.AddSample`` for a batch with at most one sample per slot."""
        s, t = batch.slots, batch.times
        if len(s) == 0:
            return
        rows = self.slot_row[s]
        # CPU: discard invalid, duplicate or out-of-order samples.
        ok = (batch.cpu >= 0) & (t > self.last_cpu[s]) & (rows >= 0)
        if ok.any():
            r, tt = rows[ok], t[ok]
            self.cpu.add(r, batch.cpu[ok], np.maximum(batch.cpu_request[ok], MIN_SAMPLE_WEIGHT), tt)
            self.last_cpu[s[ok]] = tt
            np.maximum.at(self.last_sample, r, tt)
            first = self.first_sample[r]
            self.first_sample[r] = np.where(first == 0, tt, np.minimum(first, tt))
            np.minimum.at(self.first_sample, r, tt)
            np.add.at(self.sample_count, r, 1.0)
        ok = (batch.memory >= 0) & (t >= self.last_memory[s]) & (rows >= 0)
        self._add_memory(s[ok], t[ok], batch.memory[ok], oom=False)

    def _add_memory(self, s: np.ndarray, t: np.ndarray, usage: np.ndarray, *, oom: bool) -> None:
        if len(s) == 0:
            return
        rows = self.slot_row[s]
        self.last_memory[s] = t
        first = self.window_end[s] == 0
        self.window_end[s[first]] = t[first]
        end = self.window_end[s]
        in_window = t < end
        old = np.maximum(self.peak[s], self.oom_peak[s])
        bump = in_window & (old != 0) & (usage > old)
        # Within the interval a higher peak replaces the old one: subtract it, add the new below.
        self.memory.subtract(rows[bump], old[bump], np.ones(int(bump.sum())), end[bump])
        shift = ~in_window
        if shift.any():
            ss = s[shift]
            steps = np.floor((t[shift] - self.window_end[ss]) / MEMORY_AGGREGATION_INTERVAL)
            self.window_end[ss] += steps * MEMORY_AGGREGATION_INTERVAL + MEMORY_AGGREGATION_INTERVAL
            self.peak[ss] = 0.0
            self.oom_peak[ss] = 0.0
        add = bump | shift
        sa = s[add]
        self.memory.add(rows[add], usage[add], np.ones(len(sa)), self.window_end[sa])
        if oom:
            self.oom_peak[sa] = usage[add]
        else:
            self.peak[sa] = usage[add]

    def record_oom(self, container: tuple[str, str], time: float, request_bytes: float) -> bool:
        """``RecordOOM``: an artificial memory peak after an OOM kill; False when too old or unknown."""
        s = self._slots.get(container)
        if s is None or time < self.window_end[s] - MEMORY_AGGREGATION_INTERVAL:
            return False
        used = max(request_bytes, float(self.peak[s]))
        needed = max(used + OOM_MIN_BUMP_UP, used * OOM_BUMP_UP_RATIO)
        self._add_memory(np.array([s]), np.array([time]), np.array([needed]), oom=True)
        return True

    def expire(self, now: float) -> None:
        """Forget aggregates with no CPU sample for the memory aggregation window (``isExpired``)."""
        window = MEMORY_AGGREGATION_INTERVAL * MEMORY_AGGREGATION_INTERVAL_COUNT
        for aggregate, r in list(self._rows.items()):
            if self.last_sample[r] and now - self.last_sample[r] >= window:
                self._free_row(aggregate)
