"""Job validation: a minimal ``ValidateJob`` from ``pkg/apis/batch/validation``."""

from __future__ import annotations

from emulator.api import cron
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


@register("cronjobs.batch")
def _validate_cron_job(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    """``ValidateCronJobCreate``/``Update`` (pkg/apis/batch/validation): schedule, zone, policies, template."""
    name = (obj.get("metadata") or {}).get("name") or ""
    if old is None and len(name) > 52:
        # The controller appends an 11-character suffix to Job names (validation.go maxCronJobNameLength).
        invalid(causes, "metadata.name", name, "must be no more than 52 characters")
    spec = dict_at(causes, "spec", obj.get("spec"))
    schedule = spec.get("schedule")
    if not schedule:
        required(causes, "spec.schedule")
    else:
        try:
            cron.parse(str(schedule))
        except cron.CronError as e:
            invalid(causes, "spec.schedule", schedule, str(e))
    zone = spec.get("timeZone")
    if zone is not None:
        try:
            cron.location(str(zone))
        except cron.CronError as e:
            invalid(causes, "spec.timeZone", zone, str(e))
    policy = spec.get("concurrencyPolicy", "Allow")
    if policy not in ("Allow", "Forbid", "Replace"):
        not_supported(causes, "spec.concurrencyPolicy", policy, ("Allow", "Forbid", "Replace"))
    for field_name in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        if spec.get(field_name) is not None:
            check_nonnegative(causes, f"spec.{field_name}", spec[field_name])
    job_spec = dict_at(causes, "spec.jobTemplate.spec", dict_at(causes, "spec.jobTemplate",
                                                                spec.get("jobTemplate")).get("spec"))
    tspec = dict_at(causes, "spec.jobTemplate.spec.template.spec",
                    dict_at(causes, "spec.jobTemplate.spec.template", job_spec.get("template")).get("spec"))
    check_pod_spec(causes, "spec.jobTemplate.spec.template.spec", tspec, is_pod=False)
    restart = tspec.get("restartPolicy")
    if restart not in ("Never", "OnFailure"):
        not_supported(causes, "spec.jobTemplate.spec.template.spec.restartPolicy", restart, ("OnFailure", "Never"))
