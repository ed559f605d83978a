"""The seam between the autoscaling controllers and the metrics APIs.

Mirrors upstream's ``MetricsClient`` (kubernetes
``pkg/controller/podautoscaler/metrics/interfaces.go``): four reads, one per
metric source type of ``autoscaling/v2``. Values are integers in milli-units,
as upstream carries ``MilliValue()`` (CPU in millicores, memory in
milli-bytes, a requests/s rate of 12.5 as 12500), so the replica calculator
does exact integer arithmetic. A read that cannot be answered raises
:class:`MetricsUnavailable`; the controller turns it into the upstream
condition (``ScalingActive=False``, ``FailedGetResourceMetric`` ...) and
event, it is never a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from emulator.api.selectors import LabelSelector


@dataclass(frozen=True, slots=True)
class PodMetric:
    """One pod's sample: when it was taken, over which window, and its value in milli-units."""

    timestamp: float  # cluster time, seconds since the epoch
    window: float  # seconds the sample averages over
    value: int  # milli-units


# Pod name -> its sample (upstream ``PodMetricsInfo``).
PodMetricsInfo = dict[str, PodMetric]


@dataclass(frozen=True, slots=True)
class ObjectReference:
    """``autoscaling/v2`` ``CrossVersionObjectReference``: the object an Object metric describes."""

    kind: str
    name: str
    api_version: str = ""


class MetricsUnavailable(Exception):
    """The metrics API could not answer; ``str(exc)`` is the reason the HPA reports."""


class MetricsClient(Protocol):
    def resource_metric(self, resource: str, namespace: str, selector: LabelSelector,
                        container: str = "") -> tuple[PodMetricsInfo, float]:
        """Per-pod usage of ``resource`` (``cpu`` / ``memory``) from ``metrics.k8s.io``.

        ``container`` non-empty: that container's usage only (ContainerResource metrics);
        pods without it are left out. Returns the samples and the oldest timestamp.
        """
        ...

    def pod_metric(self, metric: str, namespace: str, selector: LabelSelector,
                   metric_selector: LabelSelector | None = None) -> tuple[PodMetricsInfo, float]:
        """A per-pod custom metric (``custom.metrics.k8s.io``, ``pods/*/<metric>``)."""
        ...

    def object_metric(self, metric: str, namespace: str, obj: ObjectReference,
                      metric_selector: LabelSelector | None = None) -> tuple[int, float]:
        """A custom metric describing one object (``custom.metrics.k8s.io``, ``<kind>/<name>/<metric>``)."""
        ...

    def external_metric(self, metric: str, namespace: str,
                        selector: LabelSelector | None = None) -> tuple[list[int], float]:
        """The values of an external metric (``external.metrics.k8s.io``) matching ``selector``."""
        ...
