"""Per-node facts about a snapshot's pods, kept current while the snapshot's owner assumes and forgets pods.

PodTopologySpread and InterPodAffinity need, every cycle, numbers such as
"pods on each node matching this selector in this namespace" or "the pods on
each node that carry pod affinity". Upstream keeps some of them in
``NodeInfo`` (``PodsWithAffinity``, ``PodsWithRequiredAntiAffinity``) and
recounts the rest over every pod in parallel goroutines. Recounting in Python
costs about a millisecond per 10,000 pods -- the whole per-pod budget -- so a
:class:`PodIndex` (one per plugin instance) remembers each table it built and,
when it is asked again about the *same* snapshot object after the owner
placed or removed a few pods, recomputes only the nodes that changed.

How changes are found: the snapshot logs the node of every in-place
``assume``/``forget`` (:meth:`Snapshot.changed_nodes_since`), so when asked
about the same snapshot object again the index recomputes exactly the nodes
whose pods changed since it last looked -- a preemption's victims leaving and
its preemptor arriving on the same node included. When the log cannot say
(another snapshot object, a node added, a log overrun) the tables are rebuilt
from scratch, which is always correct.

Tables are keyed by the caller (a hashable key, typically the plugin name plus
a parsed selector) and come in two shapes: :meth:`counts` -- an int64 per
node -- and :meth:`sparse` -- a value for the nodes where a function of the
node's pods is truthy. At most ``max_tables`` tables are kept, least recently
used first out.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import numpy as np

from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo

__all__ = ["PodIndex"]

V = TypeVar("V")

_COUNTS, _SPARSE = 0, 1


class _Table:
    __slots__ = ("data", "fn", "kind")

    def __init__(self, kind: int, fn: Callable[[Sequence[PodInfo]], Any], data: Any) -> None:
        self.kind = kind
        self.fn = fn
        self.data = data


class PodIndex:
    """Incrementally maintained per-node tables over one snapshot lineage; see the module docstring."""

    __slots__ = ("_generation", "_snapshot", "_tables", "max_tables")

    def __init__(self, max_tables: int = 64) -> None:
        self.max_tables = max_tables
        self._snapshot: Snapshot | None = None
        self._generation = -1
        self._tables: OrderedDict[Hashable, _Table] = OrderedDict()

    def _sync(self, snapshot: Snapshot) -> None:
        """Bring every table up to date with ``snapshot`` (incrementally when possible)."""
        if snapshot is self._snapshot and snapshot.generation == self._generation:
            return
        if snapshot is self._snapshot:
            changed = snapshot.changed_nodes_since(self._generation)
            if changed is not None:
                for index in set(changed):
                    pods = snapshot.pods_on(index)
                    for table in self._tables.values():
                        self._set(table, index, pods)
                self._generation = snapshot.generation
                return
        self._tables.clear()
        self._snapshot = snapshot
        self._generation = snapshot.generation

    @staticmethod
    def _set(table: _Table, index: int, pods: Sequence[PodInfo]) -> None:
        if table.kind == _COUNTS:
            table.data[index] = table.fn(pods) if pods else 0
            return
        value = table.fn(pods) if pods else None
        if value:
            table.data[index] = value
        else:
            table.data.pop(index, None)

    def _table(self, snapshot: Snapshot, key: Hashable, kind: int,
               fn: Callable[[Sequence[PodInfo]], Any]) -> _Table:
        self._sync(snapshot)
        table = self._tables.get(key)
        if table is not None:
            self._tables.move_to_end(key)
            return table
        if kind == _COUNTS:
            data: Any = np.zeros(snapshot.num_nodes, dtype=np.int64)
            for index in np.flatnonzero(snapshot.pod_counts).tolist():
                data[index] = fn(snapshot.pods_on(index))
        else:
            data = {}
            for index in np.flatnonzero(snapshot.pod_counts).tolist():
                value = fn(snapshot.pods_on(index))
                if value:
                    data[index] = value
        table = self._tables[key] = _Table(kind, fn, data)
        while len(self._tables) > self.max_tables:
            self._tables.popitem(last=False)
        return table

    def counts(self, snapshot: Snapshot, key: Hashable, count: Callable[[Sequence[PodInfo]], int]) -> np.ndarray:
        """``count(pods on node i)`` for every node i, as int64 (read-only: do not modify)."""
        return self._table(snapshot, key, _COUNTS, count).data  # type: ignore[no-any-return]

    def sparse(self, snapshot: Snapshot, key: Hashable,
               value: Callable[[Sequence[PodInfo]], V | None]) -> dict[int, V]:
        """Node index -> ``value(pods on the node)`` for the nodes where it is truthy (read-only)."""
        return self._table(snapshot, key, _SPARSE, value).data  # type: ignore[no-any-return]
