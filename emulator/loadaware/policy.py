"""The dynamic scheduler's policy and node-load annotations: filter and score on measured load.

Semantics of gocrane/crane-scheduler (``pkg/plugins/dynamic/plugins.go`` and
``stats.go``, the ``DynamicSchedulerPolicy`` of ``deploy/manifests/policy.yaml``),
our own Python:

* **Annotations.** The node annotator writes, per node, one annotation per
  metric -- ``cpu_usage_avg_5m``, ``cpu_usage_max_avg_1h``,
  ``cpu_usage_max_avg_1d``, ``mem_usage_avg_5m``, ``mem_usage_max_avg_1h``,
  ``mem_usage_max_avg_1d`` -- whose value is ``"<utilization>,<sample time>"``
  (utilization a fraction, ``0.35210``; the time RFC 3339 UTC), and
  ``node_hot_value`` = ``"<n>,<time>"``.
* **Freshness.** A metric's annotation counts only while
  ``sample time + syncPolicy period + extraActivePeriod (5m)`` is in the
  future (``maxAnnotationAge``, when set, replaces that age for every
  metric); the hot value for 5 minutes. A stale, missing or malformed
  annotation is *ignored*, never trusted: it neither filters the node out nor
  adds to its score.
* **Filter** (``predicate``): a node is rejected when a fresh metric exceeds
  its ``maxLimitPecent`` (sic, crane's field name; a fraction; 0 disables
  the check) -- ``Load[<metric>] of node is too high`` (crane names the node
  too; here one reason covers every node it rejects).
* **Score** (``priority``): ``sum((1 - usage) * weight * 100) / sum(weight)``
  truncated to an integer (a stale metric contributes 0 but its weight still
  counts), minus ``int(hotValue * hotValuePenalty)`` (10), clamped to 0..100.
* **Hot value** (``hotValue``): ``sum(bindings in the last timeRange // count)``
  over the rules -- a node that just took many pods looks busier than its
  (lagging) usage says, so a burst does not all land on one new, empty node.

Everything is vectorised over nodes (:class:`NodeLoads`: one row per node,
parsed once per node set); the per-node forms evaluate a one-node table, so
both give identical numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

__all__ = [
    "HOT_VALUE",
    "METRICS",
    "HotValueRule",
    "NodeLoads",
    "Policy",
    "format_value",
    "overload_reason",
    "parse_value",
]

CPU_AVG_5M = "cpu_usage_avg_5m"
CPU_MAX_1H = "cpu_usage_max_avg_1h"
CPU_MAX_1D = "cpu_usage_max_avg_1d"
MEM_AVG_5M = "mem_usage_avg_5m"
MEM_MAX_1H = "mem_usage_max_avg_1h"
MEM_MAX_1D = "mem_usage_max_avg_1d"
METRICS: tuple[str, ...] = (CPU_AVG_5M, CPU_MAX_1H, CPU_MAX_1D, MEM_AVG_5M, MEM_MAX_1H, MEM_MAX_1D)
HOT_VALUE = "node_hot_value"
_COLUMN = {name: i for i, name in enumerate(METRICS)}

MAX_NODE_SCORE = 100  # framework.MaxNodeScore

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d)")
_UNIT = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: Any) -> float:
    """A Go duration (``3m``, ``1h30m``; ``d`` accepted too) or a number of seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    pos, total = 0, 0.0
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if match is None:
            raise ValueError(f'invalid duration "{value}"')
        total += float(match.group(1)) * _UNIT[match.group(2)]
        pos = match.end()
    if not text:
        raise ValueError('invalid duration ""')
    return total


def format_time(ts: float) -> str:
    return datetime.fromtimestamp(int(ts), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_value(value: float, ts: float, *, integer: bool = False) -> str:
    """An annotation value: ``"0.35210,2026-01-02T03:04:05Z"`` (the hot value as an integer)."""
    return f"{int(value)},{format_time(ts)}" if integer else f"{value:.5f},{format_time(ts)}"


def parse_value(text: str | None) -> tuple[float, float] | None:
    """(value, sample time) of an annotation value; None when absent, malformed or negative (crane: illegal)."""
    if not text:
        return None
    parts = text.split(",")
    if len(parts) != 2 or len(parts[1]) < 5:
        return None
    try:
        value = float(parts[0])
        ts = datetime.fromisoformat(parts[1].strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    if value < 0 or math.isnan(value):
        return None
    return value, ts


@dataclass(frozen=True, eq=False)
class NodeLoads:
    """The load annotations of a list of nodes as arrays (row ``i`` is node ``i``).

    ``values``/``stamps``: (nodes, :data:`METRICS`) float64, NaN / -inf where a
    metric's annotation is absent or malformed; ``hot``/``hot_stamp``: the hot value.
    """

    values: np.ndarray
    stamps: np.ndarray
    hot: np.ndarray
    hot_stamp: np.ndarray

    @classmethod
    def parse(cls, annotations: Sequence[Mapping[str, str] | None]) -> NodeLoads:
        n = len(annotations)
        values = np.full((n, len(METRICS)), np.nan)
        stamps = np.full((n, len(METRICS)), -np.inf)
        hot = np.zeros(n)
        hot_stamp = np.full(n, -np.inf)
        stamp_of: dict[str, float | None] = {}  # one pass stamps every node alike: parse each time once

        def parse(text: str) -> tuple[float, float] | None:
            head, _, tail = text.partition(",")
            if tail not in stamp_of:
                got = parse_value("0," + tail)
                stamp_of[tail] = None if got is None else got[1]
            stamp = stamp_of[tail]
            if stamp is None:
                return None
            try:
                value = float(head)
            except ValueError:
                return None
            return None if value < 0 or math.isnan(value) else (value, stamp)

        for i, anno in enumerate(annotations):
            if not anno:
                continue
            for j, name in enumerate(METRICS):
                text = anno.get(name)
                parsed = parse(text) if text else None
                if parsed is not None:
                    values[i, j], stamps[i, j] = parsed
            text = anno.get(HOT_VALUE)
            parsed = parse(text) if text else None
            if parsed is not None:
                hot[i], hot_stamp[i] = parsed
        return cls(values, stamps, hot, hot_stamp)

    def __len__(self) -> int:
        return len(self.hot)

    def column(self, metric: str) -> np.ndarray:
        return self.values[:, _COLUMN[metric]]

    def take(self, rows: np.ndarray) -> NodeLoads:
        return NodeLoads(self.values[rows], self.stamps[rows], self.hot[rows], self.hot_stamp[rows])


@dataclass(frozen=True)
class HotValueRule:
    """``hotValue[]``: every ``count`` bindings in the last ``time_range`` seconds add 1 to the hot value."""

    time_range: float
    count: int


def _named_list(raw: Any, what: str, key: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in raw or []:
        name = item.get("name")
        if name not in _COLUMN:
            raise ValueError(f"{what}: unknown metric {name!r}; known: {', '.join(METRICS)}")
        value = item.get(key)
        out[name] = parse_duration(value) if key == "period" else float(value)
        if out[name] < 0:
            raise ValueError(f"{what}[{name}].{key}: must be >= 0")
    return out


@dataclass(frozen=True)
class Policy:
    """A ``DynamicSchedulerPolicy`` spec; the defaults are crane's default policy plus a 30-minute hot-value rule."""

    sync_periods: Mapping[str, float] = field(default_factory=lambda: {
        CPU_AVG_5M: 180.0, CPU_MAX_1H: 900.0, CPU_MAX_1D: 10800.0,
        MEM_AVG_5M: 180.0, MEM_MAX_1H: 900.0, MEM_MAX_1D: 10800.0})
    predicates: Mapping[str, float] = field(default_factory=lambda: {
        CPU_AVG_5M: 0.65, CPU_MAX_1H: 0.75, MEM_AVG_5M: 0.65, MEM_MAX_1H: 0.75})
    priorities: Mapping[str, float] = field(default_factory=lambda: {
        CPU_AVG_5M: 0.2, CPU_MAX_1H: 0.3, CPU_MAX_1D: 0.5, MEM_AVG_5M: 0.2, MEM_MAX_1H: 0.3, MEM_MAX_1D: 0.5})
    hot_value: tuple[HotValueRule, ...] = (HotValueRule(60.0, 2), HotValueRule(300.0, 5), HotValueRule(1800.0, 30))
    extra_active_period: float = 300.0  # crane ExtraActivePeriod
    hot_value_active_period: float = 300.0  # crane DefautlHotVauleActivePeriod
    hot_value_penalty: float = 10.0  # score -= int(hotValue * 10)
    max_annotation_age: float | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> Policy:
        """From a policy's ``spec`` (or a whole ``DynamicSchedulerPolicy``, or plugin args holding one)."""
        if not raw:
            return cls()
        spec = raw.get("spec", raw)
        known = {"syncPolicy", "predicate", "priority", "hotValue", "extraActivePeriod", "hotValueActivePeriod",
                 "hotValuePenalty", "maxAnnotationAge"}
        unknown = set(spec) - known
        if unknown:
            raise ValueError(f"unknown policy fields {sorted(unknown)}; known: {sorted(known)}")
        base = cls()
        rules = tuple(HotValueRule(parse_duration(r["timeRange"]), int(r["count"])) for r in spec.get("hotValue") or [])
        if any(r.count <= 0 for r in rules):
            raise ValueError("hotValue[].count: must be > 0")
        age = spec.get("maxAnnotationAge")
        return cls(
            sync_periods=_named_list(spec["syncPolicy"], "syncPolicy", "period") if "syncPolicy" in spec
            else base.sync_periods,
            predicates=_named_list(spec["predicate"], "predicate", "maxLimitPecent") if "predicate" in spec
            else base.predicates,
            priorities=_named_list(spec["priority"], "priority", "weight") if "priority" in spec
            else base.priorities,
            hot_value=rules if "hotValue" in spec else base.hot_value,
            extra_active_period=parse_duration(spec.get("extraActivePeriod", base.extra_active_period)),
            hot_value_active_period=parse_duration(spec.get("hotValueActivePeriod", base.hot_value_active_period)),
            hot_value_penalty=float(spec.get("hotValuePenalty", base.hot_value_penalty)),
            max_annotation_age=None if age is None else parse_duration(age))

    # ------------------------------------------------------------------ freshness
    def active_duration(self, metric: str) -> float:
        """How long an annotation of ``metric`` counts (0: never -- crane needs a syncPolicy entry)."""
        if self.max_annotation_age is not None:
            return self.max_annotation_age
        period = self.sync_periods.get(metric, 0.0)
        return period + self.extra_active_period if period else 0.0

    def _active(self) -> np.ndarray:
        return np.array([self.active_duration(m) for m in METRICS])

    def fresh(self, loads: NodeLoads, now: float) -> np.ndarray:
        """(nodes, metrics) bool: present, well-formed and ``now`` before sample time + active duration."""
        active = self._active()
        return (loads.stamps + active > now) & (active > 0) & ~np.isnan(loads.values)

    def hot_values(self, loads: NodeLoads, now: float, local: np.ndarray | None = None) -> np.ndarray:
        """The hot value per node: the fresh annotation, or ``local`` (the caller's own bindings) if higher."""
        hot = np.where(loads.hot_stamp + self.hot_value_active_period > now, loads.hot, 0.0)
        return hot if local is None else np.maximum(hot, local)

    def hot_value_of(self, counts: Sequence[int]) -> int:
        """``sum(count_in_range // rule.count)``; ``counts`` aligned with :attr:`hot_value`."""
        return sum(int(c) // rule.count for c, rule in zip(counts, self.hot_value, strict=True))

    @property
    def hot_value_horizon(self) -> float:
        return max((r.time_range for r in self.hot_value), default=0.0)

    # ------------------------------------------------------------------ filter
    def overloaded(self, loads: NodeLoads, now: float) -> list[tuple[str, np.ndarray]]:
        """Per predicate metric (in policy order): the nodes whose fresh value exceeds its limit."""
        fresh = self.fresh(loads, now)
        out = []
        for metric, limit in self.predicates.items():
            if limit == 0:
                continue  # crane: a threshold of 0 switches the check off
            j = _COLUMN[metric]
            with np.errstate(invalid="ignore"):
                over = fresh[:, j] & (loads.values[:, j] > limit)
            out.append((metric, over))
        return out

    def first_overload(self, annotations: Mapping[str, str] | None, now: float) -> str | None:
        """The per-node filter: the first metric over its limit, or None (passes)."""
        loads = NodeLoads.parse([annotations])
        for metric, over in self.overloaded(loads, now):
            if over[0]:
                return metric
        return None

    # ------------------------------------------------------------------ score
    def scores(self, loads: NodeLoads, now: float, local_hot: np.ndarray | None = None) -> np.ndarray:
        """int64 per node: the weighted free share of the priority metrics, minus the hot-value penalty."""
        n = len(loads)
        weight = sum(self.priorities.values())
        if not self.priorities or weight <= 0:
            return np.zeros(n, dtype=np.int64)
        fresh = self.fresh(loads, now)
        total = np.zeros(n)
        for metric, w in self.priorities.items():
            j = _COLUMN[metric]
            total += np.where(fresh[:, j], (1.0 - np.nan_to_num(loads.values[:, j])) * w * MAX_NODE_SCORE, 0.0)
        score = np.trunc(total / weight).astype(np.int64)
        penalty = np.trunc(self.hot_values(loads, now, local_hot) * self.hot_value_penalty).astype(np.int64)
        return np.clip(score - penalty, 0, MAX_NODE_SCORE)

    def score_of(self, annotations: Mapping[str, str] | None, now: float, local_hot: float = 0.0) -> int:
        return int(self.scores(NodeLoads.parse([annotations]), now, np.array([local_hot]))[0])


def overload_reason(metric: str) -> str:
    """crane's filter message, without the node's name (one reason covers every node it rejects)."""
    return f"Load[{metric}] of node is too high"
