"""JSON value helpers shared by the patch modules: equality with JSON's number rules, hashable keys, copies.

Upstream these come for free from Go's typed values (``reflect.DeepEqual`` on
decoded JSON, ``value.Equals`` in structured-merge-diff); in Python ``True == 1``
and dicts are unhashable, so the patch code uses these instead.
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

# ----------------------------------------------------------------------------- JSON helpers

MISSING: Final = object()


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
