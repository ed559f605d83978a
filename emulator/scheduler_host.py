"""Hosting schedulers in a process: store connection, shared informers, metrics endpoint, lifecycle.

:mod:`emulator.scheduler` never touches the store, the server or the informers
itself (an import contract keeps it pure); this module wires it to them. A
:class:`SchedulerHost` connects to Redis, builds one ``ServerCore`` (the client
every scheduler binds through) and one ``SharedInformerFactory`` (one watch
multiplexer for the whole process), creates the :class:`Scheduler` instances
it is asked for, waits for the informers to sync, starts them, and -- when
asked -- serves ``/metrics`` and registers the scrape target in Redis.

Custom plugins named in the configuration are loaded by the scheduler's
configuration code (entry point or ``module:attribute``); ``extenders`` are
called over one :class:`~emulator.extender_http.HTTPTransport` per host,
which this module owns (the scheduler package may not import an HTTP client).

It is what runs inside a scheduler Ray actor (``actors/scheduler.py``), a
scheduler child process (``loadgen/bench_scheduler.py``) and ``kemu up``'s
local schedulers, so they all behave alike. Several schedulers in one host
share its informers and its GIL: fine for tests and small clusters; competing
schedulers that should use several cores each get a host (process) of their
own.

A process hosting informers over tens of thousands of objects should raise
CPython's garbage-collector thresholds (see
:mod:`emulator.informers.shared_informer`); ``tune_gc`` does that.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator import gctune
from emulator.clock import SystemClock
from emulator.extender_http import HTTPTransport
from emulator.informers import SharedInformerFactory
from emulator.scheduler import in_tree_registry
from emulator.scheduler.config import SchedulerConfiguration, load_configuration, parse_configuration
from emulator.scheduler.scheduler import Scheduler, SchedulerOptions
from emulator.server.core import ServerCore
from emulator.store.store import Store, StoreConfig

log = logging.getLogger(__name__)

__all__ = ["HostSettings", "SchedulerHost"]


def thread_cpu_seconds() -> dict[str, float]:
    """CPU seconds per thread of this process, summed by thread name (Linux ``/proc``; empty elsewhere).

    Where a scheduler process's core goes -- the scheduling thread, the bind and API threads, the informers'
    threads -- which is what decides how far one process can scale.
    """
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    for tid, name in names.items():
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        seconds = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
        key = name.rstrip("0123456789").rstrip("-") or name
        out[key] = round(out.get(key, 0.0) + seconds, 3)
    return out


@dataclass
class HostSettings:
    """Where the schedulers of one host connect and what they run.

    ``config_path`` / ``config`` is a ``KubeSchedulerConfiguration`` (file
    path, or the decoded document); neither means upstream's default profile.
    ``clock_speed`` / ``clock_start`` reproduce the cluster clock (as the API
    server process does). ``serve_metrics`` exposes ``/metrics`` on
    ``metrics_host`` and registers it in Redis for Prometheus discovery.
    """

    redis_url: str
    prefix: str = "kemu:"
    config_path: str | None = None
    config: dict[str, Any] | None = None
    clock_speed: float = 1.0
    clock_start: float | None = None
    serve_metrics: bool = False
    metrics_host: str | None = None  # None: $KEMU_METRICS_HOST (emulator.metrics.bind_host)
    tune_gc: bool = False
    labels: dict[str, str] = field(default_factory=dict)


class SchedulerHost:
    """The schedulers ``options`` describe, over one store connection and one informer factory."""

    def __init__(self, settings: HostSettings, options: list[SchedulerOptions]) -> None:
        if not options:
            raise ValueError("a scheduler host needs at least one scheduler")
        self.settings = settings
        self.options = options
        self.store: Store | None = None
        self.core: ServerCore | None = None
        self.factory: SharedInformerFactory | None = None
        self.schedulers: list[Scheduler] = []
        self.metrics_address: str | None = None
        self._targets: list[Any] = []
        self._transport: HTTPTransport | None = None

    def configuration(self) -> SchedulerConfiguration:
        registry = in_tree_registry()
        if self.settings.config_path:
            return load_configuration(self.settings.config_path, validate_registry=registry)
        return parse_configuration(self.settings.config or {}, validate_registry=registry)

    def start(self, sync_timeout: float = 120.0) -> SchedulerHost:
        """Connect, build the schedulers, sync the informers, start scheduling; raises if the sync times out."""
        s = self.settings
        if s.tune_gc:
            gctune.tune_for_caches()
        config = self.configuration()
        self.store = Store.connect(s.redis_url, StoreConfig(prefix=s.prefix))
        clock = SystemClock(s.clock_speed, s.clock_start)
        self.core = ServerCore(self.store, clock)
        self.factory = SharedInformerFactory(self.store, clock=clock)
        registry = in_tree_registry()
        if config.extenders:
            # One pooled HTTP client for every scheduler of the host: extenders are called each cycle.
            self._transport = HTTPTransport()
        self.schedulers = [
            Scheduler(self.core, config, registry=registry, clock=clock, options=opts,
                      extender_transport=self._transport).attach(self.factory)
            for opts in self.options]
        self.factory.start()
        deadline = time.monotonic() + sync_timeout
        synced = self.factory.wait_for_cache_sync(sync_timeout)
        if not all(synced.values()):
            raise TimeoutError(f"scheduler informers did not sync within {sync_timeout:g} s")
        while not all(sched.has_synced() for sched in self.schedulers):
            if time.monotonic() > deadline:
                raise TimeoutError(f"scheduler handlers did not sync within {sync_timeout:g} s")
            time.sleep(0.01)  # handler registrations report sync by polling, as client-go's do
        if s.tune_gc:
            gctune.freeze_synced_caches()  # the synced caches are long-lived
        for sched in self.schedulers:
            sched.start()
        if s.serve_metrics:
            self._serve_metrics()
        return self

    def _serve_metrics(self) -> None:
        from emulator.metrics import TargetRegistration, serve

        assert self.store is not None
        host, port = serve(self.settings.metrics_host, 0)
        self.metrics_address = f"{host}:{port}"
        instance = "+".join(sched.name for sched in self.schedulers)
        labels = {"component": "scheduler", **self.settings.labels}
        self._targets.append(TargetRegistration(self.store.redis, instance, self.metrics_address, labels,
                                                prefix=self.settings.prefix).start())

    def stop(self) -> None:
        for target in self._targets:
            target.stop()
        self._targets = []
        for sched in self.schedulers:
            sched.stop()
        if self.factory is not None:
            self.factory.shutdown()
            self.factory = None
        if self.store is not None:
            self.store.close()
            self.store = None
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def stats(self) -> list[dict[str, Any]]:
        threads = thread_cpu_seconds()
        return [{"name": sched.name, **sched.snapshot_stats(), "thread_cpu_seconds": threads}
                for sched in self.schedulers]

    def samples(self) -> list[dict[str, list[float]]]:
        """Per scheduler, every attempt latency and SLI duration kept (``keep_samples``)."""
        return [{"attempt_seconds": list(sched.stats.attempt_seconds), "sli_seconds": list(sched.stats.sli_seconds)}
                for sched in self.schedulers]

    def consistency(self) -> list[dict[str, Any]]:
        """Each scheduler's cache compared with the store (empty lists: consistent)."""
        return [{"name": sched.name, **sched.check_consistency().as_dict()} for sched in self.schedulers]
