"""Printer columns of the autoscalers' kinds: HorizontalPodAutoscaler, VerticalPodAutoscaler and KEDA's.

HPA cells restate upstream ``printHorizontalPodAutoscaler``
(``pkg/printers/internalversion/printers.go``: TARGETS as ``cpu: 40%/50%``,
``<unknown>/50%``, ``+ N more...``); the VPA and KEDA kinds are CRDs upstream,
so theirs are the CRDs' ``additionalPrinterColumns``.
"""

from __future__ import annotations

from typing import Any

from emulator.api.quantity import QuantityError, parse_quantity
from emulator.api.types import Obj
from emulator.apiserver.printing import AGE, NAME, Cell, Column, Printer, age, name_of


def _quantity_text(value: Any) -> str:
    """A quantity as ``Quantity.String()`` prints it: canonical form."""
    if value is None:
        return "<unknown>"
    try:
        return parse_quantity(value).canonical()
    except QuantityError:
        return str(value)


def _hpa_metric_text(spec: Obj, status: Obj | None) -> str:
    """One entry of upstream's ``formatHPAMetrics`` (pkg/printers/internalversion/printers.go)."""
    mtype = spec.get("type")
    status = status or {}
    if mtype in {"External", "Object"}:
        key = mtype.lower()
        target = (spec.get(key) or {}).get("target") or {}
        current = (status.get(key) or {}).get("current") if status.get(key) else None
        if target.get("averageValue") is not None:
            now = _quantity_text(current.get("averageValue")) if current else "<unknown>"
            return f"{now}/{_quantity_text(target['averageValue'])} (avg)"
        now = _quantity_text(current.get("value")) if current else "<unknown>"
        return f"{now}/{_quantity_text(target.get('value'))}"
    if mtype == "Pods":
        target = ((spec.get("pods") or {}).get("target") or {})
        current = ((status.get("pods") or {}).get("current") or {}) if status.get("pods") else None
        now = _quantity_text(current.get("averageValue")) if current else "<unknown>"
        return f"{now}/{_quantity_text(target.get('averageValue'))}"
    if mtype in ("Resource", "ContainerResource"):
        key = "resource" if mtype == "Resource" else "containerResource"
        src = spec.get(key) or {}
        target = src.get("target") or {}
        current = ((status.get(key) or {}).get("current") or {}) if status.get(key) else None
        if target.get("averageValue") is not None:
            now = _quantity_text(current.get("averageValue")) if current else "<unknown>"
            return f"{src.get('name')}: {now}/{_quantity_text(target['averageValue'])}"
        now = "<unknown>"
        if current and current.get("averageUtilization") is not None:
            now = f"{current['averageUtilization']}%"
        goal = f"{target['averageUtilization']}%" if target.get("averageUtilization") is not None else "<auto>"
        return f"{src.get('name')}: {now}/{goal}"
    return "<unknown type>"


def _hpa_targets(hpa: Obj) -> str:
    """``formatHPAMetrics``: the first two metrics, then ``+ N more...``."""
    specs = (hpa.get("spec") or {}).get("metrics") or []
    if not specs:
        return "<none>"
    statuses = (hpa.get("status") or {}).get("currentMetrics") or []
    texts = [_hpa_metric_text(s, statuses[i] if i < len(statuses) else None) for i, s in enumerate(specs)]
    if len(texts) > 2:
        return f"{', '.join(texts[:2])} + {len(texts) - 2} more..."
    return ", ".join(texts)


def _hpa_cells(hpa: Obj, now: float) -> list[Cell]:
    """``printHorizontalPodAutoscaler``."""
    spec, status = hpa.get("spec") or {}, hpa.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    min_pods = str(spec["minReplicas"]) if spec.get("minReplicas") is not None else "<unset>"
    return [name_of(hpa), f"{ref.get('kind', '')}/{ref.get('name', '')}", _hpa_targets(hpa), min_pods,
            int(spec.get("maxReplicas") or 0), int(status.get("currentReplicas") or 0), age(hpa, now)]


HPA_PRINTER = Printer((
    NAME,
    Column("Reference", description="reference to scaled resource; horizontal pod autoscaler will learn the current "
                                    "resource consumption and will set the desired number of pods by using its Scale "
                                    "subresource."),
    Column("Targets", description="metrics contains the specifications for which to use to calculate the desired "
                                  "replica count (the maximum replica count across all metrics will be used)."),
    Column("MinPods", description="minReplicas is the lower limit for the number of replicas to which the autoscaler "
                                  "can scale down."),
    Column("MaxPods", "integer", "maxReplicas is the upper limit for the number of pods that can be set by the "
                                 "autoscaler; cannot be smaller than MinReplicas."),
    Column("Replicas", "integer", "currentReplicas is current number of replicas of pods managed by this autoscaler, "
                                  "as last seen by the autoscaler."),
    AGE,
), _hpa_cells)


def _vpa_cells(v: Obj, now: float) -> list[Cell]:
    """The VPA CRD's additionalPrinterColumns: the first container's target, RecommendationProvided."""
    status = v.get("status") or {}
    recs = (status.get("recommendation") or {}).get("containerRecommendations") or []
    target = (recs[0].get("target") or {}) if recs else {}
    provided = next((c.get("status", "") for c in status.get("conditions") or []
                     if c.get("type") == "RecommendationProvided"), "")
    mode = ((v.get("spec") or {}).get("updatePolicy") or {}).get("updateMode") or ""
    return [name_of(v), mode, target.get("cpu", ""), target.get("memory", ""), provided, age(v, now)]


def _condition(obj: Obj, ctype: str) -> str:
    return next((str(c.get("status", "")) for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == ctype), "")


def _scaled_object_cells(so: Obj, now: float) -> list[Cell]:
    """The ScaledObject CRD's additionalPrinterColumns (kedacore/keda scaledobject_types.go printcolumn)."""
    spec, status = so.get("spec") or {}, so.get("status") or {}
    return [name_of(so), status.get("scaleTargetKind", ""), (spec.get("scaleTargetRef") or {}).get("name", ""),
            spec.get("minReplicaCount"), spec.get("maxReplicaCount"), _condition(so, "Ready"),
            _condition(so, "Active"), _condition(so, "Fallback"), _condition(so, "Paused"),
            status.get("triggersTypes", ""), status.get("authenticationsTypes", ""), age(so, now)]


def _scaled_job_cells(sj: Obj, now: float) -> list[Cell]:
    spec, status = sj.get("spec") or {}, sj.get("status") or {}
    return [name_of(sj), spec.get("minReplicaCount"), spec.get("maxReplicaCount"), _condition(sj, "Ready"),
            _condition(sj, "Active"), _condition(sj, "Paused"), status.get("triggersTypes", ""),
            status.get("authenticationsTypes", ""), age(sj, now)]


def _trigger_auth_cells(ta: Obj, now: float) -> list[Cell]:
    spec = ta.get("spec") or {}
    pod_identity = (spec.get("podIdentity") or {}).get("provider", "")
    secrets = ",".join(sorted({str(r.get("name", "")) for r in spec.get("secretTargetRef") or []}))
    env = ",".join(str(r.get("name", "")) for r in spec.get("env") or [])
    return [name_of(ta), pod_identity, secrets, env, age(ta, now)]


_KEDA_TRIGGERS = Column("Triggers")
_KEDA_AUTHS = Column("Authentications")
SCALEDOBJECT_PRINTER = Printer((
    NAME, Column("ScaleTargetKind"), Column("ScaleTargetName"), Column("Min", "integer"), Column("Max", "integer"),
    Column("Ready"), Column("Active"), Column("Fallback"), Column("Paused"), _KEDA_TRIGGERS, _KEDA_AUTHS, AGE,
), _scaled_object_cells)
SCALEDJOB_PRINTER = Printer((
    NAME, Column("Min", "integer"), Column("Max", "integer"), Column("Ready"), Column("Active"), Column("Paused"),
    _KEDA_TRIGGERS, _KEDA_AUTHS, AGE,
), _scaled_job_cells)
TRIGGERAUTH_PRINTER = Printer((
    NAME, Column("PodIdentity"), Column("Secret"), Column("Env"), AGE,
), _trigger_auth_cells)


AUTOSCALING_PRINTERS: dict[str, Printer] = {
    "horizontalpodautoscalers.autoscaling": HPA_PRINTER,
    "scaledobjects.keda.sh": SCALEDOBJECT_PRINTER,
    "scaledjobs.keda.sh": SCALEDJOB_PRINTER,
    "triggerauthentications.keda.sh": TRIGGERAUTH_PRINTER,
    "clustertriggerauthentications.keda.sh": TRIGGERAUTH_PRINTER,
    "verticalpodautoscalers.autoscaling.k8s.io": Printer((
        NAME,
        Column("Mode", description="The update mode (.spec.updatePolicy.updateMode)."),
        Column("CPU", description="The first container's target CPU recommendation."),
        Column("Mem", description="The first container's target memory recommendation."),
        Column("Provided", description="Whether a recommendation is provided (RecommendationProvided)."),
        AGE,
    ), _vpa_cells),
}
