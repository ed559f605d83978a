"""Table-driven tests of the shared API helpers: Go rounding, ObjectMeta accessors, node taints."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from emulator.api.gomath import go_round, go_round_array
from emulator.api.meta import resource_version, without_owner_references
from emulator.api.taints import node_taints

# Go's math.Round: the nearest integer, halves away from zero (Python's round() sends halves to even).
# 0.49999999999999994 is the largest double below 0.5: floor(x + 0.5) would give 1, math.Round gives 0.
ROUND = [
    (0.0, 0), (0.4, 0), (0.5, 1), (1.5, 2), (2.5, 3), (-0.5, -1), (-2.5, -3), (-2.4, -2),
    (0.49999999999999994, 0), (1e15 + 0.5, 1_000_000_000_000_001),
]


@pytest.mark.parametrize(("x", "want"), ROUND, ids=[repr(x) for x, _ in ROUND])
def test_go_round(x: float, want: int) -> None:
    assert go_round(x) == want
    assert go_round_array(np.array([x]))[0] == want


RV = [
    ({"metadata": {"resourceVersion": "42"}}, "42"),
    ({"metadata": {"resourceVersion": 7}}, "7"),
    ({"metadata": {}}, ""),
    ({"metadata": None}, ""),
    ({}, ""),
]


@pytest.mark.parametrize(("obj", "want"), RV, ids=["string", "int", "unset", "null-metadata", "no-metadata"])
def test_resource_version(obj: dict[str, Any], want: str) -> None:
    assert resource_version(obj) == want


def _ref(uid: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"rs-{uid}", "uid": uid}


STRIP = [
    ("one-of-two", [_ref("a"), _ref("b")], {"a"}, [_ref("b")]),
    ("the-last", [_ref("a")], {"a"}, None),  # the key goes
    ("none-match", [_ref("a")], {"z"}, "unchanged"),
    ("no-refs", None, {"a"}, "unchanged"),
    ("all-of-several", [_ref("a"), _ref("b"), _ref("c")], {"a", "c", "b"}, None),
]


@pytest.mark.parametrize(("refs", "uids", "want"), [c[1:] for c in STRIP], ids=[c[0] for c in STRIP])
def test_without_owner_references(refs: list[dict[str, Any]] | None, uids: set[str], want: Any) -> None:
    meta: dict[str, Any] = {"name": "p"}
    if refs is not None:
        meta["ownerReferences"] = refs
    result = without_owner_references(meta, uids)
    if want == "unchanged":
        assert result is None
        return
    assert result is meta
    if want is None:
        assert "ownerReferences" not in meta
    else:
        assert meta["ownerReferences"] == want


def test_node_taints_reads_spec_taints_as_tuples() -> None:
    taints = [{"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "gpu", "effect": "NoExecute"}]
    node = {"spec": {"taints": taints}}
    assert node_taints(node) == (("k", "v", "NoSchedule"), ("gpu", "", "NoExecute"))
    assert node_taints({}) == ()
