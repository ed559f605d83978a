"""The HPA's replica calculator: from metric samples and the target's pods to a replica proposal.

A re-implementation of upstream ``pkg/controller/podautoscaler/replica_calculator.go``
(``ReplicaCalculator``) and the ratio helpers of ``podautoscaler/metrics/utilization.go``,
formula for formula:

* **utilization** (Resource / ContainerResource with ``averageUtilization``):
  ``utilization = sum(usage) * 100 // sum(requests)`` over the pods that have both a
  sample and a request (integer percent, as upstream's ``int32``), ``ratio =
  utilization / target``; a ratio within ``tolerance`` (0.1) of 1 keeps the current
  count, otherwise ``ceil(ratio * readyPods)``;
* **average value** (Pods metrics, Resource ``averageValue``): ``ratio =
  (sum // n) / target`` over the samples;
* **missing and unready pods** (``groupPods``): deleted and failed pods are ignored;
  pending pods, and for CPU pods unready or still warming up (CPU initialisation
  period 5 min, initial readiness delay 30 s) are *unready*; pods without a sample are
  *missing*. When there are missing pods, or unready ones and a scale-up, the ratio is
  computed again with missing pods at 100 % of their request (scale-down) or 0 %
  (scale-up) and unready pods at 0 % (scale-up), and the scale is kept if the new ratio
  is within tolerance or would reverse the direction;
* **object / external metrics**: ``ceil(ratio * readyPods)`` (``Value`` targets) or
  ``ceil(total / targetAverage)`` (``AverageValue`` targets).

Inputs are plain data: pods as JSON dicts (from the controller's informer), samples from
a :class:`~emulator.metricsapi.client.MetricsClient`, and ``now`` in cluster seconds, so
the tests drive every branch with tables. Failures raise :class:`ReplicaCalcError`
carrying upstream's message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from emulator.api.quantity import QuantityError, cpu_millis
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339
from emulator.metricsapi.client import MetricsClient, ObjectReference, PodMetric, PodMetricsInfo

# kube-controller-manager defaults (cmd/kube-controller-manager/app/options/hpacontroller.go).
DEFAULT_TOLERANCE = 0.1
DEFAULT_CPU_INITIALIZATION_PERIOD = 300.0
DEFAULT_INITIAL_READINESS_DELAY = 30.0

PodLister = Callable[[str, LabelSelector], list[Obj]]


class ReplicaCalcError(Exception):
    """The calculator cannot propose a count; ``str(exc)`` is upstream's message."""


@dataclass(frozen=True, slots=True)
class PodGroups:
    """``groupPods``'s result."""

    ready_count: int
    unready: frozenset[str]
    missing: frozenset[str]
    ignored: frozenset[str]


def _ready_condition(pod: Obj) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond
    return None


def _time(value: Any) -> float | None:
    return parse_rfc3339(value) if isinstance(value, str) and value else None


def group_pods(pods: list[Obj], metrics: Mapping[str, PodMetric], resource: str, now: float, *,
               cpu_initialization_period: float = DEFAULT_CPU_INITIALIZATION_PERIOD,
               delay_of_initial_readiness_status: float = DEFAULT_INITIAL_READINESS_DELAY) -> PodGroups:
    """Upstream ``groupPods``: ready count, unready, missing and ignored pod names."""
    ready = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for pod in pods:
        meta, status = pod["metadata"], pod.get("status") or {}
        name = meta["name"]
        phase = status.get("phase") or "Pending"
        if meta.get("deletionTimestamp") or phase == "Failed":
            ignored.add(name)
            continue
        if phase == "Pending":
            unready.add(name)
            continue
        metric = metrics.get(name)
        if metric is None:
            missing.add(name)
            continue
        if resource == "cpu":
            cond = _ready_condition(pod)
            start = _time(status.get("startTime"))
            if cond is None or start is None:
                is_unready = True
            else:
                transition = _time(cond.get("lastTransitionTime")) or start
                if start + cpu_initialization_period > now:
                    # Still initialising: ignore the sample unless the pod is ready and a whole
                    # metric window was collected after it became ready.
                    is_unready = cond.get("status") == "False" or metric.timestamp < transition + metric.window
                else:
                    # Ignore it only if it is unready and has never been ready.
                    is_unready = (cond.get("status") == "False"
                                  and start + delay_of_initial_readiness_status > transition)
            if is_unready:
                unready.add(name)
                continue
        ready += 1
    return PodGroups(ready, frozenset(unready), frozenset(missing), frozenset(ignored))


def calculate_pod_requests(pods: list[Obj], container: str, resource: str) -> dict[str, int]:
    """Upstream ``calculatePodRequests``: each pod's request of ``resource`` in milli-units.

    Regular containers and restartable (sidecar) init containers count; with ``container``
    set only that container does. A counted container without the request is an error.
    """
    out: dict[str, int] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        containers = list(spec.get("containers") or [])
        containers += [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
        total = 0
        for c in containers:
            if container and c.get("name") != container:
                continue
            requests = (c.get("resources") or {}).get("requests") or {}
            if resource not in requests:
                raise ReplicaCalcError(f"missing request for {resource} in container {c.get('name')} "
                                       f"of Pod {pod['metadata']['name']}")
            try:
                total += cpu_millis(requests[resource])
            except QuantityError as e:
                raise ReplicaCalcError(f"invalid request for {resource} in container {c.get('name')}: {e}") from None
        out[pod["metadata"]["name"]] = total
    return out


def resource_utilization_ratio(metrics: Mapping[str, PodMetric], requests: Mapping[str, int],
                               target_utilization: int) -> tuple[float, int, int]:
    """``GetResourceUtilizationRatio``: (ratio, utilization %, raw average milli-value)."""
    metrics_total = requests_total = entities = 0
    for name, metric in metrics.items():
        request = requests.get(name)
        if request is None:
            continue  # requests are checked elsewhere: a metric without one is extraneous
        metrics_total += metric.value
        requests_total += request
        entities += 1
    if requests_total == 0:
        raise ReplicaCalcError("no metrics returned matched known pods")
    utilization = _go_div(metrics_total * 100, requests_total)
    return utilization / target_utilization, utilization, _go_div(metrics_total, entities)


def metric_usage_ratio(metrics: Mapping[str, PodMetric], target_usage: int) -> tuple[float, int]:
    """``GetMetricUsageRatio``: (ratio, average milli-value)."""
    total = sum(m.value for m in metrics.values())
    current = _go_div(total, len(metrics))
    return current / target_usage, current


def _go_div(a: int, b: int) -> int:
    """Go's integer division truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _ceil(x: float) -> int:
    return math.ceil(x)


class ReplicaCalculator:
    """Upstream ``ReplicaCalculator`` over a metrics client and a pod lister, on a clock."""

    def __init__(self, metrics: MetricsClient, pods: PodLister, now: Callable[[], float], *,
                 tolerance: float = DEFAULT_TOLERANCE,
                 cpu_initialization_period: float = DEFAULT_CPU_INITIALIZATION_PERIOD,
                 delay_of_initial_readiness_status: float = DEFAULT_INITIAL_READINESS_DELAY) -> None:
        self.metrics = metrics
        self.pods = pods
        self.now = now
        self.tolerance = tolerance
        self.cpu_initialization_period = cpu_initialization_period
        self.delay_of_initial_readiness_status = delay_of_initial_readiness_status

    def _list(self, namespace: str, selector: LabelSelector) -> list[Obj]:
        pods = self.pods(namespace, selector)
        if not pods:
            raise ReplicaCalcError("no pods returned by selector while calculating replica count")
        return pods

    def _group(self, pods: list[Obj], metrics: PodMetricsInfo, resource: str) -> PodGroups:
        groups = group_pods(pods, metrics, resource, self.now(),
                            cpu_initialization_period=self.cpu_initialization_period,
                            delay_of_initial_readiness_status=self.delay_of_initial_readiness_status)
        for name in groups.ignored | groups.unready:
            metrics.pop(name, None)
        return groups

    # ------------------------------------------------------------------ resource metrics
    def get_resource_replicas(self, current: int, target_utilization: int, resource: str, *, namespace: str,
                              selector: LabelSelector, container: str = "") -> tuple[int, int, int, float]:
        """``GetResourceReplicas``: (replicas, utilization %, raw average milli-value, timestamp)."""
        try:
            samples, timestamp = self.metrics.resource_metric(resource, namespace, selector, container)
        except Exception as e:
            raise ReplicaCalcError(f"unable to get metrics for resource {resource}: {e}") from None
        metrics = dict(samples)
        pods = self._list(namespace, selector)
        groups = self._group(pods, metrics, resource)
        if not metrics:
            raise ReplicaCalcError("did not receive metrics for targeted pods (pods might be unready)")
        requests = calculate_pod_requests(pods, container, resource)
        ratio, utilization, raw = resource_utilization_ratio(metrics, requests, target_utilization)
        scale_up_with_unready = bool(groups.unready) and ratio > 1.0
        if not scale_up_with_unready and not groups.missing:
            if abs(1.0 - ratio) <= self.tolerance:
                return current, utilization, raw, timestamp
            return _ceil(ratio * groups.ready_count), utilization, raw, timestamp
        if groups.missing:
            if ratio < 1.0:
                # On a scale-down, pods without a sample are taken at 100 % of their request.
                for name in groups.missing:
                    metrics[name] = PodMetric(0.0, 0.0, requests[name])
            elif ratio > 1.0:
                # On a scale-up, at 0 %.
                for name in groups.missing:
                    metrics[name] = PodMetric(0.0, 0.0, 0)
        if scale_up_with_unready:
            for name in groups.unready:
                metrics[name] = PodMetric(0.0, 0.0, 0)
        new_ratio, _, _ = resource_utilization_ratio(metrics, requests, target_utilization)
        if abs(1.0 - new_ratio) <= self.tolerance or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
            # Too small a change, or the assumptions reversed the direction.
            return current, utilization, raw, timestamp
        new_replicas = _ceil(new_ratio * len(metrics))
        if (new_ratio < 1.0 and new_replicas > current) or (new_ratio > 1.0 and new_replicas < current):
            return current, utilization, raw, timestamp
        return new_replicas, utilization, raw, timestamp

    def get_raw_resource_replicas(self, current: int, target_average: int, resource: str, *, namespace: str,
                                  selector: LabelSelector, container: str = "") -> tuple[int, int, float]:
        """``GetRawResourceReplicas``: (replicas, average milli-value, timestamp)."""
        try:
            samples, timestamp = self.metrics.resource_metric(resource, namespace, selector, container)
        except Exception as e:
            raise ReplicaCalcError(f"unable to get metrics for resource {resource}: {e}") from None
        replicas, usage = self._plain_metric_replicas(dict(samples), current, target_average, namespace=namespace,
                                                      selector=selector, resource=resource)
        return replicas, usage, timestamp

    # ------------------------------------------------------------------ pods metrics
    def get_metric_replicas(self, current: int, target_average: int, metric: str, *, namespace: str,
                            selector: LabelSelector, metric_selector: LabelSelector | None = None
                            ) -> tuple[int, int, float]:
        """``GetMetricReplicas`` (Pods metrics): (replicas, average milli-value, timestamp)."""
        try:
            samples, timestamp = self.metrics.pod_metric(metric, namespace, selector, metric_selector)
        except Exception as e:
            raise ReplicaCalcError(f"unable to get metric {metric}: {e}") from None
        replicas, usage = self._plain_metric_replicas(dict(samples), current, target_average, namespace=namespace,
                                                      selector=selector, resource="")
        return replicas, usage, timestamp

    def _plain_metric_replicas(self, metrics: PodMetricsInfo, current: int, target: int, *, namespace: str,
                               selector: LabelSelector, resource: str) -> tuple[int, int]:
        """``calcPlainMetricReplicas``: average-value targets."""
        pods = self._list(namespace, selector)
        groups = self._group(pods, metrics, resource)
        if not metrics:
            raise ReplicaCalcError("did not receive metrics for targeted pods (pods might be unready)")
        ratio, usage = metric_usage_ratio(metrics, target)
        scale_up_with_unready = bool(groups.unready) and ratio > 1.0
        if not scale_up_with_unready and not groups.missing:
            if abs(1.0 - ratio) <= self.tolerance:
                return current, usage
            return _ceil(ratio * groups.ready_count), usage
        if groups.missing:
            fill = target if ratio < 1.0 else 0  # at the target on a scale-down, 0 on a scale-up
            for name in groups.missing:
                metrics[name] = PodMetric(0.0, 0.0, fill)
        if scale_up_with_unready:
            for name in groups.unready:
                metrics[name] = PodMetric(0.0, 0.0, 0)
        new_ratio, _ = metric_usage_ratio(metrics, target)
        if abs(1.0 - new_ratio) <= self.tolerance or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
            return current, usage
        new_replicas = _ceil(new_ratio * len(metrics))
        if (new_ratio < 1.0 and new_replicas > current) or (new_ratio > 1.0 and new_replicas < current):
            return current, usage
        return new_replicas, usage

    # ------------------------------------------------------------------ object and external metrics
    def _ready_pods_count(self, namespace: str, selector: LabelSelector) -> int:
        pods = self._list(namespace, selector)
        return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running"
                   and (_ready_condition(p) or {}).get("status") == "True")

    def _usage_ratio_replicas(self, current: int, ratio: float, namespace: str, selector: LabelSelector) -> int:
        """``getUsageRatioReplicaCount``: with 0 current replicas (scale to zero) tolerance and pods don't count."""
        if current != 0:
            if abs(1.0 - ratio) <= self.tolerance:
                return current
            try:
                ready = self._ready_pods_count(namespace, selector)
            except ReplicaCalcError as e:
                raise ReplicaCalcError(f"unable to calculate ready pods: {e}") from None
            return _ceil(ratio * ready)
        return _ceil(ratio)

    def _object_metric(self, metric: str, namespace: str, obj: ObjectReference,
                       metric_selector: LabelSelector | None) -> tuple[int, float]:
        try:
            return self.metrics.object_metric(metric, namespace, obj, metric_selector)
        except Exception as e:
            raise ReplicaCalcError(f"unable to get metric {metric}: {obj.kind} on {namespace} {obj.name}/{e}") \
                from None

    def get_object_metric_replicas(self, current: int, target_value: int, metric: str, *, namespace: str,
                                   obj: ObjectReference, selector: LabelSelector,
                                   metric_selector: LabelSelector | None = None) -> tuple[int, int, float]:
        """``GetObjectMetricReplicas`` (Object metric, ``Value`` target)."""
        usage, timestamp = self._object_metric(metric, namespace, obj, metric_selector)
        replicas = self._usage_ratio_replicas(current, usage / target_value, namespace, selector)
        return replicas, usage, timestamp

    def get_object_per_pod_metric_replicas(self, status_replicas: int, target_average: int, metric: str, *,
                                           namespace: str, obj: ObjectReference,
                                           metric_selector: LabelSelector | None = None) -> tuple[int, int, float]:
        """``GetObjectPerPodMetricReplicas`` (Object metric, ``AverageValue`` target)."""
        usage, timestamp = self._object_metric(metric, namespace, obj, metric_selector)
        return self._per_pod(status_replicas, usage, target_average), _ceil_div(usage, status_replicas), timestamp

    def _per_pod(self, status_replicas: int, usage: int, target_average: int) -> int:
        replicas = status_replicas
        ratio = usage / (target_average * replicas) if replicas else math.inf
        if abs(1.0 - ratio) > self.tolerance:
            replicas = _ceil(usage / target_average)
        return replicas

    def _external_usage(self, metric: str, namespace: str,
                        metric_selector: LabelSelector | None) -> tuple[int, float]:
        """The sum of an external metric's series, and its timestamp."""
        try:
            values, timestamp = self.metrics.external_metric(metric, namespace, metric_selector)
        except Exception as e:
            raise ReplicaCalcError(f"unable to get external metric {namespace}/{metric}/{metric_selector}: {e}") \
                from None
        return sum(values), timestamp

    def get_external_metric_replicas(self, current: int, target_value: int, metric: str, *, namespace: str,
                                     metric_selector: LabelSelector | None, selector: LabelSelector
                                     ) -> tuple[int, int, float]:
        """``GetExternalMetricReplicas`` (External metric, ``Value`` target: the sum of the series)."""
        usage, timestamp = self._external_usage(metric, namespace, metric_selector)
        return self._usage_ratio_replicas(current, usage / target_value, namespace, selector), usage, timestamp

    def get_external_per_pod_metric_replicas(self, status_replicas: int, target_average: int, metric: str, *,
                                             namespace: str, metric_selector: LabelSelector | None
                                             ) -> tuple[int, int, float]:
        """``GetExternalPerPodMetricReplicas`` (External metric, ``AverageValue`` target)."""
        usage, timestamp = self._external_usage(metric, namespace, metric_selector)
        return self._per_pod(status_replicas, usage, target_average), _ceil_div(usage, status_replicas), timestamp


def _ceil_div(a: int, b: int) -> int:
    """``int64(math.Ceil(float64(a) / float64(b)))``; a division by zero gives 0 (Go would give +Inf → min int)."""
    return _ceil(a / b) if b else 0
