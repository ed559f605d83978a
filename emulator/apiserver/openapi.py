"""OpenAPI schemas of every served kind, generated from the object model's own field table.

Upstream kube-apiserver publishes ``/openapi/v2`` and ``/openapi/v3`` documents
generated (by ``kube-openapi``) from the Go types in ``k8s.io/api``. kemu's
equivalent of those type declarations is the protobuf field table,
:data:`emulator.apiserver.protobuf_schema.SCHEMA` (every message with its JSON
field names, types, repetition and maps); this module turns it into schemas,
so a kind gains a schema the moment its messages are in that table and no
schema is written by hand:

* a message becomes an ``object`` whose properties are its JSON fields
  (inlined sub-messages, Go's ``json:",inline"``, merge into the parent);
  ``str``/``bool``/``i32``/``i64``/``bytes`` become ``string``/``boolean``/
  ``integer`` (int32/int64)/``string`` (byte), ``[]T`` an array, ``{T}`` an
  object with ``additionalProperties``;
* the messages with a non-object JSON form are named as upstream and typed
  as their JSON: ``Time``/``MicroTime`` (date-time strings), ``Quantity``,
  ``IntOrString`` (``x-kubernetes-int-or-string``), ``FieldsV1`` (object);
* definitions are named as upstream (``io.k8s.api.core.v1.PodSpec``,
  ``io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta``): a message belongs to
  the group of the first kind (core first) that reaches it;
* top-level kinds carry ``x-kubernetes-group-version-kind``, which is how
  ``kubectl explain`` finds them; kinds that are custom resources upstream
  (``Kind.custom_resource``) or have no messages get an open object
  (``x-kubernetes-preserve-unknown-fields``), as a CRD without a schema would.

Field descriptions are not in the table, so ``kubectl explain`` shows fields
and types without upstream's prose (documented simplification).

:func:`unknown_fields` walks a request body against the same table: the
``fieldValidation`` check (``Strict`` rejects with upstream's ``strict decoding
error: unknown field "spec.foo"``, ``Warn`` answers with a warning header).
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

from emulator.api import errors
from emulator.api.kinds import Kind, all_kinds
from emulator.apiserver.protobuf import MESSAGES, TOP_LEVEL, Field

_META = "io.k8s.apimachinery.pkg.apis.meta.v1"
_META_MESSAGES = frozenset({"ObjectMeta", "OwnerReference", "ManagedFieldsEntry", "LabelSelector",
                            "LabelSelectorRequirement", "Condition", "DeleteOptions", "Preconditions", "Time",
                            "MicroTime", "FieldsV1", "TypeMeta"})
# Messages whose JSON is not an object: (definition name, schema).
_OPAQUE: dict[str, tuple[str, dict[str, Any]]] = {
    "Time": (f"{_META}.Time", {"type": "string", "format": "date-time"}),
    "MicroTime": (f"{_META}.MicroTime", {"type": "string", "format": "date-time"}),
    "FieldsV1": (f"{_META}.FieldsV1", {"type": "object"}),
    "Quantity": ("io.k8s.apimachinery.pkg.api.resource.Quantity", {"type": "string", "format": "quantity",
                                                                   "x-kubernetes-int-or-string": True}),
    "IntOrString": ("io.k8s.apimachinery.pkg.util.intstr.IntOrString",
                    {"type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": True}),
    "ExtraValue": ("io.k8s.api.authentication.v1.ExtraValue", {"type": "array", "items": {"type": "string"}}),
}
_SCALARS: dict[str, dict[str, Any]] = {
    "str": {"type": "string"}, "bytes": {"type": "string", "format": "byte"}, "bool": {"type": "boolean"},
    "i32": {"type": "integer", "format": "int32"}, "i64": {"type": "integer", "format": "int64"},
    "raw": {"type": "string", "format": "byte"},
}
_SKIP = frozenset({"Unknown", "TypeMeta"})  # the protobuf envelope, never a JSON object
# core/v1 messages that only other groups' kinds reach (a Deployment's template, a StorageClass's topologies).
_CORE_ROOTS = ("PodTemplateSpec", "TopologySelectorTerm")


def _prefix(api_version: str) -> str:
    group, _, version = api_version.rpartition("/")
    return f"io.k8s.api.{group.split('.', 1)[0] if group else 'core'}.{version}"


def _children(message: str) -> list[str]:
    return [f.type for f in MESSAGES[message].fields.values() if f.type in MESSAGES]


@lru_cache(maxsize=1)
def definition_names() -> dict[str, str]:
    """Message name → upstream-style definition name."""
    names: dict[str, str] = {m: f"{_META}.{m}" for m in _META_MESSAGES if m in MESSAGES}
    names.update({m: n for m, (n, _) in _OPAQUE.items()})
    # Core first, so PodSpec is io.k8s.api.core.v1.PodSpec though apps/v1 reaches it too.
    order = sorted((v, k) for k, v in TOP_LEVEL.items() if v)
    order += [("v1", m) for m in _CORE_ROOTS if m in MESSAGES]
    order.sort(key=lambda vk: (vk[0] != "v1", vk[0]))
    for api_version, top in order:
        prefix = _prefix(api_version)
        stack = [top]
        while stack:
            m = stack.pop()
            if m in names or m in _SKIP:
                continue
            names[m] = f"{prefix}.{m}"
            stack.extend(_children(m))
    return names


def _field_schema(f: Field, ref: str) -> dict[str, Any]:
    if f.type in MESSAGES:
        item: dict[str, Any] = {"$ref": ref + definition_names()[f.type]}
        if ref.startswith("#/components/"):
            # OpenAPI v3 as upstream writes it: a reference wrapped in allOf (kubectl explain names its type).
            item = {"allOf": [item]}
    else:
        item = dict(_SCALARS[f.type])
    if f.map:
        return {"type": "object", "additionalProperties": item}
    if f.repeated:
        return {"type": "array", "items": item}
    return item


def _properties(message: str, ref: str, out: dict[str, Any]) -> None:
    for f in MESSAGES[message].fields.values():
        if not f.json:  # inlined
            _properties(f.type, ref, out)
        else:
            out[f.json] = _field_schema(f, ref)


# OpenAPI v3 types these as one of two JSON types (kube-openapi's OpenAPIV3OneOfTypes), with no single type.
_ONE_OF_V3: dict[str, dict[str, Any]] = {
    "IntOrString": {"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}],
                    "x-kubernetes-int-or-string": True},
    "Quantity": {"oneOf": [{"type": "string"}, {"type": "number"}], "x-kubernetes-int-or-string": True},
}


def message_schema(message: str, ref: str) -> dict[str, Any]:
    if message in _ONE_OF_V3 and ref.startswith("#/components/"):
        return dict(_ONE_OF_V3[message])
    if message in _OPAQUE:
        return dict(_OPAQUE[message][1])
    props: dict[str, Any] = {}
    if TOP_LEVEL.get(message) is not None:
        props["apiVersion"] = {"type": "string", "description": "APIVersion defines the versioned schema of this "
                                                                "representation of an object."}
        props["kind"] = {"type": "string", "description": "Kind is a string value representing the REST resource "
                                                          "this object represents."}
    _properties(message, ref, props)
    return {"type": "object", "properties": props}


def has_schema(kind: Kind) -> bool:
    return not kind.custom_resource and TOP_LEVEL.get(kind.kind) == kind.api_version and kind.kind in MESSAGES


def open_schema(kind: Kind) -> dict[str, Any]:
    return {"type": "object", "description": f"{kind.kind}: a custom resource kemu serves without a schema",
            "x-kubernetes-preserve-unknown-fields": True}


def kind_definition_name(kind: Kind) -> str:
    return definition_names()[kind.kind] if has_schema(kind) else f"{_prefix(kind.api_version)}.{kind.kind}"


def definitions(kinds: list[Kind], ref: str) -> dict[str, Any]:
    """Definitions of ``kinds`` and every message they reach, refs written as ``ref + name``."""
    out: dict[str, Any] = {}
    names = definition_names()
    stack: list[str] = []
    for k in kinds:
        gvk = [{"group": k.group, "version": k.version, "kind": k.kind}]
        if has_schema(k):
            schema = message_schema(k.kind, ref)
            stack.extend(_children(k.kind))
        else:
            schema = open_schema(k)
        schema["x-kubernetes-group-version-kind"] = gvk
        out[kind_definition_name(k)] = schema
    while stack:
        m = stack.pop()
        name = names.get(m)
        if name is None or name in out:
            continue
        out[name] = message_schema(m, ref)
        if m not in _OPAQUE:
            stack.extend(_children(m))
    return out


def served_kinds() -> list[Kind]:
    return sorted(all_kinds(), key=lambda k: (k.group, k.version, k.kind))


# ----------------------------------------------------------------------------- unknown fields
@cache
def _json_fields(message: str) -> dict[str, Field]:
    out: dict[str, Field] = {}
    for f in MESSAGES[message].fields.values():
        if f.json:
            out[f.json] = f
        else:
            out.update(_json_fields(f.type))
    return out


def _walk(message: str, obj: dict[str, Any], path: str, out: list[str]) -> None:
    fields = _json_fields(message)
    for key, value in obj.items():
        f = fields.get(key)
        where = f"{path}.{key}" if path else key
        if f is None:
            if not (not path and key in ("apiVersion", "kind")):
                out.append(where)
            continue
        sub = f.type
        if sub not in MESSAGES or sub in _OPAQUE:
            continue
        if f.map:
            if isinstance(value, dict):
                for k, v in value.items():
                    if isinstance(v, dict):
                        _walk(sub, v, f"{where}[{k}]", out)
        elif f.repeated:
            if isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, dict):
                        _walk(sub, v, f"{where}[{i}]", out)
        elif isinstance(value, dict):
            _walk(sub, value, where, out)


def field_validation(directive: str, kind: Kind, obj: dict[str, Any]) -> tuple[str, ...]:
    """``fieldValidation``: Strict rejects unknown fields, Warn (the default) warns, Ignore says nothing.

    Upstream ``create.go``/``update.go``: a strict decoding error becomes ``transformDecodeError``'s
    400 ``<Kind> in version "<v>" cannot be handled as a <Kind>: strict decoding error: unknown field "..."``.
    kemu keeps unknown fields under Warn/Ignore where upstream's decoder drops them (a simplification).
    Returns the warnings to send.
    """
    if directive == "Ignore":
        return ()
    unknown = unknown_fields(kind, obj)
    if not unknown:
        return ()
    if directive == "Strict":
        listed = ", ".join(f'unknown field "{p}"' for p in unknown)
        raise errors.bad_request(f'{kind.kind} in version "{kind.version}" cannot be handled as a {kind.kind}: '
                                 f"strict decoding error: {listed}")
    return tuple(f'unknown field "{p}"' for p in unknown)


def unknown_fields(kind: Kind, obj: dict[str, Any]) -> list[str]:
    """JSON paths of the fields of ``obj`` its kind does not have ([] for kinds without a schema)."""
    if not has_schema(kind):
        return []
    out: list[str] = []
    _walk(kind.kind, obj, "", out)
    return out


# ----------------------------------------------------------------------------- typed decoding
# What Go's encoding/json says when a JSON value does not fit the typed field it is decoded into
# (``UnmarshalTypeError``: "json: cannot unmarshal <value> into Go struct field <Struct>.<path> of type
# <type>"). kemu keeps bodies as JSON, so this walk is its typed decode: a value of the wrong JSON type
# is refused here with upstream's 400, before anything (managed fields, defaulting, validation, table
# printers) reads the field as the type it is declared with. It runs on every write, so the walk is a
# precomputed plan per message and plain ``type(...) is`` tests; messages are built only for errors.
_INT_RANGE = {"i32": (-(2**31), 2**31 - 1), "i64": (-(2**63), 2**63 - 1)}
_GO_SCALAR = {"str": "string", "bytes": "[]uint8", "bool": "bool", "i32": "int32", "i64": "int64",
              "Quantity": "resource.Quantity", "IntOrString": "intstr.IntOrString"}
_SINGLE, _LIST, _MAP = 0, 1, 2


@cache
def _plan(message: str) -> dict[str, tuple[str, int, str | None]]:
    """JSON key -> (field type, single/list/map, the sub-message to walk into or None)."""
    out: dict[str, tuple[str, int, str | None]] = {}
    for key, f in _json_fields(message).items():
        shape = _MAP if f.map else _LIST if f.repeated else _SINGLE
        sub = f.type if f.type in MESSAGES and f.type not in _OPAQUE else None
        out[key] = (f.type, shape, sub)
    return out


def _json_kind(value: Any) -> str:
    """Go's name of a JSON value in UnmarshalTypeError ("number 1.5" for a number that is not an int)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "number"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _go_type(type_name: str, shape: int = _SINGLE) -> str:
    base = _GO_SCALAR.get(type_name, f"v1.{type_name}")
    return f"map[string]{base}" if shape == _MAP else f"[]{base}" if shape == _LIST else base


def _time_ok(value: str) -> bool:
    from datetime import datetime

    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in value


def _scalar_error(type_name: str, value: Any) -> str | None:
    """Why ``value`` (not null, not an object of a walked struct) cannot decode into one ``type_name``."""
    t = type(value)
    if type_name in ("str", "bytes"):
        return None if t is str else _json_kind(value)
    if type_name == "bool":
        return None if t is bool else _json_kind(value)
    if type_name in ("i32", "i64"):
        if t is int:
            lo, hi = _INT_RANGE[type_name]
            return None if lo <= value <= hi else f"number {value}"
        return _json_kind(value)
    if type_name == "Quantity":  # resource.Quantity.UnmarshalJSON: a string or a bare number
        return None if t is str or t is int or t is float else _json_kind(value)
    if type_name == "IntOrString":  # intstr.IntOrString.UnmarshalJSON: a string, else an int32
        return None if t is str else _scalar_error("i32", value)
    if type_name in ("Time", "MicroTime"):
        if t is not str:
            return _json_kind(value)
        return None if _time_ok(value) else f'time "{value}"'
    if type_name == "raw":
        return None
    if type_name == "ExtraValue":
        return None if t is list and all(type(v) is str for v in value) else _json_kind(value)
    return None if t is dict else _json_kind(value)  # a struct (FieldsV1 included: kemu keeps it an object)


def _mismatch(message: str, where: str, shown: str, go_type: str) -> str:
    if shown.startswith("time "):
        return f'parsing {shown} as "2006-01-02T15:04:05Z07:00": cannot parse it as RFC 3339 ({where})'
    return f"json: cannot unmarshal {shown} into Go struct field {message}.{where} of type {go_type}"


def _type_error(message: str, obj: dict[str, Any], path: str) -> str | None:
    plan = _plan(message)
    for key, value in obj.items():
        entry = plan.get(key)
        if entry is None or value is None:  # unknown fields are fieldValidation's; null is the zero value
            continue
        type_name, shape, sub = entry
        if shape == _SINGLE:
            values: Any = (value,)
        elif type(value) is (list if shape == _LIST else dict):
            values = value if shape == _LIST else value.values()
        else:
            return _mismatch(message, f"{path}{key}", _json_kind(value), _go_type(type_name, shape))
        for item in values:
            if item is None:
                continue
            if sub is not None and type(item) is dict:
                inner = _type_error(sub, item, f"{path}{key}.")
                if inner is not None:
                    return inner
                continue
            shown = _scalar_error(type_name, item)
            if shown is not None:  # Go names the field path without list indexes or map keys
                return _mismatch(message, f"{path}{key}", shown, _go_type(type_name))
    return None


def check_types(kind: Kind, obj: dict[str, Any]) -> None:
    """400 when a field of ``obj`` holds a JSON value its Go type cannot take (kinds with a schema only).

    Upstream ``transformDecodeError``: ``<Kind> in version "<v>" cannot be handled as a <Kind>: <decode error>``.
    """
    if not has_schema(kind):
        return
    error = _type_error(kind.kind, obj, "")
    if error is not None:
        raise errors.bad_request(f'{kind.kind} in version "{kind.version}" cannot be handled as a {kind.kind}: '
                                 f"{error}")
