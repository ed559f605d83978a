"""backoffQ: pods waiting out their backoff after a failed attempt, ordered by when it ends.

Upstream ``pkg/scheduler/backend/queue/backoff_queue.go``
(``calculateBackoffDuration``, ``isPodBackingoff``, the heap by backoff
expiry); our own Python. The backoff is ``initial * 2^(attempts-1)`` capped
at ``max`` (1 s doubling to 10 s by default). Times are cluster-clock
seconds; the :class:`~emulator.scheduler.queue.scheduling_queue.SchedulingQueue`
holds the lock.
"""

from __future__ import annotations

from emulator.clock import Clock
from emulator.scheduler.queue.heap import Heap
from emulator.scheduler.queue.queued_pod import QueuedPod

__all__ = ["DEFAULT_POD_INITIAL_BACKOFF", "DEFAULT_POD_MAX_BACKOFF", "BackoffQueue"]

DEFAULT_POD_INITIAL_BACKOFF = 1.0
DEFAULT_POD_MAX_BACKOFF = 10.0


class BackoffQueue(Heap):
    """backoffQ: a :class:`Heap` by backoff expiry, and the backoff arithmetic."""

    def __init__(self, clock: Clock, pod_initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF,
                 pod_max_backoff: float = DEFAULT_POD_MAX_BACKOFF) -> None:
        if pod_initial_backoff <= 0 or pod_max_backoff < pod_initial_backoff:
            raise ValueError("backoff durations must satisfy 0 < initial <= max")
        super().__init__(lambda qp: (qp.backoff_expiration or 0.0, qp.seq))
        self.clock = clock
        self.pod_initial_backoff = pod_initial_backoff
        self.pod_max_backoff = pod_max_backoff

    def duration(self, qp: QueuedPod) -> float:
        """upstream ``calculateBackoffDuration``: initial doubled per earlier attempt, capped at max."""
        if qp.attempts == 0:
            return 0.0
        duration = self.pod_initial_backoff
        for _ in range(1, qp.attempts):
            if duration > self.pod_max_backoff - duration:
                return self.pod_max_backoff
            duration += duration
        return duration

    def expiration(self, qp: QueuedPod) -> float:
        """When ``qp``'s backoff ends (cluster time): its timestamp plus its backoff duration."""
        if qp.backoff_expiration is None:
            qp.backoff_expiration = qp.timestamp + self.duration(qp)
        return qp.backoff_expiration

    def backing_off(self, qp: QueuedPod, now: float | None = None) -> bool:
        return self.expiration(qp) > (self.clock.now() if now is None else now)

    def add(self, qp: QueuedPod) -> None:
        """Into backoffQ, its expiry fixed first (the heap orders by it)."""
        self.expiration(qp)
        self.push(qp)

    def pop_completed(self, now: float) -> QueuedPod | None:
        """The head, taken out, if its backoff is over at ``now``; else None."""
        head = self.peek()
        if head is None or self.expiration(head) > now:
            return None
        self.pop()
        return head
