"""JSON value helpers shared by the patch modules: equality with JSON's number rules, hashable keys, copies.

Upstream these come for free from Go's typed values (``reflect.DeepEqual`` on
decoded JSON, ``value.Equals`` in structured-merge-diff); in Python ``True == 1``
and dicts are unhashable, so the patch code uses these instead.
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

from emulator.api import errors

# ----------------------------------------------------------------------------- JSON helpers

MISSING: Final = object()

# Upstream's JSON decoder (Go encoding/json, forked as sigs.k8s.io/json) refuses a document nested
# deeper than 10000 levels ("exceeded max depth", scanner.go maxNestingDepth). kemu's bound is lower
# because orjson serializes at most 254 levels and every written object is serialized: a request
# document (a body or a patch) may nest MAX_DEPTH levels, so even a JSON patch that puts such a value
# at a path as deep leaves a storable object (docs/architecture.md, Simplifications).
MAX_DEPTH: Final = 100


def check_depth(doc: Any, what: str, raw: bytes | str | None = None) -> None:
    """400 when ``doc`` nests objects/arrays deeper than :data:`MAX_DEPTH`.

    ``raw`` (the text ``doc`` was decoded from) lets the common case skip the walk: a document
    with fewer opening brackets than the bound cannot be nested that deep.
    """
    if raw is not None:
        text = raw.encode() if isinstance(raw, str) else raw
        if text.count(b"{") + text.count(b"[") <= MAX_DEPTH:
            return
    if not isinstance(doc, dict | list):
        return
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:  # iterative: a recursive walk would itself overflow on the documents it refuses
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if depth > MAX_DEPTH:
            raise errors.bad_request(f"{what}: exceeded max depth of {MAX_DEPTH} nested objects and arrays")
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))


def copy_json(obj: Any) -> Any:
    """A private deep copy of JSON data (an orjson round trip is several times faster than deepcopy)."""
    return orjson.loads(orjson.dumps(obj))


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: unlike ``==``, ``true`` is not ``1``; ``1`` and ``1.0`` are one JSON number."""
    if a is b:
        return True
    if type(a) is not type(b):
        numbers = (int, float)
        return (isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool)
                and not isinstance(b, bool) and a == b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def hkey(value: Any) -> Any:
    """A hashable stand-in for a JSON value, for set membership and list-item identity."""
    if isinstance(value, bool):
        return (bool, value)  # keep true apart from 1
    if value is None or isinstance(value, (str, int, float)):
        return value
    return (dict, orjson.dumps(value, option=orjson.OPT_SORT_KEYS))


def short_json(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "null" if value is None else "object"
