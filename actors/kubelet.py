"""The kubelet shard's Ray actor: a process and a tick loop around :class:`emulator.kubelet.shard.KubeletShard`.

All behaviour lives in the shard (``emulator/kubelet/shard.py``); this shell
only decides where it runs and when it ticks:

* ``__init__`` connects to Redis, builds the cluster clock from the
  launcher's reading (cluster time ``clock_start`` at wall time
  ``clock_wall``, ``clock_speed``: every process computes the same cluster
  time), starts the shard (its informers live in this actor's process, with
  the process's one watch multiplexer) and a **tick thread**: one tick per
  ``tick_interval`` of cluster time, i.e. ``tick_interval / speed`` wall
  seconds, catching up at once when a tick overran - and a **heartbeat
  thread** renewing the node leases every tick interval on its own, so a tick
  busy with thousands of new pods never delays a heartbeat (upstream the
  lease controller is its own goroutine too). It also serves this
  process's ``/metrics`` and registers the scrape target in Redis.
* Actor methods (``ready``, ``health``, ``stop``) run on Ray's method thread
  and only read counters, so a health check never waits for a tick;
  ``add_node`` / ``remove_node`` (a cloud provider's instances coming and going,
  e.g. the Cluster Autoscaler's) take the shard's lock, so they wait for the
  tick under way and then register or remove the node at once.
* A restarted actor (Ray restarts it after a crash or ``ray.kill(...,
  no_restart=False)``: the launcher sets ``max_restarts``) runs ``__init__``
  again with the same spec: a new shard object for the same index re-lists its
  nodes and pods and carries on (see the shard's "Recovery").

Memory: a Ray actor costs ~49 MiB before it holds anything (DESIGN.md), so
one actor hosts hundreds or thousands of nodes; the launcher places a handful.
The process hosts many cached objects, so the collector thresholds are raised
as the informers' docs recommend.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import ray

from emulator import gctune
from emulator import metrics as metrics_plumbing
from emulator.clock import SystemClock
from emulator.kubelet.nodes import pool_nodes
from emulator.kubelet.shard import KUBELET_STORE_RETRIES, KubeletShard, kubelet_shard_config
from emulator.server.core import ServerCore
from emulator.store.store import Store, StoreConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShardSpec:
    """Everything a shard actor needs, plain data so Ray can ship it (and replay it on restart)."""

    redis_url: str
    shard_index: int
    shards: int
    prefix: str = "kemu:"
    stream_cap: int = 200_000
    node_shards: int = 16
    kubelet: dict[str, Any] = field(default_factory=dict)  # the `kubelet` config key
    pools: list[dict[str, Any]] = field(default_factory=list)  # node pools
    clock_speed: float = 1.0
    clock_start: float | None = None
    clock_wall: float | None = None
    serve_metrics: bool = True
    metrics_host: str | None = None  # None: $KEMU_METRICS_HOST (emulator.metrics.bind_host)

    def clock(self) -> SystemClock:
        if self.clock_start is None or self.clock_wall is None:
            return SystemClock(self.clock_speed)
        return SystemClock(self.clock_speed, start=self.clock_start + (time.time() - self.clock_wall) *
                           self.clock_speed)


class KubeletShardActor:
    """Ray actor (wrapped by :data:`KubeletShardRemote`); see the module docstring."""

    def __init__(self, spec: ShardSpec) -> None:
        gctune.tune_for_caches()
        self.spec = spec
        self.incarnation = uuid.uuid4().hex[:12]
        self.started_wall = time.time()
        self.clock = spec.clock()
        self.store = Store.connect(spec.redis_url, StoreConfig(prefix=spec.prefix, stream_cap=spec.stream_cap,
                                                               node_shards=spec.node_shards,
                                                               retries=KUBELET_STORE_RETRIES))
        self.core = ServerCore(self.store, self.clock)
        config = kubelet_shard_config(spec.kubelet, spec.pools)
        self.shard = KubeletShard(self.core, spec.shard_index, spec.shards, config, self.clock)
        self.shard.start()
        # Whether the first tick has pool nodes of this shard to register (what ready() waits for).
        self._registers_nodes = any(self.shard.owns(pool.node_name(i)) for pool, i, _ in
                                    pool_nodes(config.pools))
        self._interval = config.tick_interval / self.clock.speed
        self._stop = threading.Event()
        self._errors = 0
        self._last_error = ""
        self._last_tick_wall = 0.0
        self._target: metrics_plumbing.TargetRegistration | None = None
        if spec.serve_metrics:
            host, port = metrics_plumbing.serve(spec.metrics_host, 0)
            self._target = metrics_plumbing.TargetRegistration(
                self.store.redis, f"kubelet-shard-{spec.shard_index}", f"{host}:{port}",
                {"component": "kubelet", "job": "kemu-kubelet", "shard": str(spec.shard_index)},
                prefix=spec.prefix).start()
        self._thread = threading.Thread(target=self._run, name=f"kubelet-shard-{spec.shard_index}", daemon=True)
        self._thread.start()
        self._heartbeat = threading.Thread(target=self._beat, name=f"kubelet-lease-{spec.shard_index}", daemon=True)
        self._heartbeat.start()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.shard.tick()
                self._last_tick_wall = time.time()
            except Exception as e:  # keep ticking: one bad tick must not stop every node's heartbeat
                self._errors += 1
                self._last_error = f"{type(e).__name__}: {e}"
                log.exception("kubelet shard %d: tick failed", self.spec.shard_index)
            next_at += self._interval
            delay = next_at - time.monotonic()
            if delay < 0:
                next_at = time.monotonic()  # overran: tick again at once, do not try to catch up tick by tick
                continue
            self._stop.wait(delay)

    def _beat(self) -> None:
        """Lease renewals on their own thread: a tick busy with thousands of new pods must not delay them."""
        while not self._stop.wait(self._interval):
            try:
                self.shard.heartbeat()
            except Exception as e:
                self._errors += 1
                self._last_error = f"heartbeat: {type(e).__name__}: {e}"
                log.exception("kubelet shard %d: heartbeat failed", self.spec.shard_index)

    def ready(self) -> dict[str, Any]:
        """Returns once the shard's nodes are registered (it has ticked once), at once for a shard that has
        no pool nodes to register (started and synced in ``__init__`` is all it needs): the health report."""
        deadline = time.monotonic() + 60
        while (self.shard.stats.ticks == 0 and self._registers_nodes and time.monotonic() < deadline
               and self._thread.is_alive()):
            self._stop.wait(0.01)
        return self.health()

    def health(self) -> dict[str, Any]:
        report = self.shard.health()
        report.update({"pid": os.getpid(), "incarnation": self.incarnation, "tickThreadAlive": self._thread.is_alive(),
                       "tickErrors": self._errors, "lastError": self._last_error,
                       "lastTickAgeSeconds": round(time.time() - self._last_tick_wall, 3) if self._last_tick_wall
                       else None})
        return report

    def add_node(self, node: dict[str, Any], index: int | None = None) -> dict[str, Any]:
        """Register a node with this shard now (:meth:`KubeletShard.add_node`); returns its Node object."""
        return self.shard.add_node(node, index)

    def remove_node(self, name: str) -> bool:
        """Take a node away now (:meth:`KubeletShard.remove_node`); False if it did not exist."""
        return self.shard.remove_node(name)

    def stop(self) -> bool:
        self._stop.set()
        self._thread.join(30)
        self._heartbeat.join(30)
        if self._target is not None:
            self._target.stop()
        self.shard.stop()
        self.store.close()
        return True


# The remote class; the launcher sets placement and restart options per actor.
KubeletShardRemote = ray.remote(KubeletShardActor)
