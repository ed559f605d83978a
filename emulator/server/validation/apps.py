"""Deployment, ReplicaSet and DaemonSet validation: ``pkg/apis/apps/validation``.

Plus the apps/v1 selector immutability of ``pkg/registry/apps/*/strategy.go``.
"""

from __future__ import annotations

from typing import Any

from emulator.api.errors import Cause
from emulator.api.names import qualified_name_errors
from emulator.api.types import Obj
from emulator.server.validation.field import (
    FIELD_IMMUTABLE,
    IS_NEGATIVE,
    check_label_selector,
    check_labels,
    check_nonnegative,
    check_positive_int_or_percent,
    dict_at,
    forbidden,
    int_at,
    invalid,
    not_supported,
    required,
    selector_is_empty,
    selector_matches,
)
from emulator.server.validation.pods import RESTART_POLICIES, check_pod_spec
from emulator.server.validation.registry import register


def _check_workload(causes: list[Cause], spec: Obj, old: Obj | None, noun: str) -> None:
    """Selector, template and the counters shared by the three workload kinds."""
    if "replicas" in spec:
        check_nonnegative(causes, "spec.replicas", spec["replicas"])
    if "minReadySeconds" in spec:
        check_nonnegative(causes, "spec.minReadySeconds", spec["minReadySeconds"])
    if spec.get("revisionHistoryLimit") is not None:
        check_nonnegative(causes, "spec.revisionHistoryLimit", spec["revisionHistoryLimit"])

    template = dict_at(causes, "spec.template", spec.get("template"))
    tmeta = dict_at(causes, "spec.template.metadata", template.get("metadata"))
    tlabels = tmeta.get("labels") or {}
    selector = spec.get("selector")
    if selector is None:
        required(causes, "spec.selector")
    else:
        usable = check_label_selector(causes, "spec.selector", selector)
        if isinstance(selector, dict) and selector_is_empty(selector):
            invalid(causes, "spec.selector", selector, f"empty selector is invalid for {noun}")
        elif usable and isinstance(tlabels, dict) and not selector_matches(selector, tlabels):
            invalid(causes, "spec.template.metadata.labels", tlabels, "`selector` does not match template `labels`")
    if old is not None:
        old_selector = (old.get("spec") or {}).get("selector")
        if selector != old_selector:
            invalid(causes, "spec.selector", selector, FIELD_IMMUTABLE)

    # ValidatePodTemplateSpec: template metadata is reported at "spec.template.labels" (sic).
    if tmeta.get("labels"):
        check_labels(causes, "spec.template.labels", tmeta["labels"])
    if tmeta.get("annotations"):
        for key in dict_at(causes, "spec.template.annotations", tmeta["annotations"]):
            for msg in qualified_name_errors(key.lower()):
                invalid(causes, "spec.template.annotations", key, msg)
    tspec = dict_at(causes, "spec.template.spec", template.get("spec"))
    check_pod_spec(causes, "spec.template.spec", tspec, is_pod=False)
    restart = tspec.get("restartPolicy")
    if restart is not None and restart != "Always" and restart in RESTART_POLICIES:
        not_supported(causes, "spec.template.spec.restartPolicy", restart, ("Always",))
    if tspec.get("activeDeadlineSeconds") is not None:
        forbidden(causes, "spec.template.spec.activeDeadlineSeconds",
                  f"activeDeadlineSeconds in {'DaemonSet' if noun == 'daemonset' else 'ReplicaSet'} is not Supported")


def _rolling_update(causes: list[Cause], path: str, rolling: Any, default_unavailable: Any,
                    default_surge: Any) -> tuple[Any, Any, int | None, int | None]:
    """maxUnavailable and maxSurge of the rollingUpdate at ``path`` (absent: the defaults), each checked as an
    int or a percentage; returns both values and their checked numbers."""
    ru = dict_at(causes, path, rolling)
    unavailable, surge = ru.get("maxUnavailable", default_unavailable), ru.get("maxSurge", default_surge)
    return (unavailable, surge, check_positive_int_or_percent(causes, path + ".maxUnavailable", unavailable),
            check_positive_int_or_percent(causes, path + ".maxSurge", surge))


@register("deployments.apps")
def _validate_deployment(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = dict_at(causes, "spec", obj.get("spec"))
    _check_workload(causes, spec, old, "deployment")
    strategy = spec.get("strategy")
    if strategy:
        strategy = dict_at(causes, "spec.strategy", strategy)
        stype = strategy.get("type")
        rolling = strategy.get("rollingUpdate")
        if stype == "Recreate":
            if rolling is not None:
                forbidden(causes, "spec.strategy.rollingUpdate",
                          "may not be specified when strategy `type` is 'Recreate'")
        elif stype == "RollingUpdate" or stype is None:
            if rolling is not None:
                path = "spec.strategy.rollingUpdate"
                # Absent fields default to 25% (pkg/apis/apps/v1/defaults.go).
                unavailable, _, n_unavailable, n_surge = _rolling_update(causes, path, rolling, "25%", "25%")
                if n_unavailable == 0 and n_surge == 0:
                    invalid(causes, path + ".maxUnavailable", unavailable, "may not be 0 when `maxSurge` is 0")
        else:
            not_supported(causes, "spec.strategy", stype, ("Recreate", "RollingUpdate"))
    deadline = spec.get("progressDeadlineSeconds")
    if deadline is not None:
        number = int_at(causes, "spec.progressDeadlineSeconds", deadline)
        if number is not None:
            if number < 0:
                invalid(causes, "spec.progressDeadlineSeconds", number, IS_NEGATIVE)
            min_ready = spec.get("minReadySeconds") or 0
            if isinstance(min_ready, int) and number <= min_ready:
                invalid(causes, "spec.progressDeadlineSeconds", number, "must be greater than minReadySeconds")


@register("replicasets.apps")
def _validate_replica_set(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    # Upstream's ReplicaSet message says "deployment" too (ValidateReplicaSetSpec).
    _check_workload(causes, dict_at(causes, "spec", obj.get("spec")), old, "deployment")


@register("daemonsets.apps")
def _validate_daemon_set(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = dict_at(causes, "spec", obj.get("spec"))
    _check_workload(causes, spec, old, "daemonset")
    strategy = spec.get("updateStrategy")
    if strategy:
        strategy = dict_at(causes, "spec.updateStrategy", strategy)
        stype = strategy.get("type")
        if stype == "RollingUpdate" or stype is None:
            rolling = strategy.get("rollingUpdate")
            if rolling is not None:
                path = "spec.updateStrategy.rollingUpdate"
                # Defaults: maxUnavailable 1, maxSurge 0 (pkg/apis/apps/v1/defaults.go).
                _, surge, n_unavailable, n_surge = _rolling_update(causes, path, rolling, 1, 0)
                if n_unavailable and n_surge:
                    invalid(causes, path + ".maxSurge", surge, "may not be set when maxUnavailable is non-zero")
                elif n_unavailable == 0 and n_surge == 0:
                    required(causes, path + ".maxUnavailable", "cannot be 0 when maxSurge is 0")
        elif stype != "OnDelete":
            not_supported(causes, "spec.updateStrategy", stype, ("RollingUpdate", "OnDelete"))


# pkg/apis/apps/validation ValidateStatefulSetUpdate: the only spec fields an update may change.
_STATEFULSET_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
                        "minReadySeconds", "revisionHistoryLimit")


@register("statefulsets.apps")
def _validate_stateful_set(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    """``ValidateStatefulSet``: the workload checks, policies, strategy, claim templates; most of spec frozen."""
    spec = dict_at(causes, "spec", obj.get("spec"))
    _check_workload(causes, spec, old, "statefulset")
    policy = spec.get("podManagementPolicy", "OrderedReady")
    if policy not in ("OrderedReady", "Parallel"):
        not_supported(causes, "spec.podManagementPolicy", policy, ("OrderedReady", "Parallel"))
    strategy = dict_at(causes, "spec.updateStrategy", spec.get("updateStrategy"))
    stype = strategy.get("type", "RollingUpdate")
    if stype == "OnDelete":
        if strategy.get("rollingUpdate") is not None:
            invalid(causes, "spec.updateStrategy.rollingUpdate", strategy["rollingUpdate"],
                    "only allowed for updateStrategy 'RollingUpdate'")
    elif stype == "RollingUpdate":
        ru = dict_at(causes, "spec.updateStrategy.rollingUpdate", strategy.get("rollingUpdate"))
        if ru.get("partition") is not None:
            check_nonnegative(causes, "spec.updateStrategy.rollingUpdate.partition", ru["partition"])
        if ru.get("maxUnavailable") is not None:
            path = "spec.updateStrategy.rollingUpdate.maxUnavailable"
            if check_positive_int_or_percent(causes, path, ru["maxUnavailable"]) == 0:
                invalid(causes, path, ru["maxUnavailable"], "must be greater than 0")
    else:
        not_supported(causes, "spec.updateStrategy.type", stype, ("OnDelete", "RollingUpdate"))
    retention = dict_at(causes, "spec.persistentVolumeClaimRetentionPolicy",
                        spec.get("persistentVolumeClaimRetentionPolicy"))
    for name in ("whenDeleted", "whenScaled"):
        if retention.get(name, "Retain") not in ("Retain", "Delete"):
            not_supported(causes, f"spec.persistentVolumeClaimRetentionPolicy.{name}", retention[name],
                          ("Retain", "Delete"))
    for i, claim in enumerate(spec.get("volumeClaimTemplates") or []):
        name = ((claim or {}).get("metadata") or {}).get("name")
        if not name:
            required(causes, f"spec.volumeClaimTemplates[{i}].metadata.name")
    if old is not None:
        ospec = old.get("spec") or {}
        frozen = {k: v for k, v in spec.items() if k not in _STATEFULSET_MUTABLE}
        if frozen != {k: v for k, v in ospec.items() if k not in _STATEFULSET_MUTABLE}:
            forbidden(causes, "spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                      "'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' "
                      "and 'minReadySeconds' are forbidden")
