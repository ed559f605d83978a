"""A pod in the scheduling queue: upstream ``QueuedPodInfo`` plus the queue's own bookkeeping.

Upstream ``pkg/scheduler/framework/types.go`` (``QueuedPodInfo``) and the
pod key every queue structure indexes by (``cache.MetaNamespaceKeyFunc``);
our own Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from emulator.api.types import ObjView
from emulator.scheduler.framework.types import QueuedPodInfo

__all__ = ["QueuedPod", "pod_key"]


def pod_key(pod: ObjView) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


@dataclass(eq=False)
class QueuedPod(QueuedPodInfo):
    """A queued pod (upstream ``QueuedPodInfo``) with the bookkeeping the queue needs.

    ``attempts`` counts pops; ``unschedulable_count`` / ``consecutive_errors``
    count failures by kind; ``initial_attempt_timestamp`` (cluster clock) and
    ``initial_attempt_wall`` (``perf_counter``) are set when the pod first
    enters activeQ -- the start of its SLI duration.
    """

    unschedulable_count: int = 0
    consecutive_errors: int = 0
    backoff_expiration: float | None = None
    initial_attempt_wall: float | None = None
    seq: int = 0
    deleted: bool = False  # deleted (or bound elsewhere) while in flight: do not requeue
    moved_while_in_flight: bool = False  # an update arrived while in flight
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pod(self) -> ObjView:
        return self.pod_info.pod

    @property
    def key(self) -> str:
        return self.pod_info.key

    @property
    def gated(self) -> bool:
        return bool(self.gating_plugin)
