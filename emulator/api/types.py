"""The one alias for an API object in its Kubernetes JSON shape.

Upstream every kind is a Go struct (``k8s.io/api/<group>/<version>/types.go``)
or, for generic code, ``unstructured.Unstructured`` — a ``map[string]interface{}``
(``k8s.io/apimachinery/pkg/apis/meta/v1/unstructured``). kemu keeps every
object as that unstructured map: a ``dict`` decoded from JSON or msgpack.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["Obj", "ObjView"]

# An object kemu may change (what the store returns is the caller's own copy).
Obj = dict[str, Any]
# An object only read: the scheduler's cache and queue keep informer objects they must not mutate.
ObjView = Mapping[str, Any]
