"""Work pushed into real Redis lists by ``load`` phases of kind ``push`` (what KEDA-scaled queue workers drain).

A ``push`` phase's series is items per second (the same shapes and seeded noise as the
``http`` and ``queue`` series, :func:`loadgen.plan._load`); each second the runner calls
:meth:`QueuePusher.push` with that second's rate, which RPUSHes that many items — whole
items, the fractions carried to the next second — onto the list named by the phase's
``target`` in the cluster's Redis (unprefixed: the key a ``redis`` trigger's ``listName``
and a ``queue-worker`` pod's ``kemu.io/queue`` name). Items are ``<list>-<n>``, numbered
per list from 0, so consumption can be counted item by item.
"""

from __future__ import annotations

from typing import Any

__all__ = ["QueuePusher"]

# Items per RPUSH call (a burst of 100k items must not be one huge command).
CHUNK = 10_000


class QueuePusher:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.pushed: dict[str, int] = {}
        self._carry: dict[str, float] = {}

    def push(self, queue: str, rate: float) -> int:
        """Push one second's worth of items at ``rate`` items/s onto ``queue``; how many were pushed."""
        owed = self._carry.get(queue, 0.0) + max(0.0, rate)
        count = int(owed)
        self._carry[queue] = owed - count
        first = self.pushed.get(queue, 0)
        for start in range(0, count, CHUNK):
            end = min(count, start + CHUNK)
            self.client.rpush(queue, *(f"{queue}-{first + i}" for i in range(start, end)))
        self.pushed[queue] = first + count
        return count
