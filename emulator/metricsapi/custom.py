"""The custom and external halves of the autoscalers' ``MetricsClient``, read through the metrics adapter.

Upstream ``pkg/controller/podautoscaler/metrics/client.go``:
``customMetricsClient`` (``GetRawMetric``: ``pods/*/<metric>`` over the
HPA's selector; ``GetObjectMetric``: one object's metric, a Namespace read
root-scoped) and ``externalMetricsClient`` (``GetExternalMetric``). Both go
through the aggregated APIs; kemu's read the same
:class:`~emulator.metricsapi.adapter.MetricsAdapter` calls the API server
answers ``kubectl get --raw`` with, so values, timestamps and windows are
identical. Values come back as the API's quantities read with
``MilliValue()`` (the adapter's :attr:`MetricValue.milli`). Failures are
:class:`~emulator.metricsapi.client.MetricsUnavailable` with upstream's
messages ("unable to fetch metrics from custom metrics API: ...", "no
metrics returned from custom metrics API").

``resource_metric`` (``metrics.k8s.io``) is delegated to a resource reader
given at construction (:mod:`emulator.metricsapi.resource`), so one object
satisfies the whole :class:`~emulator.metricsapi.client.MetricsClient` protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from emulator.api import errors, kinds
from emulator.api.selectors import LabelSelector
from emulator.metricsapi.adapter import MetricsAdapter, MetricValue
from emulator.metricsapi.client import MetricsUnavailable, ObjectReference, PodMetric, PodMetricsInfo
from emulator.store.store import Store

__all__ = ["DEFAULT_WINDOW", "CustomMetricsClient", "metrics_client"]

# metricServerDefaultMetricWindow: the window of a value the API gives none for.
DEFAULT_WINDOW = 60.0


class ResourceMetrics(Protocol):
    def resource_metric(self, resource: str, namespace: str, selector: LabelSelector,
                        container: str = "") -> tuple[PodMetricsInfo, float]: ...


def _kind_of(obj: ObjectReference) -> kinds.Kind:
    group = obj.api_version.rpartition("/")[0] if "/" in obj.api_version else ""
    for kind in kinds.all_kinds():
        if kind.group == group and kind.kind == obj.kind:
            return kind
    raise MetricsUnavailable(f"unable to fetch metrics from custom metrics API: no resource for kind {obj.kind} "
                             f"in group {group or 'core'}")


class CustomMetricsClient:
    """``MetricsClient`` over a :class:`MetricsAdapter` (custom, external) and a resource reader (resource)."""

    def __init__(self, adapter: MetricsAdapter, resources: ResourceMetrics | None = None) -> None:
        self.adapter = adapter
        self.resources = resources

    def resource_metric(self, resource: str, namespace: str, selector: LabelSelector,
                        container: str = "") -> tuple[PodMetricsInfo, float]:
        if self.resources is None:
            raise MetricsUnavailable("unable to get metrics for resource "
                                     f"{resource}: no resource metrics reader configured")
        return self.resources.resource_metric(resource, namespace, selector, container)

    def pod_metric(self, metric: str, namespace: str, selector: LabelSelector,
                   metric_selector: LabelSelector | None = None) -> tuple[PodMetricsInfo, float]:
        try:
            _, values = self.adapter.object_values("pods", namespace, "*", metric, selector=selector,
                                                   metric_selector=metric_selector)
        except errors.StatusError as e:
            raise MetricsUnavailable(f"unable to fetch metrics from custom metrics API: {e.message}") from None
        if not values:
            raise MetricsUnavailable("no metrics returned from custom metrics API")
        info = {v.name: PodMetric(v.timestamp, v.window if v.window is not None else DEFAULT_WINDOW, v.milli)
                for v in values}
        return info, values[0].timestamp

    def object_metric(self, metric: str, namespace: str, obj: ObjectReference,
                      metric_selector: LabelSelector | None = None) -> tuple[int, float]:
        try:
            if obj.kind == "Namespace" and "/" not in obj.api_version:
                # Upstream reads a Namespace root-scoped, by the HPA's own namespace (not obj.name).
                _, values = self.adapter.object_values("namespaces", None, namespace, metric,
                                                       metric_selector=metric_selector)
            else:
                kind = _kind_of(obj)
                _, values = self.adapter.object_values(kind.resource, namespace, obj.name, metric,
                                                       metric_selector=metric_selector)
        except errors.StatusError as e:
            raise MetricsUnavailable(f"unable to fetch metrics from custom metrics API: {e.message}") from None
        value: MetricValue = values[0]
        return value.milli, value.timestamp

    def external_metric(self, metric: str, namespace: str,
                        selector: LabelSelector | None = None) -> tuple[list[int], float]:
        try:
            values = self.adapter.external_values(namespace, metric, selector)
        except errors.StatusError as e:
            raise MetricsUnavailable(f"unable to fetch metrics from external metrics API: {e.message}") from None
        if not values:
            raise MetricsUnavailable("no metrics returned from external metrics API")
        return [v.milli for v in values], values[0].timestamp


def metrics_client(store: Store, now: Callable[[], float], *, rules_path: str | None = None,
                   prometheus_url: str | None = None, resources: ResourceMetrics | None = None) -> CustomMetricsClient:
    """The whole ``MetricsClient`` a controller manager hands its autoscalers.

    ``rules_path`` / ``prometheus_url`` as the API server's (config ``metrics_rules``,
    ``prometheus_url``), ``now`` the cluster clock, ``resources`` the ``metrics.k8s.io`` reader.
    """
    return CustomMetricsClient(MetricsAdapter.build(store, rules_path, prometheus_url, now), resources)
