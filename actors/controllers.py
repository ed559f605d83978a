"""Ray actor shell around :class:`emulator.controllers.manager.ControllerManager`.

All behaviour lives in ``emulator/controllers/``; this module only decides
where it runs. Each :class:`ControllerManagerActor` is one controller-manager
process with its own store connection, informer factory and watch
multiplexer; several of them elect one leader through the
``kube-system/kube-controller-manager`` Lease, so killing the leader's actor
(``ray.kill``) hands the work to a standby after the lease expires — the
failover kemu's tests exercise.

The cluster clock crosses the process boundary as (speed, cluster time at a
wall instant), the same way the API server process receives it.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import ray

from emulator.clock import SystemClock
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.server.core import ServerCore
from emulator.store.store import Store, StoreConfig


def _cluster_clock(speed: float, clock_start: float | None, clock_wall: float | None) -> SystemClock:
    if clock_start is None or clock_wall is None:
        return SystemClock(speed)
    return SystemClock(speed, start=clock_start + (time.time() - clock_wall) * speed)


@ray.remote(num_cpus=0, max_restarts=0)
class ControllerManagerActor:
    """One controller manager; ``config`` is a :class:`ManagerConfig` as a dict."""

    def __init__(self, redis_url: str, config: dict[str, Any] | None = None, *, prefix: str = "kemu:",
                 stream_cap: int = 200_000, node_shards: int = 16, clock_speed: float = 1.0,
                 clock_start: float | None = None, clock_wall: float | None = None) -> None:
        # A process full of informer caches: keep full collections rare (see emulator/informers/shared_informer.py).
        gc.set_threshold(50_000, 20, 1000)
        clock = _cluster_clock(clock_speed, clock_start, clock_wall)
        self.store = Store.connect(redis_url, StoreConfig(prefix=prefix, stream_cap=stream_cap,
                                                          node_shards=node_shards))
        self.core = ServerCore(self.store, clock)
        self.manager = ControllerManager(self.core, ManagerConfig.from_dict(config or {}))

    def start(self) -> dict[str, Any]:
        self.manager.start()
        return self.manager.status()

    def status(self) -> dict[str, Any]:
        return self.manager.status()

    def wait_active(self, timeout: float) -> bool:
        return self.manager.wait_active(timeout)

    def stop(self) -> None:
        self.manager.stop()
        self.store.close()


def start_controller_managers(n: int, redis_url: str, config: dict[str, Any] | None = None,
                              **kwargs: Any) -> list[Any]:
    """Start ``n`` controller-manager actors (one will lead); returns their handles."""
    actors = [ControllerManagerActor.remote(redis_url, config, **kwargs) for _ in range(n)]
    ray.get([a.start.remote() for a in actors])
    return actors
