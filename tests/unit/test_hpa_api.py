"""HorizontalPodAutoscaler as API data: defaults, validation, v1 <-> v2 conversion, the Table columns.

Expected values follow upstream: ``pkg/apis/autoscaling/v2/defaults.go``,
``pkg/apis/autoscaling/validation/validation.go``, ``pkg/apis/autoscaling/v1/conversion.go``
and ``printHorizontalPodAutoscaler`` / ``formatHPAMetrics`` in ``pkg/printers``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from emulator.api import autoscaling_v1, errors
from emulator.api.kinds import HORIZONTALPODAUTOSCALER
from emulator.api.types import Obj
from emulator.apiserver import tables
from emulator.server.defaults import apply_defaults
from emulator.server.validation import validate


def hpa(**spec: Any) -> Obj:
    body: Obj = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                 "metadata": {"name": "web", "namespace": "default"},
                 "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                          "maxReplicas": 10, **spec}}
    return body


def causes(body: Obj) -> list[tuple[str, str]]:
    apply_defaults(HORIZONTALPODAUTOSCALER, body)
    with pytest.raises(errors.StatusError) as e:
        validate(HORIZONTALPODAUTOSCALER, body)
    assert e.value.code == 422
    return [(c.field, c.message) for c in e.value.causes]


def test_defaults_min_replicas_and_the_80_percent_cpu_metric() -> None:
    body = hpa()
    apply_defaults(HORIZONTALPODAUTOSCALER, body)
    assert body["spec"]["minReplicas"] == 1
    assert body["spec"]["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 80}}}]
    assert "behavior" not in body["spec"]  # only a given behavior is completed
    validate(HORIZONTALPODAUTOSCALER, body)


def test_a_partial_behavior_is_completed_with_upstream_defaults() -> None:
    body = hpa(behavior={"scaleDown": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}})
    apply_defaults(HORIZONTALPODAUTOSCALER, body)
    assert body["spec"]["behavior"] == {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                 {"type": "Percent", "value": 100, "periodSeconds": 15}]},
        "scaleDown": {"selectPolicy": "Max", "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}


@pytest.mark.parametrize(("spec", "expected"), [
    ({"minReplicas": 5, "maxReplicas": 3},
     [("spec.maxReplicas", "Invalid value: 3: must be greater than or equal to `minReplicas`")]),
    ({"minReplicas": 0},
     [("spec.minReplicas", "Invalid value: 0: must be greater than or equal to 1"),
      ("spec.metrics", "Forbidden: must specify at least one Object or External metric to support scaling to zero "
                       "replicas")]),
    ({"maxReplicas": 0},
     [("spec.maxReplicas", "Invalid value: 0: must be greater than 0"),
      ("spec.maxReplicas", "Invalid value: 0: must be greater than or equal to `minReplicas`")]),
    ({"metrics": [{"type": "Bogus"}]},
     [("spec.metrics[0].type", 'Unsupported value: "Bogus": supported values: "ContainerResource", "External", '
                               '"Object", "Pods", "Resource"')]),
    ({"metrics": [{"type": "Pods", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                          "averageUtilization": 50}}}]},
     [("spec.metrics[0].pods", "Required value: must populate information for the given metric source")]),
    ({"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                              "averageUtilization": 0}}}]},
     [("spec.metrics[0].resource.target.averageUtilization", "Invalid value: 0: must be greater than 0")]),
    ({"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}]},
     [("spec.metrics[0].resource.target.averageUtilization",
       "Required value: must set either a target raw value or a target utilization")]),
    ({"metrics": [{"type": "External", "external": {"metric": {"name": "queue"}, "target": {
        "type": "Value", "value": "10", "averageValue": "1"}}}]},
     [("spec.metrics[0].external.target.value",
       "Forbidden: may not set both a target value for metric and a per-pod target")]),
    ({"behavior": {"scaleDown": {"stabilizationWindowSeconds": 4000, "selectPolicy": "Sometimes",
                                 "policies": [{"type": "Percent", "value": 0, "periodSeconds": 2000}]}}},
     [("spec.behavior.scaleDown.stabilizationWindowSeconds", "Invalid value: 4000: must be less than or equal to 3600"),
      ("spec.behavior.scaleDown.selectPolicy",
       'Unsupported value: "Sometimes": supported values: "Disabled", "Max", "Min"'),
      ("spec.behavior.scaleDown.policies[0].value", "Invalid value: 0: must be greater than zero"),
      ("spec.behavior.scaleDown.policies[0].periodSeconds",
       "Invalid value: 2000: must be less than or equal to 1800")]),
    ({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "", "name": "a/b"}},
     [("spec.scaleTargetRef.kind", "Required value"),
      ("spec.scaleTargetRef.name", "Invalid value: \"a/b\": may not contain '/'")]),
], ids=["min-above-max", "min-zero", "max-zero", "unknown-metric-type", "wrong-source", "utilization-zero",
        "no-target", "external-both-targets", "behavior", "scale-target-ref"])
def test_validation_names_the_field(spec: Obj, expected: list[tuple[str, str]]) -> None:
    assert causes(hpa(**spec)) == expected


def test_v1_round_trips_through_v2_with_upstream_annotations() -> None:
    v2 = hpa(minReplicas=2, metrics=[
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
        {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue",
                                                                        "averageValue": "10"}}}],
        behavior={"scaleDown": {"stabilizationWindowSeconds": 60}})
    v2["status"] = {"currentReplicas": 3, "desiredReplicas": 4,
                    "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {
                        "averageUtilization": 70, "averageValue": "350m"}}}],
                    "conditions": [{"type": "AbleToScale", "status": "True", "reason": "SucceededRescale",
                                    "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    v1 = autoscaling_v1.to_v1(v2)
    assert v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"] == {"scaleTargetRef": v2["spec"]["scaleTargetRef"], "minReplicas": 2, "maxReplicas": 10,
                          "targetCPUUtilizationPercentage": 50}
    assert v1["status"] == {"currentReplicas": 3, "desiredReplicas": 4, "currentCPUUtilizationPercentage": 70}
    notes = v1["metadata"]["annotations"]
    assert json.loads(notes["autoscaling.alpha.kubernetes.io/metrics"]) == [
        {"type": "Pods", "pods": {"metricName": "rps", "targetAverageValue": "10"}}]
    assert json.loads(notes["autoscaling.alpha.kubernetes.io/current-metrics"]) == [
        {"type": "Resource", "resource": {"name": "cpu", "currentAverageUtilization": 70,
                                          "currentAverageValue": "350m"}}]
    assert json.loads(notes["autoscaling.alpha.kubernetes.io/behavior"]) == v2["spec"]["behavior"]
    assert json.loads(notes["autoscaling.alpha.kubernetes.io/conditions"]) == v2["status"]["conditions"]
    back = autoscaling_v1.to_v2(copy.deepcopy(v1))
    assert "annotations" not in back["metadata"]
    assert back["spec"]["behavior"] == v2["spec"]["behavior"]
    assert sorted(m["type"] for m in back["spec"]["metrics"]) == ["Pods", "Resource"]
    assert back["status"]["currentMetrics"] == v2["status"]["currentMetrics"]
    assert back["status"]["conditions"] == v2["status"]["conditions"]


@pytest.mark.parametrize(("metrics", "current", "expected"), [
    ([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}],
     [], "cpu: <unknown>/50%"),
    ([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}],
     [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40, "averageValue": "40m"}}}],
     "cpu: 40%/50%"),
    ([{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue",
                                                                     "averageValue": "512Mi"}}}],
     [{"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "268435456"}}}],
     "memory: 268435456/512Mi"),
    ([{"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue",
                                                                      "averageValue": "10"}}},
      {"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "AverageValue",
                                                                          "averageValue": "30"}}},
      {"type": "Object", "object": {"metric": {"name": "hits"}, "target": {"type": "Value", "value": "1k"}}}],
     [{"type": "Pods", "pods": {"metric": {"name": "rps"}, "current": {"averageValue": "12500m"}}}],
     "12500m/10, <unknown>/30 (avg) + 1 more..."),
    ([], [], "<none>"),
], ids=["unknown-yet", "utilization", "average-value", "two-then-more", "none"])
def test_targets_column(metrics: list[Obj], current: list[Obj], expected: str) -> None:
    obj = hpa(metrics=metrics, minReplicas=2)
    obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    obj["status"] = {"currentReplicas": 3, "currentMetrics": current}
    row = tables.printer_for(HORIZONTALPODAUTOSCALER.resource).cells(obj, 1_767_225_600.0 + 120)
    assert row == ["web", "Deployment/web", expected, "2", 10, 3, "2m"]
