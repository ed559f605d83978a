"""Helpers several in-tree plugins share: score normalisation and Go integer arithmetic.

Upstream ``pkg/scheduler/framework/plugins/helper/normalize_score.go``
(DefaultNormalizeScore). Taint/toleration and node-affinity matching are API
semantics the kubelet and the controllers share, so they live in
:mod:`emulator.api.taints` and :mod:`emulator.api.nodeaffinity`.
"""

from __future__ import annotations

import numpy as np

from emulator.scheduler.framework.interface import MAX_NODE_SCORE

__all__ = ["default_normalize_score", "go_div", "go_int_div"]

# -- integer arithmetic as Go does it ---------------------------------------------------------


def go_div(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """Integer division truncating toward zero, as Go's ``/`` on int64 (numpy's ``//`` floors)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if b.ndim == 0 and b > 0 and (a.size == 0 or a.min() >= 0):
        return a // b  # the common case: floor and truncation agree
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) ^ (b < 0), -q, q)


def go_int_div(a: int, b: int) -> int:
    """Go's ``/`` on two ints: the quotient truncated toward zero."""
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def default_normalize_score(scores: np.ndarray, reverse: bool = False, max_priority: int = MAX_NODE_SCORE) -> None:
    """Scale ``scores`` in place to 0..max_priority by the highest one (``DefaultNormalizeScore``).

    With ``reverse`` the scale is flipped (highest raw score -> 0). When the
    highest score is 0 every node gets 0, or ``max_priority`` if reversed.
    """
    max_count = int(scores.max()) if len(scores) else 0
    if max_count <= 0:
        if reverse:
            scores[:] = max_priority
        return
    scaled = go_div(max_priority * scores.astype(np.int64), max_count)
    scores[:] = max_priority - scaled if reverse else scaled
