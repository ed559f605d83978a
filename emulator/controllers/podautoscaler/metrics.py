"""HPA controller metrics (upstream ``podautoscaler/monitor/metrics.go``) and kube-state-metrics HPA series.

Controller metrics, upstream names and labels (subsystem
``horizontal_pod_autoscaler_controller``):

* ``..._reconciliations_total{action,error}`` and ``..._reconciliation_duration_seconds``
  (buckets 1 ms doubling 15 times): ``action`` is ``scale_up``/``scale_down``/``none``,
  ``error`` ``spec``/``internal``/``none`` (an error reports action ``none``);
* ``..._metric_computation_total{action,error,metric_type}`` and
  ``..._metric_computation_duration_seconds``: one per metric spec per reconcile,
  ``metric_type`` the spec's ``type``;
* ``..._num_horizontal_pod_autoscalers`` and ``..._desired_replicas{namespace,hpa_name}``.

State series, kube-state-metrics' names and labels (``namespace``,
``horizontalpodautoscaler``), computed at scrape time from the leading controller's
HPA cache: ``kube_horizontalpodautoscaler_status_desired_replicas``,
``..._status_current_replicas``, ``..._spec_max_replicas``, ``..._spec_min_replicas``, and per
metric (labels ``metric_name``, ``metric_target_type`` = ``value``/``utilization``/``average``)
``kube_horizontalpodautoscaler_spec_target_metric`` (the spec's target) and
``kube_horizontalpodautoscaler_status_target_metric`` (``status.currentMetrics``), as
kube-state-metrics' ``internal/store/hpa.go`` exports them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from emulator.api.quantity import parse_quantity
from emulator.collectors import SourceCollector, registered

_SUBSYSTEM = "horizontal_pod_autoscaler_controller"
_BUCKETS = tuple(0.001 * 2**i for i in range(15))  # metrics.ExponentialBuckets(0.001, 2, 15)
_LABELS_DOC = ("The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' "
               "should be either 'spec', 'internal', or 'none'.")

ACTION_SCALE_UP = "scale_up"
ACTION_SCALE_DOWN = "scale_down"
ACTION_NONE = "none"
ERROR_SPEC = "spec"
ERROR_INTERNAL = "internal"
ERROR_NONE = "none"

RECONCILIATIONS = Counter(f"{_SUBSYSTEM}_reconciliations", "Number of reconciliations of HPA controller. "
                          + _LABELS_DOC, ["action", "error"])
RECONCILIATION_DURATION = Histogram(f"{_SUBSYSTEM}_reconciliation_duration_seconds",
                                    "The time(seconds) that the HPA controller takes to reconcile once. " + _LABELS_DOC,
                                    ["action", "error"], buckets=_BUCKETS)
METRIC_COMPUTATIONS = Counter(f"{_SUBSYSTEM}_metric_computation", "Number of metric computations. " + _LABELS_DOC
                              + " The label 'metric_type' corresponds to HPA.spec.metrics[*].type",
                              ["action", "error", "metric_type"])
METRIC_COMPUTATION_DURATION = Histogram(f"{_SUBSYSTEM}_metric_computation_duration_seconds",
                                        "The time(seconds) that the HPA controller takes to calculate one metric. "
                                        + _LABELS_DOC, ["action", "error", "metric_type"], buckets=_BUCKETS)
NUM_HPAS = Gauge(f"{_SUBSYSTEM}_num_horizontal_pod_autoscalers", "Current number of controlled HPA objects.")
DESIRED_REPLICAS = Gauge(f"{_SUBSYSTEM}_desired_replicas", "Current desired replica count for HPA objects.",
                         ["namespace", "hpa_name"])


def observe_reconciliation(action: str, error: str, seconds: float) -> None:
    RECONCILIATIONS.labels(action, error).inc()
    RECONCILIATION_DURATION.labels(action, error).observe(seconds)


def observe_metric_computation(action: str, error: str, seconds: float, metric_type: str) -> None:
    METRIC_COMPUTATIONS.labels(action, error, metric_type).inc()
    METRIC_COMPUTATION_DURATION.labels(action, error, metric_type).observe(seconds)


# ----------------------------------------------------------------------------- kube-state-metrics series


class HPASource(Protocol):
    def hpa_objects(self) -> list[dict[str, Any]] | None:
        """The cached HPAs (None: caches not synced / not running)."""
        ...


_STATE = (
    ("kube_horizontalpodautoscaler_spec_max_replicas",
     "Upper limit for the number of pods that can be set by the autoscaler; cannot be smaller than MinReplicas.",
     lambda h: (h.get("spec") or {}).get("maxReplicas")),
    ("kube_horizontalpodautoscaler_spec_min_replicas",
     "Lower limit for the number of pods that can be set by the autoscaler, default 1.",
     lambda h: (h.get("spec") or {}).get("minReplicas", 1)),
    ("kube_horizontalpodautoscaler_status_current_replicas",
     "Current number of replicas of pods managed by this autoscaler.",
     lambda h: (h.get("status") or {}).get("currentReplicas", 0)),
    ("kube_horizontalpodautoscaler_status_desired_replicas",
     "Desired number of replicas of pods managed by this autoscaler.",
     lambda h: (h.get("status") or {}).get("desiredReplicas", 0)),
)


_TARGET_TYPES = (("value", "value"), ("averageUtilization", "utilization"), ("averageValue", "average"))
TARGET_METRICS = (
    ("kube_horizontalpodautoscaler_spec_target_metric",
     "The metric specifications used by this autoscaler when calculating the desired replica count.", "target"),
    ("kube_horizontalpodautoscaler_status_target_metric",
     "The current metric status used by this autoscaler when calculating the desired replica count.", "current"),
)


def _metric_name(entry: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(metric name, its source) of a spec.metrics[] / status.currentMetrics[] entry."""
    kind = entry.get("type") or ""
    source = entry.get(kind[:1].lower() + kind[1:]) or {}
    if kind in ("Resource", "ContainerResource"):
        return str(source.get("name") or ""), source
    return str((source.get("metric") or {}).get("name") or ""), source


def target_series(hpas: list[dict[str, Any]]) -> dict[str, list[tuple[list[str], float]]]:
    """kube-state-metrics' spec/status target metrics: name -> [(namespace, hpa, metric_name, type), value]."""
    out: dict[str, list[tuple[list[str], float]]] = {name: [] for name, _, _ in TARGET_METRICS}
    for hpa in hpas:
        meta = hpa.get("metadata") or {}
        for name, _, part in TARGET_METRICS:
            entries = (hpa.get("spec") or {}).get("metrics") if part == "target" else \
                (hpa.get("status") or {}).get("currentMetrics")
            for entry in entries or []:
                metric, source = _metric_name(entry)
                values = source.get(part) or {}
                for field_name, target_type in _TARGET_TYPES:
                    raw = values.get(field_name)
                    if raw is None:
                        continue
                    try:
                        value = float(raw) if field_name == "averageUtilization" else \
                            parse_quantity(raw).milli_value() / 1000.0
                    except (TypeError, ValueError):
                        continue
                    out[name].append(([meta.get("namespace") or "", meta.get("name") or "", metric, target_type],
                                      value))
    return out


def state_series(hpas: list[dict[str, Any]]) -> dict[str, dict[tuple[str, str], float]]:
    """Metric name -> (namespace, horizontalpodautoscaler) -> value, as kube-state-metrics exports them."""
    out: dict[str, dict[tuple[str, str], float]] = {name: {} for name, _, _ in _STATE}
    for hpa in hpas:
        meta = hpa.get("metadata") or {}
        labels = (meta.get("namespace") or "", meta.get("name") or "")
        for name, _, value_of in _STATE:
            value = value_of(hpa)
            if isinstance(value, int | float):
                out[name][labels] = float(value)
    return out


class HPAStateCollector(SourceCollector):
    """Exports :func:`state_series` over the first running HPA controller of the process."""

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        for source in self.sources():
            hpas = source.hpa_objects()
            if hpas is None:
                continue
            series = state_series(hpas)
            for name, text, _ in _STATE:
                family = GaugeMetricFamily(name, text, labels=["namespace", "horizontalpodautoscaler"])
                for labels, value in series[name].items():
                    family.add_metric(list(labels), value)
                yield family
            targets = target_series(hpas)
            for name, text, _part in TARGET_METRICS:
                family = GaugeMetricFamily(name, text, labels=["namespace", "horizontalpodautoscaler", "metric_name",
                                                              "metric_target_type"])
                for label_values, value in targets[name]:
                    family.add_metric(label_values, value)
                yield family
            return


def state_collector() -> HPAStateCollector:
    """The process's collector, registered in the default registry on first use."""
    return registered(HPAStateCollector)
