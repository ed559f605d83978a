"""PrioritySort: the scheduling queue's order -- higher priority first, then earlier queued.

Upstream ``pkg/scheduler/framework/plugins/queuesort/priority_sort.go``
(priority is ``spec.priority``, 0 when unset).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from emulator.scheduler.framework.interface import Handle
from emulator.scheduler.framework.types import QueuedPodInfo

NAME = "PrioritySort"


class PrioritySort:
    """QueueSort plugin."""

    name = NAME

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        p1, p2 = a.pod_info.priority, b.pod_info.priority
        return p1 > p2 or (p1 == p2 and a.timestamp < b.timestamp)


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> PrioritySort:
    return PrioritySort()
