"""``autoscaling/v1`` HorizontalPodAutoscaler <-> ``autoscaling/v2`` (the stored version), as upstream converts.

A re-implementation of upstream ``pkg/apis/autoscaling/v1/conversion.go``. v1 knows one
metric, ``spec.targetCPUUtilizationPercentage`` (and ``status.currentCPUUtilizationPercentage``);
everything else v2 holds travels in annotations, in v1's (v2beta1-shaped) metric types:

* ``autoscaling.alpha.kubernetes.io/metrics``: the metric specs other than the CPU
  utilization one;
* ``autoscaling.alpha.kubernetes.io/current-metrics``: every metric status (the CPU one
  too, so its raw value survives);
* ``autoscaling.alpha.kubernetes.io/behavior``: ``spec.behavior``;
* ``autoscaling.alpha.kubernetes.io/conditions``: ``status.conditions``.

Reading v1 drops any such annotation the client sent and writes those the object implies;
writing v1 rebuilds the v2 fields from them (a malformed annotation is ignored, as upstream
ignores a JSON error) and removes them. Objects are JSON dicts; inputs are not mutated.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from emulator.api.types import Obj

METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
ROUND_TRIP_ANNOTATIONS = (METRICS_ANNOTATION, CURRENT_METRICS_ANNOTATION, BEHAVIOR_ANNOTATION, CONDITIONS_ANNOTATION)


def _set(out: Obj, key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def _is_cpu_utilization(metric: Obj) -> bool:
    resource = metric.get("resource") or {}
    return (metric.get("type") == "Resource" and resource.get("name") == "cpu"
            and (resource.get("target") or {}).get("averageUtilization") is not None)


def _drop_round_trip(meta: Obj) -> Obj:
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in ROUND_TRIP_ANNOTATIONS}
    out = {k: v for k, v in meta.items() if k != "annotations"}
    if annotations:
        out["annotations"] = annotations
    return out


# ----------------------------------------------------------------------------- metric types, v2 -> v1


def _metric_spec_to_v1(m: Obj) -> Obj:
    mtype = m.get("type")
    out: Obj = {"type": mtype}
    if mtype in ("Resource", "ContainerResource"):
        key = "resource" if mtype == "Resource" else "containerResource"
        src = m.get(key) or {}
        target = src.get("target") or {}
        conv: Obj = {"name": src.get("name")}
        _set(conv, "targetAverageUtilization", target.get("averageUtilization"))
        _set(conv, "targetAverageValue", target.get("averageValue"))
        _set(conv, "container", src.get("container"))
        out[key] = conv
    elif mtype == "Pods":
        src = m.get("pods") or {}
        metric, target = src.get("metric") or {}, src.get("target") or {}
        conv = {"metricName": metric.get("name"), "targetAverageValue": target.get("averageValue")}
        _set(conv, "selector", metric.get("selector"))
        out["pods"] = conv
    elif mtype == "Object":
        src = m.get("object") or {}
        metric, target = src.get("metric") or {}, src.get("target") or {}
        conv = {"target": src.get("describedObject") or {}, "metricName": metric.get("name"),
                "targetValue": target.get("value") or "0"}
        _set(conv, "selector", metric.get("selector"))
        _set(conv, "averageValue", target.get("averageValue"))
        out["object"] = conv
    elif mtype == "External":
        src = m.get("external") or {}
        metric, target = src.get("metric") or {}, src.get("target") or {}
        conv = {"metricName": metric.get("name")}
        _set(conv, "metricSelector", metric.get("selector"))
        _set(conv, "targetValue", target.get("value"))
        _set(conv, "targetAverageValue", target.get("averageValue"))
        out["external"] = conv
    return out


def _metric_status_to_v1(m: Obj) -> Obj:
    mtype = m.get("type")
    out: Obj = {"type": mtype}
    if mtype in ("Resource", "ContainerResource"):
        key = "resource" if mtype == "Resource" else "containerResource"
        src = m.get(key) or {}
        current = src.get("current") or {}
        conv: Obj = {"name": src.get("name")}
        _set(conv, "currentAverageUtilization", current.get("averageUtilization"))
        conv["currentAverageValue"] = current.get("averageValue") or "0"
        _set(conv, "container", src.get("container"))
        out[key] = conv
    elif mtype == "Pods":
        src = m.get("pods") or {}
        metric, current = src.get("metric") or {}, src.get("current") or {}
        conv = {"metricName": metric.get("name"), "currentAverageValue": current.get("averageValue") or "0"}
        _set(conv, "selector", metric.get("selector"))
        out["pods"] = conv
    elif mtype == "Object":
        src = m.get("object") or {}
        metric, current = src.get("metric") or {}, src.get("current") or {}
        conv = {"target": src.get("describedObject") or {}, "metricName": metric.get("name"),
                "currentValue": current.get("value") or "0"}
        _set(conv, "selector", metric.get("selector"))
        _set(conv, "averageValue", current.get("averageValue"))
        out["object"] = conv
    elif mtype == "External":
        src = m.get("external") or {}
        metric, current = src.get("metric") or {}, src.get("current") or {}
        conv = {"metricName": metric.get("name"), "currentValue": current.get("value") or "0"}
        _set(conv, "metricSelector", metric.get("selector"))
        _set(conv, "currentAverageValue", current.get("averageValue"))
        out["external"] = conv
    return out


# ----------------------------------------------------------------------------- metric types, v1 -> v2


def _metric_spec_to_v2(m: Obj) -> Obj:
    mtype = m.get("type")
    out: Obj = {"type": mtype}
    if mtype in ("Resource", "ContainerResource"):
        key = "resource" if mtype == "Resource" else "containerResource"
        src = m.get(key) or {}
        target: Obj = {}
        if src.get("targetAverageUtilization") is not None:
            target = {"type": "Utilization", "averageUtilization": src["targetAverageUtilization"]}
        elif src.get("targetAverageValue") is not None:
            target = {"type": "AverageValue", "averageValue": src["targetAverageValue"]}
        conv: Obj = {"name": src.get("name"), "target": target}
        _set(conv, "container", src.get("container"))
        out[key] = conv
    elif mtype == "Pods":
        src = m.get("pods") or {}
        metric: Obj = {"name": src.get("metricName")}
        _set(metric, "selector", src.get("selector"))
        out["pods"] = {"metric": metric,
                       "target": {"type": "AverageValue", "averageValue": src.get("targetAverageValue")}}
    elif mtype == "Object":
        src = m.get("object") or {}
        metric = {"name": src.get("metricName")}
        _set(metric, "selector", src.get("selector"))
        if src.get("averageValue") is not None:
            target = {"type": "AverageValue", "averageValue": src["averageValue"]}
        else:
            target = {"type": "Value", "value": src.get("targetValue")}
        out["object"] = {"describedObject": src.get("target") or {}, "metric": metric, "target": target}
    elif mtype == "External":
        src = m.get("external") or {}
        metric = {"name": src.get("metricName")}
        _set(metric, "selector", src.get("metricSelector"))
        if src.get("targetAverageValue") is not None:
            target = {"type": "AverageValue", "averageValue": src["targetAverageValue"]}
        else:
            target = {"type": "Value", "value": src.get("targetValue")}
        out["external"] = {"metric": metric, "target": target}
    return out


def _metric_status_to_v2(m: Obj) -> Obj:
    mtype = m.get("type")
    out: Obj = {"type": mtype}
    if mtype in ("Resource", "ContainerResource"):
        key = "resource" if mtype == "Resource" else "containerResource"
        src = m.get(key) or {}
        current: Obj = {}
        _set(current, "averageUtilization", src.get("currentAverageUtilization"))
        _set(current, "averageValue", src.get("currentAverageValue"))
        conv: Obj = {"name": src.get("name"), "current": current}
        _set(conv, "container", src.get("container"))
        out[key] = conv
    elif mtype == "Pods":
        src = m.get("pods") or {}
        metric: Obj = {"name": src.get("metricName")}
        _set(metric, "selector", src.get("selector"))
        out["pods"] = {"metric": metric, "current": {"averageValue": src.get("currentAverageValue")}}
    elif mtype == "Object":
        src = m.get("object") or {}
        metric = {"name": src.get("metricName")}
        _set(metric, "selector", src.get("selector"))
        current = {"value": src.get("currentValue")}
        _set(current, "averageValue", src.get("averageValue"))
        out["object"] = {"describedObject": src.get("target") or {}, "metric": metric, "current": current}
    elif mtype == "External":
        src = m.get("external") or {}
        metric = {"name": src.get("metricName")}
        _set(metric, "selector", src.get("metricSelector"))
        current = {"value": src.get("currentValue")}
        _set(current, "averageValue", src.get("currentAverageValue"))
        out["external"] = {"metric": metric, "current": current}
    return out


def _annotation_list(annotations: Obj, key: str) -> list[Obj] | None:
    raw = annotations.get(key)
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None  # upstream ignores an annotation it cannot parse
    return value if isinstance(value, list) and all(isinstance(v, dict) for v in value) else None


# ----------------------------------------------------------------------------- objects


def to_v1(obj: Obj) -> Obj:
    """``Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler``."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    meta = _drop_round_trip(copy.deepcopy(obj.get("metadata") or {}))
    annotations: Obj = dict(meta.get("annotations") or {})
    v1_spec: Obj = {"scaleTargetRef": copy.deepcopy(spec.get("scaleTargetRef") or {})}
    _set(v1_spec, "minReplicas", spec.get("minReplicas"))
    v1_spec["maxReplicas"] = spec.get("maxReplicas", 0)
    metrics = spec.get("metrics") or []
    cpu = next((m for m in metrics if _is_cpu_utilization(m)), None)
    if cpu is not None:
        v1_spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"]["averageUtilization"]
    others = [_metric_spec_to_v1(m) for m in metrics if not _is_cpu_utilization(m)]
    if others:
        annotations[METRICS_ANNOTATION] = json.dumps(others, separators=(",", ":"))
    current = status.get("currentMetrics") or []
    if current:
        annotations[CURRENT_METRICS_ANNOTATION] = json.dumps([_metric_status_to_v1(m) for m in current],
                                                             separators=(",", ":"))
    if spec.get("behavior") is not None:
        annotations[BEHAVIOR_ANNOTATION] = json.dumps(spec["behavior"], separators=(",", ":"))
    if status.get("conditions"):
        annotations[CONDITIONS_ANNOTATION] = json.dumps(status["conditions"], separators=(",", ":"))
    if annotations:
        meta["annotations"] = annotations
    v1_status: Obj = {}
    for key in ("observedGeneration", "lastScaleTime"):
        _set(v1_status, key, status.get(key))
    v1_status["currentReplicas"] = status.get("currentReplicas", 0)
    v1_status["desiredReplicas"] = status.get("desiredReplicas", 0)
    for m in current:
        resource = m.get("resource") or {}
        if m.get("type") == "Resource" and resource.get("name") == "cpu":
            _set(v1_status, "currentCPUUtilizationPercentage",
                 (resource.get("current") or {}).get("averageUtilization"))
    return {"kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v1", "metadata": meta, "spec": v1_spec,
            "status": v1_status}


def to_v2(obj: Obj) -> Obj:
    """``Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler``."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    meta = copy.deepcopy(obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {})
    annotations: Obj = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    v2_spec: Obj = {k: copy.deepcopy(v) for k, v in spec.items()
                    if k in ("scaleTargetRef", "minReplicas", "maxReplicas")}
    metrics = [_metric_spec_to_v2(m) for m in _annotation_list(annotations, METRICS_ANNOTATION) or []]
    if spec.get("targetCPUUtilizationPercentage") is not None:
        metrics.append({"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": spec["targetCPUUtilizationPercentage"]}}})
    if metrics:
        v2_spec["metrics"] = metrics
    raw_behavior = annotations.get(BEHAVIOR_ANNOTATION)
    if isinstance(raw_behavior, str):
        try:
            behavior = json.loads(raw_behavior)
        except ValueError:
            behavior = None
        if isinstance(behavior, dict) and behavior:
            v2_spec["behavior"] = behavior
    v2_status: Obj = {k: status[k] for k in ("observedGeneration", "lastScaleTime", "currentReplicas",
                                             "desiredReplicas") if k in status}
    current = [_metric_status_to_v2(m) for m in _annotation_list(annotations, CURRENT_METRICS_ANNOTATION) or []]
    if not current and status.get("currentCPUUtilizationPercentage") is not None:
        current = [{"type": "Resource", "resource": {"name": "cpu", "current": {
            "averageUtilization": status["currentCPUUtilizationPercentage"]}}}]
    if current:
        v2_status["currentMetrics"] = current
    conditions = _annotation_list(annotations, CONDITIONS_ANNOTATION)
    if conditions:
        v2_status["conditions"] = conditions
    out: Obj = {"kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2",
                "metadata": _drop_round_trip(meta), "spec": v2_spec}
    if status:
        out["status"] = v2_status
    return out
