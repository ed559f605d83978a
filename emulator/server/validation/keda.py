"""KEDA's ``keda.sh/v1alpha1`` kinds: the CRDs' OpenAPI schemas (kedacore/keda ``config/crd/bases``).

Structural checks only: required fields, types and enums the CRD schema
enforces before an object is stored. The checks that read other objects
(another HPA or ScaledObject on the same target) and KEDA's cross-field
rules (min <= max, idle < min, fallback) are the validating webhook's:
:mod:`emulator.server.keda_webhook`.
"""

from __future__ import annotations

from emulator.api.errors import Cause
from emulator.api.types import Obj
from emulator.server.validation.field import check_enum, dict_at, int_at, list_at, required, wrong_type
from emulator.server.validation.registry import register

FALLBACK_BEHAVIORS = ("static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower")
METRIC_TYPES = ("AverageValue", "Value", "Utilization")
SCALING_STRATEGIES = ("default", "custom", "accurate", "eager")


def _check_triggers(causes: list[Cause], spec: Obj) -> None:
    if "triggers" not in spec:
        required(causes, "spec.triggers")
        return
    for i, raw in enumerate(list_at(causes, "spec.triggers", spec.get("triggers"))):
        p = f"spec.triggers[{i}]"
        trigger = dict_at(causes, p, raw)
        if not trigger.get("type"):
            required(causes, f"{p}.type")
        elif not isinstance(trigger["type"], str):
            wrong_type(causes, f"{p}.type", trigger["type"], "string")
        if "metadata" not in trigger:
            required(causes, f"{p}.metadata")
        for key, value in dict_at(causes, f"{p}.metadata", trigger.get("metadata")).items():
            if not isinstance(value, str):
                wrong_type(causes, f"{p}.metadata.{key}", value, "string")
        if trigger.get("metricType") is not None:
            check_enum(causes, f"{p}.metricType", trigger["metricType"], METRIC_TYPES)
        ref = dict_at(causes, f"{p}.authenticationRef", trigger.get("authenticationRef"))
        if trigger.get("authenticationRef") is not None and not ref.get("name"):
            required(causes, f"{p}.authenticationRef.name")
        if ref.get("kind") is not None:
            check_enum(causes, f"{p}.authenticationRef.kind", ref["kind"],
                       ("TriggerAuthentication", "ClusterTriggerAuthentication"))


def _check_ints(causes: list[Cause], spec: Obj, fields: tuple[str, ...]) -> None:
    for field in fields:
        if spec.get(field) is not None:
            int_at(causes, f"spec.{field}", spec[field])


def _spec_with_target(obj: Obj, causes: list[Cause], target: str, needs: str) -> Obj | None:
    """The spec (required), after checking that ``spec.<target>`` is set and has its ``needs`` field."""
    if "spec" not in obj:
        required(causes, "spec")
        return None
    spec = dict_at(causes, "spec", obj.get("spec"))
    if not spec.get(target):
        required(causes, f"spec.{target}")
    elif not dict_at(causes, f"spec.{target}", spec[target]).get(needs):
        required(causes, f"spec.{target}.{needs}")
    return spec


@register("scaledobjects.keda.sh")
def _validate_scaled_object(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = _spec_with_target(obj, causes, "scaleTargetRef", "name")
    if spec is None:
        return
    _check_ints(causes, spec, ("pollingInterval", "cooldownPeriod", "initialCooldownPeriod", "idleReplicaCount",
                               "minReplicaCount", "maxReplicaCount"))
    if spec.get("fallback") is not None:
        fb = dict_at(causes, "spec.fallback", spec["fallback"])
        for field in ("failureThreshold", "replicas"):
            if field not in fb:
                required(causes, f"spec.fallback.{field}")
            else:
                int_at(causes, f"spec.fallback.{field}", fb[field])
        if fb.get("behavior") is not None:
            check_enum(causes, "spec.fallback.behavior", fb["behavior"], FALLBACK_BEHAVIORS)
    _check_triggers(causes, spec)


@register("scaledjobs.keda.sh")
def _validate_scaled_job(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = _spec_with_target(obj, causes, "jobTargetRef", "template")
    if spec is None:
        return
    _check_ints(causes, spec, ("pollingInterval", "successfulJobsHistoryLimit", "failedJobsHistoryLimit",
                               "minReplicaCount", "maxReplicaCount"))
    strategy = dict_at(causes, "spec.scalingStrategy", spec.get("scalingStrategy"))
    if strategy.get("strategy") is not None:
        check_enum(causes, "spec.scalingStrategy.strategy", strategy["strategy"], SCALING_STRATEGIES)
    _check_triggers(causes, spec)


def _validate_auth(obj: Obj, causes: list[Cause]) -> None:
    if "spec" not in obj:
        required(causes, "spec")
        return
    spec = dict_at(causes, "spec", obj.get("spec"))
    for i, raw in enumerate(list_at(causes, "spec.secretTargetRef", spec.get("secretTargetRef"))):
        ref = dict_at(causes, f"spec.secretTargetRef[{i}]", raw)
        for field in ("parameter", "name", "key"):
            if not ref.get(field):
                required(causes, f"spec.secretTargetRef[{i}].{field}")
    for i, raw in enumerate(list_at(causes, "spec.env", spec.get("env"))):
        ref = dict_at(causes, f"spec.env[{i}]", raw)
        for field in ("parameter", "name"):
            if not ref.get(field):
                required(causes, f"spec.env[{i}].{field}")


@register("triggerauthentications.keda.sh")
def _validate_trigger_authentication(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    _validate_auth(obj, causes)


@register("clustertriggerauthentications.keda.sh")
def _validate_cluster_trigger_authentication(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    _validate_auth(obj, causes)
