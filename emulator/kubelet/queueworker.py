"""Queue workers: pods that consume items from a real Redis list while they are ready.

Upstream a KEDA-scaled worker is a process that pops jobs from a queue; the queue's
depth is what KEDA's ``redis`` scaler reads. kemu's pods run no process, so the kubelet
model does the popping: a pod whose behaviour names a ``queue`` (the profile field, or
the annotation ``kemu.io/queue: jobs`` on its template) and an ``items-per-second`` rate
consumes that many items per second of cluster time from the Redis list of that name
while it is ready (the ``queue-worker`` profile is such a pod). Once its deletion begins (the
kubelet sends SIGTERM) it takes no new item, as a worker that handles SIGTERM finishes and
exits, although it stays Ready until its containers stop, as upstream's prober keeps it
(:meth:`~emulator.kubelet.model.KubeletModel.begin_termination`).

Per shard tick (:func:`drain`, before the tick's deletions and starts), for every queue the
workers ready as the last tick left them earn ``sum(rate) * dt`` items of credit: a pod works
from the tick that started it to the one that sees it stop or sends it SIGTERM (off by less
than a tick only for a start delay or an exit between ticks). The whole part is popped with
one real ``LPOP key count`` in one Lua script per queue (atomic, so two shards never get the same item, and
an item is never both counted and left behind). The script also adds the count to the
hash ``P queue:consumed`` (queue -> items consumed) and appends the items to the list
``P queue:done:<queue>`` (the last :data:`DONE_KEEP`), so tests and reports count what was
consumed. Credit a worker could not use because the list ran dry is dropped: an idle
worker does not bank capacity. The lists live in the cluster's embedded Redis, unprefixed,
so a ``redis`` trigger without an address reads the very list the workers drain.

Vectorised: per tick a bincount over pod rows, and nothing while no pod names a queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from emulator.kubelet.model import KubeletModel

__all__ = ["CONSUMED_KEY", "DONE_KEEP", "QueueTable", "consumed", "done_items", "drain"]

CONSUMED_KEY = "queue:consumed"
DONE_PREFIX = "queue:done:"
DONE_KEEP = 1_000_000

_POP = """
local items = redis.call('LPOP', KEYS[1], tonumber(ARGV[1]))
if not items then return 0 end
redis.call('HINCRBY', KEYS[2], KEYS[1], #items)
redis.call('RPUSH', KEYS[3], unpack(items))
redis.call('LTRIM', KEYS[3], -tonumber(ARGV[2]), -1)
return #items
"""


class QueueTable:
    """Per pod row: the queue it consumes (-1: none) and its rate; per queue: unused credit."""

    def __init__(self, pods: int) -> None:
        self.p_queue = np.full(pods, -1, dtype=np.int64)
        self.p_rate = np.zeros(pods)
        self._ids: dict[str, int] = {}
        self._names: list[str] = []
        self._credit = np.zeros(0)
        self._workers = 0
        self.last_tick: float | None = None
        self.popped: dict[str, int] = {}  # items this table's pods consumed, per queue (this process)

    @property
    def active(self) -> bool:
        return self._workers > 0

    def grow(self, pods: int) -> None:
        extra = pods - len(self.p_queue)
        if extra > 0:
            self.p_queue = np.concatenate([self.p_queue, np.full(extra, -1, dtype=np.int64)])
            self.p_rate = np.concatenate([self.p_rate, np.zeros(extra)])

    def assign_pod(self, p_row: int, queue: str, rate: float) -> None:
        self.clear_pod(p_row)
        if not queue or rate <= 0:
            return
        qid = self._ids.get(queue)
        if qid is None:
            qid = self._ids[queue] = len(self._names)
            self._names.append(queue)
            self._credit = np.append(self._credit, 0.0)
        self.p_queue[p_row] = qid
        self.p_rate[p_row] = rate
        self._workers += 1

    def clear_pod(self, p_row: int) -> None:
        if p_row < len(self.p_queue) and self.p_queue[p_row] >= 0:
            self._workers -= 1
            self.p_queue[p_row] = -1
            self.p_rate[p_row] = 0.0

    def due(self, pod_ready: np.ndarray, dt: float) -> dict[str, int]:
        """Whole items each queue's ready workers may pop this tick (credit accumulates fractions)."""
        n = len(pod_ready)
        queues = self.p_queue[:n]
        working = pod_ready & (queues >= 0)
        rate = np.bincount(queues[working], weights=self.p_rate[:n][working], minlength=len(self._names))
        self._credit += rate * dt
        self._credit[rate == 0] = 0.0  # no ready worker: nothing banked
        whole = np.floor(self._credit)
        self._credit -= whole
        return {self._names[i]: int(whole[i]) for i in np.flatnonzero(whole > 0)}


def drain(model: KubeletModel, client: Any, prefix: str, now: float) -> dict[str, int]:
    """A shard's per-tick step: pop what its ready workers consumed since the last tick; items popped per queue."""
    table = model.queues
    last, table.last_tick = table.last_tick, now
    if not table.active or last is None or now <= last:
        return {}
    wanted = table.due(model.pods_ready(), now - last)
    if not wanted:
        return {}
    pipe = client.pipeline(transaction=False)
    names = list(wanted)
    for name in names:
        pipe.eval(_POP, 3, name, prefix + CONSUMED_KEY, prefix + DONE_PREFIX + name, wanted[name], DONE_KEEP)
    popped = {name: int(count) for name, count in zip(names, pipe.execute(), strict=True)}
    for name, count in popped.items():
        table.popped[name] = table.popped.get(name, 0) + count
    return popped


def consumed(client: Any, prefix: str) -> Mapping[str, int]:
    """Items consumed per queue, cluster-wide."""
    return {(k.decode() if isinstance(k, bytes) else str(k)): int(v)
            for k, v in (client.hgetall(prefix + CONSUMED_KEY) or {}).items()}


def done_items(client: Any, prefix: str, queue: str) -> list[str]:
    """The (last :data:`DONE_KEEP`) items consumed from ``queue``, in order."""
    items = client.lrange(prefix + DONE_PREFIX + queue, 0, -1)
    return [(i.decode() if isinstance(i, bytes) else str(i)) for i in items]
