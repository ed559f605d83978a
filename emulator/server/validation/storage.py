"""StorageClass validation: ``pkg/apis/storage/validation`` ``ValidateStorageClass(Update)``."""

from __future__ import annotations

from emulator.api.errors import Cause
from emulator.api.names import qualified_name_errors
from emulator.api.types import Obj
from emulator.server.validation.field import (
    FIELD_IMMUTABLE,
    check_enum,
    check_label_name,
    dict_at,
    forbidden,
    invalid,
    list_at,
    required,
    wrong_type,
)
from emulator.server.validation.registry import register

_PV_RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
_SC_RECLAIM_POLICIES = ("Delete", "Retain")


_SC_RECLAIM_POLICIES = ("Delete", "Retain")
_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")


@register("storageclasses.storage.k8s.io")
def _validate_storage_class(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    provisioner = obj.get("provisioner")
    if not provisioner:
        required(causes, "provisioner")
    elif isinstance(provisioner, str):
        for msg in qualified_name_errors(provisioner):
            invalid(causes, "provisioner", provisioner, msg)
    else:
        wrong_type(causes, "provisioner", provisioner, "a string")
    check_enum(causes, "reclaimPolicy", obj.get("reclaimPolicy"), _SC_RECLAIM_POLICIES)
    check_enum(causes, "volumeBindingMode", obj.get("volumeBindingMode"), _BINDING_MODES)
    for i, term in enumerate(list_at(causes, "allowedTopologies", obj.get("allowedTopologies"))):
        path = f"allowedTopologies[{i}].matchLabelExpressions"
        expressions = list_at(causes, path, dict_at(causes, f"allowedTopologies[{i}]", term).get(
            "matchLabelExpressions"))
        if not expressions:
            required(causes, path, "must have at least one label expression")
        for j, raw_expr in enumerate(expressions):
            expr = dict_at(causes, f"{path}[{j}]", raw_expr)
            check_label_name(causes, f"{path}[{j}].key", expr.get("key", ""))
            if not list_at(causes, f"{path}[{j}].values", expr.get("values")):
                required(causes, f"{path}[{j}].values", "must specify as least one value")
    if old is None:
        return
    for fld, detail in (("parameters", "updates to parameters are forbidden."),
                        ("provisioner", "updates to provisioner are forbidden."),
                        ("reclaimPolicy", "updates to reclaimPolicy are forbidden.")):
        if obj.get(fld) != old.get(fld):
            forbidden(causes, fld, detail)
    if obj.get("volumeBindingMode") != old.get("volumeBindingMode"):
        invalid(causes, "volumeBindingMode", obj.get("volumeBindingMode"), FIELD_IMMUTABLE)
