"""A heap of queued pods with lookup and removal by pod key.

Upstream ``pkg/scheduler/backend/heap/heap.go`` (a heap with a key index);
our own Python over :mod:`heapq`, with lazy deletion instead of an index
kept per slot.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from emulator.scheduler.queue.queued_pod import QueuedPod

__all__ = ["Heap"]


class _Entry:
    """A heap slot; deleted entries stay in the heap with ``alive=False`` until they surface."""

    __slots__ = ("alive", "key", "qp")

    def __init__(self, key: Any, qp: QueuedPod) -> None:
        self.key = key
        self.qp = qp
        self.alive = True

    def __lt__(self, other: _Entry) -> bool:
        return self.key < other.key


class Heap:
    """A heap ordered by ``key_of(qp)``, with lookup and removal by pod key (lazy deletion)."""

    def __init__(self, key_of: Callable[[QueuedPod], Any]) -> None:
        self._heap: list[_Entry] = []
        self._by_key: dict[str, _Entry] = {}
        self._key_of = key_of

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def get(self, key: str) -> QueuedPod | None:
        entry = self._by_key.get(key)
        return entry.qp if entry is not None else None

    def push(self, qp: QueuedPod) -> None:
        old = self._by_key.get(qp.key)
        if old is not None:
            old.alive = False
        entry = _Entry(self._key_of(qp), qp)
        self._by_key[qp.key] = entry
        heapq.heappush(self._heap, entry)
        if len(self._heap) > 64 and len(self._heap) > 2 * len(self._by_key):
            self._compact()

    def remove(self, key: str) -> QueuedPod | None:
        entry = self._by_key.pop(key, None)
        if entry is None:
            return None
        entry.alive = False
        return entry.qp

    def peek(self) -> QueuedPod | None:
        heap = self._heap
        while heap and not heap[0].alive:
            heapq.heappop(heap)
        return heap[0].qp if heap else None

    def pop(self) -> QueuedPod | None:
        heap = self._heap
        while heap:
            entry = heapq.heappop(heap)
            if entry.alive:
                del self._by_key[entry.qp.key]
                return entry.qp
        return None

    def values(self) -> list[QueuedPod]:
        return [entry.qp for entry in self._by_key.values()]

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if entry.alive]
        heapq.heapify(self._heap)
