"""``LowNodeUtilizationArgs`` and ``HighNodeUtilizationArgs``: types, defaults, validation.

Upstream ``nodeutilization/types.go``, ``defaults.go``, ``validation.go``:
thresholds are percentages in [0, 100] per resource (``cpu``, ``memory``,
``pods`` or an extended resource); LowNodeUtilization's ``thresholds`` and
``targetThresholds`` must name the same resources and, unless
``useDeviationThresholds``, no threshold may exceed its target;
``evictableNamespaces`` may only *exclude*; ``numberOfNodes`` >= 0;
``evictionLimits.node`` caps evictions per node for this plugin.
``metricsUtilization`` (``source: KubernetesMetrics``, or the older
``metricsServer: true``) switches from requests to actual usage read from
``metrics.k8s.io``; kemu has no Prometheus source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from emulator.descheduler.api import ArgsReader, Namespaces, PolicyError

MIN_PERCENT, MAX_PERCENT = 0.0, 100.0
KUBERNETES_METRICS = "KubernetesMetrics"


@dataclass(frozen=True)
class LowNodeUtilizationArgs:
    thresholds: Mapping[str, float] = field(default_factory=dict)
    target_thresholds: Mapping[str, float] = field(default_factory=dict)
    use_deviation_thresholds: bool = False
    number_of_nodes: int = 0
    actual_usage: bool = False  # metricsUtilization from metrics.k8s.io
    evictable_namespaces: Namespaces | None = None
    max_evictions_per_node: int | None = None  # evictionLimits.node


@dataclass(frozen=True)
class HighNodeUtilizationArgs:
    thresholds: Mapping[str, float] = field(default_factory=dict)
    number_of_nodes: int = 0
    actual_usage: bool = False
    evictable_namespaces: Namespaces | None = None
    max_evictions_per_node: int | None = None


def _thresholds(r: ArgsReader, name: str) -> dict[str, float]:
    raw = r.raw.get(name)
    path = r.field(name)
    if raw is None or (isinstance(raw, Mapping) and not raw):
        raise PolicyError(path, "no resource threshold is configured", kind="Required value")
    if not isinstance(raw, Mapping):
        raise PolicyError(path, "must map resource names to percentages", raw)
    out = {}
    for resource, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PolicyError(f"{path}.{resource}", "must be a number", value)
        if not MIN_PERCENT <= value <= MAX_PERCENT:
            raise PolicyError(f"{path}.{resource}", f"{resource} threshold not in [0, 100] range", value)
        out[str(resource)] = float(value)
    return out


def _actual_usage(r: ArgsReader) -> bool:
    raw = r.raw.get("metricsUtilization")
    if raw is None:
        return False
    m = ArgsReader(raw, r.field("metricsUtilization"), ("metricsServer", "source", "prometheus"))
    source = m.str("source")
    if source == "Prometheus" or m.raw.get("prometheus"):
        raise PolicyError(m.field("source"), "kemu serves usage through metrics.k8s.io only; use KubernetesMetrics",
                          source or "Prometheus", kind="Unsupported value")
    if source and source != KUBERNETES_METRICS:
        raise PolicyError(m.field("source"), "unrecognized metrics source", source, kind="Unsupported value")
    return m.bool("metricsServer") or source == KUBERNETES_METRICS


def _common(r: ArgsReader) -> tuple[int, bool, Namespaces | None, int | None]:
    ns = r.namespaces("evictableNamespaces")
    if ns is not None and ns.include:
        raise PolicyError(r.field("evictableNamespaces.include"),
                          "only Exclude namespaces can be set, inclusion is not supported", kind="Forbidden")
    limit = None
    if r.raw.get("evictionLimits") is not None:
        limit = ArgsReader(r.raw["evictionLimits"], r.field("evictionLimits"), ("node",)).int("node", minimum=0)
    return r.int("numberOfNodes", 0, minimum=0) or 0, _actual_usage(r), ns, limit


def parse_low_args(raw: Any, path: str) -> LowNodeUtilizationArgs:
    r = ArgsReader(raw, path, ("thresholds", "targetThresholds", "useDeviationThresholds", "numberOfNodes",
                               "metricsUtilization", "evictableNamespaces", "evictionLimits"))
    low, high = _thresholds(r, "thresholds"), _thresholds(r, "targetThresholds")
    deviation = r.bool("useDeviationThresholds")
    if set(low) != set(high):
        raise PolicyError(r.field("targetThresholds"), "thresholds and targetThresholds configured different "
                          "resources", sorted(high))
    for resource, value in low.items():
        if value > high[resource] and not deviation:
            raise PolicyError(r.field(f"thresholds.{resource}"),
                              f"thresholds' {resource} percentage is greater than targetThresholds'", value)
    number, actual, ns, limit = _common(r)
    return LowNodeUtilizationArgs(low, high, deviation, number, actual, ns, limit)


def parse_high_args(raw: Any, path: str) -> HighNodeUtilizationArgs:
    r = ArgsReader(raw, path, ("thresholds", "numberOfNodes", "metricsUtilization", "evictableNamespaces",
                               "evictionLimits"))
    thresholds = _thresholds(r, "thresholds")
    number, actual, ns, limit = _common(r)
    return HighNodeUtilizationArgs(thresholds, number, actual, ns, limit)
