"""``metadata.managedFields``: apimachinery ``pkg/util/managedfields/internal`` (encoding, ``capmanagers.go``).

Entries are decoded into :class:`ManagedEntry` (a manager, operation, version,
subresource, time and field set) and written back in upstream's ``FieldsV1``
tree and entry order. At most :data:`MAX_UPDATE_MANAGERS` update managers are
kept; older ones fold into ``ancient-changes``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from emulator.api.types import Obj
from emulator.apiserver.patch.fieldpath import Path

# Upstream managedfields: DefaultMaxUpdateManagers.
MAX_UPDATE_MANAGERS: Final = 10

# The two managedFields operations.
APPLY: Final = "Apply"
UPDATE: Final = "Update"


# ----------------------------------------------------------------------------- server-side apply: managedFields


@dataclass
class ManagedEntry:
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
        version = self.api_version if self.operation == UPDATE else ""
        return (self.manager, self.operation, version, self.subresource)

    def describe(self) -> str:
        """Upstream ``printManager``: ``"kubectl" with subresource "scale" using apps/v1``."""
        text = json.dumps(self.manager, ensure_ascii=False)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource, ensure_ascii=False)}"
        if self.operation == UPDATE:
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


def decode_managed(entries: Any) -> list[ManagedEntry]:
    """Decode ``managedFields``; malformed entries are skipped rather than failing the write."""
    decoded: list[ManagedEntry] = []
    if not isinstance(entries, list):
        return decoded
    for raw in entries:
        if not isinstance(raw, dict) or raw.get("operation") not in (APPLY, UPDATE):
            continue
        if raw.get("fieldsType", "FieldsV1") != "FieldsV1" or not raw.get("apiVersion"):
            continue
        decoded.append(ManagedEntry(
            manager=str(raw.get("manager", "")),
            operation=raw["operation"],
            api_version=str(raw["apiVersion"]),
            subresource=str(raw.get("subresource") or ""),
            time=raw.get("time"),
            fields=_fields_to_set(raw.get("fieldsV1")),
        ))
    return decoded


def encode_managed(entries: list[ManagedEntry]) -> list[Obj]:
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


def pop_managed(obj: Obj) -> Any:
    meta = obj.get("metadata")
    return meta.pop("managedFields", None) if isinstance(meta, dict) else None


def store_managed(obj: Obj, entries: list[ManagedEntry]) -> Obj:
    entries = [e for e in entries if e.fields]
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        if not entries:
            return obj
        meta = obj["metadata"] = {}
    if entries:
        meta["managedFields"] = encode_managed(entries)
    else:
        meta.pop("managedFields", None)
    return obj


def cap_update_managers(entries: list[ManagedEntry]) -> list[ManagedEntry]:
    """Fold the oldest update managers into ``ancient-changes`` (one per version) beyond the cap."""
    updaters = sorted((e for e in entries if e.operation == UPDATE), key=lambda e: (e.time or "", e.manager))
    excess = len(updaters) - MAX_UPDATE_MANAGERS
    if excess <= 0:
        return entries
    first_of_version: dict[str, ManagedEntry] = {}
    buckets: dict[str, ManagedEntry] = {e.api_version: e for e in updaters if e.manager == "ancient-changes"}
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
