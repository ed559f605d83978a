"""Validation of ``autoscaling/v2`` HorizontalPodAutoscalers, with upstream's field paths and messages.

A re-implementation of upstream ``pkg/apis/autoscaling/validation/validation.go``
(``ValidateHorizontalPodAutoscaler``, ``validateMetrics``, ``validateMetricSpec``,
``validateMetricTarget``, ``validateBehavior``, ``validateScalingPolicy``):

* ``spec.minReplicas`` >= 1 (scale to zero, the ``HPAScaleToZero`` gate, is off as in
  a default cluster), ``spec.maxReplicas`` > 0 and >= ``minReplicas``;
* ``spec.scaleTargetRef`` kind and name required and valid path segments; only when
  it is valid are the metrics checked, and only when they are, the behavior (upstream's
  ``else if`` chain);
* each metric: a known ``type`` whose source (and only that source) is populated, a
  well-formed target (``Utilization``/``Value``/``AverageValue``, positive values) and
  the per-source rules;
* behavior: stabilization window 0..3600 s, ``selectPolicy`` Max/Min/Disabled, at least
  one policy, each ``Pods``/``Percent`` with a positive value and a period of 1..1800 s;
* status writes: ``currentReplicas`` and ``desiredReplicas`` not negative.

It registers itself in :data:`~emulator.server.validation.registry.VALIDATORS`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from emulator.api.errors import Cause, render_value
from emulator.api.types import Obj
from emulator.server.validation.registry import register
from emulator.server.validation.resources import TOO_LARGE, quantity

MAX_PERIOD_SECONDS = 1800
MAX_STABILIZATION_WINDOW_SECONDS = 3600
MIN_REPLICAS_LOWER_BOUND = 1
_METRIC_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")  # sets.List(): sorted
_SOURCE_FIELDS = {"Object": "object", "External": "external", "Pods": "pods", "Resource": "resource",
                  "ContainerResource": "containerResource"}
_TARGET_TYPES = ("Utilization", "Value", "AverageValue")
_SELECT_POLICIES = ("Disabled", "Max", "Min")
_POLICY_TYPES = ("Percent", "Pods")


def _invalid(causes: list[Cause], path: str, value: Any, detail: str) -> None:
    causes.append(Cause(path, f"Invalid value: {render_value(value)}: {detail}", "FieldValueInvalid"))


def _required(causes: list[Cause], path: str, detail: str = "") -> None:
    causes.append(Cause(path, f"Required value: {detail}" if detail else "Required value", "FieldValueRequired"))


def _forbidden(causes: list[Cause], path: str, detail: str) -> None:
    causes.append(Cause(path, f"Forbidden: {detail}", "FieldValueForbidden"))


def _not_supported(causes: list[Cause], path: str, value: Any, supported: Iterable[str]) -> None:
    allowed = ", ".join(json.dumps(s) for s in supported)
    causes.append(Cause(path, f"Unsupported value: {render_value(value)}: supported values: {allowed}",
                        "FieldValueNotSupported"))


def _dict(causes: list[Cause], path: str, value: Any) -> Obj:
    if isinstance(value, dict):
        return value
    if value is not None:
        causes.append(Cause(path, f"Invalid value: {render_value(value)}: must be an object", "FieldValueTypeInvalid"))
    return {}


def _int(causes: list[Cause], path: str, value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if value is not None:
        causes.append(Cause(path, f"Invalid value: {render_value(value)}: must be an integer",
                            "FieldValueTypeInvalid"))
    return None


def _path_segment_errors(name: str) -> list[str]:
    """``path.IsValidPathSegmentName``."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def _check_cross_version_ref(causes: list[Cause], path: str, ref: Obj) -> None:
    """``ValidateCrossVersionObjectReference``."""
    for field in ("kind", "name"):
        value = ref.get(field)
        if not value:
            _required(causes, f"{path}.{field}")
            continue
        if not isinstance(value, str):
            _invalid(causes, f"{path}.{field}", value, "must be a string")
            continue
        for msg in _path_segment_errors(value):
            _invalid(causes, f"{path}.{field}", value, msg)


def _check_metric_target(causes: list[Cause], path: str, target: Obj) -> None:
    """``validateMetricTarget``."""
    ttype = target.get("type")
    if not ttype:
        _required(causes, path + ".type", "must specify a metric target type")
    if ttype not in _TARGET_TYPES:
        _invalid(causes, path + ".type", ttype or "", "must be either Utilization, Value, or AverageValue")
    for field in ("value", "averageValue"):
        raw = target.get(field)
        if raw is None:
            continue
        parsed = quantity(raw)
        if isinstance(parsed, str):
            _invalid(causes, f"{path}.{field}", raw, parsed if parsed == TOO_LARGE else "must be a quantity")
            continue
        if parsed[1] != 1:
            _invalid(causes, f"{path}.{field}", raw, "must be positive")
    utilization = _int(causes, path + ".averageUtilization", target.get("averageUtilization"))
    if utilization is not None and utilization < 1:
        _invalid(causes, path + ".averageUtilization", utilization, "must be greater than 0")


def _check_metric_identifier(causes: list[Cause], path: str, metric: Obj) -> None:
    name = metric.get("name")
    if not name:
        _required(causes, path + ".name", "must specify a metric name")
        return
    for msg in _path_segment_errors(str(name)):
        _invalid(causes, path + ".name", name, msg)


def _check_resource_source(causes: list[Cause], path: str, src: Obj, container: bool) -> None:
    if not src.get("name"):
        _required(causes, path + ".name", "must specify a resource name")
    if container and not src.get("container"):
        _required(causes, path + ".container", "must specify a container")
    target = _dict(causes, path + ".target", src.get("target"))
    _check_metric_target(causes, path + ".target", target)
    has_util, has_value = target.get("averageUtilization") is not None, target.get("averageValue") is not None
    if not has_util and not has_value:
        _required(causes, path + ".target.averageUtilization", "must set either a target raw value or a target "
                                                               "utilization")
    if has_util and has_value:
        _forbidden(causes, path + ".target.averageValue", "may not set both a target raw value and a target "
                                                          "utilization")


def _check_source(causes: list[Cause], path: str, mtype: str, src: Obj) -> None:
    if mtype in ("Resource", "ContainerResource"):
        _check_resource_source(causes, path, src, mtype == "ContainerResource")
        return
    if mtype == "Object":
        _check_cross_version_ref(causes, path + ".describedObject", _dict(causes, path + ".describedObject",
                                                                          src.get("describedObject")))
    _check_metric_identifier(causes, path + ".metric", _dict(causes, path + ".metric", src.get("metric")))
    target = _dict(causes, path + ".target", src.get("target"))
    _check_metric_target(causes, path + ".target", target)
    value, average = target.get("value"), target.get("averageValue")
    if mtype == "Object" and value is None and average is None:
        _required(causes, path + ".target.averageValue", "must set either a target value or averageValue")
    if mtype == "External":
        if value is None and average is None:
            _required(causes, path + ".target.averageValue", "must set either a target value for metric or a "
                                                             "per-pod target")
        if value is not None and average is not None:
            _forbidden(causes, path + ".target.value", "may not set both a target value for metric and a per-pod "
                                                       "target")
    if mtype == "Pods" and average is None:
        _required(causes, path + ".target.averageValue", "must specify a positive target averageValue")


def _check_metric_spec(causes: list[Cause], path: str, spec: Obj) -> None:
    """``validateMetricSpec``: a known type, its source populated, no other source."""
    mtype = spec.get("type")
    if not mtype:
        _required(causes, path + ".type", "must specify a metric source type")
    present = [(t, f) for t, f in _SOURCE_FIELDS.items() if spec.get(f) is not None]
    if present:
        first_type, first_field = present[0]
        _check_source(causes, f"{path}.{first_field}", first_type,
                      _dict(causes, f"{path}.{first_field}", spec.get(first_field)))
    expected = _SOURCE_FIELDS.get(str(mtype)) if isinstance(mtype, str) else None
    if expected is None:
        if mtype:
            _not_supported(causes, path + ".type", mtype, _METRIC_TYPES)
    elif spec.get(expected) is None:
        _required(causes, f"{path}.{expected}", "must populate information for the given metric source")
    if len(present) != 1:
        for _t, field in present:
            if field != expected:
                _forbidden(causes, f"{path}.{field}", "must populate the given metric source only")


def _check_scaling_rules(causes: list[Cause], path: str, rules: Any) -> None:
    if rules is None:
        return
    rules = _dict(causes, path, rules)
    window = _int(causes, path + ".stabilizationWindowSeconds", rules.get("stabilizationWindowSeconds"))
    if window is not None and window < 0:
        _invalid(causes, path + ".stabilizationWindowSeconds", window, "must be greater than or equal to zero")
    if window is not None and window > MAX_STABILIZATION_WINDOW_SECONDS:
        _invalid(causes, path + ".stabilizationWindowSeconds", window,
                 f"must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}")
    select = rules.get("selectPolicy")
    if select is not None and select not in _SELECT_POLICIES:
        _not_supported(causes, path + ".selectPolicy", select, _SELECT_POLICIES)
    policies = rules.get("policies")
    if not policies:
        _required(causes, path + ".policies", "must specify at least one Policy")
        return
    if not isinstance(policies, list):
        _invalid(causes, path + ".policies", policies, "must be an array")
        return
    for i, raw in enumerate(policies):
        p = f"{path}.policies[{i}]"
        policy = _dict(causes, p, raw)
        if policy.get("type") not in _POLICY_TYPES:
            _not_supported(causes, p + ".type", policy.get("type") or "", _POLICY_TYPES)
        value = _int(causes, p + ".value", policy.get("value"))
        if value is None or value <= 0:
            _invalid(causes, p + ".value", value or 0, "must be greater than zero")
        period = _int(causes, p + ".periodSeconds", policy.get("periodSeconds"))
        if period is None or period <= 0:
            _invalid(causes, p + ".periodSeconds", period or 0, "must be greater than zero")
        elif period > MAX_PERIOD_SECONDS:
            _invalid(causes, p + ".periodSeconds", period, f"must be less than or equal to {MAX_PERIOD_SECONDS}")


@register("horizontalpodautoscalers.autoscaling")
def validate_horizontal_pod_autoscaler(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    """``ValidateHorizontalPodAutoscaler`` (and the status checks of its status update)."""
    spec = _dict(causes, "spec", obj.get("spec"))
    min_replicas = _int(causes, "spec.minReplicas", spec.get("minReplicas"))
    max_replicas = _int(causes, "spec.maxReplicas", spec.get("maxReplicas"))
    if min_replicas is not None and min_replicas < MIN_REPLICAS_LOWER_BOUND:
        _invalid(causes, "spec.minReplicas", min_replicas,
                 f"must be greater than or equal to {MIN_REPLICAS_LOWER_BOUND}")
    if (max_replicas or 0) < 1:
        _invalid(causes, "spec.maxReplicas", max_replicas or 0, "must be greater than 0")
    if min_replicas is not None and (max_replicas or 0) < min_replicas:
        _invalid(causes, "spec.maxReplicas", max_replicas or 0, "must be greater than or equal to `minReplicas`")
    before = len(causes)
    _check_cross_version_ref(causes, "spec.scaleTargetRef", _dict(causes, "spec.scaleTargetRef",
                                                                  spec.get("scaleTargetRef")))
    if len(causes) == before:
        metrics = spec.get("metrics") or []
        if not isinstance(metrics, list):
            _invalid(causes, "spec.metrics", metrics, "must be an array")
            metrics = []
        for i, metric in enumerate(metrics):
            _check_metric_spec(causes, f"spec.metrics[{i}]", _dict(causes, f"spec.metrics[{i}]", metric))
        # Only string types name a source (a dict "type" was reported above and is not hashable).
        types = {m.get("type") for m in metrics if isinstance(m, dict) and isinstance(m.get("type"), str)}
        if min_replicas == 0 and not types & {"Object", "External"}:
            _forbidden(causes, "spec.metrics", "must specify at least one Object or External metric to support "
                                               "scaling to zero replicas")
        if len(causes) == before:
            behavior = spec.get("behavior")
            if behavior is not None:
                behavior = _dict(causes, "spec.behavior", behavior)
                _check_scaling_rules(causes, "spec.behavior.scaleUp", behavior.get("scaleUp"))
                _check_scaling_rules(causes, "spec.behavior.scaleDown", behavior.get("scaleDown"))
    status = obj.get("status")
    if isinstance(status, dict):
        for field in ("currentReplicas", "desiredReplicas"):
            value = _int(causes, f"status.{field}", status.get(field))
            if value is not None and value < 0:
                _invalid(causes, f"status.{field}", value, "must be greater than or equal to 0")
