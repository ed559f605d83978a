"""Field sets for server-side apply: structured-merge-diff ``fieldpath/`` and ``typed/`` (``ToFieldSet``, ``Compare``).

A field set is a Python ``set`` of paths; a path is a tuple of ``FieldsV1``
elements (``"f:spec"``, ``'k:{"name":"app"}'``, ``'v:"x"'``). An object owns its
leaves, its atomic lists/maps, and the items of associative lists and sets.
``apiVersion``, ``kind``, ``metadata.name``/``namespace``/``uid``/
``resourceVersion``/``generation``/``creationTimestamp``/``managedFields`` are
never owned (upstream ``internal/stripmeta.go``), and neither is ``status``
through the main resource of a kind with a status subresource (nor ``spec``
through ``/status``), mirroring the registries' reset fields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import orjson

from emulator.api import errors
from emulator.api.kinds import Kind
from emulator.api.types import Obj
from emulator.apiserver.patch.jsonvalue import json_equal
from emulator.apiserver.patch.schema import FieldMeta, join_path

Path = tuple[str, ...]

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


def json_compact(value: Any) -> str:
    """Compact JSON as Go's encoder writes it: raw UTF-8, but <, >, & and U+2028/9 escaped."""
    text = orjson.dumps(value).decode()
    if _GO_ESCAPED.search(text):
        text = _GO_ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def item_element(item: Any, meta: FieldMeta) -> str | None:
    """The ``k:{...}`` path element of an associative-list item, or None when a key field is missing."""
    if not isinstance(item, dict):
        return None
    parts = []
    for quoted, name, default in meta.key_plan:
        value = item.get(name, default)
        if value is None or isinstance(value, (dict, list)):
            return None
        parts.append(f"{quoted}:{json_compact(value)}")
    return "k:{" + ",".join(parts) + "}"


def path_string(path: Path) -> str:
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
            self._value(value, join_path(pattern, key), (*path, "f:" + key))

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
            element = item_element(item, meta)
            if element is None:
                if self.strict:
                    missing = [k for k in meta.keys if not isinstance(item, dict) or k not in item]
                    raise errors.bad_request(
                        f"{path_string(path)}: element {index}: associative list with keys has an element "
                        f"that omits key field {json.dumps(missing[0] if missing else meta.keys[0])} "
                        "(and doesn't have default value)")
                return False
            if element in seen:
                if self.strict:
                    raise errors.bad_request(
                        f"{path_string(path)}: duplicate entries for key {path_string((element,))}")
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
            item_path = (*path, "v:" + json_compact(item))
            if item_path in paths:
                if self.strict:
                    raise errors.bad_request(
                        f"{path_string(path)}: duplicate entries for key {path_string(item_path[-1:])}")
                return False
            paths[item_path] = None
        for item_path in paths:
            self.out[item_path] = _ITEM
        return True


def flatten(obj: Obj, schema: Mapping[str, FieldMeta], *, strict: bool = False) -> dict[Path, Any]:
    return _Flattener(schema, strict=strict).walk(obj)


def diff_fields(old: Mapping[Path, Any], new: Mapping[Path, Any]) -> tuple[set[Path], set[Path]]:
    """(added or modified, removed) between two flattened objects (upstream ``TypedValue.Compare``)."""
    changed = {p for p, v in new.items() if p not in old or not json_equal(old[p], v)}
    removed = {p for p in old if p not in new}
    return changed, removed


# Create compares against the Go zero value of the kind (upstream ``fieldmanager`` gets an empty typed
# object as the live one), in which struct fields and lists without ``omitempty`` already exist: their
# paths are never "added", so they get no ``"."``. kemu has no Go types; what it knows instead:
# map-typed fields (free keys, ``omitempty``: absent from the zero value) and the common pointer
# structs by name, and PodSpec's ``containers`` as the one granular list without ``omitempty``.
# Any other map is taken for a (non-pointer) struct.
_ZERO_ABSENT_MAPS: Final = frozenset(f"f:{name}" for name in (
    "labels", "annotations", "data", "binaryData", "stringData", "nodeSelector", "limits", "requests",
    "capacity", "allocatable", "matchLabels", "parameters", "selector",
    "rollingUpdate", "securityContext", "affinity", "dnsConfig"))
_ZERO_PRESENT_LISTS: Final = frozenset({"f:containers"})


def container_paths(flat: Mapping[Path, Any]) -> set[Path]:
    """Every granular map, list and list item under an owned field: the proper prefixes of ``flat``'s paths."""
    out: set[Path] = set()
    for path in flat:
        for n in range(len(path) - 1, 0, -1):
            prefix = path[:n]
            if prefix in out:
                break  # and so are all of its own prefixes
            out.add(prefix)
    return out


def _in_zero_value(path: Path, lists: set[Path]) -> bool:
    """Whether a container path exists in the Go zero value of the kind (see :data:`_ZERO_ABSENT_MAPS`)."""
    if any(not element.startswith("f:") for element in path):
        return False  # at or inside a list item: no item exists in a zero value
    if path in lists:
        return path[-1] in _ZERO_PRESENT_LISTS
    return path[-1] not in _ZERO_ABSENT_MAPS


def compare_fields(old: Mapping[Path, Any], new: Mapping[Path, Any], *,
                   create: bool = False) -> tuple[set[Path], set[Path]]:
    """Upstream ``TypedValue.Compare`` as (added or modified, removed), non-leaf paths included.

    Besides the leaves of :func:`diff_fields`, a granular map, list or list item that ``new`` has
    and ``old`` has not is added (so the writer owns it: ``"."`` in its ``FieldsV1``), and one
    that only ``old`` has is removed (typed/compare.go: a walker with no lhs inserts its path
    into Added). ``create``: ``old`` stands for the kind's zero value (:func:`_in_zero_value`).
    """
    changed, removed = diff_fields(old, new)
    grown = [p for p in changed if p not in old]
    if not grown and not removed:
        return changed, removed  # the same paths with other values: no container came or went
    if grown:
        # A map that was there empty (a leaf then) is not added: only its new children are.
        added = container_paths(dict.fromkeys(grown)) - container_paths(old) - old.keys()
        if create and added:
            lists = {p[:-1] for p in new if not p[-1].startswith("f:")}  # item paths are always flattened
            added = {p for p in added if not _in_zero_value(p, lists)}
        changed |= added
    if removed:
        removed |= container_paths(dict.fromkeys(removed)) - container_paths(new) - new.keys()
    return changed, removed


def ownable_filter(kind: Kind | None, subresource: str) -> Callable[[Iterable[Path]], set[Path]]:
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
