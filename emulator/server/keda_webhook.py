"""KEDA's validating admission webhook (``vscaledobject.kb.io`` / ``vscaledjob.kb.io``) as an admission plugin.

kedacore/keda ``apis/keda/v1alpha1/scaledobject_webhook.go`` (``validateWorkload``:
``verifyScaledObjects``, ``verifyHpas``, ``verifyReplicaCount``, ``verifyFallback``,
``verifyName``, ``verifyTriggers``, ``ValidateAndCompileScalingModifiers``) and
``scaledjob_webhook.go``. Upstream the webhook is an HTTPS callout the API server makes;
a denial reaches the client as
``admission webhook "vscaledobject.kb.io" denied the request: <message>`` with
code 403, which is what this plugin raises. Reads go through the request's
:class:`~emulator.server.admission.Lookup` (HPAs and ScaledObjects of the namespace).
"""

from __future__ import annotations

from emulator.api import errors
from emulator.api import keda as k
from emulator.api.kinds import HORIZONTALPODAUTOSCALER, SCALEDJOB, SCALEDOBJECT
from emulator.api.types import Obj
from emulator.keda.formula import FormulaError, compile_formula
from emulator.server.admission import Attributes, Lookup

SCALEDOBJECT_WEBHOOK = "vscaledobject.kb.io"
SCALEDJOB_WEBHOOK = "vscaledjob.kb.io"


def _denied(webhook: str, message: str) -> errors.StatusError:
    return errors.StatusError(403, "Forbidden", f'admission webhook "{webhook}" denied the request: {message}')


def verify_triggers(triggers: list[Obj]) -> str | None:
    """``ValidateTriggers`` (scaletriggers_types.go)."""
    if not triggers:
        return "no triggers defined in the ScaledObject/ScaledJob"
    names: set[str] = set()
    for trigger in triggers:
        kind = trigger.get("type")
        if trigger.get("useCachedMetrics") and kind in ("cpu", "memory", "cron"):
            return f'property "useCachedMetrics" is not supported for "{kind}" scaler'
        name = trigger.get("name")
        if name:
            if name in names:
                return (f'triggerName "{name}" is defined multiple times in the ScaledObject/ScaledJob, '
                        "but it must be unique")
            names.add(name)
    return None


def verify_replica_count(so: Obj) -> str | None:
    """``CheckReplicaCountBoundsAreValid``."""
    minimum = k.hpa_min_replicas(so) if k.min_replica_count(so) is not None else 0
    maximum = k.hpa_max_replicas(so)
    if minimum > maximum:
        return f"MinReplicaCount={minimum} must be less than MaxReplicaCount={maximum}"
    idle = k.idle_replica_count(so)
    if idle is not None and idle >= minimum:
        return f"IdleReplicaCount={idle} must be less than MinReplicaCount={minimum}"
    return None


def verify_fallback(so: Obj) -> str | None:
    """``CheckFallbackValid``: fallback needs a non-cpu/memory trigger with an AverageValue target."""
    fb = k.fallback(so)
    if fb is None:
        return None
    threshold, replicas = int(fb.get("failureThreshold") or 0), int(fb.get("replicas") or 0)
    if threshold < 0 or replicas < 0:
        return f"FailureThreshold={threshold} & Replicas={replicas} must both be greater than or equal to 0"
    if k.scaling_modifiers(so) is None and not any(
            t.get("type") not in ("cpu", "memory") and (t.get("metricType") or "AverageValue") == "AverageValue"
            for t in k.triggers(so)):  # with scalingModifiers the composite metric is AverageValue or Value
        return ("at least one trigger (that is not cpu or memory) has to have the `AverageValue` type for the "
                "fallback to be enabled")
    return None


def verify_scaling_modifiers(so: Obj) -> str | None:
    """``ValidateAndCompileScalingModifiers``: a formula over the trigger names, a target > 0, not Utilization.
    Upstream joins the cause under a headline (``errors.Join``: one per line)."""
    modifiers = k.scaling_modifiers(so)
    if modifiers is None:
        return None
    formula = str(modifiers.get("formula") or "")
    if not formula:
        return "error ScalingModifiers.Formula is mandatory"
    target = str(modifiers.get("target") or "")
    if not target:
        return "error validating formula in ScalingModifiers\nformula is given but target is empty"
    try:
        compile_formula(formula, k.formula_trigger_names(so))
    except FormulaError as e:
        return f"error validating formula in ScalingModifiers\n{e}"
    try:
        number: float | None = float(target)
        cause = "%!w(<nil>)"  # Go's %w of a nil error: the number parsed but is not > 0
    except ValueError:
        number, cause = None, f'strconv.ParseFloat: parsing "{target}": invalid syntax'
    if number is None or number <= 0:
        return ("error validating target in ScalingModifiers\nerror converting target for scalingModifiers "
                f"(string->float) to valid target: {cause}")
    if modifiers.get("metricType") == "Utilization":
        return ("error validating target in ScalingModifiers\nerror trigger type is Utilization, but it needs to be "
                "AverageValue or Value for external metrics")
    return None


def verify_name(so: Obj) -> str | None:
    name = str((so.get("metadata") or {}).get("name") or "")
    if len(name) > k.MAX_LABEL_VALUE:
        return (f'scaledobject name "{name}" is {len(name)} characters long; must be no more than '
                f'{k.MAX_LABEL_VALUE} characters because it is used as the "{k.OWNER_LABEL}" label value')
    hpa = k.hpa_name(so)
    if len(hpa) > k.MAX_LABEL_VALUE:
        return (f'HPA name "{hpa}" derived from scaledobject is {len(hpa)} characters long; must be no more than '
                f"{k.MAX_LABEL_VALUE} characters; set spec.advanced.horizontalPodAutoscalerConfig.name to a shorter "
                "name or shorten the scaledobject name")
    return None


def verify_scaled_objects(so: Obj, others: list[Obj]) -> str | None:
    api_version, kind, name = k.target_ref(so)
    own = so["metadata"].get("name")
    for other in others:
        other_name = other["metadata"]["name"]
        if other_name == own:
            continue
        o_api, o_kind, o_target = k.target_ref(other)
        if (o_api, o_kind, o_target) == (api_version, kind, name):
            return (f"the workload '{name}' of type '{k.gvk_string(api_version, kind)}' is already managed by the "
                    f"ScaledObject '{other_name}'")
        if k.hpa_name(other) == k.hpa_name(so):
            return f"the HPA '{k.hpa_name(other)}' is already managed by the ScaledObject '{other_name}'"
    return None


def verify_hpas(so: Obj, hpas: list[Obj]) -> str | None:
    api_version, kind, name = k.target_ref(so)
    gvk = k.gvk_string(api_version, kind)
    so_name = so["metadata"].get("name")
    for hpa in hpas:
        meta = hpa.get("metadata") or {}
        if (meta.get("annotations") or {}).get(k.VALIDATIONS_HPA_OWNERSHIP) == "false":
            continue
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        if (ref.get("apiVersion") or "", ref.get("kind"), ref.get("name")) != (api_version, kind, name):
            continue
        if any(o.get("kind") == "ScaledObject" and o.get("name") == so_name for o in meta.get("ownerReferences") or []):
            continue
        if k.annotations(so).get(k.TRANSFER_HPA_OWNERSHIP) == "true":
            if k.hpa_config(so).get("name") == meta.get("name"):
                continue
            return (f"the existing hpa '{meta.get('name')}' for workload '{name}' of type '{gvk}' must be specified "
                    "by name in advanced settings to enable ownership transfer")
        return f"the workload '{name}' of type '{gvk}' is already managed by the hpa '{meta.get('name')}'"
    return None


class KedaWebhook:
    """Admission plugin: ScaledObject and ScaledJob creates and updates (see the module docstring)."""

    name = "KedaValidatingWebhook"

    def handles(self, attrs: Attributes) -> bool:
        return attrs.kind in (SCALEDOBJECT, SCALEDJOB) and attrs.operation in ("CREATE", "UPDATE") \
            and not attrs.subresource

    def admit(self, attrs: Attributes, lookup: Lookup) -> None:
        obj = attrs.obj
        if attrs.operation == "UPDATE" and attrs.old is not None and obj.get("spec") == attrs.old.get("spec"):
            return  # metadata-only changes (finalizers, pause annotations) are not re-verified upstream either
        if attrs.kind is SCALEDJOB:
            message = verify_triggers(k.triggers(obj))
            if message:
                raise _denied(SCALEDJOB_WEBHOOK, message)
            return
        ns = attrs.namespace
        checks = (
            lambda: verify_scaled_objects(obj, list(lookup.reader.list(SCALEDOBJECT, ns).items)),
            lambda: verify_hpas(obj, list(lookup.reader.list(HORIZONTALPODAUTOSCALER, ns).items)),
            lambda: verify_replica_count(obj),
            lambda: verify_fallback(obj),
            lambda: verify_name(obj),
            lambda: verify_triggers(k.triggers(obj)),
            lambda: verify_scaling_modifiers(obj),
        )
        for check in checks:
            message = check()
            if message:
                raise _denied(SCALEDOBJECT_WEBHOOK, message)
