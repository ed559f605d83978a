"""PodDisruptionBudget helpers shared by the eviction subresource and the disruption controller.

Upstream keeps these in ``k8s.io/component-helpers/apps/poddisruptionbudget``
(the ``DisruptionAllowed`` condition), ``pkg/api/v1/pod`` (``IsPodReady``),
``k8s.io/apimachinery/pkg/api/meta/conditions.go`` (``SetStatusCondition``) and
``k8s.io/apimachinery/pkg/util/intstr`` (``GetScaledValueFromIntOrPercent``),
so both the API server (``pkg/registry/core/pod/storage/eviction.go``) and the
controller (``pkg/controller/disruption/disruption.go``) agree on what a healthy
pod is and on how the condition reads. kemu keeps them here for the same reason:
:mod:`emulator.server.eviction` and :mod:`emulator.controllers.disruption` both
import this module and never each other.

Everything works on the Kubernetes JSON shape of the objects (plain dicts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from emulator.api import errors
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj

# pkg/controller/disruption/disruption.go DeletionTimeout: how long an entry of
# status.disruptedPods keeps a pod out of currentHealthy before the controller
# assumes the approved eviction never happened.
DELETION_TIMEOUT_SECONDS = 120.0
# pkg/registry/core/pod/storage/eviction.go MaxDisruptedPodSize.
MAX_DISRUPTED_POD_SIZE = 2000

# k8s.io/api/policy/v1 constants.
DISRUPTION_ALLOWED_CONDITION = "DisruptionAllowed"
SYNC_FAILED_REASON = "SyncFailed"
SUFFICIENT_PODS_REASON = "SufficientPods"
INSUFFICIENT_PODS_REASON = "InsufficientPods"
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
IF_HEALTHY_BUDGET = "IfHealthyBudget"
ALWAYS_ALLOW = "AlwaysAllow"


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    """Upstream ``IsPodReady``: the pod's ``Ready`` condition is ``True``."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def budget_selector(pdb: Mapping[str, Any]) -> LabelSelector:
    """``metav1.LabelSelectorAsSelector(pdb.spec.selector)``; raises StatusError if it is malformed.

    policy/v1 semantics: a missing selector selects nothing, an empty one (``{}``) every pod of
    the namespace.
    """
    return LabelSelector.from_dict((pdb.get("spec") or {}).get("selector"), "spec.selector")


def budget_matches(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """True when ``pdb`` covers ``pod`` (same namespace, selector matches; a bad selector matches nothing)."""
    pmeta, meta = pdb.get("metadata") or {}, pod.get("metadata") or {}
    if pmeta.get("namespace") != meta.get("namespace"):
        return False
    try:
        selector = budget_selector(pdb)
    except errors.StatusError:
        return False
    return selector.matches(meta.get("labels"))


def scaled_value(value: Any, total: int, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``: an int as is, ``"N%"`` of ``total`` rounded as asked.

    Raises ValueError with upstream's message for anything else (a number in a string included:
    upstream requires the ``%``).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise ValueError("invalid value for IntOrString: invalid type: neither int nor percentage")
    if not value.endswith("%"):
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    digits = value[:-1]
    if not re.fullmatch(r"[+-]?\d+", digits):
        raise ValueError(f'invalid value for IntOrString: invalid value "{value}": strconv.Atoi: parsing '
                         f'"{digits}": invalid syntax')
    scaled = int(digits) * total
    # Exact integer rounding (upstream rounds a float64 product, the same for every realistic size).
    return -(-scaled // 100) if round_up else scaled // 100


def set_status_condition(conditions: list[Obj], new: Obj, now: str) -> bool:
    """``meta.SetStatusCondition``: add or update the condition of ``new["type"]`` in place.

    ``lastTransitionTime`` moves only when the status changes. Returns whether anything changed.
    """
    for cond in conditions:
        if cond.get("type") != new["type"]:
            continue
        changed = False
        if cond.get("status") != new["status"]:
            cond["status"] = new["status"]
            cond["lastTransitionTime"] = new.get("lastTransitionTime") or now
            changed = True
        for key in ("reason", "message"):
            if cond.get(key, "") != new.get(key, ""):
                cond[key] = new.get(key, "")
                changed = True
        if (cond.get("observedGeneration") or 0) != (new.get("observedGeneration") or 0):
            if new.get("observedGeneration"):
                cond["observedGeneration"] = new["observedGeneration"]
            else:
                cond.pop("observedGeneration", None)
            changed = True
        return changed
    cond = {"type": new["type"], "status": new["status"], "lastTransitionTime": new.get("lastTransitionTime") or now,
            "reason": new.get("reason", ""), "message": new.get("message", "")}
    if new.get("observedGeneration"):
        cond["observedGeneration"] = new["observedGeneration"]
    conditions.append(cond)
    return True


def update_disruption_allowed_condition(status: Obj, now: str) -> None:
    """``pdbhelper.UpdateDisruptionAllowedCondition``: the condition follows ``disruptionsAllowed``."""
    conditions = status.setdefault("conditions", [])
    allowed = int(status.get("disruptionsAllowed") or 0) > 0
    set_status_condition(conditions, {
        "type": DISRUPTION_ALLOWED_CONDITION,
        "status": "True" if allowed else "False",
        "reason": SUFFICIENT_PODS_REASON if allowed else INSUFFICIENT_PODS_REASON,
        "message": "",
        "observedGeneration": int(status.get("observedGeneration") or 0),
    }, now)


def conditions_up_to_date(pdb: Mapping[str, Any]) -> bool:
    """``pdbhelper.ConditionsAreUpToDate``: the condition agrees with the stored status and generation."""
    status = pdb.get("status") or {}
    cond = next((c for c in status.get("conditions") or [] if c.get("type") == DISRUPTION_ALLOWED_CONDITION), None)
    if cond is None:
        return False
    if int(status.get("observedGeneration") or 0) != int((pdb.get("metadata") or {}).get("generation") or 0):
        return False
    if int(status.get("disruptionsAllowed") or 0) > 0:
        return cond.get("status") == "True" and cond.get("reason") == SUFFICIENT_PODS_REASON
    return cond.get("status") == "False" and cond.get("reason") == INSUFFICIENT_PODS_REASON
