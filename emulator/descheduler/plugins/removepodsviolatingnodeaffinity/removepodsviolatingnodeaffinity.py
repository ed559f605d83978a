"""RemovePodsViolatingNodeAffinity: evict pods whose node no longer satisfies their node affinity.

Upstream ``removepodsviolatingnodeaffinity/node_affinity.go``, per affinity type:

* ``requiredDuringSchedulingIgnoredDuringExecution``: a pod with required node
  affinity whose node no longer matches it (nor its ``nodeSelector``) is evicted
  when some node fits it (``PodFitsAnyNode``: taints, affinity, schedulable,
  resources) — the "IgnoredDuringExecution" the scheduler leaves undone;
* ``preferredDuringSchedulingIgnoredDuringExecution``: a pod whose node still
  fits it is evicted when another node that fits it scores a higher sum of
  matching preferred-term weights than its own.

Node selector terms are :mod:`emulator.api.nodeaffinity`, the scheduler's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emulator.api.nodeaffinity import parse_preferred_terms
from emulator.api.types import Obj
from emulator.descheduler.framework import Handle, Status, evict_each, pod_filter
from emulator.descheduler.plugins.removepodsviolatingnodeaffinity.args import (
    PREFERRED,
    REQUIRED,
    RemovePodsViolatingNodeAffinityArgs,
    parse_args,
)

__all__ = ["EXTENSION_POINTS", "NAME", "RemovePodsViolatingNodeAffinity", "new", "parse_args"]

NAME = "RemovePodsViolatingNodeAffinity"
EXTENSION_POINTS = ("deschedule",)


def _node_affinity(pod: Obj) -> Obj:
    return ((pod["spec"].get("affinity") or {}).get("nodeAffinity")) or {}


def preferred_weight(pod: Obj, node: Obj) -> int:
    """``GetNodeWeightGivenPodPreferredAffinity``: the weights of the preferred terms ``node`` matches."""
    terms, _ = parse_preferred_terms(_node_affinity(pod).get(PREFERRED) or [])
    labels = node["metadata"].get("labels") or {}
    return sum(w for w, term in terms if term.matches(labels, node["metadata"]["name"]))


class RemovePodsViolatingNodeAffinity:
    name = NAME

    def __init__(self, args: RemovePodsViolatingNodeAffinityArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.accept = pod_filter(handle, namespaces=args.namespaces, label_selector=args.label_selector)

    def _violates(self, kind: str, pod: Obj, node: Obj, nodes: Sequence[Obj]) -> bool:
        snapshot = self.handle.snapshot
        if kind == REQUIRED:
            return (bool(_node_affinity(pod).get(REQUIRED)) and not snapshot.matches_node_selector(pod, node)
                    and snapshot.pod_fits_any_node(pod, nodes))
        if not _node_affinity(pod).get(PREFERRED) or not snapshot.matches_node_selector(pod, node):
            return False
        fitting = [n for n in nodes if snapshot.pod_fits_node(pod, n)]
        if not fitting:
            return False
        return max(preferred_weight(pod, n) for n in fitting) > preferred_weight(pod, node)

    def deschedule(self, nodes: Sequence[Obj]) -> Status | None:
        snapshot = self.handle.snapshot
        for kind in self.args.node_affinity_type:
            for node in nodes:
                candidates = snapshot.having("nodeAffinity").get(node["metadata"]["name"], ())
                # Upstream asks the pod filter before the check; both are side-effect free, so a pod whose
                # required affinity its node still matches is ruled out first, without the evictor's filters.
                victims = [p for p in candidates
                           if _node_affinity(p).get(kind)
                           and (kind != REQUIRED or not snapshot.matches_node_selector(p, node))
                           and self.accept(p) and self._violates(kind, p, node, nodes)]
                if not evict_each(self.handle, victims, NAME):
                    return None
        return None


def new(args: Any, handle: Handle) -> RemovePodsViolatingNodeAffinity:
    return RemovePodsViolatingNodeAffinity(args, handle)
