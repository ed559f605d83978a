"""Server-side apply and update tracking: ``sigs.k8s.io/structured-merge-diff`` ``merge/update.go``.

Intent from ``kubernetes-sigs/structured-merge-diff`` (``merge/update.go``)
and ``staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal``; our
own, smaller implementation (field sets in :mod:`.fieldpath`, entries in
:mod:`.managedfields`):

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

* ``"."`` in ``FieldsV1`` marks a path owned *and* holding owned children.
  An applier owns its list items (``ToFieldSet``), so ``k:{...}`` items get
  one; an updater also owns every map, list and item its write added
  (``Compare``), so ``f:labels`` gets one when the update created the labels
  (a create compares with the kind's zero value: see
  :func:`.fieldpath.compare_fields`).

Left out: version conversion (one version per kind), the
``last-applied-configuration`` hand-over between client- and server-side
apply (``lastappliedmanager.go``/``lastappliedupdater.go``), unions, and
defaulting of the applied object beyond list-key defaults. Explicit ``null``
in an applied config removes the field and is owned.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from emulator.api import errors, kinds
from emulator.api.errors import Cause, StatusError
from emulator.api.kinds import Kind
from emulator.api.types import Obj
from emulator.apiserver.patch.fieldpath import (
    Path,
    compare_fields,
    flatten,
    item_element,
    json_compact,
    ownable_filter,
    path_string,
)
from emulator.apiserver.patch.jsonvalue import MISSING, check_depth, copy_json, hkey, json_type
from emulator.apiserver.patch.managedfields import (
    APPLY,
    UPDATE,
    ManagedEntry,
    cap_update_managers,
    decode_managed,
    pop_managed,
    store_managed,
)
from emulator.apiserver.patch.schema import FieldMeta, join_path, schema_for

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
    check_depth(doc, "error decoding patch")
    if not isinstance(doc, dict):
        raise errors.bad_request(f"error decoding patch: the applied configuration is a {json_type(doc)}, "
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
    next_shared = shared[0] if shared else MISSING
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
                next_shared = shared[next_shared_index] if next_shared_index < len(shared) else MISSING
                continue
            if live_key in config_keys and next_shared is not MISSING and next_shared != live_key:
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
                out.append(combine(live_items.get(config_key, MISSING), item))
                emitted.add(config_key)
            j += 1
            if next_shared is not MISSING and next_shared == config_key:
                next_shared_index += 1
                next_shared = shared[next_shared_index] if next_shared_index < len(shared) else MISSING
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
                out[key] = _apply_merge(live.get(key, MISSING), value, join_path(pattern, key), schema)
        return out
    if isinstance(config, list) and isinstance(live, list) and meta is not None:
        if meta.ssa == "map":
            live_keyed = [(item_element(item, meta), item) for item in live]
            if all(k is not None for k, _ in live_keyed):
                element = pattern + "[]"
                element_meta = schema.get(element)
                atomic = element_meta is not None and element_meta.ssa == "atomic"
                config_keyed = [(item_element(item, meta), item) for item in config]
                return _ordered_merge(
                    live_keyed, config_keyed,
                    lambda old, new: _without_nulls(new) if atomic else _apply_merge(old, new, element, schema))
        elif meta.ssa == "set" and all(not isinstance(v, (dict, list)) for v in (*live, *config)):
            return _ordered_merge([(hkey(v), v) for v in live], [(hkey(v), v) for v in config],
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
            pattern = join_path(pattern, body)
            continue
        if not isinstance(node, list):
            return
        meta = schema.get(pattern)
        index = None
        for i, item in enumerate(node):
            if kind == "k:" and meta is not None and item_element(item, meta) == element:
                index = i
                break
            if kind == "v:" and not isinstance(item, (dict, list)) and "v:" + json_compact(item) == element:
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
    ownable = ownable_filter(kind, subresource)
    config = copy_json(applied)
    config_set = ownable(flatten(config, schema, strict=True))

    live: Obj = copy_json(current) if current is not None else {}
    entries = decode_managed(pop_managed(live))
    live_flat = flatten(live, schema)
    if current is not None and not entries:
        # Upstream skipnonapplied.go: fields set before anyone applied belong to "before-first-apply".
        entries = [ManagedEntry("before-first-apply", UPDATE, kind.api_version, subresource, now, ownable(live_flat))]

    me_ident = (manager, APPLY, "", subresource)
    me = next((e for e in entries if e.ident == me_ident), None)
    others = [e for e in entries if e is not me]

    merged = _apply_merge(live, config, "", schema)
    if me is not None and me.fields - config_set:
        keep = set(config_set).union(*(e.fields for e in others))
        _prune(merged, me.fields - config_set, keep, schema)

    changed, removed = compare_fields(live_flat, flatten(merged, schema), create=current is None)
    changed, removed = ownable(changed), ownable(removed)
    conflicts = [(e, sorted(e.fields & changed)) for e in others if e.fields & changed]
    if conflicts and not force:
        raise _conflict_error(conflicts)
    for e in others:
        e.fields -= changed  # forced: ownership of what we changed moves to us
        e.fields -= removed
    if me is None:
        me = ManagedEntry(manager, APPLY, kind.api_version, subresource)
        entries.append(me)
    me.api_version = kind.api_version
    me.fields = config_set
    me.time = now
    return store_managed(merged, entries)


def _conflict_error(conflicts: list[tuple[ManagedEntry, list[Path]]]) -> StatusError:
    """409 like upstream ``internal/conflict.go``: one cause per field, message grouped by manager."""
    pairs = [(e.describe(), path_string(p)) for e, paths in conflicts for p in paths]
    causes = [Cause(field=path, message=f"conflict with {who}", reason="FieldManagerConflict") for who, path in pairs]
    if len(pairs) == 1:
        who, path = pairs[0]
        message = f"Apply failed with 1 conflict: conflict with {who}: {path}"
    else:
        lines: list[str] = []
        for e, paths in sorted(conflicts, key=lambda c: c[0].describe()):
            lines.append(f"conflicts with {e.describe()}:")
            lines.extend(f"- {path_string(p)}" for p in paths)
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
    ownable = ownable_filter(kind, subresource)
    result: Obj = copy_json(new)
    sent = pop_managed(result)
    live: Obj = copy_json(current) if current is not None else {}
    stored = pop_managed(live)
    if subresource or sent is None or (isinstance(sent, list) and sent and not decode_managed(sent)):
        entries = decode_managed(stored)
    else:
        entries = decode_managed(sent)
    if not entries and current is not None:
        return result  # upstream skipnonapplied.go: untracked objects stay untracked until applied

    changed, removed = compare_fields(flatten(live, schema), flatten(result, schema), create=current is None)
    changed, removed = ownable(changed), ownable(removed)
    api_version = kind.api_version if kind is not None else str(new.get("apiVersion", ""))
    me_ident = (manager, UPDATE, api_version, subresource)
    for e in entries:
        e.fields -= removed
        e.fields -= changed
    if changed:
        me = next((e for e in entries if e.ident == me_ident), None)
        if me is None:
            me = ManagedEntry(manager, UPDATE, api_version, subresource)
            entries.append(me)
        me.fields |= changed
        me.time = now
    entries = cap_update_managers([e for e in entries if e.fields])
    return store_managed(result, entries)
