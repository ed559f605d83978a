"""NodeUnschedulable: keep pods off cordoned nodes (``spec.unschedulable``) unless they tolerate it.

Upstream ``pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go``:
a pod passes a cordoned node only if it tolerates the taint
``node.kubernetes.io/unschedulable:NoSchedule``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from emulator.api.taints import Taint, tolerations_tolerate
from emulator.scheduler.framework.interface import (
    Code,
    CycleState,
    FilterVerdict,
    Handle,
    Status,
    all_pass,
    reject_where,
)
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import NodeInfo, PodInfo

NAME = "NodeUnschedulable"
ERR_REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT: Taint = ("node.kubernetes.io/unschedulable", "", "NoSchedule")


class NodeUnschedulable:
    """Filter plugin: cordoned nodes reject pods that do not tolerate the unschedulable taint."""

    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not node.unschedulable or tolerations_tolerate(pod.tolerations, UNSCHEDULABLE_TAINT):
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON)

    def filter_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict:
        if tolerations_tolerate(pod.tolerations, UNSCHEDULABLE_TAINT):
            return all_pass(snapshot.num_nodes)
        # spec.unschedulable is a node fact: every pod that does not tolerate the taint shares the verdict.
        return snapshot.node_memo((NAME, "cordoned"), lambda: reject_where(
            snapshot.unschedulable, ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
            if snapshot.unschedulable.any() else all_pass(snapshot.num_nodes))


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> NodeUnschedulable:
    return NodeUnschedulable()
