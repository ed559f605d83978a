"""The HPA replica calculator against upstream's formulas (pkg/controller/podautoscaler/replica_calculator.go).

Every expected count is worked out here from the formula: utilization = sum(usage) * 100 //
sum(requests) over pods with a sample, ratio = utilization / target, and ceil(ratio * pods);
within tolerance 0.1 nothing changes; missing pods count at 100 % of their request on a
scale-down and 0 % on a scale-up, unready pods at 0 % on a scale-up; a reversal of direction
keeps the current count. The metrics come from a static source implementing the
``MetricsClient`` seam (the seam exists so the calculator can be fed samples).
"""

from __future__ import annotations

import math

import pytest

from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.clock import rfc3339
from emulator.controllers.podautoscaler.replica_calculator import (
    ReplicaCalcError,
    ReplicaCalculator,
    group_pods,
)
from emulator.metricsapi.client import MetricsUnavailable, ObjectReference, PodMetric, PodMetricsInfo

NOW = 1_700_000_000.0
SELECTOR = LabelSelector.from_set({"app": "web"})


def pod(name: str, *, request_m: int = 1000, phase: str = "Running", ready: bool = True, started: float = 3600,
        ready_since: float = 3600, deleted: bool = False) -> Obj:
    """A pod started ``started`` seconds ago, Ready (or not) since ``ready_since`` seconds ago."""
    meta: Obj = {"name": name, "namespace": "default", "labels": {"app": "web"}}
    if deleted:
        meta["deletionTimestamp"] = rfc3339(NOW - 1)
    return {"metadata": meta,
            "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": f"{request_m}m"}}}]},
            "status": {"phase": phase, "startTime": rfc3339(NOW - started),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "lastTransitionTime": rfc3339(NOW - ready_since)}]}}


class StaticMetrics:
    """A MetricsClient answering fixed samples (milli-units), taken 10 s ago over a 15 s window."""

    def __init__(self, values: dict[str, int], *, timestamp: float = NOW - 10, total: int = 0) -> None:
        self.samples: PodMetricsInfo = {n: PodMetric(timestamp, 15.0, v) for n, v in values.items()}
        self.total = total

    def resource_metric(self, resource: str, namespace: str, selector: LabelSelector,
                        container: str = "") -> tuple[PodMetricsInfo, float]:
        if not self.samples:
            raise MetricsUnavailable("no metrics returned from resource metrics API")
        return dict(self.samples), NOW - 10

    def pod_metric(self, metric: str, namespace: str, selector: LabelSelector,
                   metric_selector: LabelSelector | None = None) -> tuple[PodMetricsInfo, float]:
        return dict(self.samples), NOW - 10

    def object_metric(self, metric: str, namespace: str, obj: ObjectReference,
                      metric_selector: LabelSelector | None = None) -> tuple[int, float]:
        return self.total, NOW - 10

    def external_metric(self, metric: str, namespace: str,
                        selector: LabelSelector | None = None) -> tuple[list[int], float]:
        return [self.total // 2, self.total - self.total // 2], NOW - 10


def calculator(pods: list[Obj], metrics: StaticMetrics) -> ReplicaCalculator:
    return ReplicaCalculator(metrics, lambda ns, sel: [p for p in pods if sel.matches(p["metadata"]["labels"])],
                             lambda: NOW)


def util(usage: int, request: int = 1000) -> int:
    return usage * 100 // request


# (pods, usage per pod name in millicores, target %, expected replicas)
RESOURCE_CASES = [
    # 4 pods at 80 % of request, target 50 %: ceil(4 * 0.8 / 0.5) = ceil(6.4) = 7.
    ([pod(f"p{i}") for i in range(4)], {f"p{i}": 800 for i in range(4)}, 50, math.ceil(4 * (80 / 50))),
    # 52 % against 50 %: ratio 1.04 is within the 0.1 tolerance, so the 4 replicas stay.
    ([pod(f"p{i}") for i in range(4)], {f"p{i}": 520 for i in range(4)}, 50, 4),
    # 20 % against 50 %: ceil(4 * 0.4) = 2.
    ([pod(f"p{i}") for i in range(4)], {f"p{i}": 200 for i in range(4)}, 50, math.ceil(4 * 20 / 50)),
    # Scale-down with a pod missing its sample: it counts at 100 % of its request.
    # 4 pods at 10 % + 1 missing -> (4 * 100 + 1000) * 100 // 5000 = 28 % -> ceil(5 * 0.56) = 3.
    ([pod(f"p{i}") for i in range(5)], {f"p{i}": 100 for i in range(4)}, 50,
     math.ceil(5 * (util(4 * 100 + 1000, 5000) / 50))),
    # Scale-up with a pod missing its sample: it counts at 0 %.
    # 3 pods at 90 % + 1 missing -> 270 * 100 // 400 = 67 % -> ceil(4 * 67 / 50) = 6.
    ([pod(f"p{i}") for i in range(4)], {f"p{i}": 900 for i in range(3)}, 50,
     math.ceil(4 * (util(3 * 900, 4000) / 50))),
    # Scale-up with a Pending (unready) pod: it counts at 0 % too -> 6.
    ([*[pod(f"p{i}") for i in range(3)], pod("p3", phase="Pending")], {f"p{i}": 900 for i in range(4)}, 50,
     math.ceil(4 * (util(3 * 900, 4000) / 50))),
    # Scale-down with a Pending pod: it is left out -> ceil(3 * 20 / 50) = 2.
    ([*[pod(f"p{i}") for i in range(3)], pod("p3", phase="Pending")], {f"p{i}": 200 for i in range(3)}, 50,
     math.ceil(3 * 20 / 50)),
    # Missing pods would reverse the direction (80 % -> 70 % ... ratio 1.4 > 1): keep 4.
    ([pod(f"p{i}") for i in range(4)], {"p0": 400, "p1": 400}, 50, 4),
    # Deleted and failed pods are ignored altogether: 2 pods at 100 % against 50 % -> ceil(2 * 2) = 4.
    ([pod("p0"), pod("p1"), pod("gone", deleted=True), pod("dead", phase="Failed")],
     {"p0": 1000, "p1": 1000, "gone": 0, "dead": 0}, 50, math.ceil(2 * 100 / 50)),
    # CPU initialisation: a pod started 60 s ago whose sample (10 s old, 15 s window) began before it became
    # Ready 20 s ago is unready; on this scale-up it counts at 0 %: 3 at 90 % + 1 -> 67 % -> 6.
    ([*[pod(f"p{i}") for i in range(3)], pod("young", started=60, ready_since=20)],
     {"p0": 900, "p1": 900, "p2": 900, "young": 900}, 50, math.ceil(4 * (util(3 * 900, 4000) / 50))),
    # ... but Ready for longer than a window before its sample, it counts: 4 at 90 % -> ceil(4 * 1.8) = 8.
    ([*[pod(f"p{i}") for i in range(3)], pod("young", started=60, ready_since=50)],
     {"p0": 900, "p1": 900, "p2": 900, "young": 900}, 50, math.ceil(4 * 90 / 50)),
    # After the 5 min initialisation period an unready pod that was Ready once counts (ready_since long
    # after start + 30 s): 2 at 90 % -> ceil(2 * 1.8) = 4.
    ([pod("p0"), pod("flaky", ready=False, started=3600, ready_since=60)], {"p0": 900, "flaky": 900}, 50,
     math.ceil(2 * 90 / 50)),
]


@pytest.mark.parametrize(("pods", "usage", "target", "expected"), RESOURCE_CASES, ids=[
    "80pct-of-50-gives-7", "within-tolerance", "scale-down", "missing-on-scale-down-at-100pct",
    "missing-on-scale-up-at-0pct", "pending-on-scale-up-at-0pct", "pending-on-scale-down-ignored",
    "missing-would-reverse-direction", "deleted-and-failed-ignored", "cpu-warming-up-unready",
    "cpu-ready-a-window-before-sample", "after-init-period-once-ready-counts"])
def test_resource_utilization_replicas(pods: list[Obj], usage: dict[str, int], target: int, expected: int) -> None:
    calc = calculator(pods, StaticMetrics(usage))
    current = len(pods)
    replicas, _utilization, _raw, _ts = calc.get_resource_replicas(current, target, "cpu", namespace="default",
                                                                   selector=SELECTOR)
    assert replicas == expected


def test_utilization_and_raw_average_are_reported_over_the_pods_with_samples() -> None:
    pods = [pod("a", request_m=500), pod("b", request_m=1500)]
    calc = calculator(pods, StaticMetrics({"a": 400, "b": 600}))
    _, utilization, raw, _ = calc.get_resource_replicas(2, 50, "cpu", namespace="default", selector=SELECTOR)
    assert utilization == (400 + 600) * 100 // (500 + 1500)  # 50
    assert raw == (400 + 600) // 2


@pytest.mark.parametrize(("usage", "target", "expected"), [
    ({"p0": 150, "p1": 150, "p2": 150, "p3": 150}, 100, math.ceil(4 * 150 / 100)),  # average value 1.5x -> 6
    ({"p0": 105, "p1": 95, "p2": 100, "p3": 100}, 100, 4),  # average exactly on target
    ({"p0": 30, "p1": 30, "p2": 30, "p3": 30}, 100, math.ceil(4 * 30 / 100)),  # -> 2
], ids=["pods-metric-scale-up", "pods-metric-on-target", "pods-metric-scale-down"])
def test_average_value_replicas(usage: dict[str, int], target: int, expected: int) -> None:
    pods = [pod(f"p{i}") for i in range(4)]
    replicas, average, _ = calculator(pods, StaticMetrics(usage)).get_metric_replicas(
        4, target, "requests", namespace="default", selector=SELECTOR)
    assert replicas == expected
    assert average == sum(usage.values()) // len(usage)


def test_object_and_external_metrics() -> None:
    pods = [pod("p0"), pod("p1")]
    ref = ObjectReference("Service", "web", "v1")
    # Object, Value target: ratio 3000 / 1000 = 3 -> ceil(3 * 2 ready pods) = 6.
    replicas, usage, _ = calculator(pods, StaticMetrics({}, total=3000)).get_object_metric_replicas(
        2, 1000, "hits", namespace="default", obj=ref, selector=SELECTOR)
    assert (replicas, usage) == (math.ceil(3000 / 1000 * 2), 3000)
    # Object, AverageValue target: ceil(4500 / 1000) = 5 (ratio 4500 / (1000 * 3) = 1.5 is outside tolerance).
    replicas, usage, _ = calculator(pods, StaticMetrics({}, total=4500)).get_object_per_pod_metric_replicas(
        3, 1000, "hits", namespace="default", obj=ref)
    assert (replicas, usage) == (math.ceil(4500 / 1000), math.ceil(4500 / 3))
    # External, Value target: the series sum 4500 against 1500 -> ratio 3 -> ceil(3 * 2) = 6.
    replicas, usage, _ = calculator(pods, StaticMetrics({}, total=4500)).get_external_metric_replicas(
        2, 1500, "queue", namespace="default", metric_selector=None, selector=SELECTOR)
    assert (replicas, usage) == (6, 4500)
    # External, AverageValue 1000 per pod with 4 replicas: 4500 / 4000 = 1.125 > 1.1 -> ceil(4.5) = 5.
    replicas, _, _ = calculator(pods, StaticMetrics({}, total=4500)).get_external_per_pod_metric_replicas(
        4, 1000, "queue", namespace="default", metric_selector=None)
    assert replicas == 5
    # From zero replicas (scale to zero enabled): ceil(ratio) regardless of pods and tolerance.
    replicas, _, _ = calculator([], StaticMetrics({}, total=2500)).get_external_metric_replicas(
        0, 1000, "queue", namespace="default", metric_selector=None, selector=SELECTOR)
    assert replicas == 3


@pytest.mark.parametrize(("pods", "usage", "message"), [
    ([], {"x": 1}, "no pods returned by selector while calculating replica count"),
    ([pod("p0", phase="Pending")], {"p0": 500}, "did not receive metrics for targeted pods (pods might be unready)"),
    ([pod("p0")], {}, "unable to get metrics for resource cpu: no metrics returned from resource metrics API"),
], ids=["no-pods", "only-unready-pods", "metrics-unavailable"])
def test_errors_carry_upstream_messages(pods: list[Obj], usage: dict[str, int], message: str) -> None:
    with pytest.raises(ReplicaCalcError) as e:
        calculator(pods, StaticMetrics(usage)).get_resource_replicas(1, 50, "cpu", namespace="default",
                                                                     selector=SELECTOR)
    assert str(e.value) == message


def test_missing_request_is_an_error() -> None:
    p = pod("p0")
    p["spec"]["containers"][0]["resources"] = {}
    with pytest.raises(ReplicaCalcError, match="missing request for cpu in container app of Pod p0"):
        calculator([p], StaticMetrics({"p0": 100})).get_resource_replicas(1, 50, "cpu", namespace="default",
                                                                           selector=SELECTOR)


def test_group_pods_sorts_pods_into_upstreams_four_groups() -> None:
    pods = [pod("ok"), pod("pending", phase="Pending"), pod("nosample"), pod("gone", deleted=True),
            pod("warming", started=30, ready_since=5)]
    samples = {n: PodMetric(NOW - 10, 15.0, 100) for n in ("ok", "pending", "gone", "warming")}
    groups = group_pods(pods, samples, "cpu", NOW)
    assert groups.ready_count == 1
    assert groups.unready == {"pending", "warming"}
    assert groups.missing == {"nosample"}
    assert groups.ignored == {"gone"}
    # Readiness only matters for CPU: the warming pod counts for memory.
    assert group_pods(pods, samples, "memory", NOW).ready_count == 2
