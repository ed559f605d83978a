"""VerticalPodAutoscaler validation: the ``autoscaling.k8s.io`` CRD's schema and the VPA webhook's checks."""

from __future__ import annotations

from emulator.api import vpa as vpa_api
from emulator.api.errors import Cause
from emulator.api.types import Obj
from emulator.server.validation.field import (
    NOT_POSITIVE,
    check_enum,
    dict_at,
    forbidden,
    int_at,
    invalid,
    list_at,
    required,
)
from emulator.server.validation.registry import register
from emulator.server.validation.resources import validate_quantity


@register("verticalpodautoscalers.autoscaling.k8s.io")
def _validate_vpa(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    """VerticalPodAutoscaler: the CRD's schema plus the VPA admission webhook's checks.

    kubernetes/autoscaler ``vertical-pod-autoscaler/deploy/vpa-v1-crd-gen.yaml`` and
    ``pkg/admission-controller/resource/vpa/handler.go`` (ValidateVPA).
    """
    spec = dict_at(causes, "spec", obj.get("spec"))
    if not spec.get("targetRef"):
        required(causes, "spec.targetRef")
    else:
        ref = dict_at(causes, "spec.targetRef", spec["targetRef"])
        for key in ("kind", "name"):
            if not ref.get(key):
                required(causes, f"spec.targetRef.{key}")
    policy = dict_at(causes, "spec.updatePolicy", spec.get("updatePolicy"))
    check_enum(causes, "spec.updatePolicy.updateMode", policy.get("updateMode"), vpa_api.UPDATE_MODES)
    if "minReplicas" in policy:
        value = int_at(causes, "spec.updatePolicy.minReplicas", policy["minReplicas"])
        if value is not None and value <= 0:
            invalid(causes, "spec.updatePolicy.minReplicas", value, NOT_POSITIVE)
    resource_policy = dict_at(causes, "spec.resourcePolicy", spec.get("resourcePolicy"))
    for i, raw in enumerate(list_at(causes, "spec.resourcePolicy.containerPolicies",
                                     resource_policy.get("containerPolicies"))):
        p = f"spec.resourcePolicy.containerPolicies[{i}]"
        cp = dict_at(causes, p, raw)
        if not cp.get("containerName"):
            required(causes, f"{p}.containerName")
        if cp.get("mode") is not None:
            check_enum(causes, f"{p}.mode", cp["mode"], vpa_api.CONTAINER_MODES)
        if cp.get("controlledValues") is not None:
            check_enum(causes, f"{p}.controlledValues", cp["controlledValues"], vpa_api.CONTROLLED_VALUES)
            if cp.get("mode") == "Off":
                forbidden(causes, f"{p}.controlledValues",
                           "controlledValues shouldn't be specified if container scaling mode is off")
        for j, r in enumerate(list_at(causes, f"{p}.controlledResources", cp.get("controlledResources"))):
            check_enum(causes, f"{p}.controlledResources[{j}]", r, vpa_api.RESOURCES)
        bounds = {}
        for field in ("minAllowed", "maxAllowed"):
            values = dict_at(causes, f"{p}.{field}", cp.get(field))
            bounds[field] = {}
            for name, value in values.items():
                q = validate_quantity(value, f"{p}.{field}[{name}]", causes)
                if q is not None:
                    bounds[field][name] = q
        for name, low in bounds["minAllowed"].items():
            high = bounds["maxAllowed"].get(name)
            if high is not None and high < low:
                invalid(causes, f"{p}.maxAllowed[{name}]", str(high), f"max resource for {name} is lower than min")
    recommenders = list_at(causes, "spec.recommenders", spec.get("recommenders"))
    if len(recommenders) > 1:
        invalid(causes, "spec.recommenders", len(recommenders),
                 "the current version of VPA object shouldn't specify more than one recommenders")
