"""The nominator: which pods preemption nominated to which node.

Upstream ``pkg/scheduler/backend/queue/nominator.go``; our own Python. Not
locked itself: the
:class:`~emulator.scheduler.queue.scheduling_queue.SchedulingQueue` calls it
under its own lock, as upstream's ``PriorityQueue`` does for its nominator.
"""

from __future__ import annotations

from emulator.scheduler.framework.types import PodInfo

__all__ = ["Nominator"]


class Nominator:
    """Node -> pod key -> PodInfo, and pod key -> node."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}
        self._view: dict[str, tuple[PodInfo, ...]] | None = {}  # by_node()'s copy; None once stale
        self.foreign: set[str] = set()  # pods a competing replica owns (their nominations come from the informer)

    def add(self, info: PodInfo, node: str | None, *, foreign: bool = False) -> None:
        """Nominate ``info`` to ``node`` (None: the node its status names); an empty node clears it.
        ``foreign``: the pod is a competing replica's."""
        node = node if node is not None else info.nominated_node_name
        self.delete(info.key)
        if not node:
            return
        self._by_node.setdefault(node, {})[info.key] = info
        self._node_of[info.key] = node
        if foreign:
            self.foreign.add(info.key)
        self._view = None

    def delete(self, key: str) -> None:
        node = self._node_of.pop(key, None)
        self.foreign.discard(key)
        if node is not None:
            self._view = None
            pods = self._by_node.get(node)
            if pods is not None:
                pods.pop(key, None)
                if not pods:
                    del self._by_node[node]

    def update(self, info: PodInfo) -> None:
        # A pod keeps the nomination preemption gave it until its own status says otherwise.
        if info.nominated_node_name or info.key not in self._node_of:
            self.add(info, None)

    def by_node(self) -> dict[str, tuple[PodInfo, ...]]:
        """Node -> its nominated pods: a copy, rebuilt only after a change (every Filter reads it); do not modify."""
        if self._view is None:
            self._view = {node: tuple(pods.values()) for node, pods in self._by_node.items()}
        return self._view

    def pods_for_node(self, node: str) -> list[PodInfo]:
        return list(self._by_node.get(node, {}).values())

    def node_of(self, key: str) -> str | None:
        return self._node_of.get(key)
