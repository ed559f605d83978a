"""Scheduler Ray actors: each a process hosting :class:`emulator.scheduler_host.SchedulerHost`.

All behaviour lives in ``emulator/scheduler/`` (the loop, queue, cache,
framework) and ``emulator/scheduler_host.py`` (store connection, informers,
metrics endpoint); this module only decides where schedulers run.

:func:`start_scheduler_actors` places ``n`` competing replicas of the same
profiles -- actor ``i`` is ``kemu-scheduler-<i>``, replica ``i`` of ``n``, so
it owns the pending pods whose uid hashes to ``i`` (see
:mod:`emulator.scheduler.scheduler`) and places them onto every node from its
own cache; the store arbitrates the binds. Actors take ``num_cpus=0`` (they
share the machine's cores with Redis and the rest, as the kubelet actors do)
and spread over a multi-machine Ray cluster. Each serves ``/metrics`` and
registers it for Prometheus discovery.

The cluster clock crosses the process boundary as (speed, cluster time at a
wall instant), as for the API server and the other actors.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict
from typing import Any

import ray

from actors.launcher import RAY_NAMESPACE, init_ray
from emulator.scheduler.scheduler import SchedulerOptions
from emulator.scheduler_host import HostSettings, SchedulerHost

log = logging.getLogger(__name__)

__all__ = ["ACTOR_NAME", "SchedulerActor", "SchedulerLauncher", "scheduler_runner", "start_scheduler_actors",
           "stop_scheduler_actors"]

ACTOR_NAME = "kemu-scheduler-{}"


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
class SchedulerActor:
    """One scheduler process: ``settings`` (:class:`HostSettings` as a dict), one :class:`SchedulerOptions` dict each.

    A restarted actor (after a crash) runs ``__init__`` again: its schedulers re-list the cluster and pick up
    the pods they own that are still pending.
    """

    def __init__(self, settings: dict[str, Any], options: list[dict[str, Any]],
                 clock_wall: float | None = None) -> None:
        host_settings = HostSettings(**settings)
        if host_settings.clock_start is not None and clock_wall is not None:
            # Advance the launcher's reading to now, so every process derives the same cluster time.
            host_settings.clock_start += (time.time() - clock_wall) * host_settings.clock_speed
        self.host = SchedulerHost(host_settings, [SchedulerOptions(**o) for o in options]).start()

    def ready(self) -> dict[str, Any]:
        # pid: a restarted actor is a new worker process (chaos tells the incarnations apart by it).
        return {"schedulers": [s.name for s in self.host.schedulers], "metrics": self.host.metrics_address,
                "pid": os.getpid()}

    def stats(self) -> list[dict[str, Any]]:
        return self.host.stats()

    def stats_and_samples(self) -> tuple[list[dict[str, Any]], list[dict[str, list[float]]]]:
        return self.host.stats(), self.host.samples()

    def consistency(self) -> list[dict[str, Any]]:
        return self.host.consistency()

    def dump(self) -> list[dict[str, Any]]:
        return [s.dump() for s in self.host.schedulers]

    def stop(self) -> None:
        self.host.stop()


def start_scheduler_actors(redis_url: str, n: int, *, prefix: str = "kemu:", config_path: str | None = None,
                           config: dict[str, Any] | None = None, bind_workers: int = 1,
                           bind_linger: float | None = None, keep_samples: bool = False,
                           serve_metrics: bool = True, clock_speed: float = 1.0,
                           clock_start: float | None = None, clock_wall: float | None = None,
                           ray_address: str | None = None, num_cpus: int | None = None,
                           timeout: float = 180.0) -> list[Any]:
    """Start ``n`` competing scheduler actors (Ray is initialised if needed); returns their handles once ready."""
    if n < 1:
        raise ValueError("at least one scheduler actor")
    init_ray(ray_address, num_cpus=num_cpus)
    settings = asdict(HostSettings(redis_url, prefix, config_path=config_path, config=config,
                                   clock_speed=clock_speed, clock_start=clock_start, serve_metrics=serve_metrics,
                                   tune_gc=True))
    actors = []
    for i in range(n):
        opts = SchedulerOptions(name=ACTOR_NAME.format(i), replica=i, replicas=n, bind_workers=bind_workers,
                                keep_samples=keep_samples, seed=i)
        if bind_linger is not None:
            opts.bind_linger = bind_linger
        options = asdict(opts)
        actors.append(SchedulerActor.options(name=ACTOR_NAME.format(i), namespace=RAY_NAMESPACE,
                                             scheduling_strategy="SPREAD").remote(settings, [options], clock_wall))
    try:
        ray.get([a.ready.remote() for a in actors], timeout=timeout)
    except BaseException:
        stop_scheduler_actors(actors)
        raise
    return actors


def stop_scheduler_actors(actors: list[Any], timeout: float = 30.0) -> None:
    """Stop each actor's schedulers, then kill the actors (no restart)."""
    try:
        ray.get([a.stop.remote() for a in actors], timeout=timeout)
    except Exception as e:  # a dead or stuck actor must not keep the others alive
        log.warning("scheduler actors did not all stop cleanly: %s", e)
    for actor in actors:
        try:
            ray.kill(actor, no_restart=True)
        except Exception as e:
            log.debug("ray.kill of a scheduler actor: %s", e)


class SchedulerLauncher:
    """The scheduler runner ``kemu up`` uses (see :func:`scheduler_runner`): start, report, stop."""

    def __init__(self, redis_url: str, n: int, **kwargs: Any) -> None:
        self.redis_url = redis_url
        self.n = n
        self.kwargs = kwargs
        self.actors: list[Any] = []

    def start(self, timeout: float = 180.0) -> list[dict[str, Any]]:
        self.actors = start_scheduler_actors(self.redis_url, self.n, timeout=timeout, **self.kwargs)
        return ray.get([a.ready.remote() for a in self.actors], timeout=timeout)

    def health(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        return [s for stats in ray.get([a.stats.remote() for a in self.actors], timeout=timeout) for s in stats]

    def crash(self, index: int, timeout: float = 60.0) -> float:
        """kill -9 scheduler actor ``index`` (chaos): Ray restarts it (``max_restarts=-1``) and its schedulers
        re-list; the seconds until it answered again."""
        actor = self.actors[index]
        old = ray.get(actor.ready.remote(), timeout=timeout)["pid"]
        t0 = time.monotonic()
        ray.kill(actor, no_restart=False)
        deadline = t0 + timeout
        while True:
            try:
                if ray.get(actor.ready.remote(), timeout=max(1.0, deadline - time.monotonic()))["pid"] != old:
                    return time.monotonic() - t0
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"scheduler actor {index} did not come back within {timeout} s")
            time.sleep(0.1)  # the actor is restarting in another process: nothing local to wait on

    def stop(self, timeout: float = 30.0) -> None:
        if self.actors:
            stop_scheduler_actors(self.actors, timeout)
            self.actors = []


def scheduler_runner(launch: Any) -> SchedulerLauncher:
    """The :data:`emulator.cluster.SchedulerRunnerFactory` the ``kemu`` entry point gives LocalCluster."""
    cfg = launch.config
    return SchedulerLauncher(launch.redis_url, cfg.scheduler_count(), prefix=cfg.prefix,
                             config_path=cfg.scheduler_config, clock_speed=cfg.clock_speed,
                             clock_start=launch.clock_start, clock_wall=launch.clock_wall,
                             ray_address=cfg.ray_address, num_cpus=cfg.ray_num_cpus)
