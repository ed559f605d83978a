"""The unschedulable pods pool: pods some plugin rejected (or a PreEnqueue plugin gates), by pod key.

Upstream ``pkg/scheduler/backend/queue/unschedulable_pods.go``; our own
Python. Besides the pods it counts, per rejecting plugin, how many pods in
the pool that plugin rejected, so that a cluster event no plugin in the
pool cares about costs no walk over the pool. The
:class:`~emulator.scheduler.queue.scheduling_queue.SchedulingQueue` holds
the lock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from emulator.scheduler.queue.events import WILDCARD_EVENTS
from emulator.scheduler.queue.queued_pod import QueuedPod

__all__ = ["UnschedulablePods"]


class UnschedulablePods(dict[str, QueuedPod]):
    """Pod key -> queued pod; add and remove through :meth:`add` / :meth:`remove` to keep the plugin counts."""

    def __init__(self) -> None:
        super().__init__()
        self._rejectors: Counter[str] = Counter()  # rejecting plugin -> pods in the pool it rejected

    def add(self, qp: QueuedPod) -> None:
        """Into the pool, counting its rejecting plugins (see :meth:`anyone_interested`)."""
        self.remove(qp.key)
        rejectors = frozenset(qp.unschedulable_plugins | qp.pending_plugins)
        qp.extra["rejectors"] = rejectors
        self._rejectors.update(rejectors)
        self[qp.key] = qp

    def remove(self, key: str) -> QueuedPod | None:
        qp = self.pop(key, None)
        if qp is not None:
            self._rejectors.subtract(qp.extra.pop("rejectors", ()))
        return qp

    def anyone_interested(self, event: str, plugin_events: Mapping[str, frozenset[str]]) -> bool:
        """Whether some pod in the pool was rejected by a plugin that cares about ``event``.

        Bound-pod events arrive at the scheduling rate; without this check each one would walk the whole
        unschedulable pool (upstream pre-filters the same way, by plugin and cross-topology terms).
        """
        if event in WILDCARD_EVENTS:
            return bool(self)
        for plugin, n in self._rejectors.items():
            if n > 0:
                events = plugin_events.get(plugin)
                if events is None or event in events:
                    return True
        return False
