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
        self._live: dict[str, tuple[PodInfo, ...]] = {}  # node -> its pods, kept up to date per change
        self._view: dict[str, tuple[PodInfo, ...]] | None = {}  # by_node()'s copy of _live; None once stale
        self.foreign: set[str] = set()  # pods a competing replica owns (their nominations come from the informer)
        self.version = 0  # one more per change of a node's nominated pods
        self._log: list[str] = []  # the node of each change since version _log_base
        self._log_base = 0

    def add(self, info: PodInfo, node: str | None, *, foreign: bool = False) -> None:
        """Nominate ``info`` to ``node`` (None: the node its status names); an empty node clears it.
        ``foreign``: the pod is a competing replica's."""
        node = node if node is not None else info.nominated_node_name
        self.delete(info.key)
        if not node:
            return
        pods = self._by_node.setdefault(node, {})
        pods[info.key] = info
        self._live[node] = tuple(pods.values())
        self._changed(node)
        self._node_of[info.key] = node
        if foreign:
            self.foreign.add(info.key)
        self._view = None

    def delete(self, key: str) -> None:
        node = self._node_of.pop(key, None)
        self.foreign.discard(key)
        if node is not None:
            self._view = None
            self._changed(node)
            pods = self._by_node.get(node)
            if pods is not None:
                pods.pop(key, None)
                if pods:
                    self._live[node] = tuple(pods.values())
                else:
                    del self._by_node[node]
                    self._live.pop(node, None)

    def update(self, info: PodInfo) -> None:
        # A pod keeps the nomination preemption gave it until its own status says otherwise.
        if info.nominated_node_name or info.key not in self._node_of:
            self.add(info, None)

    def by_node(self) -> dict[str, tuple[PodInfo, ...]]:
        """Node -> its nominated pods: a copy, taken only after a change (every Filter reads it, without the queue's
        lock); do not modify. Each change updates only its node's entry, so the copy is one C-level dict copy."""
        if self._view is None:
            self._view = dict(self._live)
        return self._view

    _LOG_LIMIT = 4096

    def _changed(self, node: str) -> None:
        self._log.append(node)
        self.version += 1
        if len(self._log) > self._LOG_LIMIT:
            half = len(self._log) // 2
            del self._log[:half]
            self._log_base += half

    def changes_since(self, version: int) -> dict[str, tuple[PodInfo, ...]] | None:
        """Node -> its nominated pods now (empty: none) for every node whose nominated pods changed since
        ``version``; None when the log no longer reaches back that far (read :meth:`by_node` instead)."""
        if not self._log_base <= version <= self.version:
            return None
        return {node: self._live.get(node, ()) for node in self._log[version - self._log_base:]}

    def pods_for_node(self, node: str) -> list[PodInfo]:
        return list(self._by_node.get(node, {}).values())

    def node_of(self, key: str) -> str | None:
        return self._node_of.get(key)
