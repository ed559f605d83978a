"""ObjectMeta validation, for every kind.

Upstream ``staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go``
(``ValidateObjectMeta``, ``ValidateObjectMetaUpdate``) plus the finalizer-name
rule of ``pkg/apis/core/validation`` ``ValidateObjectMeta``. The name rule
(DNS-1123 label or subdomain) is chosen per resource.
"""

from __future__ import annotations

from typing import Any

from emulator.api.errors import Cause
from emulator.api.kinds import Kind
from emulator.api.names import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    qualified_name_errors,
)
from emulator.api.types import Obj
from emulator.server.validation.field import (
    FIELD_IMMUTABLE,
    check_labels,
    check_nonnegative,
    dict_at,
    forbidden,
    invalid,
    list_at,
    required,
    too_long,
    wrong_type,
)
from emulator.server.validation.pods import mask_trailing_dash

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # TotalAnnotationSizeLimitB


TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # TotalAnnotationSizeLimitB
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


# Resources whose names are DNS-1123 labels; every other kind here uses DNS-1123 subdomains.
_LABEL_NAMED = frozenset({"namespaces"})
# RBAC objects are named by path segments (upstream ValidateRBACName): "system:discovery" is a valid name.
_PATH_SEGMENT_NAMED = frozenset({"roles.rbac.authorization.k8s.io", "clusterroles.rbac.authorization.k8s.io",
                                 "rolebindings.rbac.authorization.k8s.io",
                                 "clusterrolebindings.rbac.authorization.k8s.io"})


def path_segment_name_errors(name: str) -> list[str]:
    """Upstream ``path.IsValidPathSegmentName``."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def _check_finalizers(causes: list[Cause], path: str, finalizers: Any) -> None:
    items = list_at(causes, path, finalizers)
    for i, fin in enumerate(items):
        if not isinstance(fin, str):
            wrong_type(causes, f"{path}[{i}]", fin, "a string")
            continue
        # Upstream reports the format at the list and the kube-standard rule at the item.
        for msg in qualified_name_errors(fin):
            invalid(causes, path, fin, msg)
        if "/" not in fin and fin not in STANDARD_FINALIZERS:
            invalid(causes, f"{path}[{i}]", fin, "name is neither a standard finalizer name nor is it fully qualified")
    if "orphan" in items and "foregroundDeletion" in items:
        invalid(causes, path, items, "finalizer orphan and foregroundDeletion cannot be both set")


def _check_owner_references(causes: list[Cause], path: str, refs: Any) -> None:
    controller = ""
    for ref in list_at(causes, path, refs):
        if not isinstance(ref, dict):
            wrong_type(causes, path, ref, "an object")
            continue
        api_version, kind = ref.get("apiVersion") or "", ref.get("kind") or ""
        if not str(api_version).rpartition("/")[2]:
            invalid(causes, path + ".apiVersion", api_version, "version must not be empty")
        if not kind:
            invalid(causes, path + ".kind", kind, "must not be empty")
        if not ref.get("name"):
            invalid(causes, path + ".name", ref.get("name") or "", "must not be empty")
        if not ref.get("uid"):
            invalid(causes, path + ".uid", ref.get("uid") or "", "must not be empty")
        if api_version == "v1" and kind == "Event":
            invalid(causes, path, ref, "/v1, Kind=Event is disallowed from being an owner")
        if ref.get("controller") is True:
            this = f"{kind}/{ref.get('name')}"
            if controller:
                invalid(causes, path, refs, "Only one reference can have Controller set to true. "
                        f'Found "true" in references for {controller} and {this}')
            else:
                controller = this


def check_object_meta(kind: Kind, meta: Obj, causes: list[Cause]) -> None:
    name_errors = dns1123_label_errors if kind.resource in _LABEL_NAMED else dns1123_subdomain_errors
    if kind.resource in _PATH_SEGMENT_NAMED:
        name_errors = path_segment_name_errors
    name = meta.get("name") or ""
    generate = meta.get("generateName") or ""
    if generate:
        if isinstance(generate, str):
            for msg in name_errors(mask_trailing_dash(generate)):
                invalid(causes, "metadata.generateName", generate, msg)
        else:
            wrong_type(causes, "metadata.generateName", generate, "a string")
    if not name:
        if not generate:
            # The server generates a name from generateName after validation when needed.
            required(causes, "metadata.name", "name or generateName is required")
    elif not isinstance(name, str):
        wrong_type(causes, "metadata.name", name, "a string")
    else:
        for msg in name_errors(name):
            invalid(causes, "metadata.name", name, msg)

    namespace = meta.get("namespace") or ""
    if kind.namespaced:
        if not namespace:
            required(causes, "metadata.namespace")
        elif not isinstance(namespace, str):
            wrong_type(causes, "metadata.namespace", namespace, "a string")
        else:
            for msg in dns1123_label_errors(namespace):
                invalid(causes, "metadata.namespace", namespace, msg)
    elif namespace:
        # Upstream's BeforeCreate clears it silently; kemu rejects it so the mistake is visible.
        forbidden(causes, "metadata.namespace", "not allowed on this type")

    generation = meta.get("generation")
    if generation is not None:
        check_nonnegative(causes, "metadata.generation", generation)

    labels = meta.get("labels")
    if labels:
        check_labels(causes, "metadata.labels", labels)

    annotations = meta.get("annotations")
    if annotations:
        total = 0
        for key, value in dict_at(causes, "metadata.annotations", annotations).items():
            # QualifiedName except that case does not matter (objectmeta.go ValidateAnnotations).
            for msg in qualified_name_errors(key.lower()):
                invalid(causes, "metadata.annotations", key, msg)
            if not isinstance(value, str):
                wrong_type(causes, f"metadata.annotations[{key}]", value, "a string")
                continue
            total += len(key) + len(value)
        if total > TOTAL_ANNOTATION_SIZE_LIMIT:
            too_long(causes, "metadata.annotations", TOTAL_ANNOTATION_SIZE_LIMIT)

    for field, check in (("ownerReferences", _check_owner_references), ("finalizers", _check_finalizers)):
        if meta.get(field):
            check(causes, f"metadata.{field}", meta[field])


def check_object_meta_update(meta: Obj, old_meta: Obj, causes: list[Cause]) -> None:
    """ValidateObjectMetaAccessorUpdate: identity fields never change.

    A missing uid is not an error (the server copies the stored one, as upstream's
    BeforeUpdate does); resourceVersion is the store's precondition, not checked here.
    """
    for fld in ("name", "namespace"):
        new, old = meta.get(fld) or "", old_meta.get(fld) or ""
        if new != old:
            invalid(causes, "metadata." + fld, new, FIELD_IMMUTABLE)
    uid = meta.get("uid")
    if uid and uid != old_meta.get("uid"):
        invalid(causes, "metadata.uid", uid, FIELD_IMMUTABLE)
