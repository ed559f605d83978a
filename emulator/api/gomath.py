"""Go's ``math.Round`` for the formulas kemu takes from upstream Go code.

Python's ``round`` rounds halves to even; Go's ``math.Round`` rounds them away
from zero. Upstream formulas that round (the Deployment controller's
proportional scaling in ``pkg/controller/deployment/util/deployment_util.go``,
PodTopologySpread's and RequestedToCapacityRatio's scores in
``pkg/scheduler/framework/plugins``) must round the Go way to give the same
integers.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["go_round", "go_round_array"]


def go_round(x: float) -> int:
    """Go's ``math.Round``: the nearest integer, halves away from zero."""
    whole = math.trunc(x)
    if abs(x - whole) >= 0.5:
        whole += 1 if x > 0 else -1
    return whole


def go_round_array(x: np.ndarray) -> np.ndarray:
    """:func:`go_round` over an array, element by element (float results)."""
    t = np.trunc(x)
    return t + np.where(np.abs(x - t) >= 0.5, np.copysign(1.0, x), 0.0)
