"""PodDisruptionBudget validation: ``pkg/apis/policy/validation``."""

from __future__ import annotations

from emulator.api.errors import Cause
from emulator.api.types import Obj
from emulator.server.validation.field import (
    check_label_selector,
    check_positive_int_or_percent,
    dict_at,
    invalid,
    required,
)
from emulator.server.validation.registry import register


@register("poddisruptionbudgets.policy")
def _validate_pdb(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = dict_at(causes, "spec", obj.get("spec"))
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        invalid(causes, "spec", spec, "minAvailable and maxUnavailable cannot be both set")
    elif min_available is None and max_unavailable is None:
        # Stricter than upstream, which accepts a budget with neither (kemu's brief: exactly one).
        required(causes, "spec.minAvailable", "one of minAvailable or maxUnavailable must be set")
    if min_available is not None:
        check_positive_int_or_percent(causes, "spec.minAvailable", min_available)
    if max_unavailable is not None:
        check_positive_int_or_percent(causes, "spec.maxUnavailable", max_unavailable)
    if spec.get("selector") is not None:
        check_label_selector(causes, "spec.selector", spec["selector"])
