"""PATCH for the API server: JSON patch, merge patch, strategic merge patch and server-side apply.

Everything here is a pure function of JSON-shaped dicts: no I/O, no clock (the
caller passes ``now``), no store. The HTTP façade decodes the request, calls
:func:`apply_patch` or :func:`server_side_apply`, validates identity and
writes the result; every expected failure is an :class:`errors.StatusError`
carrying the code upstream answers with.

Patch types (upstream ``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go``)
    * ``application/json-patch+json`` (RFC 6902) via the ``jsonpatch`` library.
      A body that is not a list of operations is 400; an operation that cannot
      be applied (failed ``test``, missing path, unknown op) is 422, as upstream
      turns every ``Apply`` error into 422.
    * ``application/merge-patch+json`` (RFC 7386): objects merge, ``null`` deletes,
      everything else replaces.
    * ``application/strategic-merge-patch+json``: a merge patch that knows, per
      field, whether a list is merged (by ``patchMergeKey``, or as a set of
      primitives) or replaced, and honours the directives ``$patch``
      (``replace``/``delete`` on maps and list items), ``$retainKeys``,
      ``$setElementOrder/<list>`` and ``$deleteFromPrimitiveList/<list>``. The
      algorithm follows upstream
      ``staging/src/k8s.io/apimachinery/pkg/util/strategicpatch/patch.go``
      (``mergeMap``/``mergeSlice`` and their ordering rules: items named by the
      patch take the patch's order, live-only items keep their place relative
      to them, and a new item with no ``$setElementOrder`` lands first).
    * ``application/apply-patch+yaml``: server-side apply, :func:`server_side_apply`.

Why a table of merge keys
    Upstream reads ``patchStrategy``/``patchMergeKey`` struct tags (strategic
    merge) and ``+listType``/``+listMapKey`` markers (server-side apply, via the
    OpenAPI schema) from the Go types. kemu has no Go types, so the same facts
    are DATA: :data:`MERGE_KEYS` maps a resource (``Kind.resource``) to
    ``{path pattern: FieldMeta}``, with patterns such as
    ``spec.template.spec.containers[].ports``. The two views differ upstream
    and are both recorded: container ports merge by ``containerPort`` in a
    strategic patch but are keyed by ``(containerPort, protocol)`` for apply;
    ``status.hostIPs`` merges by ``ip`` but is atomic for apply. Anything not in
    the table behaves as upstream's default: maps merge, lists are replaced
    whole (``tolerations``, Node ``spec.taints``, ``status.containerStatuses``
    and ``status.images`` really have no strategy upstream; ``kubectl taint``
    relies on that by sending the complete new list). Entries were read from
    ``staging/src/k8s.io/api/core/v1/types.go``, ``apps/v1/types.go``,
    ``batch/v1/types.go``, ``policy/v1/types.go`` and ``apimachinery``'s
    ``meta/v1/types.go``. Lookup is one dict access per visited field, so a
    patch costs time proportional to its own size plus the lists it touches.

Server-side apply, simplified
    Intent from ``kubernetes-sigs/structured-merge-diff`` (``merge/update.go``)
    and ``staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal``; our
    own, smaller implementation:

    * A field set is a Python ``set`` of paths; a path is a tuple of
      ``FieldsV1`` elements (``"f:spec"``, ``'k:{"name":"app"}'``, ``'v:"x"'``).
      ``metadata.managedFields`` stores them in the upstream ``FieldsV1`` tree.
    * The applied config owns its leaves, its atomic lists/maps, and the items
      of associative lists and sets (what upstream's ``ToFieldSet`` yields).
      ``apiVersion``, ``kind``, ``metadata.name``/``namespace``/``uid``/
      ``resourceVersion``/``generation``/``creationTimestamp``/``managedFields``
      are never owned (upstream ``stripmeta.go``), and neither is ``status``
      through the main resource of a kind with a status subresource (nor
      ``spec`` through ``/status``), mirroring the registries' reset fields.
    * Apply merges the config into the live object (associative lists by the
      table's keys, sets as sets, everything else replaced), prunes fields the
      manager applied last time but not now unless someone else still owns
      them, then compares live and result: a field another manager owns whose
      value was added or changed is a conflict (409, one cause per field)
      unless ``force``, which moves ownership. Fields that disappeared leave
      every manager's set.
    * Updates (:func:`record_update`) give the writing manager the fields it
      added or changed, taking them from everybody else, as upstream's
      ``Updater.Update`` does; updates are tracked only once an object has
      managedFields (upstream tracks from create, and an existing object
      without managedFields gets a ``before-first-apply`` owner on its first
      apply). At most 10 update managers are kept; older ones fold into
      ``ancient-changes`` (``capmanagers.go``).

    Left out: version conversion (one version per kind), the
    ``last-applied-configuration`` hand-over between client- and server-side
    apply (``lastappliedmanager.go``/``lastappliedupdater.go``), unions,
    defaulting of the applied object beyond list-key defaults, and the ``.``
    self-markers upstream writes for maps created by updates (we write ``.``
    only for list items that also own children). Explicit ``null`` in an
    applied config removes the field and is owned.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import jsonpatch
import jsonpointer
import orjson
import yaml

from emulator.api import errors, kinds
from emulator.api.errors import Cause, StatusError
from emulator.api.kinds import Kind

__all__ = [
    "APPLY_PATCH_YAML",
    "JSON_PATCH",
    "JSON_PATCH_MAX_COPY_BYTES",
    "MAX_JSON_PATCH_OPERATIONS",
    "MAX_UPDATE_MANAGERS",
    "MERGE_KEYS",
    "MERGE_PATCH",
    "PATCH_CONTENT_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "FieldMeta",
    "apply_patch",
    "parse_apply_body",
    "patch_type",
    "record_update",
    "schema_for",
    "server_side_apply",
]

Obj = dict[str, Any]
Path = tuple[str, ...]

# ----------------------------------------------------------------------------- content types

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
# kubectl and client-go send YAML; JSON bodies are valid YAML, so they parse too. There is no
# "apply-patch+json" upstream (only +yaml and the feature-gated +cbor), so it is a 415 here as there.
APPLY_PATCH_YAML: Final = "application/apply-patch+yaml"
PATCH_CONTENT_TYPES: Final = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH_YAML)

# Upstream handlers/patch.go: maxJSONPatchOperations.
MAX_JSON_PATCH_OPERATIONS: Final = 10000
# Upstream server/config.go JSONPatchMaxCopyBytes: "copy" ops may not add more than this in total,
# or a short patch could double the document thousands of times.
JSON_PATCH_MAX_COPY_BYTES: Final = 3 * 1024 * 1024
# Upstream managedfields: DefaultMaxUpdateManagers.
MAX_UPDATE_MANAGERS: Final = 10

_APPLY: Final = "Apply"
_UPDATE: Final = "Update"


def patch_type(content_type: str) -> str:
    """The patch type named by a ``Content-Type`` header (parameters dropped); 415 if kemu cannot apply it."""
    media = content_type.split(";", 1)[0].strip()
    if media not in PATCH_CONTENT_TYPES:
        raise errors.unsupported_media_type(content_type)
    return media


# ----------------------------------------------------------------------------- merge metadata (data)


@dataclass(frozen=True, slots=True)
class FieldMeta:
    """How one field merges, in the two vocabularies upstream uses.

    ``strategy``/``merge_key`` are the strategic-merge struct tags (``patchStrategy``,
    ``patchMergeKey``): ``"merge"`` with a key merges a list of objects by that key,
    ``"merge"`` without a key merges a list of primitives as a set, ``"replace"`` on a
    map replaces it whole, ``""`` is the default (maps merge, lists are replaced).

    ``ssa``/``keys`` are the server-side-apply markers: ``"map"`` is an associative list
    keyed by ``keys`` (``key_defaults`` fill optional key fields, as the schema default of
    a port's ``protocol`` does), ``"set"`` a list of unique primitives, ``"atomic"`` a list,
    map or struct owned as one value; ``""`` is the default (lists atomic, maps granular).

    ``retain_keys`` records ``patchStrategy:"retainKeys"``. Servers never act on it (only
    on an explicit ``$retainKeys`` directive, which clients derive from it); it is kept so
    the table is a faithful copy of the tags.
    """

    strategy: str = ""
    merge_key: str = ""
    ssa: str = ""
    keys: tuple[str, ...] = ()
    key_defaults: tuple[tuple[str, Any], ...] = ()
    retain_keys: bool = False
    # (JSON-quoted key name, name, default or None) in key-name order: how apply serialises an
    # item's ``k:{...}`` element. Precomputed because it is needed for every list item walked.
    key_plan: tuple[tuple[str, str, Any], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        defaults = dict(self.key_defaults)
        plan = tuple((json.dumps(name), name, defaults.get(name)) for name in sorted(self.keys))
        object.__setattr__(self, "key_plan", plan)


def _keyed(merge_key: str, *ssa_keys: str, retain_keys: bool = False, **defaults: Any) -> FieldMeta:
    """A list merged by ``merge_key`` (strategic) and keyed by ``ssa_keys`` (apply; default: the same key)."""
    return FieldMeta("merge", merge_key, "map", ssa_keys or (merge_key,), tuple(defaults.items()), retain_keys)


_SET = FieldMeta("merge", "", "set")
_ATOMIC = FieldMeta(ssa="atomic")
# Explicitly strategy-less lists: replaced by a strategic patch, atomic for apply. Listed (although
# it is the default) where getting it wrong would be tempting: tolerations, taints, statuses.
_REPLACED = FieldMeta(ssa="atomic")


def _at(prefix: str, fragment: Mapping[str, FieldMeta]) -> dict[str, FieldMeta]:
    return {f"{prefix}.{path}": meta for path, meta in fragment.items()}


# meta/v1 ObjectMeta: finalizers are a set; ownerReferences merge by uid, each one atomic.
_OBJECT_META: dict[str, FieldMeta] = {
    "finalizers": _SET,
    "ownerReferences": _keyed("uid"),
    "ownerReferences[]": _ATOMIC,
}

# core/v1 Container (and EphemeralContainerCommon).
_CONTAINER: dict[str, FieldMeta] = {
    "ports": _keyed("containerPort", "containerPort", "protocol", protocol="TCP"),
    "env": _keyed("name"),
    "env[].valueFrom.configMapKeyRef": _ATOMIC,
    "env[].valueFrom.secretKeyRef": _ATOMIC,
    "env[].valueFrom.fieldRef": _ATOMIC,
    "env[].valueFrom.resourceFieldRef": _ATOMIC,
    "env[].valueFrom.fileKeyRef": _ATOMIC,
    "volumeMounts": _keyed("mountPath"),
    "volumeDevices": _keyed("devicePath"),
    "resources.claims": FieldMeta(ssa="map", keys=("name",)),
}

# core/v1 PodSpec.
_POD_SPEC: dict[str, FieldMeta] = {
    "volumes": _keyed("name", retain_keys=True),
    "initContainers": _keyed("name"),
    "containers": _keyed("name"),
    "ephemeralContainers": _keyed("name"),
    **{f"{c}[].{path}": meta for c in ("initContainers", "containers", "ephemeralContainers")
       for path, meta in _CONTAINER.items()},
    "imagePullSecrets": _keyed("name"),
    "hostAliases": _keyed("ip"),
    "topologySpreadConstraints": _keyed("topologyKey", "topologyKey", "whenUnsatisfiable"),
    "topologySpreadConstraints[].labelSelector": _ATOMIC,
    "schedulingGates": _keyed("name"),
    "resourceClaims": _keyed("name", retain_keys=True),
    "tolerations": _REPLACED,
    "readinessGates": _REPLACED,
    "nodeSelector": _ATOMIC,  # +mapType=atomic
    "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution": _ATOMIC,  # NodeSelector is atomic
}

# core/v1 PodStatus.
_POD_STATUS: dict[str, FieldMeta] = {
    "conditions": _keyed("type"),
    "podIPs": _keyed("ip"),
    "hostIPs": FieldMeta("merge", "ip", "atomic"),
    "resourceClaimStatuses": _keyed("name", retain_keys=True),
    "initContainerStatuses": _REPLACED,
    "containerStatuses": _REPLACED,
    "ephemeralContainerStatuses": _REPLACED,
}

_META = _at("metadata", _OBJECT_META)
_CONDITIONS_BY_TYPE = {"status.conditions": _keyed("type")}


def _pod_template(prefix: str) -> dict[str, FieldMeta]:
    return {**_at(f"{prefix}.metadata", _OBJECT_META), **_at(f"{prefix}.spec", _POD_SPEC)}


_WORKLOAD = {**_META, "spec.selector": _ATOMIC, **_pod_template("spec.template"), **_CONDITIONS_BY_TYPE}

MERGE_KEYS: dict[str, dict[str, FieldMeta]] = {
    "pods": {**_META, **_at("spec", _POD_SPEC), **_at("status", _POD_STATUS)},
    "nodes": {
        **_META,
        "spec.podCIDRs": _SET,
        "spec.taints": _REPLACED,
        "status.conditions": _keyed("type"),
        "status.addresses": _keyed("type"),
        "status.images": _REPLACED,
        "status.volumesInUse": _REPLACED,
        "status.volumesAttached": _REPLACED,
    },
    "namespaces": {**_META, "spec.finalizers": _REPLACED, **_CONDITIONS_BY_TYPE},
    "services": {
        **_META,
        "spec.ports": _keyed("port", "port", "protocol", protocol="TCP"),
        "spec.selector": _ATOMIC,
        **_CONDITIONS_BY_TYPE,
    },
    "events": {**_META, "involvedObject": _ATOMIC, "related": _ATOMIC},
    "deployments.apps": {**_WORKLOAD, "spec.strategy": FieldMeta(retain_keys=True)},
    "replicasets.apps": _WORKLOAD,
    "daemonsets.apps": _WORKLOAD,
    "statefulsets.apps": {**_WORKLOAD, "spec.volumeClaimTemplates": _REPLACED},
    "jobs.batch": {
        **_META,
        "spec.selector": _ATOMIC,
        **_pod_template("spec.template"),
        "status.conditions": FieldMeta("merge", "type", "atomic"),
    },
    "cronjobs.batch": {
        **_META,
        "spec.jobTemplate.spec.selector": _ATOMIC,
        **_pod_template("spec.jobTemplate.spec.template"),
        "status.active": _REPLACED,
    },
    "poddisruptionbudgets.policy": {
        **_META,
        "spec.selector": FieldMeta("replace", ssa="atomic"),
        **_CONDITIONS_BY_TYPE,
    },
}


def schema_for(kind: Kind | None) -> Mapping[str, FieldMeta]:
    """The merge table of ``kind``; kinds without one get the ObjectMeta rules only."""
    if kind is None:
        return _META
    return MERGE_KEYS.get(kind.resource, _META)


def _join(pattern: str, key: str) -> str:
    return f"{pattern}.{key}" if pattern else key


# ----------------------------------------------------------------------------- JSON helpers

_MISSING: Final = object()
_DROP: Final = object()


def _copy(obj: Any) -> Any:
    """A private deep copy of JSON data (an orjson round trip is several times faster than deepcopy)."""
    return orjson.loads(orjson.dumps(obj))


def _load_json(body: bytes | str) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        # Upstream validateAndTranscodePatch: the same words for every non-apply patch type.
        raise errors.bad_request("invalid JSON patch") from None


def _same(a: Any, b: Any) -> bool:
    """JSON equality: unlike ``==``, ``true`` is not ``1``; ``1`` and ``1.0`` are one JSON number."""
    if a is b:
        return True
    if type(a) is not type(b):
        numbers = (int, float)
        return (isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool)
                and not isinstance(b, bool) and a == b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _hkey(value: Any) -> Any:
    """A hashable stand-in for a JSON value, for set membership and list-item identity."""
    if isinstance(value, bool):
        return (bool, value)  # keep true apart from 1
    if value is None or isinstance(value, (str, int, float)):
        return value
    return (dict, orjson.dumps(value, option=orjson.OPT_SORT_KEYS))


def _short(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


# ----------------------------------------------------------------------------- entry point: non-apply patches


def apply_patch(kind: Kind, current: Obj, body: bytes | str, content_type: str) -> Obj:
    """Apply a JSON, merge or strategic merge patch to ``current`` and return the new object.

    ``current`` is never modified. 415 for a content type that is not a patch type, 400
    for a body that cannot be decoded or a malformed strategic directive, 422 for a JSON
    patch operation that cannot be applied (or copies over 3 MiB in total), 413 for more
    than 10000 JSON patch operations.
    Server-side apply bodies go to :func:`server_side_apply` (it needs a field manager).
    """
    media = patch_type(content_type)
    if media == APPLY_PATCH_YAML:
        raise errors.internal("apply patches are handled by server_side_apply, not apply_patch")
    patch = _load_json(body)
    doc = _copy(current)
    try:
        if media == JSON_PATCH:
            return _json_patch(doc, patch)
        if not isinstance(patch, dict):
            # Upstream decodes strategic/merge bodies into a map; anything else cannot become an object.
            raise errors.bad_request(
                f"json: cannot unmarshal {_json_type(patch)} into Go value of type map[string]interface {{}}")
        if media == MERGE_PATCH:
            return _merge_patch(doc, patch)
        return _smp_map(doc, patch, schema_for(kind), "")
    except RecursionError:
        raise errors.bad_request("the patch is nested too deeply") from None


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "null" if value is None else "object"


def _json_patch(doc: Obj, ops: Any) -> Obj:
    """RFC 6902. Decoding failures are 400 and application failures 422, as in upstream's jsonPatcher."""
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise errors.bad_request(f"json: cannot unmarshal {_json_type(ops)} into Go value of type jsonpatch.Patch")
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise errors.too_large(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}")
    try:
        if any(op.get("op") == "copy" for op in ops):
            result = _json_patch_counting_copies(doc, ops)
        else:
            result = jsonpatch.JsonPatch(ops).apply(doc, in_place=True)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, KeyError, IndexError, TypeError,
            ValueError, AttributeError) as e:
        raise _unprocessable(str(e) or type(e).__name__) from None
    if not isinstance(result, dict):
        raise _unprocessable(f"the patched document is a JSON {_json_type(result)}, not an object")
    return result


def _json_patch_counting_copies(doc: Any, ops: list[Obj]) -> Any:
    """Apply op by op, refusing once copied values add up to more than JSON_PATCH_MAX_COPY_BYTES."""
    copied = 0
    for op in ops:
        if op.get("op") == "copy":
            copied += len(orjson.dumps(jsonpointer.resolve_pointer(doc, op.get("from"))))
            if copied > JSON_PATCH_MAX_COPY_BYTES:
                raise ValueError(f"Unable to complete the copy, the accumulated size increase of copy is {copied}, "
                                 f"exceeding the limit {JSON_PATCH_MAX_COPY_BYTES}")
        doc = jsonpatch.JsonPatch([op]).apply(doc, in_place=True)
    return doc


def _unprocessable(detail: str) -> StatusError:
    # Upstream answers with NewGenericServerResponse(422): a fixed message and the library's error
    # dropped. We keep the message and carry the detail as a cause so a client can see it.
    return StatusError(422, "Invalid", "the server rejected our request due to an error in our request",
                       causes=[Cause("patch", detail)])


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge_patch(target.get(key), value)
    return target


# ----------------------------------------------------------------------------- strategic merge patch

_DIRECTIVE: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_SET_ORDER: Final = "$setElementOrder"
_DELETE_PRIMITIVES: Final = "$deleteFromPrimitiveList"
_BAD_PRIMITIVE_LIST: Final = "invalid patch format of primitive list"
_BAD_RETAIN_KEYS: Final = "invalid patch format of retainKeys"
_BAD_SET_ORDER: Final = "invalid patch format of setElementOrder list"


def _is_directive_key(key: str) -> bool:
    return key in (_DIRECTIVE, _RETAIN_KEYS) or key.startswith((_SET_ORDER, _DELETE_PRIMITIVES))


def _directive_target(key: str, prefix: str, error: str) -> str:
    """``$setElementOrder/containers`` -> ``containers``; anything but ``<prefix>/<name>`` is a 400."""
    head, sep, name = key.partition("/")
    if head != prefix or not sep:
        raise errors.bad_request(error)
    return name


def _clean(value: Any) -> Any:
    """A patch value as it lands in the object: directive-marked maps vanish, nulls and directive keys go.

    Upstream drops these in ``removeDirectives``/``discardNullValuesFromPatch`` or, for stray
    directive keys, when decoding into the typed object; returns ``_DROP`` for a value to omit.
    """
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return _DROP
        out: Obj = {}
        for k, v in value.items():
            if v is None or _is_directive_key(k):
                continue
            cleaned = _clean(v)
            if cleaned is not _DROP:
                out[k] = cleaned
        return out
    if isinstance(value, list):
        return [c for c in (_clean(v) for v in value) if c is not _DROP]
    return value


def _no_merge_key(item: Any, merge_key: str) -> StatusError:
    return errors.bad_request(f"map: {_short(item)} does not contain declared merge key: {merge_key}")


def _smp_map(original: Obj, patch: Obj, schema: Mapping[str, FieldMeta], path: str) -> Obj:
    """Merge ``patch`` into ``original`` (both owned by us; ``original`` is updated in place and returned)."""
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if directive == "replace":
            replaced = _clean({k: v for k, v in patch.items() if k != _DIRECTIVE})
            return replaced if isinstance(replaced, dict) else {}
        if directive == "delete":
            return {}
        raise errors.bad_request(f"unknown patch type: {directive} in map: {_short(patch)}")

    if _RETAIN_KEYS in patch:
        _retain_keys(original, patch)

    for key in [k for k in patch if k.startswith(_SET_ORDER)]:
        _set_element_order(original, patch, key, schema, path)

    deletions: list[tuple[str, Any]] = []
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVES):
            # Applied after the merges so "add x" and "delete y" in one patch do not depend on key order.
            deletions.append((_directive_target(key, _DELETE_PRIMITIVES, _BAD_PRIMITIVE_LIST), value))
            continue
        if value is None:
            original.pop(key, None)
            continue
        child = _join(path, key)
        live = original.get(key, _MISSING)
        if isinstance(value, dict) and isinstance(live, dict):
            meta = schema.get(child)
            if meta is not None and meta.strategy == "replace":
                original[key] = _clean(value)
            else:
                original[key] = _smp_map(live, value, schema, child)
        elif isinstance(value, list) and isinstance(live, list):
            original[key] = _smp_list_field(live, value, schema, child)
        else:
            cleaned = _clean(value)
            if cleaned is _DROP:
                original.pop(key, None)
            else:
                original[key] = cleaned

    for key, values in deletions:
        live = original.get(key)
        if not isinstance(live, list):
            continue
        if not isinstance(values, list):
            raise errors.bad_request(_BAD_PRIMITIVE_LIST)
        doomed = {_hkey(v) for v in values}
        original[key] = [v for v in live if _hkey(v) not in doomed]
    return original


def _retain_keys(original: Obj, patch: Obj) -> None:
    """``$retainKeys``: every key the patch sets must be listed; live keys not listed are cleared."""
    retain = patch.pop(_RETAIN_KEYS)
    if not isinstance(retain, list):
        raise errors.bad_request(_BAD_RETAIN_KEYS)
    keep = {k for k in retain if isinstance(k, str)}
    for key, value in patch.items():
        if value is None or key.startswith((_SET_ORDER, _DELETE_PRIMITIVES)):
            continue
        if key not in keep:
            raise errors.bad_request(_BAD_RETAIN_KEYS)
    for key in [k for k in original if k not in keep]:
        del original[key]


def _smp_list_field(live: list[Any], value: list[Any], schema: Mapping[str, FieldMeta], path: str) -> list[Any]:
    meta = schema.get(path)
    if meta is not None and meta.strategy == "merge":
        return _smp_merge_list(live, value, meta.merge_key, schema, path)
    cleaned = _clean(value)
    return cleaned if isinstance(cleaned, list) else []


def _element_kind(*lists: list[Any]) -> str:
    """``map`` or ``scalar``: the one element kind all the lists share (upstream ``sliceElementType``)."""
    seen = ""
    for items in lists:
        for item in items:
            if isinstance(item, list):
                raise StatusError(422, "Invalid", "lists of lists are not supported")
            kind = "map" if isinstance(item, dict) else type(item).__name__
            if seen and kind != seen:
                raise errors.bad_request(f"list element types are not identical: {_short(list(lists))}")
            seen = kind
    return "map" if seen == "map" else "scalar"


def _smp_merge_list(original: list[Any], patch: list[Any], merge_key: str,
                    schema: Mapping[str, FieldMeta], path: str) -> list[Any]:
    """A list with ``patchStrategy: merge``: a set of primitives, or objects merged by ``merge_key``."""
    if not original and not patch:
        return original
    if _element_kind(original, patch) != "map":
        merged: list[Any] = []
        seen: set[Any] = set()
        for item in (*original, *patch):
            if _hkey(item) not in seen:
                seen.add(_hkey(item))
                merged.append(item)
        return _order_like_patch(merged, [_hkey(p) for p in patch], [_hkey(o) for o in original], _hkey)
    if not merge_key:
        raise errors.bad_request(f"cannot merge lists without merge key for {path}")

    def key_of(item: Any) -> Any:
        return _hkey(item[merge_key]) if isinstance(item, dict) and merge_key in item else _MISSING

    plain: list[Obj] = []
    replace = False
    for item in patch:
        directive = item.get(_DIRECTIVE, _MISSING)
        if directive is _MISSING:
            plain.append(item)
        elif directive == "delete":
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            doomed = key_of(item)
            original = [o for o in original if key_of(o) != doomed]
        elif directive == "replace":
            replace = True  # keep scanning: the other directive items are still dropped
        elif directive == "merge":
            raise errors.bad_request("merging lists cannot yet be specified in the patch")
        else:
            raise errors.bad_request(f"unknown patch type: {directive} in map: {_short(item)}")
    if replace:
        return [c for c in (_clean(p) for p in plain) if c is not _DROP]

    result = list(original)
    position: dict[Any, int] = {}
    for i, item in enumerate(result):
        k = key_of(item)
        if k is not _MISSING:
            position.setdefault(k, i)
    patch_keys: list[Any] = []
    element = path + "[]"
    for item in plain:
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        k = key_of(item)
        i = position.get(k)
        if i is None:
            position[k] = len(result)
            result.append(_clean(item))
        else:
            result[i] = _smp_map(result[i], item, schema, element)
        patch_keys.append(k)
    return _order_like_patch(result, patch_keys, [key_of(o) for o in original], key_of)


def _order_like_patch(merged: list[Any], patch_order: list[Any], server_order: list[Any],
                      key_of: Callable[[Any], Any]) -> list[Any]:
    """Order a merged list the way upstream's ``normalizeElementOrder`` does.

    Items named by ``patch_order`` come in that order; the others keep the live order; the two
    runs interleave so a live-only item stays before the patched items it preceded in the live list.
    """
    wanted = set(patch_order)
    patch_items = [m for m in merged if key_of(m) in wanted]
    server_only = [m for m in merged if key_of(m) not in wanted]
    rank = {k: i for i, k in reversed(list(enumerate(patch_order)))}
    patch_items.sort(key=lambda m: rank[key_of(m)])
    live_rank = {k: i for i, k in reversed(list(enumerate(server_order)))}
    end = len(server_order)
    server_only.sort(key=lambda m: live_rank.get(key_of(m), end))
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patch_items):
        if j >= len(patch_items):
            out.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            out.append(patch_items[j])
            j += 1
        else:
            left = live_rank.get(key_of(server_only[i]))
            right = live_rank.get(key_of(patch_items[j]))
            # A server-only item goes first only when both are in the live list and it came first there;
            # so a brand-new patch item (not in the live list) is placed before the remaining live items.
            if left is not None and right is not None and left < right:
                out.append(server_only[i])
                i += 1
            else:
                out.append(patch_items[j])
                j += 1
    return out


def _set_element_order(original: Obj, patch: Obj, directive_key: str,
                       schema: Mapping[str, FieldMeta], path: str) -> None:
    """``$setElementOrder/<list>``: merge the list (if patched) and impose the given relative order."""
    order = patch.pop(directive_key)
    name = _directive_target(directive_key, _SET_ORDER, _BAD_SET_ORDER)
    if not isinstance(order, list):
        raise errors.bad_request(_BAD_SET_ORDER)
    child = _join(path, name)
    meta = schema.get(child)
    merge_key = meta.merge_key if meta is not None else ""
    live = original.get(name)
    live_list = live if isinstance(live, list) else None
    patched = patch.get(name, _MISSING)
    if patched is not _MISSING and not isinstance(patched, list):
        return  # null or a non-list: the main loop deletes or replaces it; there is nothing to order
    _check_order(patched if isinstance(patched, list) else [], order, merge_key)
    if live_list is None and patched is _MISSING:
        return
    if patched is _MISSING:
        merged = live_list or []
    elif live_list is None:
        merged = _clean(patched)
    else:
        merged = _smp_list_field(live_list, patched, schema, child)

    def key_of(item: Any) -> Any:
        if not merge_key:
            return _hkey(item)
        return _hkey(item[merge_key]) if isinstance(item, dict) and merge_key in item else _MISSING

    order_keys = []
    for item in order:
        if merge_key and not (isinstance(item, dict) and merge_key in item):
            raise _no_merge_key(item, merge_key)
        order_keys.append(key_of(item))
    original[name] = _order_like_patch(merged, order_keys, [key_of(o) for o in live_list or []], key_of)
    patch.pop(name, None)


def _check_order(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    """The patched items must appear in ``$setElementOrder`` and in the same relative order."""
    if not order or not patch_list:
        return

    def same(item: Any, ordered: Any) -> bool:
        if not merge_key:
            return _same(item, ordered)
        for m in (item, ordered):
            if not isinstance(m, dict) or merge_key not in m:
                raise _no_merge_key(m, merge_key)
        return _same(item[merge_key], ordered[merge_key])

    items = [p for p in patch_list if not (merge_key and isinstance(p, dict) and p.get(_DIRECTIVE) == "delete")]
    i = j = 0
    while i < len(items) and j < len(order):
        if isinstance(items[i], dict) and _DIRECTIVE in items[i]:
            i += 1
            continue
        if same(items[i], order[j]):
            i += 1
        j += 1
    if i < len(items):
        raise errors.bad_request(
            f"The order in patch list:\n{_short(patch_list)}\n doesn't match {_SET_ORDER} list:\n{_short(order)}\n")


# ----------------------------------------------------------------------------- server-side apply: body


class _ApplyYamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe YAML without the timestamp rule: like sigs.k8s.io/yaml, ``2024-01-01`` stays a string."""

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in rules if tag != "tag:yaml.org,2002:timestamp"]
        for first, rules in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


def parse_apply_body(body: bytes | str) -> Obj:
    """Decode an ``application/apply-patch+yaml`` body (YAML or JSON) into an object; 400 if it is not one."""
    try:
        doc = yaml.load(body, Loader=_ApplyYamlLoader)  # a SafeLoader subclass: no arbitrary objects
        # Aliases share nodes, so a small body can denote a huge document ("billion laughs"); without
        # aliases a document has fewer nodes than the body has bytes, so that is the budget.
        doc = _yaml_to_json(doc, [2 * len(body) + 64])
    except (yaml.YAMLError, ValueError, RecursionError) as e:
        raise errors.bad_request(f"error decoding patch: {e}") from None
    if not isinstance(doc, dict):
        raise errors.bad_request(f"error decoding patch: the applied configuration is a {_json_type(doc)}, "
                                 "not an object")
    return doc


def _yaml_to_json(value: Any, budget: list[int]) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError("the document expands to too many nodes (excessive aliasing)")
    if isinstance(value, dict):
        # YAML keys may be numbers or booleans; JSON (and upstream's YAMLToJSON) makes them strings.
        return {(k if isinstance(k, str) else json.dumps(k)): _yaml_to_json(v, budget) for k, v in value.items()}
    if isinstance(value, list):
        return [_yaml_to_json(v, budget) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} cannot be represented in JSON")
    if value is None or isinstance(value, (str, int, float)):
        return value
    raise ValueError(f"unsupported YAML value of type {type(value).__name__}")


# ----------------------------------------------------------------------------- server-side apply: field sets

_ITEM: Final = object()  # the value recorded for an associative-list or set item path

# Never owned by anybody (upstream internal/stripmeta.go).
_STRIPPED: Final[frozenset[Path]] = frozenset({
    ("f:apiVersion",), ("f:kind",), ("f:metadata",),
    *(("f:metadata", f"f:{name}") for name in (
        "name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation",
        "managedFields", "resourceVersion")),
})


_GO_ESCAPED: Final = re.compile("[<>&\u2028\u2029]")


def _json_compact(value: Any) -> str:
    """Compact JSON as Go's encoder writes it: raw UTF-8, but <, >, & and U+2028/9 escaped."""
    text = orjson.dumps(value).decode()
    if _GO_ESCAPED.search(text):
        text = _GO_ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def _item_element(item: Any, meta: FieldMeta) -> str | None:
    """The ``k:{...}`` path element of an associative-list item, or None when a key field is missing."""
    if not isinstance(item, dict):
        return None
    parts = []
    for quoted, name, default in meta.key_plan:
        value = item.get(name, default)
        if value is None or isinstance(value, (dict, list)):
            return None
        parts.append(f"{quoted}:{_json_compact(value)}")
    return "k:{" + ",".join(parts) + "}"


def _path_string(path: Path) -> str:
    """Upstream ``fieldpath.Path.String``: ``.spec.containers[name="app"].image``."""
    parts = []
    for element in path:
        kind, body = element[:2], element[2:]
        if kind == "f:":
            parts.append("." + body)
        elif kind == "k:":
            key = json.loads(body)
            parts.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in key.items()) + "]")
        elif kind == "v:":
            parts.append(f"[={body}]")
        else:
            parts.append(f"[{body}]")
    return "".join(parts)


class _Flattener:
    """Walks an object into ``{path: value}`` for every field it owns (upstream ``ToFieldSet``).

    Leaves are scalars, nulls, empty maps and atomic lists/maps; associative-list and set items
    are recorded too (with ``_ITEM``), so item membership and leaf values can both be compared.
    ``strict`` (applied configs) rejects items without keys and duplicate keys; otherwise (live
    objects) such a list is treated as atomic, as upstream tolerates duplicates in stored objects.
    """

    def __init__(self, schema: Mapping[str, FieldMeta], *, strict: bool) -> None:
        self.schema = schema
        self.strict = strict
        self.out: dict[Path, Any] = {}

    def walk(self, obj: Obj) -> dict[Path, Any]:
        self._map(obj, "", ())
        return self.out

    def _map(self, obj: Obj, pattern: str, path: Path) -> None:
        for key, value in obj.items():
            self._value(value, _join(pattern, key), (*path, "f:" + key))

    def _value(self, value: Any, pattern: str, path: Path) -> None:
        meta = self.schema.get(pattern)
        if isinstance(value, dict):
            if value and (meta is None or meta.ssa != "atomic"):
                self._map(value, pattern, path)
            else:
                self.out[path] = value
        elif isinstance(value, list) and value and meta is not None and meta.ssa == "map":
            if not self._associative(value, meta, pattern, path):
                self.out[path] = value
        elif isinstance(value, list) and value and meta is not None and meta.ssa == "set":
            if not self._set(value, path):
                self.out[path] = value
        elif isinstance(value, list) and not value and meta is not None and meta.ssa in ("map", "set"):
            pass  # an empty granular list owns nothing (upstream visits no item)
        else:
            self.out[path] = value

    def _associative(self, items: list[Any], meta: FieldMeta, pattern: str, path: Path) -> bool:
        elements: list[tuple[str, Any]] = []
        seen: dict[str, int] = {}
        for index, item in enumerate(items):
            element = _item_element(item, meta)
            if element is None:
                if self.strict:
                    missing = [k for k in meta.keys if not isinstance(item, dict) or k not in item]
                    raise errors.bad_request(
                        f"{_path_string(path)}: element {index}: associative list with keys has an element "
                        f"that omits key field {json.dumps(missing[0] if missing else meta.keys[0])} "
                        "(and doesn't have default value)")
                return False
            if element in seen:
                if self.strict:
                    raise errors.bad_request(
                        f"{_path_string(path)}: duplicate entries for key {_path_string((element,))}")
                return False
            seen[element] = index
            elements.append((element, item))
        element_pattern = pattern + "[]"
        element_meta = self.schema.get(element_pattern)
        atomic_items = element_meta is not None and element_meta.ssa == "atomic"
        for element, item in elements:
            item_path = (*path, element)
            if atomic_items:
                self.out[item_path] = item
            else:
                self.out[item_path] = _ITEM
                self._map(item, element_pattern, item_path)
        return True

    def _set(self, items: list[Any], path: Path) -> bool:
        paths: dict[Path, None] = {}  # ordered and O(1) membership
        for item in items:
            if isinstance(item, (dict, list)):
                return False
            item_path = (*path, "v:" + _json_compact(item))
            if item_path in paths:
                if self.strict:
                    raise errors.bad_request(
                        f"{_path_string(path)}: duplicate entries for key {_path_string(item_path[-1:])}")
                return False
            paths[item_path] = None
        for item_path in paths:
            self.out[item_path] = _ITEM
        return True


def _flatten(obj: Obj, schema: Mapping[str, FieldMeta], *, strict: bool = False) -> dict[Path, Any]:
    return _Flattener(schema, strict=strict).walk(obj)


def _diff(old: Mapping[Path, Any], new: Mapping[Path, Any]) -> tuple[set[Path], set[Path]]:
    """(added or modified, removed) between two flattened objects (upstream ``TypedValue.Compare``)."""
    changed = {p for p, v in new.items() if p not in old or not _same(old[p], v)}
    removed = {p for p in old if p not in new}
    return changed, removed


def _ownable(kind: Kind | None, subresource: str) -> Callable[[Iterable[Path]], set[Path]]:
    """The filter from 'fields touched' to 'fields a manager may own' for this endpoint."""
    if subresource == "status":
        ignored = "f:spec"
    elif not subresource and kind is not None and kind.has_status:
        ignored = "f:status"
    else:
        ignored = ""

    def keep(paths: Iterable[Path]) -> set[Path]:
        return {p for p in paths if p not in _STRIPPED and p[0] != ignored}

    return keep


# ----------------------------------------------------------------------------- server-side apply: managedFields


@dataclass
class _Entry:
    """One ``metadata.managedFields`` entry, with its field set decoded."""

    manager: str
    operation: str
    api_version: str
    subresource: str = ""
    time: str | None = None
    fields: set[Path] = field(default_factory=set)

    @property
    def ident(self) -> tuple[str, str, str, str]:
        # Upstream BuildManagerIdentifier: appliers are one manager whatever the version they applied.
        version = self.api_version if self.operation == _UPDATE else ""
        return (self.manager, self.operation, version, self.subresource)

    def describe(self) -> str:
        """Upstream ``printManager``: ``"kubectl" with subresource "scale" using apps/v1``."""
        text = json.dumps(self.manager, ensure_ascii=False)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource, ensure_ascii=False)}"
        if self.operation == _UPDATE:
            text += f" using {self.api_version}"
        return text


def _fields_to_set(tree: Any) -> set[Path]:
    out: set[Path] = set()
    if not isinstance(tree, dict):
        return out
    stack: list[tuple[Path, Obj]] = [((), tree)]
    while stack:
        prefix, node = stack.pop()
        for key, child in node.items():
            if key == ".":
                if prefix:
                    out.add(prefix)
            elif isinstance(child, dict) and child:
                stack.append(((*prefix, key), child))
            else:
                out.add((*prefix, key))
    return out


_ELEMENT_RANK = {"f:": 0, "k:": 1, "v:": 2, "i:": 3}


def _set_to_fields(paths: set[Path]) -> Obj:
    """The ``FieldsV1`` tree of a set: children sorted like upstream, ``"."`` marks a member with children."""
    root: Obj = {}
    for path in paths:
        node = root
        for element in path:
            node = node.setdefault(element, {})

    def emit(node: Obj, prefix: Path) -> Obj:
        out: Obj = {}
        if node and prefix in paths:
            out["."] = {}
        for element in sorted(node, key=lambda e: (_ELEMENT_RANK.get(e[:2], 4), e)):
            out[element] = emit(node[element], (*prefix, element))
        return out

    return emit(root, ())


def _decode_managed(entries: Any) -> list[_Entry]:
    """Decode ``managedFields``; malformed entries are skipped rather than failing the write."""
    decoded: list[_Entry] = []
    if not isinstance(entries, list):
        return decoded
    for raw in entries:
        if not isinstance(raw, dict) or raw.get("operation") not in (_APPLY, _UPDATE):
            continue
        if raw.get("fieldsType", "FieldsV1") != "FieldsV1" or not raw.get("apiVersion"):
            continue
        decoded.append(_Entry(
            manager=str(raw.get("manager", "")),
            operation=raw["operation"],
            api_version=str(raw["apiVersion"]),
            subresource=str(raw.get("subresource") or ""),
            time=raw.get("time"),
            fields=_fields_to_set(raw.get("fieldsV1")),
        ))
    return decoded


def _encode_managed(entries: list[_Entry]) -> list[Obj]:
    # Upstream sortEncodedManagedFields: operation, time, manager, apiVersion, subresource.
    ordered = sorted(entries, key=lambda e: (e.operation, e.time or "", e.manager, e.api_version, e.subresource))
    out = []
    for e in ordered:
        entry: Obj = {"manager": e.manager, "operation": e.operation, "apiVersion": e.api_version}
        if e.time is not None:
            entry["time"] = e.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = _set_to_fields(e.fields)
        if e.subresource:
            entry["subresource"] = e.subresource
        out.append(entry)
    return out


def _pop_managed(obj: Obj) -> Any:
    meta = obj.get("metadata")
    return meta.pop("managedFields", None) if isinstance(meta, dict) else None


def _store_managed(obj: Obj, entries: list[_Entry]) -> Obj:
    entries = [e for e in entries if e.fields]
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        if not entries:
            return obj
        meta = obj["metadata"] = {}
    if entries:
        meta["managedFields"] = _encode_managed(entries)
    else:
        meta.pop("managedFields", None)
    return obj


def _cap_update_managers(entries: list[_Entry]) -> list[_Entry]:
    """Fold the oldest update managers into ``ancient-changes`` (one per version) beyond the cap."""
    updaters = sorted((e for e in entries if e.operation == _UPDATE), key=lambda e: (e.time or "", e.manager))
    excess = len(updaters) - MAX_UPDATE_MANAGERS
    if excess <= 0:
        return entries
    first_of_version: dict[str, _Entry] = {}
    buckets: dict[str, _Entry] = {e.api_version: e for e in updaters if e.manager == "ancient-changes"}
    gone: set[int] = set()
    for e in updaters:
        if excess <= 0:
            break
        if e.manager == "ancient-changes":
            continue
        bucket = buckets.get(e.api_version)
        if bucket is None and e.api_version not in first_of_version:
            first_of_version[e.api_version] = e
            continue
        if bucket is None:
            bucket = first_of_version[e.api_version]
            bucket.manager = "ancient-changes"
            buckets[e.api_version] = bucket
        bucket.fields |= e.fields
        bucket.time = e.time
        gone.add(id(e))
        excess -= 1
    return [e for e in entries if id(e) not in gone]


# ----------------------------------------------------------------------------- server-side apply: merge and prune


def _ordered_merge(live: list[tuple[Any, Any]], config: list[tuple[Any, Any]],
                   combine: Callable[[Any, Any], Any]) -> list[Any]:
    """Merge keyed items: shared and config items follow the config's order, live-only items keep their place.

    This is the interleaving structured-merge-diff's ``mergingWalker.visitListItems`` produces.
    """
    config_keys = {k for k, _ in config}
    live_items: dict[Any, Any] = {}
    for k, item in live:
        live_items.setdefault(k, item)
    shared = [k for k, _ in config if k in live_items]
    next_shared_index = 0
    next_shared = shared[0] if shared else _MISSING
    emitted: set[Any] = set()
    out: list[Any] = []
    i = j = 0
    while i < len(live) or j < len(config):
        if i < len(live) and j < len(config):
            live_key = live[i][0]
            if live_key == config[j][0]:
                if live_key not in emitted:
                    out.append(combine(live_items[live_key], config[j][1]))
                    emitted.add(live_key)
                i += 1
                j += 1
                next_shared_index += 1
                next_shared = shared[next_shared_index] if next_shared_index < len(shared) else _MISSING
                continue
            if live_key in config_keys and next_shared is not _MISSING and next_shared != live_key:
                i += 1  # a shared item the config wants later: it is emitted when the config reaches it
                continue
        if i < len(live):
            live_key = live[i][0]
            if live_key not in config_keys:
                out.append(live[i][1])
                i += 1
                continue
            if live_key in emitted:
                i += 1
        if j < len(config):
            config_key, item = config[j]
            if config_key not in emitted:
                out.append(combine(live_items.get(config_key, _MISSING), item))
                emitted.add(config_key)
            j += 1
            if next_shared is not _MISSING and next_shared == config_key:
                next_shared_index += 1
                next_shared = shared[next_shared_index] if next_shared_index < len(shared) else _MISSING
    return out


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _apply_merge(live: Any, config: Any, pattern: str, schema: Mapping[str, FieldMeta]) -> Any:
    """Merge an applied configuration into a live value (both private copies)."""
    meta = schema.get(pattern)
    if isinstance(config, dict):
        if not isinstance(live, dict) or (meta is not None and meta.ssa == "atomic"):
            return _without_nulls(config)
        out = dict(live)
        for key, value in config.items():
            if value is None:
                out.pop(key, None)  # explicit null: the applier wants the field gone (and owns that)
            else:
                out[key] = _apply_merge(live.get(key, _MISSING), value, _join(pattern, key), schema)
        return out
    if isinstance(config, list) and isinstance(live, list) and meta is not None:
        if meta.ssa == "map":
            live_keyed = [(_item_element(item, meta), item) for item in live]
            if all(k is not None for k, _ in live_keyed):
                element = pattern + "[]"
                element_meta = schema.get(element)
                atomic = element_meta is not None and element_meta.ssa == "atomic"
                config_keyed = [(_item_element(item, meta), item) for item in config]
                return _ordered_merge(
                    live_keyed, config_keyed,
                    lambda old, new: _without_nulls(new) if atomic else _apply_merge(old, new, element, schema))
        elif meta.ssa == "set" and all(not isinstance(v, (dict, list)) for v in (*live, *config)):
            return _ordered_merge([(_hkey(v), v) for v in live], [(_hkey(v), v) for v in config],
                                  lambda _old, new: new)
    return _without_nulls(config)


def _prune(obj: Obj, doomed: set[Path], keep: set[Path], schema: Mapping[str, FieldMeta]) -> None:
    """Remove fields the applier dropped from its config, unless someone (or the config) still owns them.

    A path is kept when it, or anything below it, is still owned, so a list item another manager
    still has fields in survives, and so do the key fields that identify such an item.
    """
    still_owned = {p[:n] for p in keep for n in range(1, len(p) + 1)}
    for path in sorted(doomed, key=len):
        if path in still_owned:
            continue
        if len(path) >= 2 and path[-2].startswith("k:") and path[:-1] in still_owned:
            continue  # a key field of a surviving item
        _remove_path(obj, path, schema)


def _remove_path(obj: Obj, path: Path, schema: Mapping[str, FieldMeta]) -> None:
    """Delete one path; containers it leaves empty go too (Go would omit them), except top-level fields."""
    trail: list[tuple[Any, Any]] = []  # (container, key-or-index) from the top down
    node: Any = obj
    pattern = ""
    for element in path:
        kind, body = element[:2], element[2:]
        if kind == "f:":
            if not isinstance(node, dict) or body not in node:
                return
            trail.append((node, body))
            node = node[body]
            pattern = _join(pattern, body)
            continue
        if not isinstance(node, list):
            return
        meta = schema.get(pattern)
        index = None
        for i, item in enumerate(node):
            if kind == "k:" and meta is not None and _item_element(item, meta) == element:
                index = i
                break
            if kind == "v:" and not isinstance(item, (dict, list)) and "v:" + _json_compact(item) == element:
                index = i
                break
        if index is None:
            return
        trail.append((node, index))
        node = node[index]
        pattern += "[]"
    if not trail:
        return
    container, key = trail.pop()
    del container[key]
    while len(trail) > 1 and not container:
        container, key = trail.pop()
        del container[key]


# ----------------------------------------------------------------------------- server-side apply: entry points


def _gvk_string(api_version: Any, kind: Any) -> str:
    """Go's ``schema.GroupVersionKind.String``: ``apps/v1, Kind=Deployment``; ``/v1, Kind=Pod``."""
    version = str(api_version or "")
    group, _, ver = version.rpartition("/")
    return f"{group}/{ver}, Kind={kind or ''}"


def server_side_apply(kind: Kind, current: Obj | None, applied: Obj, manager: str, *, force: bool, now: str,
                      subresource: str = "") -> Obj:
    """Server-side apply ``applied`` (a decoded apply body) as ``manager``; ``current is None`` means create.

    Returns the new object with ``metadata.managedFields`` maintained; neither input is modified.
    Identity (name, namespace, uid) and status are merged like any field: the caller checks the
    former and resets the latter on the main resource, exactly as for an update.
    400 for a config of another kind or carrying managedFields or with unkeyable list items, 422
    for a missing field manager, 409 Conflict listing every field another manager owns with a
    different value, unless ``force``.
    """
    if not manager:
        raise StatusError(422, "Invalid",
                          'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                          "is required for apply patch",
                          "PatchOptions", "", "meta.k8s.io",
                          [Cause("fieldManager", "Required value: is required for apply patch", "FieldValueRequired")])
    if not isinstance(applied, dict):
        raise errors.bad_request("error decoding patch: the applied configuration is not an object")
    if applied.get("apiVersion") != kind.api_version or applied.get("kind") != kind.kind:
        raise errors.bad_request(f"invalid object type: {_gvk_string(applied.get('apiVersion'), applied.get('kind'))}")
    applied_meta = applied.get("metadata")
    if isinstance(applied_meta, dict) and applied_meta.get("managedFields") is not None:
        raise errors.bad_request("metadata.managedFields must be nil")

    schema = schema_for(kind)
    ownable = _ownable(kind, subresource)
    config = _copy(applied)
    config_set = ownable(_flatten(config, schema, strict=True))

    live: Obj = _copy(current) if current is not None else {}
    entries = _decode_managed(_pop_managed(live))
    live_flat = _flatten(live, schema)
    if current is not None and not entries:
        # Upstream skipnonapplied.go: fields set before anyone applied belong to "before-first-apply".
        entries = [_Entry("before-first-apply", _UPDATE, kind.api_version, subresource, now, ownable(live_flat))]

    me_ident = (manager, _APPLY, "", subresource)
    me = next((e for e in entries if e.ident == me_ident), None)
    others = [e for e in entries if e is not me]

    merged = _apply_merge(live, config, "", schema)
    if me is not None and me.fields - config_set:
        keep = set(config_set).union(*(e.fields for e in others))
        _prune(merged, me.fields - config_set, keep, schema)

    changed, removed = _diff(live_flat, _flatten(merged, schema))
    changed, removed = ownable(changed), ownable(removed)
    conflicts = [(e, sorted(e.fields & changed)) for e in others if e.fields & changed]
    if conflicts and not force:
        raise _conflict_error(conflicts)
    for e in others:
        e.fields -= changed  # forced: ownership of what we changed moves to us
        e.fields -= removed
    if me is None:
        me = _Entry(manager, _APPLY, kind.api_version, subresource)
        entries.append(me)
    me.api_version = kind.api_version
    me.fields = config_set
    me.time = now
    return _store_managed(merged, entries)


def _conflict_error(conflicts: list[tuple[_Entry, list[Path]]]) -> StatusError:
    """409 like upstream ``internal/conflict.go``: one cause per field, message grouped by manager."""
    pairs = [(e.describe(), _path_string(p)) for e, paths in conflicts for p in paths]
    causes = [Cause(field=path, message=f"conflict with {who}", reason="FieldManagerConflict") for who, path in pairs]
    if len(pairs) == 1:
        who, path = pairs[0]
        message = f"Apply failed with 1 conflict: conflict with {who}: {path}"
    else:
        lines: list[str] = []
        for e, paths in sorted(conflicts, key=lambda c: c[0].describe()):
            lines.append(f"conflicts with {e.describe()}:")
            lines.extend(f"- {_path_string(p)}" for p in paths)
        message = f"Apply failed with {len(pairs)} conflicts: " + "\n".join(lines)
    return StatusError(409, "Conflict", message, causes=causes)


def _kind_of(obj: Obj) -> Kind | None:
    try:
        return kinds.by_api_version_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    except StatusError:
        return None


def record_update(current: Obj | None, new: Obj, manager: str, now: str, *, kind: Kind | None = None,
                  subresource: str = "") -> Obj:
    """Record a non-apply write (create, update, patch) of ``new`` by ``manager`` in its managedFields.

    The manager's ``Update`` entry gains every field it added or changed, and those fields (and
    any removed ones) leave the other managers' sets: so an ``apply`` that later wants another
    value for them conflicts. ``current is None`` is a create. As upstream, an existing object
    without managedFields stays untracked until its first apply, managedFields sent by the client
    replace the stored ones (an explicit ``[]`` clears them), and subresource writes cannot set them.
    ``kind`` defaults to the registered kind of ``new``'s apiVersion/kind. ``new`` is not modified.
    """
    kind = kind or _kind_of(new)
    schema = schema_for(kind)
    ownable = _ownable(kind, subresource)
    result: Obj = _copy(new)
    sent = _pop_managed(result)
    live: Obj = _copy(current) if current is not None else {}
    stored = _pop_managed(live)
    if subresource or sent is None or (isinstance(sent, list) and sent and not _decode_managed(sent)):
        entries = _decode_managed(stored)
    else:
        entries = _decode_managed(sent)
    if not entries and current is not None:
        return result  # upstream skipnonapplied.go: untracked objects stay untracked until applied

    changed, removed = _diff(_flatten(live, schema), _flatten(result, schema))
    changed, removed = ownable(changed), ownable(removed)
    api_version = kind.api_version if kind is not None else str(new.get("apiVersion", ""))
    me_ident = (manager, _UPDATE, api_version, subresource)
    for e in entries:
        e.fields -= removed
        e.fields -= changed
    if changed:
        me = next((e for e in entries if e.ident == me_ident), None)
        if me is None:
            me = _Entry(manager, _UPDATE, api_version, subresource)
            entries.append(me)
        me.fields |= changed
        me.time = now
    entries = _cap_update_managers([e for e in entries if e.fields])
    return _store_managed(result, entries)
