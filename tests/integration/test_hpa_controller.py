"""The HPA controller on a ManualClock against a real Redis: resource metrics reader, reconcile, metrics.

Pods and the kubelets' usage snapshot (``mu:pods:<ns>``) are written directly, so the
expected counts come straight from upstream's formula: 4 pods using 80 % of their request
against a 50 % target -> ceil(4 * 80 / 50) = 7 (below the scale-up limit max(2 * 4, 4) = 8).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from prometheus_client import REGISTRY

from emulator.api.kinds import DEPLOYMENT, EVENT, HORIZONTALPODAUTOSCALER, POD
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.clock import ManualClock, rfc3339
from emulator.controllers.manager import ControllerManager
from emulator.kubelet import usage
from emulator.metricsapi.client import MetricsUnavailable
from emulator.metricsapi.resource import ResourceMetricsReader
from emulator.server.core import ServerCore
from tests.waiting import hpa_controller_settled, wait_for

pytestmark = pytest.mark.integration

MI = 1024**2


def deployment(name: str, replicas: int) -> Obj:
    labels = {"app": name}
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                                         "resources": {"requests": {"cpu": "200m"}}}]}}}}


def running_pod(app: str, i: int, now: float) -> Obj:
    started = rfc3339(now - 3600)
    return {"metadata": {"name": f"{app}-{i}", "namespace": "default", "labels": {"app": app}},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "app", "image": "nginx:1.27", "resources": {"requests": {"cpu": "200m"}}},
                {"name": "sidecar", "image": "envoy:1", "resources": {"requests": {"cpu": "50m"}}}]},
            "status": {"phase": "Running", "startTime": started,
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": started}]}}


def publish(core: ServerCore, now: float, usage_of: dict[str, tuple[int, int]]) -> None:
    """Write the kubelets' snapshot: pod -> (app millicores, sidecar millicores)."""
    pipe = core.store.redis.pipeline(transaction=False)
    usage.write_snapshot(pipe, core.store.config.prefix, timestamp=now, window=15.0, nodes={}, pods={
        ("default", name): [("app", app * 1_000_000, 64 * MI), ("sidecar", side * 1_000_000, 16 * MI)]
        for name, (app, side) in usage_of.items()})
    pipe.execute()


def sync_until(core: ServerCore, manager: ControllerManager, clock: ManualClock, condition: Callable[[], bool],
               periods: int = 4) -> None:
    """Move the clock one sync period at a time until ``condition``.

    Before each move the controller has done what is due and holds every HPA (a new HPA's first sync
    is queued a period after its informer delivered it, as upstream's queue does); after it, the
    controller has synced every HPA due at the new time - then the condition is looked at.
    """
    controller = manager.controllers()["horizontalpodautoscaling"]

    def settle() -> None:
        wait_for(lambda: hpa_controller_settled(core, controller), 20,
                 "the HPA controller's work due at the current cluster time", interval=0.005)
    settle()
    for _ in range(periods):
        clock.advance(15)
        settle()
        if condition():
            return
    raise AssertionError(f"condition not met after {periods} sync periods")


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_resource_reader_reads_the_kubelet_snapshot(core: ServerCore, clock: ManualClock) -> None:
    now = clock.now()
    core.create_many(POD, [running_pod("web", i, now) for i in range(3)])
    publish(core, now - 5, {"web-0": (150, 30), "web-1": (99, 1)})
    reader = ResourceMetricsReader(core.store, clock.now)
    selector = LabelSelector.from_set({"app": "web"})
    cpu, oldest = reader.resource_metric("cpu", "default", selector)
    # Millicores are the nanocores rounded up, summed over the containers; web-2 has no sample.
    assert {n: m.value for n, m in cpu.items()} == {"web-0": 180, "web-1": 100}
    assert oldest == now - 5 and cpu["web-0"].window == 15.0
    app_only, _ = reader.resource_metric("cpu", "default", selector, container="app")
    assert {n: m.value for n, m in app_only.items()} == {"web-0": 150, "web-1": 99}
    memory, _ = reader.resource_metric("memory", "default", selector)
    assert memory["web-0"].value == (64 + 16) * MI * 1000  # milli-bytes
    clock.advance(4 * 15 + 1)  # older than MAX_AGE_WINDOWS windows: stale
    with pytest.raises(MetricsUnavailable, match="no metrics returned from resource metrics API"):
        reader.resource_metric("cpu", "default", selector)


def test_controller_scales_by_the_formula_and_exports_metrics(
        core: ServerCore, clock: ManualClock, start_manager: Callable[..., ControllerManager]) -> None:
    now = clock.now()
    core.create(DEPLOYMENT, deployment("web", 4))
    core.create_many(POD, [running_pod("web", i, now) for i in range(4)])
    # 80 % of the 250m request: 200m per pod (160m app + 40m sidecar).
    publish(core, now, {f"web-{i}": (160, 40) for i in range(4)})
    manager = start_manager("horizontalpodautoscaling")
    before = sample("horizontal_pod_autoscaler_controller_reconciliations_total", action="scale_up", error="none")
    computed = sample("horizontal_pod_autoscaler_controller_metric_computation_total", action="scale_up",
                      error="none", metric_type="Resource")
    core.create(HORIZONTALPODAUTOSCALER, {"metadata": {"name": "web", "namespace": "default"}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minReplicas": 1,
        "maxReplicas": 20, "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": 50}}}]}})
    # The controller has seen the HPA, and its first sync waits for the sync period of cluster time
    # (upstream's HPA rate limiter): the status is untouched until the clock moves.
    hpa_controller = manager.controllers()["horizontalpodautoscaling"]
    wait_for(lambda: hpa_controller.hpa_informer.indexer.get_by_key("default/web") is not None, 10,
             "the HPA controller's cache to hold the HPA")
    assert "conditions" not in (core.get(HORIZONTALPODAUTOSCALER, "default", "web").get("status") or {})
    expected = math.ceil(4 * (200 * 100 // 250) / 50)
    assert expected == 7 <= max(2 * 4, 4)
    sync_until(core, manager, clock, lambda: core.get(DEPLOYMENT, "default", "web")["spec"]["replicas"] == expected)
    wait_for(lambda: (core.get(HORIZONTALPODAUTOSCALER, "default", "web").get("status") or {}).get(
        "desiredReplicas") == expected, 10, "the HPA's desiredReplicas")
    status = core.get(HORIZONTALPODAUTOSCALER, "default", "web")["status"]
    assert status["currentReplicas"] == 4 and status["lastScaleTime"] == rfc3339(clock.now())
    assert status["currentMetrics"] == [{"type": "Resource", "resource": {"name": "cpu", "current": {
        "averageUtilization": 80, "averageValue": "200m"}}}]
    reasons = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert reasons == {"AbleToScale": ("True", "SucceededRescale"), "ScalingActive": ("True", "ValidMetricFound"),
                       "ScalingLimited": ("False", "DesiredWithinRange")}
    assert sample("horizontal_pod_autoscaler_controller_reconciliations_total", action="scale_up",
                  error="none") == before + 1
    assert sample("horizontal_pod_autoscaler_controller_metric_computation_total", action="scale_up", error="none",
                  metric_type="Resource") == computed + 1
    labels = {"namespace": "default", "horizontalpodautoscaler": "web"}
    assert sample("kube_horizontalpodautoscaler_spec_max_replicas", **labels) == 20
    assert sample("kube_horizontalpodautoscaler_spec_min_replicas", **labels) == 1
    wait_for(lambda: sample("kube_horizontalpodautoscaler_status_desired_replicas", **labels) == expected, 10,
             "the desired-replicas series")
    assert sample("kube_horizontalpodautoscaler_status_current_replicas", **labels) == 4
    # Per metric: the spec's target and the status' current values, labelled by name and target type.
    cpu = {**labels, "metric_name": "cpu"}
    assert sample("kube_horizontalpodautoscaler_spec_target_metric", **cpu, metric_target_type="utilization") == 50
    assert sample("kube_horizontalpodautoscaler_status_target_metric", **cpu, metric_target_type="utilization") == 80
    assert sample("kube_horizontalpodautoscaler_status_target_metric", **cpu, metric_target_type="average") == 0.2
    wait_for(lambda: any(e["reason"] == "SuccessfulRescale" and e["message"] ==
                         f"New size: {expected}; reason: cpu resource utilization (percentage of request) above target"
                         and e["source"]["component"] == "horizontal-pod-autoscaler"
                         for e in core.list(EVENT, "default").items), 10, "the SuccessfulRescale event")


def test_missing_metrics_become_the_upstream_condition_and_event(
        core: ServerCore, clock: ManualClock, start_manager: Callable[..., ControllerManager]) -> None:
    now = clock.now()
    core.create(DEPLOYMENT, deployment("quiet", 2))
    core.create_many(POD, [running_pod("quiet", i, now) for i in range(2)])  # no usage published
    manager = start_manager("horizontalpodautoscaling")
    core.create(HORIZONTALPODAUTOSCALER, {"metadata": {"name": "quiet", "namespace": "default"}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "quiet"}, "maxReplicas": 5}})
    sync_until(core, manager, clock, lambda: bool(
        (core.get(HORIZONTALPODAUTOSCALER, "default", "quiet").get("status") or {}).get("conditions")))
    hpa = core.get(HORIZONTALPODAUTOSCALER, "default", "quiet")
    active = next(c for c in hpa["status"]["conditions"] if c["type"] == "ScalingActive")
    assert (active["status"], active["reason"]) == ("False", "FailedGetResourceMetric")
    assert active["message"] == ("the HPA was unable to compute the replica count: failed to get cpu utilization: "
                                 "unable to get metrics for resource cpu: no metrics returned from resource "
                                 "metrics API")
    assert hpa["status"]["currentMetrics"] == [{"type": ""}]  # upstream keeps the failed metric's empty status
    assert hpa["status"]["currentReplicas"] == 2 and hpa["status"]["desiredReplicas"] == 0
    assert core.get(DEPLOYMENT, "default", "quiet")["spec"]["replicas"] == 2  # nothing else changed
    wait_for(lambda: {e["reason"] for e in core.list(EVENT, "default").items} >= {
        "FailedGetResourceMetric", "FailedComputeMetricsReplicas"}, 10, "the failure events")


def test_two_hpas_on_the_same_pods_are_ambiguous(
        core: ServerCore, clock: ManualClock, start_manager: Callable[..., ControllerManager]) -> None:
    now = clock.now()
    core.create(DEPLOYMENT, deployment("web", 4))
    core.create_many(POD, [running_pod("web", i, now) for i in range(4)])
    publish(core, now, {f"web-{i}": (160, 40) for i in range(4)})
    manager = start_manager("horizontalpodautoscaling")
    for name in ("a", "b"):
        core.create(HORIZONTALPODAUTOSCALER, {"metadata": {"name": name, "namespace": "default"}, "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 20}})

    def reasons() -> set[tuple[str, str]]:
        out = set()
        for name in ("a", "b"):
            conditions = (core.get(HORIZONTALPODAUTOSCALER, "default", name).get("status") or {}).get("conditions")
            active = next((c for c in conditions or [] if c["type"] == "ScalingActive"), {})
            out.add((active.get("reason", ""), active.get("message", "")))
        return out

    message = "pods by selector app=web are controlled by multiple HPAs: [default/a default/b]"
    sync_until(core, manager, clock, lambda: reasons() == {("AmbiguousSelector", message)}, periods=6)
    # The first HPA to sync may have seen only itself and scaled once (4 pods at 80 % against the default
    # 80 % target is within tolerance, so it did not); from then on both are stopped.
    assert core.get(DEPLOYMENT, "default", "web")["spec"]["replicas"] == 4
