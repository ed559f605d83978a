"""backoffQ: pods waiting out their backoff after a failed attempt, ordered by when it ends.

Upstream ``pkg/scheduler/backend/queue/backoff_queue.go``
(``calculateBackoffDuration``, ``getBackoffTime``, the heap by backoff
expiry); our own Python. The backoff is ``initial * 2^(count-1)`` capped
at ``max`` (1 s doubling to 10 s by default), where ``count`` is the pod's
consecutive errors if its last attempt failed with an error, else the times
plugins rejected it -- as current upstream's ``getBackoffTime`` counts
(beside its podErrorBackoffQ): attempts that only waited (a pod popped early, a preemptor held while
its preemption is carried out) and errors long past do not lengthen it. Times are cluster-clock
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
        """upstream ``calculateBackoffDuration`` of ``getBackoffTime``'s count (consecutive errors, else
        rejections): initial doubled per count beyond the first, capped at max; 0 before any failure."""
        count = qp.consecutive_errors if qp.consecutive_errors > 0 else qp.unschedulable_count
        if count == 0:
            return 0.0
        duration = self.pod_initial_backoff
        for _ in range(1, count):
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

    def pop_early(self) -> QueuedPod | None:
        """upstream ``popBackoff`` (SchedulerPopFromBackoffQ): the pod whose backoff ends first, taken out before it
        ends -- only among pods rejected by plugins (upstream's podBackoffQ); a pod backing off after an error
        (``consecutive_errors``: upstream's podErrorBackoffQ) is never popped early. None if there is none."""
        head = self.peek()
        if head is not None and head.consecutive_errors == 0:
            found: QueuedPod | None = head
        else:
            waiting = [qp for qp in self.values() if qp.consecutive_errors == 0]
            found = min(waiting, key=lambda qp: (self.expiration(qp), qp.seq)) if waiting else None
        if found is not None:
            self.remove(found.key)
        return found

    def pop_completed(self, now: float) -> QueuedPod | None:
        """The head, taken out, if its backoff is over at ``now``; else None."""
        head = self.peek()
        if head is None or self.expiration(head) > now:
            return None
        self.pop()
        return head
