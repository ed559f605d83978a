"""Validation of the core (``v1``) kinds besides Pod: ``pkg/apis/core/validation``.

Node (``ValidateNode``/``ValidateNodeUpdate``), Namespace, LimitRange,
ResourceQuota, ConfigMap, PersistentVolume and PersistentVolumeClaim (the
fields the scheduler's volume plugins read; volume sources are not checked,
kemu attaches no volumes) and Event (ObjectMeta only). Pods are in
:mod:`emulator.server.validation.pods`.
"""

from __future__ import annotations

import re
from typing import Any

from emulator.api.errors import Cause
from emulator.api.names import (
    dns1123_subdomain_errors,
    label_value_errors,
    qualified_name_errors,
)
from emulator.api.names import max_len as _max_len
from emulator.api.names import regex_error as _regex_error
from emulator.api.quantity import Quantity
from emulator.api.types import Obj
from emulator.server.validation.field import (
    NOT_INTEGER,
    NOT_POSITIVE,
    check_enum,
    check_label_name,
    check_label_selector,
    dict_at,
    duplicate,
    forbidden,
    invalid,
    list_at,
    not_supported,
    objects_at,
    required,
    too_long,
    wrong_type,
)
from emulator.server.validation.objectmeta import STANDARD_FINALIZERS
from emulator.server.validation.pods import TAINT_EFFECTS, check_node_selector_term
from emulator.server.validation.registry import metadata_only, register
from emulator.server.validation.resources import (
    check_resource_list,
    container_resource_name_errors,
    is_extended_resource,
    is_integer_resource,
    is_integral,
    quantity,
    resource_name_errors,
    validate_quantity,
)

_CONFIGMAP_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIGMAP_KEY_RE = re.compile(_CONFIGMAP_KEY_FMT)
_CONFIGMAP_KEY_MSG = _regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                  _CONFIGMAP_KEY_FMT, "key.name", "KEY_NAME", "key-name")


def _configmap_key_errors(key: str) -> list[str]:
    """Upstream ``IsConfigMapKey``."""
    errs: list[str] = []
    if len(key) > 253:
        errs.append(_max_len(253))
    if not _CONFIGMAP_KEY_RE.fullmatch(key):
        errs.append(_CONFIGMAP_KEY_MSG)
    if key == ".":
        errs.append("must not be '.'")
    elif key == "..":
        errs.append("must not be '..'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


@register("nodes")
def _validate_node(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = dict_at(causes, "spec", obj.get("spec"))
    taints = spec.get("taints")
    if taints:
        # Upstream roots taint paths at "metadata" (ValidateNode's fldPath), hence
        # "metadata.taints[0].effect" rather than "spec.taints[0].effect".
        path = "metadata.taints"
        seen: set[tuple[str, str]] = set()
        for p, taint in objects_at(causes, path, taints):
            key = taint.get("key", "")
            check_label_name(causes, p + ".key", key)
            value = taint.get("value") or ""
            errs = label_value_errors(value) if isinstance(value, str) else ["must be a string"]
            if errs:
                invalid(causes, p + ".value", value, ";".join(errs))
            effect = taint.get("effect") or ""
            if not effect:
                required(causes, p + ".effect")
            elif effect not in TAINT_EFFECTS:
                not_supported(causes, p + ".effect", effect, TAINT_EFFECTS)
            if isinstance(key, str) and isinstance(effect, str):
                if (key, effect) in seen:
                    duplicate(causes, p, taint, "taints must be unique by key and effect pair")
                else:
                    seen.add((key, effect))
    status = obj.get("status")
    if status:
        status = dict_at(causes, "status", status)
        for fld in ("capacity", "allocatable"):
            values = status.get(fld)
            if values:
                # ValidateNodeResources builds these with Child(name): "status.capacity.cpu".
                for name, raw in dict_at(causes, "status." + fld, values).items():
                    q = validate_quantity(raw, f"status.{fld}.{name}", causes)
                    if q is not None and q.sign() >= 0 and is_integer_resource(name) and not is_integral(q):
                        invalid(causes, f"status.{fld}.{name}", str(q), NOT_INTEGER)
    if old is not None:
        old_provider = (old.get("spec") or {}).get("providerID") or ""
        if old_provider and spec.get("providerID") != old_provider:
            forbidden(causes, "spec.providerID", 'node updates may not change providerID except from "" to valid')


@register("namespaces")
def _validate_namespace(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = obj.get("spec")
    if spec:
        finalizers = dict_at(causes, "spec", spec).get("finalizers")
        if finalizers:
            # ValidateNamespace reports every finalizer at the list's path.
            for fin in list_at(causes, "spec.finalizers", finalizers):
                if not isinstance(fin, str):
                    wrong_type(causes, "spec.finalizers", fin, "a string")
                    continue
                for msg in qualified_name_errors(fin):
                    invalid(causes, "spec.finalizers", fin, msg)
                if "/" not in fin and fin not in STANDARD_FINALIZERS:
                    invalid(causes, "spec.finalizers", fin,
                            "name is neither a standard finalizer name nor is it fully qualified")


_LIMIT_TYPES = frozenset({"Pod", "Container", "PersistentVolumeClaim"})


@register("limitranges")
def _validate_limit_range(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = dict_at(causes, "spec", obj.get("spec"))
    types_seen: set[str] = set()
    for i, item in enumerate(list_at(causes, "spec.limits", spec.get("limits"))):
        p = f"spec.limits[{i}]"
        if not isinstance(item, dict):
            wrong_type(causes, p, item, "an object")
            continue
        ltype = item.get("type") or ""
        if not isinstance(ltype, str):
            wrong_type(causes, p + ".type", ltype, "a string")
            ltype = ""
        errs = qualified_name_errors(ltype)
        for msg in errs:
            invalid(causes, p + ".type", ltype, msg)
        if not errs and "/" not in ltype and ltype not in _LIMIT_TYPES:
            invalid(causes, p + ".type", ltype, "must be a standard limit type or fully qualified")
        if ltype in types_seen:
            duplicate(causes, p + ".type", ltype)
        types_seen.add(ltype)

        # Pod and Container limits name container resources; other types (PVC) any resource.
        names = container_resource_name_errors if ltype in ("Pod", "Container") else resource_name_errors
        # Upstream does not require LimitRange quantities to be non-negative, only well-formed.
        q_max = check_resource_list(causes, p + ".max", item.get("max"), names, non_negative=False)
        q_min = check_resource_list(causes, p + ".min", item.get("min"), names, non_negative=False)
        q_def: dict[str, Quantity] = {}
        q_req: dict[str, Quantity] = {}
        if ltype == "Pod":
            if item.get("default"):
                forbidden(causes, p + ".default", "may not be specified when `type` is 'Pod'")
            if item.get("defaultRequest"):
                forbidden(causes, p + ".defaultRequest", "may not be specified when `type` is 'Pod'")
        else:
            q_def = check_resource_list(causes, p + ".default", item.get("default"), names, non_negative=False)
            q_req = check_resource_list(causes, p + ".defaultRequest", item.get("defaultRequest"), names,
                                        non_negative=False)
        if ltype == "PersistentVolumeClaim" and "storage" not in q_min and "storage" not in q_max:
            required(causes, p + ".limits",
                     "either minimum or maximum storage value is required, but neither was provided")
        q_ratio = check_resource_list(causes, p + ".maxLimitRequestRatio", item.get("maxLimitRequestRatio"), names,
                                      non_negative=False)
        for k in q_max.keys() | q_min.keys() | q_def.keys() | q_req.keys() | q_ratio.keys():
            mn, mx, df, rq, ratio = q_min.get(k), q_max.get(k), q_def.get(k), q_req.get(k), q_ratio.get(k)
            if mn is not None and mx is not None and mn > mx:
                invalid(causes, f"{p}.min[{k}]", str(mn), f"min value {mn} is greater than max value {mx}")
            if rq is not None and mn is not None and mn > rq:
                invalid(causes, f"{p}.defaultRequest[{k}]", str(rq),
                        f"min value {mn} is greater than default request value {rq}")
            if rq is not None and mx is not None and rq > mx:
                invalid(causes, f"{p}.defaultRequest[{k}]", str(rq),
                        f"default request value {rq} is greater than max value {mx}")
            if rq is not None and df is not None and rq > df:
                invalid(causes, f"{p}.defaultRequest[{k}]", str(rq),
                        f"default request value {rq} is greater than default limit value {df}")
            if df is not None and mn is not None and mn > df:
                invalid(causes, f"{p}.default[{k}]", str(mn), f"min value {mn} is greater than default value {df}")
            if df is not None and mx is not None and df > mx:
                invalid(causes, f"{p}.default[{k}]", str(mx), f"default value {df} is greater than max value {mx}")
            if ratio is not None:
                if ratio < 1:
                    invalid(causes, f"{p}.maxLimitRequestRatio[{k}]", str(ratio), f"ratio {ratio} is less than 1")
                elif mn is not None and mx is not None and mn.sign() > 0 and ratio.amount > mx.amount / mn.amount:
                    invalid(causes, f"{p}.maxLimitRequestRatio[{k}]", str(ratio),
                            f"ratio {ratio} is greater than max/min = {float(mx.amount / mn.amount):f}")
            # Extended resources cannot be overcommitted, so their default limit and request agree.
            if "/" in k and is_extended_resource(k) and df is not None and rq is not None and df != rq:
                invalid(causes, f"{p}.defaultRequest[{k}]", str(rq),
                        f"default value {df} must equal to defaultRequest value {rq} in {k}")


@register("resourcequotas")
def _validate_resource_quota(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    """``ValidateResourceQuota``: every hard amount a valid, non-negative quantity; known scopes."""
    spec = dict_at(causes, "spec", obj.get("spec"))
    for rname, raw in (dict_at(causes, "spec.hard", spec.get("hard") or {})).items():
        parsed = quantity(raw)
        if isinstance(parsed, str):
            invalid(causes, f"spec.hard[{rname}]", raw, parsed)
        elif parsed[0].sign() < 0:
            invalid(causes, f"spec.hard[{rname}]", raw, "must be greater than or equal to 0")
    scopes = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
              "CrossNamespacePodAffinity")
    for i, scope in enumerate(spec.get("scopes") or []):
        if scope not in scopes:
            not_supported(causes, f"spec.scopes[{i}]", scope, scopes)


MAX_CONFIGMAP_SIZE = 1024 * 1024  # core.MaxSecretSize, shared by ConfigMaps


@register("configmaps")
def _validate_configmap(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    total = 0
    data = dict_at(causes, "data", obj.get("data"))
    binary = dict_at(causes, "binaryData", obj.get("binaryData"))
    for key, value in data.items():
        for msg in _configmap_key_errors(key):
            invalid(causes, f"data[{key}]", key, msg)
        if key in binary:
            invalid(causes, f"data[{key}]", key, "duplicate of key present in binaryData")
        if isinstance(value, str):
            total += len(value.encode())
        else:
            wrong_type(causes, f"data[{key}]", value, "a string")
    for key, value in binary.items():
        for msg in _configmap_key_errors(key):
            invalid(causes, f"binaryData[{key}]", key, msg)
        if isinstance(value, str):
            total += len(value) * 3 // 4  # base64 text: count the decoded bytes
    if total > MAX_CONFIGMAP_SIZE:
        # Upstream reports the whole object here (field.NewPath("")), so the field is empty.
        too_long(causes, "", MAX_CONFIGMAP_SIZE)
    if old is not None and old.get("immutable"):
        if not obj.get("immutable"):
            forbidden(causes, "immutable", "field is immutable when `immutable` is set")
        if obj.get("data") != old.get("data"):
            forbidden(causes, "data", "field is immutable when `immutable` is set")
        if obj.get("binaryData") != old.get("binaryData"):
            forbidden(causes, "binaryData", "field is immutable when `immutable` is set")


_ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")


_ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
_VOLUME_MODES = ("Block", "Filesystem")


_VOLUME_MODES = ("Block", "Filesystem")
_PV_RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")


def _check_access_modes(causes: list[Cause], path: str, modes: Any) -> None:
    items = list_at(causes, path, modes)
    if not items:
        required(causes, path, "at least 1 access mode is required")
        return
    for mode in items:
        if mode not in _ACCESS_MODES:
            not_supported(causes, path, mode, _ACCESS_MODES)
    if "ReadWriteOncePod" in items and len(items) > 1:
        forbidden(causes, path, "may not use ReadWriteOncePod with other access modes")


def _check_positive_quantity(causes: list[Cause], path: str, value: Any) -> None:
    q = validate_quantity(value, path, causes)
    if q is not None and q.sign() <= 0:
        invalid(causes, path, str(q), NOT_POSITIVE)


def _check_storage_class_name(causes: list[Cause], path: str, name: Any) -> None:
    if name:
        for msg in dns1123_subdomain_errors(name) if isinstance(name, str) else ["must be a string"]:
            invalid(causes, path, name, msg)


@register("persistentvolumes")
def _validate_persistent_volume(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = dict_at(causes, "spec", obj.get("spec"))
    _check_access_modes(causes, "spec.accessModes", spec.get("accessModes"))
    capacity = dict_at(causes, "spec.capacity", spec.get("capacity"))
    if not capacity:
        required(causes, "spec.capacity")
    elif "storage" not in capacity or len(capacity) > 1:
        not_supported(causes, "spec.capacity", ", ".join(sorted(capacity)), ("storage",))
    else:
        _check_positive_quantity(causes, "spec.capacity[storage]", capacity["storage"])
    check_enum(causes, "spec.persistentVolumeReclaimPolicy", spec.get("persistentVolumeReclaimPolicy"),
               _PV_RECLAIM_POLICIES)
    check_enum(causes, "spec.volumeMode", spec.get("volumeMode"), _VOLUME_MODES)
    _check_storage_class_name(causes, "spec.storageClassName", spec.get("storageClassName"))
    affinity = spec.get("nodeAffinity")
    if affinity is not None:
        required_terms = dict_at(causes, "spec.nodeAffinity", affinity).get("required")
        if required_terms is None:
            required(causes, "spec.nodeAffinity.required", "must specify required node constraints")
        else:
            path = "spec.nodeAffinity.required.nodeSelectorTerms"
            terms = list_at(causes, path, dict_at(causes, path, required_terms).get("nodeSelectorTerms"))
            if not terms:
                required(causes, path, "must have at least one node selector term")
            for i, term in enumerate(terms):
                check_node_selector_term(causes, f"{path}[{i}]", term, strict_values=True)


@register("persistentvolumeclaims")
def _validate_persistent_volume_claim(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = dict_at(causes, "spec", obj.get("spec"))
    _check_access_modes(causes, "spec.accessModes", spec.get("accessModes"))
    if spec.get("selector") is not None:
        check_label_selector(causes, "spec.selector", spec["selector"])
    requests = dict_at(causes, "spec.resources.requests",
                       dict_at(causes, "spec.resources", spec.get("resources")).get("requests"))
    if "storage" not in requests:
        required(causes, "spec.resources[storage]")
    else:
        _check_positive_quantity(causes, "spec.resources[storage]", requests["storage"])
    _check_storage_class_name(causes, "spec.storageClassName", spec.get("storageClassName"))
    check_enum(causes, "spec.volumeMode", spec.get("volumeMode"), _VOLUME_MODES)
    if old is None:
        return
    # ValidatePersistentVolumeClaimUpdate: the spec is frozen, except the binder setting volumeName once
    # and a bound claim's storage request (expansion).
    old_spec = dict(old.get("spec") or {})
    new_spec = dict(spec)
    if not old_spec.get("volumeName"):
        old_spec["volumeName"] = new_spec.get("volumeName")
    if ((obj.get("status") or {}).get("phase") or "") == "Bound":
        for fixed in (old_spec, new_spec):
            resources = dict(fixed.get("resources") or {})
            resources["requests"] = {k: v for k, v in (resources.get("requests") or {}).items() if k != "storage"}
            fixed["resources"] = resources
    if old_spec != new_spec:
        forbidden(causes, "spec", "spec is immutable after creation except resources.requests and "
                                   "volumeAttributesClassName for bound claims")


register("events")(metadata_only)
