"""Kubelet shards for tests that need real pod usage: one shard publishing the metrics pipeline's samples.

:func:`metrics_shard` runs a :class:`KubeletShard` with ``nodes`` nodes (``n-00000`` ...) whose
usage is averaged over a ``window``-second metrics window, for a block; :func:`wall_clock_core`
is a bootstrapped core on a ManualClock that starts at the wall clock, so that an API server
process (which reads wall time) finds the published samples fresh.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from emulator.clock import ManualClock
from emulator.kubelet.shard import KubeletShard, kubelet_shard_config
from emulator.server.core import ServerCore
from emulator.store.store import Store


@contextlib.contextmanager
def metrics_shard(core: ServerCore, clock: ManualClock, window: float, nodes: int = 1) -> Iterator[KubeletShard]:
    """A started kubelet shard of ``nodes`` nodes with a ``window``-second metrics window, stopped after the block."""
    shard = KubeletShard(core, 0, 1, kubelet_shard_config({"metrics_window": window}, [{"name": "n", "count": nodes}]),
                         clock)
    shard.start(timeout=30)
    try:
        yield shard
    finally:
        shard.stop()


def wall_clock_core(redis_url: str) -> tuple[ServerCore, ManualClock]:
    """A bootstrapped core whose cluster time starts at the wall clock's whole second."""
    clock = ManualClock(float(int(time.time())))
    core = ServerCore(Store.connect(redis_url), clock)
    core.bootstrap()
    return core, clock
