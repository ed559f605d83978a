"""RuntimeClass validation: ``pkg/apis/node/validation``."""

from __future__ import annotations

from emulator.api.errors import Cause
from emulator.api.names import dns1123_label_errors
from emulator.api.types import Obj
from emulator.server.validation.field import FIELD_IMMUTABLE, check_labels, dict_at, invalid, wrong_type
from emulator.server.validation.pods import check_tolerations
from emulator.server.validation.registry import register
from emulator.server.validation.resources import check_resource_list, container_resource_name_errors


@register("runtimeclasses.node.k8s.io")
def _validate_runtime_class(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    handler = obj.get("handler") or ""
    if not isinstance(handler, str):
        wrong_type(causes, "handler", handler, "a string")
    else:
        # NameIsDNSLabel: an empty handler fails the label regex (upstream has no separate Required).
        for msg in dns1123_label_errors(handler):
            invalid(causes, "handler", handler, msg)
    overhead = obj.get("overhead")
    if overhead:
        # validateOverhead wraps podFixed as the limits of ResourceRequirements rooted at "overhead".
        pod_fixed = dict_at(causes, "overhead", overhead).get("podFixed")
        if pod_fixed:
            check_resource_list(causes, "overhead.limits", pod_fixed, container_resource_name_errors)
    scheduling = obj.get("scheduling")
    if scheduling:
        scheduling = dict_at(causes, "scheduling", scheduling)
        if scheduling.get("nodeSelector"):
            check_labels(causes, "scheduling.nodeSelector", scheduling["nodeSelector"])
        if scheduling.get("tolerations"):
            check_tolerations(causes, "scheduling.tolerations", scheduling["tolerations"])
    if old is not None and (obj.get("handler") or "") != (old.get("handler") or ""):
        invalid(causes, "handler", obj.get("handler"), FIELD_IMMUTABLE)
