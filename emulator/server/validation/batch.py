"""Job validation: a minimal ``ValidateJob`` from ``pkg/apis/batch/validation``."""

from __future__ import annotations

from emulator.api.errors import Cause
from emulator.api.types import Obj
from emulator.server.validation.field import (
    FIELD_IMMUTABLE,
    check_nonnegative,
    dict_at,
    invalid,
    not_supported,
    required,
)
from emulator.server.validation.pods import check_pod_spec
from emulator.server.validation.registry import register


@register("jobs.batch")
def _validate_job(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    """A minimal ``ValidateJob`` (pkg/apis/batch/validation): counters, restartPolicy, pod template."""
    spec = dict_at(causes, "spec", obj.get("spec"))
    for name in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        if spec.get(name) is not None:
            check_nonnegative(causes, f"spec.{name}", spec[name])
    if spec.get("activeDeadlineSeconds") == 0:
        invalid(causes, "spec.activeDeadlineSeconds", 0, "must be greater than 0")
    mode = spec.get("completionMode", "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        not_supported(causes, "spec.completionMode", mode, ("NonIndexed", "Indexed"))
    elif mode == "Indexed" and spec.get("completions") is None:
        required(causes, "spec.completions", "when completion mode is Indexed")
    template = dict_at(causes, "spec.template", spec.get("template"))
    tspec = dict_at(causes, "spec.template.spec", template.get("spec"))
    check_pod_spec(causes, "spec.template.spec", tspec, is_pod=False)
    restart = tspec.get("restartPolicy")
    if restart not in ("Never", "OnFailure"):
        not_supported(causes, "spec.template.spec.restartPolicy", restart, ("OnFailure", "Never"))
    if spec.get("selector") is None:
        required(causes, "spec.selector")
    if old is not None:
        ospec = old.get("spec") or {}
        for name in ("selector", "completionMode"):
            if spec.get(name) != ospec.get(name):
                invalid(causes, f"spec.{name}", spec.get(name), FIELD_IMMUTABLE)
