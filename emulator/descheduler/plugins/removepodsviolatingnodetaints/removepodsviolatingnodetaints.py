"""RemovePodsViolatingNodeTaints: evict pods that do not tolerate their node's NoSchedule taints.

Upstream ``removepodsviolatingnodetaints/node_taint.go``: for each node, the
pods on it that pass the evictor's filters and do not tolerate every taint
with effect NoSchedule (and PreferNoSchedule with ``includePreferNoSchedule``)
— taints matching ``excludedTaints`` (``key`` or ``key=value``) are ignored,
and with ``includedTaints`` only those count — are evicted. NoExecute taints
are the taint-eviction controller's business, not the descheduler's.
Toleration matching is :mod:`emulator.api.taints`, the scheduler's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emulator.api.taints import Taint, node_taints
from emulator.api.types import Obj
from emulator.descheduler import utils
from emulator.descheduler.framework import Handle, Status, evict_each, pod_filter
from emulator.descheduler.plugins.removepodsviolatingnodetaints.args import (
    RemovePodsViolatingNodeTaintsArgs,
    parse_args,
)

__all__ = ["EXTENSION_POINTS", "NAME", "RemovePodsViolatingNodeTaints", "new", "parse_args"]

NAME = "RemovePodsViolatingNodeTaints"
EXTENSION_POINTS = ("deschedule",)


def _taint_matches(spec: str, taint: Taint) -> bool:
    """``key`` matches any value of that key; ``key=value`` only that value."""
    key, sep, value = spec.partition("=")
    return taint[0] == key and (not sep or taint[1] == value)


class RemovePodsViolatingNodeTaints:
    name = NAME

    def __init__(self, args: RemovePodsViolatingNodeTaintsArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.effects = frozenset({"NoSchedule", "PreferNoSchedule"} if args.include_prefer_no_schedule
                                 else {"NoSchedule"})
        self.accept = pod_filter(handle, namespaces=args.namespaces, label_selector=args.label_selector)

    def counted_taints(self, node: Obj) -> list[Taint]:
        out = []
        for taint in node_taints(node):
            if taint[2] not in self.effects:
                continue
            if self.args.excluded_taints and any(_taint_matches(s, taint) for s in self.args.excluded_taints):
                continue
            if self.args.included_taints and not any(_taint_matches(s, taint) for s in self.args.included_taints):
                continue
            out.append(taint)
        return out

    def deschedule(self, nodes: Sequence[Obj]) -> Status | None:
        for node in nodes:
            taints = self.counted_taints(node)
            if not taints:
                continue  # nothing on this node can violate: skip listing its pods
            victims = [p for p in self.handle.snapshot.active_pods_on(node["metadata"]["name"])
                       if not utils.tolerates_taints(p, taints, self.effects) and self.accept(p)]
            if not evict_each(self.handle, victims, NAME):
                return None
        return None


def new(args: Any, handle: Handle) -> RemovePodsViolatingNodeTaints:
    return RemovePodsViolatingNodeTaints(args, handle)
