"""PriorityClass validation: ``pkg/apis/scheduling/validation`` and ``pkg/apis/scheduling/v1/helpers.go``."""

from __future__ import annotations

from emulator.api.errors import Cause
from emulator.api.types import Obj
from emulator.server.validation.field import FIELD_IMMUTABLE, check_enum, forbidden, int_at, invalid, required
from emulator.server.validation.pods import MAX_INT32, PREEMPTION_POLICIES
from emulator.server.validation.registry import register

HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000


HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY


SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": SYSTEM_CRITICAL_PRIORITY + 1000,
    "system-cluster-critical": SYSTEM_CRITICAL_PRIORITY,
}


@register("priorityclasses.scheduling.k8s.io")
def _validate_priority_class(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    name = (obj.get("metadata") or {}).get("name") or ""
    raw = obj.get("value")
    value: int | None = None
    if raw is None:
        required(causes, "value")
    else:
        value = int_at(causes, "value", raw)
        if value is not None and not -(2**31) <= value <= MAX_INT32:
            invalid(causes, "value", value, f"must be between {-(2**31)} and {MAX_INT32}, inclusive")
    if isinstance(name, str) and name.startswith("system-"):
        # IsKnownSystemPriorityClass: reserved names must match a built-in exactly.
        if name not in SYSTEM_PRIORITY_CLASSES:
            why = f"{name} is not a known system priority class"
        elif value != SYSTEM_PRIORITY_CLASSES[name]:
            why = f"value of {name} PriorityClass must be {SYSTEM_PRIORITY_CLASSES[name]}"
        elif obj.get("globalDefault"):
            why = f"globalDefault of {name} PriorityClass must be false"
        else:
            why = ""
        if why:
            forbidden(causes, "metadata.name",
                      f"priority class names with 'system-' prefix are reserved for system use only. error: {why}")
    elif value is not None and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        forbidden(causes, "value",
                  f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}")
    check_enum(causes, "preemptionPolicy", obj.get("preemptionPolicy"), PREEMPTION_POLICIES)
    if old is not None:
        if obj.get("value") != old.get("value"):
            forbidden(causes, "value", "may not be changed in an update.")
        if obj.get("preemptionPolicy") != old.get("preemptionPolicy"):
            invalid(causes, "preemptionPolicy", obj.get("preemptionPolicy"), FIELD_IMMUTABLE)
