"""Strategic merge patch: apimachinery ``pkg/util/strategicpatch/patch.go``.

``application/strategic-merge-patch+json`` is a merge patch that knows, per
field (:mod:`.schema`), whether a list is merged (by ``patchMergeKey``, or as a
set of primitives) or replaced, and honours the directives ``$patch``
(``replace``/``delete`` on maps and list items), ``$retainKeys``,
``$setElementOrder/<list>`` and ``$deleteFromPrimitiveList/<list>``. The
algorithm follows upstream's ``mergeMap``/``mergeSlice`` and their ordering
rules: items named by the patch take the patch's order, live-only items keep
their place relative to them, and a new item with no ``$setElementOrder`` lands
first. Malformed directives are 400, as upstream.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from emulator.api import errors
from emulator.api.errors import StatusError
from emulator.api.types import Obj
from emulator.apiserver.patch.jsonvalue import MISSING, hkey, json_equal, short_json
from emulator.apiserver.patch.schema import FieldMeta, join_path

# ----------------------------------------------------------------------------- strategic merge patch

_DIRECTIVE: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_SET_ORDER: Final = "$setElementOrder"
_DELETE_PRIMITIVES: Final = "$deleteFromPrimitiveList"
_BAD_PRIMITIVE_LIST: Final = "invalid patch format of primitive list"
_BAD_RETAIN_KEYS: Final = "invalid patch format of retainKeys"
_BAD_SET_ORDER: Final = "invalid patch format of setElementOrder list"


_DROP: Final = object()


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
    return errors.bad_request(f"map: {short_json(item)} does not contain declared merge key: {merge_key}")


def smp_map(original: Obj, patch: Obj, schema: Mapping[str, FieldMeta], path: str) -> Obj:
    """Merge ``patch`` into ``original`` (both owned by us; ``original`` is updated in place and returned)."""
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if directive == "replace":
            replaced = _clean({k: v for k, v in patch.items() if k != _DIRECTIVE})
            return replaced if isinstance(replaced, dict) else {}
        if directive == "delete":
            return {}
        raise errors.bad_request(f"unknown patch type: {directive} in map: {short_json(patch)}")

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
        child = join_path(path, key)
        live = original.get(key, MISSING)
        if isinstance(value, dict) and isinstance(live, dict):
            meta = schema.get(child)
            if meta is not None and meta.strategy == "replace":
                original[key] = _clean(value)
            else:
                original[key] = smp_map(live, value, schema, child)
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
        doomed = {hkey(v) for v in values}
        original[key] = [v for v in live if hkey(v) not in doomed]
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
                raise errors.bad_request(f"list element types are not identical: {short_json(list(lists))}")
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
            if hkey(item) not in seen:
                seen.add(hkey(item))
                merged.append(item)
        return _order_like_patch(merged, [hkey(p) for p in patch], [hkey(o) for o in original], hkey)
    if not merge_key:
        raise errors.bad_request(f"cannot merge lists without merge key for {path}")

    def key_of(item: Any) -> Any:
        return hkey(item[merge_key]) if isinstance(item, dict) and merge_key in item else MISSING

    plain: list[Obj] = []
    replace = False
    for item in patch:
        directive = item.get(_DIRECTIVE, MISSING)
        if directive is MISSING:
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
            raise errors.bad_request(f"unknown patch type: {directive} in map: {short_json(item)}")
    if replace:
        return [c for c in (_clean(p) for p in plain) if c is not _DROP]

    result = list(original)
    position: dict[Any, int] = {}
    for i, item in enumerate(result):
        k = key_of(item)
        if k is not MISSING:
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
            result[i] = smp_map(result[i], item, schema, element)
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
    child = join_path(path, name)
    meta = schema.get(child)
    merge_key = meta.merge_key if meta is not None else ""
    live = original.get(name)
    live_list = live if isinstance(live, list) else None
    patched = patch.get(name, MISSING)
    if patched is not MISSING and not isinstance(patched, list):
        return  # null or a non-list: the main loop deletes or replaces it; there is nothing to order
    _check_order(patched if isinstance(patched, list) else [], order, merge_key)
    if live_list is None and patched is MISSING:
        return
    if patched is MISSING:
        merged = live_list or []
    elif live_list is None:
        merged = _clean(patched)
    else:
        merged = _smp_list_field(live_list, patched, schema, child)

    def key_of(item: Any) -> Any:
        if not merge_key:
            return hkey(item)
        return hkey(item[merge_key]) if isinstance(item, dict) and merge_key in item else MISSING

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
            return json_equal(item, ordered)
        for m in (item, ordered):
            if not isinstance(m, dict) or merge_key not in m:
                raise _no_merge_key(m, merge_key)
        return json_equal(item[merge_key], ordered[merge_key])

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
            f"The order in patch list:\n{short_json(patch_list)}\n doesn't match {_SET_ORDER} list:\n"
            f"{short_json(order)}\n")
