"""NodePorts: a pod's host ports must be free on the node.

Upstream ``pkg/scheduler/framework/plugins/nodeports/node_ports.go`` with
``HostPortInfo.CheckConflict``: a wanted ``ip:port/protocol`` clashes with
the same port/protocol used on that IP or on 0.0.0.0, and a wanted 0.0.0.0
clashes with any IP. Host ports come from app containers and sidecar init
containers. Pods without host ports make PreFilter answer Skip.
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
    PreFilterResult,
    Status,
    reject_where,
)
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import HostPort, NodeInfo, PodInfo

NAME = "NodePorts"
PRE_FILTER_KEY = "PreFilter" + NAME
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"


class NodePorts:
    """Filter plugin on host-port conflicts."""

    name = NAME

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.host_ports:
            return None, Status(Code.SKIP)
        state.write(PRE_FILTER_KEY, pod.host_ports)
        return None, None

    def pre_filter_extensions(self) -> None:
        return None

    @staticmethod
    def _wanted(state: CycleState, pod: PodInfo) -> tuple[HostPort, ...]:
        return state.get(PRE_FILTER_KEY) or pod.host_ports

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        for ip, protocol, port in self._wanted(state, pod):
            if node.used_ports.check_conflict(ip, protocol, port):
                return Status(Code.UNSCHEDULABLE, ERR_REASON)
        return None

    def filter_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict:
        failed = np.zeros(snapshot.num_nodes, dtype=bool)
        for ip, protocol, port in self._wanted(state, pod):
            failed |= snapshot.port_conflicts(ip, protocol, port)
        return reject_where(failed, ERR_REASON)


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> NodePorts:
    return NodePorts()
