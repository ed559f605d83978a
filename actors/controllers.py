"""Ray actor shell around :class:`emulator.controllers.manager.ControllerManager`.

All behaviour lives in ``emulator/controllers/``; this module only decides
where it runs. Each :class:`ControllerManagerActor` is one controller-manager
process with its own store connection, informer factory and watch
multiplexer; several of them elect one leader through the
``kube-system/kube-controller-manager`` Lease, so killing the leader's actor
(``ray.kill``) hands the work to a standby after the lease expires — the
failover kemu's tests exercise. :class:`ControllerLauncher` is the runner
``kemu up --controllers-on-ray`` hands :class:`emulator.cluster.LocalCluster`
(the controller-manager service of ``docker-compose.yml`` uses it).

The cluster clock crosses the process boundary as (speed, cluster time at a
wall instant), the same way the API server process receives it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

import ray

from emulator.clock import SystemClock
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.server.core import ServerCore
from emulator.store.store import Store, StoreConfig

log = logging.getLogger(__name__)


def _cluster_clock(speed: float, clock_start: float | None, clock_wall: float | None) -> SystemClock:
    if clock_start is None or clock_wall is None:
        return SystemClock(speed)
    return SystemClock(speed, start=clock_start + (time.time() - clock_wall) * speed)


@ray.remote(num_cpus=0, max_restarts=0)
class ControllerManagerActor:
    """One controller manager; ``config`` is a :class:`ManagerConfig` as a dict."""

    def __init__(self, redis_url: str, config: dict[str, Any] | None = None, *, prefix: str = "kemu:",
                 stream_cap: int = 200_000, node_shards: int = 16, clock_speed: float = 1.0,
                 clock_start: float | None = None, clock_wall: float | None = None,
                 serve_metrics: bool = False) -> None:
        clock = _cluster_clock(clock_speed, clock_start, clock_wall)
        self.store = Store.connect(redis_url, StoreConfig(prefix=prefix, stream_cap=stream_cap,
                                                          node_shards=node_shards))
        self.core = ServerCore(self.store, clock)
        self.manager = ControllerManager(self.core, ManagerConfig.from_dict(config or {}), tune_gc=True)
        self.serve_metrics = serve_metrics
        self.metrics: Any = None

    def start(self) -> dict[str, Any]:
        self.manager.start()
        if self.serve_metrics and self.metrics is None:
            # This actor's process is a scrape target of its own (workqueues, reconcile times, cluster state).
            from emulator.metrics import serve_and_register

            self.metrics = serve_and_register(self.store.redis, f"controller-manager-{socket.gethostname()}-"
                                              f"{os.getpid()}", "controller-manager", prefix=self.store.config.prefix)
        return self.manager.status()

    def status(self) -> dict[str, Any]:
        return self.manager.status()

    def wait_active(self, timeout: float) -> bool:
        return self.manager.wait_active(timeout)

    def stop(self) -> None:
        self.manager.stop()
        if self.metrics is not None:
            self.metrics.stop()
            self.metrics = None
        self.store.close()


def start_controller_managers(n: int, redis_url: str, config: dict[str, Any] | None = None,
                              **kwargs: Any) -> list[Any]:
    """Start ``n`` controller-manager actors (one will lead); returns their handles."""
    actors = [ControllerManagerActor.remote(redis_url, config, **kwargs) for _ in range(n)]
    ray.get([a.start.remote() for a in actors])
    return actors


class ControllerLauncher:
    """The controller runner ``kemu up --controllers-on-ray`` uses (see :func:`controller_runner`).

    ``n`` managers as actors ``kemu-controller-manager-<i>``, spread over the Ray cluster; they elect
    one leader through the Lease as in-process managers do. No Ray restarts: a restarted actor would
    not be started again, and the standby managers are what takes over from a dead leader.
    """

    def __init__(self, launch: Any) -> None:
        self.launch = launch
        self.actors: list[Any] = []

    def start(self, timeout: float = 180.0) -> list[dict[str, Any]]:
        from actors.launcher import RAY_NAMESPACE, init_ray

        cfg = self.launch.config
        init_ray(cfg.ray_address, num_cpus=cfg.ray_num_cpus)
        self.actors = [ControllerManagerActor.options(
            name=f"kemu-controller-manager-{i}", namespace=RAY_NAMESPACE, scheduling_strategy="SPREAD",
        ).remote(self.launch.redis_url, cfg.manager_settings(), prefix=cfg.prefix, stream_cap=cfg.stream_cap,
                 node_shards=cfg.node_shards, clock_speed=cfg.clock_speed, clock_start=self.launch.clock_start,
                 clock_wall=self.launch.clock_wall, serve_metrics=cfg.metrics)
            for i in range(cfg.controller_managers)]
        try:
            return ray.get([a.start.remote() for a in self.actors], timeout=timeout)
        except BaseException:
            self.stop()
            raise

    def health(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        return ray.get([a.status.remote() for a in self.actors], timeout=timeout)

    def stop(self, timeout: float = 30.0) -> None:
        if not self.actors:
            return
        try:
            ray.get([a.stop.remote() for a in self.actors], timeout=timeout)  # a leader releases its Lease
        except Exception as e:  # a dead or stuck actor must not keep the others alive
            log.warning("controller manager actors did not all stop cleanly: %s", e)
        for actor in self.actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception as e:
                log.debug("ray.kill of a controller manager actor: %s", e)
        self.actors = []


def controller_runner(launch: Any) -> ControllerLauncher:
    """The :data:`emulator.cluster.ControllerRunnerFactory` the ``kemu`` entry point gives LocalCluster."""
    return ControllerLauncher(launch)
