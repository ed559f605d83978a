"""activeQ: the pods ready to be scheduled, ordered by the profile's QueueSort plugin.

Upstream ``pkg/scheduler/backend/queue/active_queue.go`` (the heap part;
in-flight pods and the scheduling cycle stay with the
:class:`~emulator.scheduler.queue.scheduling_queue.SchedulingQueue` that
owns the lock); our own Python.

For PrioritySort -- the default, and what every profile of one scheduler
must share -- the order is a plain tuple key ``(-priority, timestamp,
arrival)`` compared in C; any other QueueSort gets a generic key object
calling its ``less``. Ties fall back to arrival order, so runs are
repeatable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.scheduler.framework.types import QueuedPodInfo
from emulator.scheduler.queue.heap import Heap
from emulator.scheduler.queue.queued_pod import QueuedPod

__all__ = ["ActiveQueue"]


class _LessKey:
    """Orders by a QueueSort ``less``; arrival order breaks ties."""

    __slots__ = ("less", "qp")

    def __init__(self, qp: QueuedPod, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool]) -> None:
        self.qp = qp
        self.less = less

    def __lt__(self, other: _LessKey) -> bool:
        if self.less(self.qp, other.qp):
            return True
        if self.less(other.qp, self.qp):
            return False
        return self.qp.seq < other.qp.seq


def _priority_key(qp: QueuedPod) -> tuple[int, float, int]:
    """PrioritySort's order as a tuple: higher priority first, then earlier timestamp, then arrival."""
    return (-qp.pod_info.priority, qp.timestamp, qp.seq)


class ActiveQueue(Heap):
    """activeQ: a :class:`Heap` ordered by ``less`` (None or ``priority_sort=True``: PrioritySort's fast path)."""

    def __init__(self, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool] | None = None, *,
                 priority_sort: bool | None = None) -> None:
        fast = priority_sort if priority_sort is not None else less is None
        if fast or less is None:
            key_of: Callable[[QueuedPod], Any] = _priority_key
        else:
            sort = less

            def key_of(qp: QueuedPod) -> Any:
                return _LessKey(qp, sort)
        super().__init__(key_of)
