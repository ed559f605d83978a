"""NodeName: a pod that names its node (``spec.nodeName``) fits only that node.

Upstream ``pkg/scheduler/framework/plugins/nodename/node_name.go``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

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

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName:
    """Filter plugin: ``spec.nodeName``, when set, must be this node's name."""

    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not pod.node_name or pod.node_name == node.name:
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON)

    def filter_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict:
        if not pod.node_name:
            return all_pass(snapshot.num_nodes)
        failed = np.ones(snapshot.num_nodes, dtype=bool)
        index = snapshot.index_of(pod.node_name)
        if index is not None:
            failed[index] = False
        return reject_where(failed, ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> NodeName:
    return NodeName()
