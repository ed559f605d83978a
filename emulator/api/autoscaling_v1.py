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


# ----------------------------------------------------------------------------- metric types
# One table serves both directions and both sides (spec targets, status currents). A row is a v1
# field (``{side}``: ``target`` in a spec, ``current`` in a status), where its value sits in v2 (the
# source itself, its ``metric``, or its target/current value), the v2 key, and per side how an
# absent value converts (to v1, to v2): OPT leaves the field out, RAW writes it (even null), ZERO
# writes "0" (v1's non-pointer quantities), OBJ writes {}. Rows are in the v1 types' field order.
OPT, RAW, ZERO, OBJ = "opt", "raw", "zero", "obj"
_SRC, _METRIC, _VALUE = "src", "metric", "value"
_Modes = tuple[str, str]  # to v1, to v2
_Row = tuple[str, str, str, str, str]  # v1 field, place, v2 key, to-v1 mode, to-v2 mode

_RESOURCE: tuple[tuple[str, str, str, _Modes, _Modes], ...] = (
    ("name", _SRC, "name", (RAW, RAW), (RAW, RAW)),
    ("{side}AverageUtilization", _VALUE, "averageUtilization", (OPT, OPT), (OPT, OPT)),
    ("{side}AverageValue", _VALUE, "averageValue", (OPT, OPT), (ZERO, OPT)),
    ("container", _SRC, "container", (OPT, OPT), (OPT, OPT)))
_ROWS: dict[str, tuple[tuple[str, str, str, _Modes, _Modes], ...]] = {
    "Resource": _RESOURCE,
    "ContainerResource": _RESOURCE,
    "Pods": (("metricName", _METRIC, "name", (RAW, RAW), (RAW, RAW)),
             ("{side}AverageValue", _VALUE, "averageValue", (RAW, RAW), (ZERO, RAW)),
             ("selector", _METRIC, "selector", (OPT, OPT), (OPT, OPT))),
    "Object": (("target", _SRC, "describedObject", (OBJ, OBJ), (OBJ, OBJ)),
               ("metricName", _METRIC, "name", (RAW, RAW), (RAW, RAW)),
               ("{side}Value", _VALUE, "value", (ZERO, RAW), (ZERO, RAW)),
               ("selector", _METRIC, "selector", (OPT, OPT), (OPT, OPT)),
               ("averageValue", _VALUE, "averageValue", (OPT, OPT), (OPT, OPT))),
    "External": (("metricName", _METRIC, "name", (RAW, RAW), (RAW, RAW)),
                 ("metricSelector", _METRIC, "selector", (OPT, OPT), (OPT, OPT)),
                 ("{side}Value", _VALUE, "value", (OPT, RAW), (ZERO, RAW)),
                 ("{side}AverageValue", _VALUE, "averageValue", (OPT, OPT), (OPT, OPT))),
}
# The rows of each metric type and side, with the v1 names and the modes of that side.
_METRIC_ROWS: dict[str, dict[str, tuple[_Row, ...]]] = {
    mtype: {side: tuple((v1.format(side=side), place, v2, *(spec if side == "target" else status))
                        for v1, place, v2, spec, status in rows)
            for side in ("target", "current")}
    for mtype, rows in _ROWS.items()}
_SOURCE_KEY = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods",
               "Object": "object", "External": "external"}
# A v2 target's type by the key that holds its value; a v1 spec picks the first one it has, in this order.
_TARGET_TYPES = {"averageUtilization": "Utilization", "averageValue": "AverageValue", "value": "Value"}


def _put(out: Obj, key: str, value: Any, mode: str) -> None:
    if mode == OPT:
        _set(out, key, value)
    else:
        out[key] = value if mode == RAW else value or ("0" if mode == ZERO else {})


def _convert_metric(m: Obj, side: str, *, to_v1: bool) -> Obj:
    """A metric spec (``side`` "target") or status ("current"): v2 to v1's (v2beta1) shape, or back."""
    mtype = m.get("type")
    out: Obj = {"type": mtype}
    if mtype not in _METRIC_ROWS:
        return out
    key = _SOURCE_KEY[mtype]
    src = m.get(key) or {}
    rows = _METRIC_ROWS[mtype][side]
    out[key] = _source_to_v1(src, rows, side) if to_v1 else _source_to_v2(src, rows, side)
    return out


def _source_to_v1(src: Obj, rows: tuple[_Row, ...], side: str) -> Obj:
    places = {_SRC: src, _METRIC: src.get("metric") or {}, _VALUE: src.get(side) or {}}
    conv: Obj = {}
    for v1, place, v2, mode, _ in rows:
        _put(conv, v1, places[place].get(v2), mode)
    return conv


def _source_to_v2(src: Obj, rows: tuple[_Row, ...], side: str) -> Obj:
    conv: Obj = {}
    for v1, place, v2, _, mode in rows:
        if place == _SRC:
            _put(conv, v2, src.get(v1), mode)
        elif place == _METRIC:
            _put(conv.setdefault("metric", {}), v2, src.get(v1), mode)
        elif side not in conv:
            conv[side] = _target_to_v2(src, rows) if side == "target" else _current_to_v2(src, rows)
    return conv


def _target_to_v2(src: Obj, rows: tuple[_Row, ...]) -> Obj:
    """The first value the v1 spec has, by :data:`_TARGET_TYPES` order; else the required one (null), or {}."""
    values = sorted((r for r in rows if r[1] == _VALUE), key=lambda r: list(_TARGET_TYPES).index(r[2]))
    for v1, _, v2, _, _ in values:
        if src.get(v1) is not None:
            return {"type": _TARGET_TYPES[v2], v2: src[v1]}
    required = [r for r in values if r[4] == RAW]
    return {"type": _TARGET_TYPES[required[-1][2]], required[-1][2]: src.get(required[-1][0])} if required else {}


def _current_to_v2(src: Obj, rows: tuple[_Row, ...]) -> Obj:
    current: Obj = {}
    for v1, place, v2, _, mode in rows:
        if place == _VALUE:
            _put(current, v2, src.get(v1), mode)
    return current


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
    others = [_convert_metric(m, "target", to_v1=True) for m in metrics if not _is_cpu_utilization(m)]
    if others:
        annotations[METRICS_ANNOTATION] = json.dumps(others, separators=(",", ":"))
    current = status.get("currentMetrics") or []
    if current:
        annotations[CURRENT_METRICS_ANNOTATION] = json.dumps(
            [_convert_metric(m, "current", to_v1=True) for m in current], separators=(",", ":"))
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
    metrics = [_convert_metric(m, "target", to_v1=False)
               for m in _annotation_list(annotations, METRICS_ANNOTATION) or []]
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
    current = [_convert_metric(m, "current", to_v1=False)
               for m in _annotation_list(annotations, CURRENT_METRICS_ANNOTATION) or []]
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
