"""Recent bindings per node: the input of the dynamic scheduler's hot value.

crane-scheduler's annotator keeps a bounded heap of the last bindings
(``pkg/controller/annotator/binding.go``: ``BindingRecords``,
``GetLastNodeBindingCount``) fed by the scheduler's ``Scheduled`` events, and
its newer versions count in the scheduler process too, since an annotation
written every few minutes cannot damp a burst of binds within seconds. kemu
does both with this class: the node annotator records the binds it sees
through its pod informer (``spec.nodeName`` set), the ``LoadAware`` plugin and
the extender the placements they make. Times are cluster time.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence

import numpy as np

__all__ = ["BindingRecords"]


class BindingRecords:
    """(time, node) of recent bindings, dropped once older than ``horizon`` or beyond ``max_size``."""

    def __init__(self, horizon: float, max_size: int = 200_000) -> None:
        self.horizon = horizon
        self._records: deque[tuple[float, str]] = deque(maxlen=max_size)
        self._lock = threading.Lock()
        self.version = 0  # bumped by every change, so readers can cache what they computed

    def add(self, node: str, ts: float) -> None:
        with self._lock:
            self._records.append((ts, node))
            self.version += 1

    def remove(self, node: str, ts: float) -> None:
        """Undo one :meth:`add` (an Unreserve); a record already gone is fine."""
        with self._lock:
            try:
                self._records.remove((ts, node))
                self.version += 1
            except ValueError:
                pass

    def __len__(self) -> int:
        return len(self._records)

    def _trim(self, now: float) -> list[tuple[float, str]]:
        records = self._records
        while records and records[0][0] <= now - self.horizon:
            records.popleft()
        return list(records)

    def counts(self, now: float, ranges: Sequence[float]) -> dict[str, list[int]]:
        """Per node with a recent binding: how many fall in each of the last ``ranges`` seconds."""
        with self._lock:
            records = self._trim(now)
        if not records:
            return {}
        times = np.fromiter((r[0] for r in records), dtype=np.float64, count=len(records))
        code_of: dict[str, int] = {}
        codes = np.fromiter((code_of.setdefault(r[1], len(code_of)) for r in records), dtype=np.int64,
                            count=len(records))
        # crane: a binding counts when its timestamp is after now - timeRange.
        per_range = [np.bincount(codes[times > now - r], minlength=len(code_of)) for r in ranges]
        return {node: [int(c[i]) for c in per_range] for node, i in code_of.items()}
