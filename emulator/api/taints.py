"""Taints and tolerations: when a toleration tolerates a taint.

Upstream: ``Toleration.ToleratesTaint`` in ``staging/src/k8s.io/api/core/v1/toleration.go``
and ``FindMatchingUntoleratedTaint`` in ``staging/src/k8s.io/component-helpers/scheduling/corev1/helpers.go``.
The scheduler's TaintToleration, NodeUnschedulable and PodTopologySpread
plugins, the kubelet's admission, the DaemonSet controller and the taint
eviction controller all decide with these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["Taint", "find_untolerated_taint", "node_taints", "taint_of", "tolerates", "tolerations_tolerate"]

Taint = tuple[str, str, str]
"""A node taint as (key, value, effect)."""


def taint_of(taint: Mapping[str, Any]) -> Taint:
    """A taint object (``{"key", "value", "effect"}``) as a :data:`Taint` tuple."""
    return (taint.get("key") or "", taint.get("value") or "", taint.get("effect") or "")


def node_taints(node: Mapping[str, Any]) -> tuple[Taint, ...]:
    """Every taint in a Node's ``spec.taints``."""
    return tuple(taint_of(t) for t in (node.get("spec") or {}).get("taints") or ())


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """``Toleration.ToleratesTaint``: effect and key match when set; Equal compares values, Exists does not."""
    key, value, effect = taint
    t_effect = toleration.get("effect") or ""
    if t_effect and t_effect != effect:
        return False
    t_key = toleration.get("key") or ""
    if t_key and t_key != key:
        return False
    operator = toleration.get("operator") or ""
    if operator in ("", "Equal"):
        return (toleration.get("value") or "") == value
    return operator == "Exists"


def tolerations_tolerate(tolerations: Iterable[Mapping[str, Any]], taint: Taint) -> bool:
    """Some toleration in ``tolerations`` tolerates ``taint`` (``TolerationsTolerateTaint``)."""
    return any(tolerates(t, taint) for t in tolerations)


def find_untolerated_taint(taints: Iterable[Taint], tolerations: Sequence[Mapping[str, Any]],
                           effects: frozenset[str]) -> Taint | None:
    """The first taint with an effect in ``effects`` that no toleration tolerates (``FindMatchingUntoleratedTaint``)."""
    for taint in taints:
        if taint[2] in effects and not tolerations_tolerate(tolerations, taint):
            return taint
    return None
