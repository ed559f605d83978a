"""The resource-metrics reader: ``metrics.k8s.io`` pod usage for the HPA's Resource metrics.

Upstream's ``resourceMetricsClient.GetResourceMetric``
(``pkg/controller/podautoscaler/metrics/client.go``) lists ``PodMetrics`` for the
target's selector and turns each pod's usage into one milli-value: the sum over its
containers, or one container's value for ``ContainerResource`` metrics (a pod without
that container is left out). kemu's ``metrics.k8s.io`` is the kubelet shards' usage
snapshot in Redis (:mod:`emulator.kubelet.usage`: ``mu:pods:<ns>`` hashes, CPU in
nanocores, memory in bytes), so this reader reads the same hashes directly:

* the pods come from a lister (the controller's informer cache, as metrics-server
  filters by labels through its own informers), or from the store when none is given;
* one ``HMGET`` of exactly those pods' entries per call, so 1,000 HPAs over a
  namespace of 10,000 pods each read only their own pods;
* CPU nanocores become millicores rounded up (``Quantity.MilliValue`` of ``<n>n``),
  memory bytes become milli-bytes;
* entries older than :data:`~emulator.kubelet.usage.MAX_AGE_WINDOWS` windows (a shard
  that stopped publishing) are stale and not served;
* no sample at all raises :class:`~emulator.metricsapi.client.MetricsUnavailable`
  (``no metrics returned from resource metrics API``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from emulator.api.kinds import POD
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.kubelet.usage import MAX_AGE_WINDOWS, PODS_KEY
from emulator.metricsapi.client import MetricsUnavailable, PodMetric, PodMetricsInfo
from emulator.store.store import Store

PodLister = Callable[[str, LabelSelector], list[Obj]]

_NANO_PER_MILLI = 1_000_000


def _container_value(resource: str, cpu_nanocores: int, memory_bytes: int) -> int:
    if resource == "cpu":
        return -(-int(cpu_nanocores) // _NANO_PER_MILLI)  # MilliValue rounds up
    return int(memory_bytes) * 1000


class ResourceMetricsReader:
    """Implements ``MetricsClient.resource_metric`` over the kubelet usage snapshot."""

    def __init__(self, store: Store, now: Callable[[], float], pods: PodLister | None = None) -> None:
        self.store = store
        self.now = now
        self.pods = pods or self._list_pods

    def _list_pods(self, namespace: str, selector: LabelSelector) -> list[Obj]:
        return self.store.list(POD, namespace, label_selector=selector).items

    def resource_metric(self, resource: str, namespace: str, selector: LabelSelector,
                        container: str = "") -> tuple[PodMetricsInfo, float]:
        if resource not in ("cpu", "memory"):
            raise MetricsUnavailable(f"resource metrics API has no resource {resource!r}")
        names = [p["metadata"]["name"] for p in self.pods(namespace, selector)]
        if not names:
            raise MetricsUnavailable("no metrics returned from resource metrics API")
        try:
            raw = self.store.redis.hmget(self.store.config.prefix + PODS_KEY + namespace, names)
        except Exception as e:  # Redis down: the metrics API is unavailable
            raise MetricsUnavailable(f"unable to fetch metrics from resource metrics API: {e}") from None
        now = self.now()
        out: PodMetricsInfo = {}
        oldest = float("inf")
        for name, entry in zip(names, raw, strict=True):
            if entry is None:
                continue
            timestamp, window, containers = msgpack.unpackb(entry, raw=False)
            timestamp, window = float(timestamp), float(window)
            if now - timestamp > MAX_AGE_WINDOWS * max(window, 1.0):
                continue
            if container:
                values = [_container_value(resource, c[1], c[2]) for c in containers if c[0] == container]
                if not values:
                    continue
                value = values[0]
            else:
                value = sum(_container_value(resource, c[1], c[2]) for c in containers)
            out[name] = PodMetric(timestamp, window, value)
            oldest = min(oldest, timestamp)
        if not out:
            raise MetricsUnavailable("no metrics returned from resource metrics API")
        return out, oldest

    # The other sources belong to the custom / external metrics APIs (another reader).
    def pod_metric(self, metric: str, namespace: str, selector: LabelSelector,
                   metric_selector: LabelSelector | None = None) -> tuple[PodMetricsInfo, float]:
        raise MetricsUnavailable("no custom metrics API (custom.metrics.k8s.io) is served")

    def object_metric(self, metric: str, namespace: str, obj: Any,
                      metric_selector: LabelSelector | None = None) -> tuple[int, float]:
        raise MetricsUnavailable("no custom metrics API (custom.metrics.k8s.io) is served")

    def external_metric(self, metric: str, namespace: str,
                        selector: LabelSelector | None = None) -> tuple[list[int], float]:
        raise MetricsUnavailable("no external metrics API (external.metrics.k8s.io) is served")
