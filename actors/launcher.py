"""Bring kubelet shard actors up on Ray, keep them running, stop them.

:class:`KubeletLauncher` is what ``kemu up --nodes N --kubelet-shards K``
runs (through :func:`kubelet_runner`, which :class:`emulator.cluster.LocalCluster`
is given by the ``kemu`` entry point in :mod:`actors.cli`):

1. **Ray.** With ``ray_address`` it joins that cluster (``ray.init(address=...)``;
   Ray 2.60's token authentication then needs the cluster's token, which Ray
   reads from ``RAY_AUTH_TOKEN`` / ``RAY_AUTH_TOKEN_PATH`` / ``~/.ray/auth_token``
   as usual). Without one it starts a private local instance, kept light:
   ``num_cpus`` (default 2), no dashboard, a 75 MiB object store (the actors
   exchange only small reports), no log forwarding, and workers at nice 0
   (Ray's default, 15, starves them next to the driver and Redis). Ray 2.60 turns token
   authentication on for new local clusters and would otherwise write a token
   to ``~/.ray/auth_token``; kemu instead generates one per launch and hands it
   to Ray and its child processes through ``RAY_AUTH_MODE=token`` /
   ``RAY_AUTH_TOKEN`` (so nothing is left behind and two launches never share
   a token). The driver process has usually imported Ray already, and Ray
   caches the auth mode at import: the cached config and token are refreshed
   after setting them (the same two calls Ray's own ``ray.init`` makes when it
   enables token auth), otherwise the driver's first RPC is refused.
2. **Placement.** ``K`` actors named ``kemu-kubelet-<i>`` in Ray namespace
   ``kemu``, ``num_cpus=0`` (they share the CPUs with Redis and the API
   server; a reservation would only stop the K-th actor from being placed on a
   2-core machine) and ``scheduling_strategy="SPREAD"`` so a multi-machine Ray
   cluster spreads them. Shard ``i`` of ``K`` hosts the nodes whose store shard
   ``s`` satisfies ``s % K == i`` (so K may not exceed the store's
   ``node_shards``).
3. **Restarts.** ``max_restarts=-1``: Ray restarts a dead actor (process crash,
   ``ray.kill(actor, no_restart=False)``) with the same spec, and the new shard
   recovers its nodes and pods from the store. :meth:`KubeletLauncher.health`
   reports each actor's incarnation, ticks and lease statistics.
4. **Stop.** Each actor's ``stop`` (its tick thread, informers, metrics target),
   then ``ray.kill``; a Ray instance the launcher started is shut down. Under
   ``kemu up`` its daemons are recorded in ``$KEMU_HOME/processes`` as they start
   (:mod:`emulator.processes`), so ``kemu down`` stops them even after a ``kill -9``
   of ``kemu up``.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import ray

from actors.kubelet import KubeletShardRemote, ShardSpec
from emulator import processes

log = logging.getLogger(__name__)

RAY_NAMESPACE = "kemu"
ACTOR_NAME = "kemu-kubelet-{}"
_MIN_OBJECT_STORE = 75 * 1024 * 1024  # Ray's minimum object store size
NODES_PER_SHARD = 1250  # the automatic shard count: one shard per this many nodes


def auto_shards(total_nodes: int, node_shards: int) -> int:
    """How many kubelet shards to run for ``total_nodes`` when the user did not say."""
    return max(1, min(node_shards, math.ceil(total_nodes / NODES_PER_SHARD)))


def _enable_local_token_auth() -> None:
    """A fresh token for a private local Ray instance, given to Ray through the environment (see module docs)."""
    if os.environ.get("RAY_AUTH_MODE") is not None:
        return  # the user chose (token with their own token, or disabled): respect it
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _loopback_only() -> None:
    """Make a private local Ray instance use 127.0.0.1 instead of the host's network address.

    Nothing outside this machine needs to reach it, so its processes should talk over loopback.
    Ray maps an explicit 127.0.0.1 back to the host address on Linux; its single-machine mode
    (the one it uses on macOS and Windows, switched by ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``)
    keeps loopback. The variable is read when Ray is imported, so it is set for the processes Ray
    starts and the already-imported constant is updated for this one (a private Ray attribute,
    like the auth cache above: check it on a Ray upgrade).
    """
    if os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") is not None:
        return  # the user chose
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False


CLIENT_CONNECT_ATTEMPTS = 5


def _join(address: str) -> None:
    """Join an existing Ray cluster: ``HOST:PORT`` (this machine is one of its nodes) or ``ray://HOST:PORT``.

    ``ray://`` is Ray Client, what a driver on a machine (container) without a raylet uses
    (``kemu ray-node --head`` serves it). Its proxy starts one server process per client, and in Ray 2.60
    that start sometimes fails at once (the server dies in ``fork`` while the proxy's gRPC threads run,
    ray-project/ray#63202: "Initialization failure from server"); a new connection gets a new server, so
    a failed attempt is retried a few times before giving up.
    """
    attempts = CLIENT_CONNECT_ATTEMPTS if address.startswith("ray://") else 1
    for attempt in range(1, attempts + 1):
        try:
            ray.init(address=address, namespace=RAY_NAMESPACE, log_to_driver=False, configure_logging=False)
            return
        except ConnectionError as e:  # ConnectionAbortedError included
            if attempt == attempts:
                raise
            log.warning("Ray Client connection to %s failed (attempt %d of %d), retrying: %s", address, attempt,
                        attempts, str(e).splitlines()[0])
            if ray.is_initialized():
                ray.shutdown()
            time.sleep(0.5 * attempt)  # the proxy on the head frees the dead server's port meanwhile


def _normal_priority() -> None:
    """Start a private local Ray instance's workers at nice 0 instead of Ray's default 15.

    Ray lowers its worker processes' priority (``RAY_worker_niceness``, default 15) so that they yield the
    CPU to its own daemons; here the workers *are* the emulator (kubelet shards, schedulers) and they share
    the cores with the driver and Redis, which run at nice 0. At nice 15 a contended core gives them about
    1/28 of the time (CFS weights 36 vs 1024): the scheduler actor's threads spent more time runnable-but-
    waiting than running (a 5,000-node, 500 pods/s trial: scheduling thread 0.30 core on CPU, 0.58 core in
    the run queue), and a preempted thread holding the GIL stalls the whole process. Like
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``, the variable is inherited by the processes Ray starts (the raylet
    applies it to the workers it spawns); a value the user set wins.
    """
    os.environ.setdefault("RAY_worker_niceness", "0")


def init_ray(address: str | None = None, *, num_cpus: int | None = None) -> bool:
    """Connect to Ray (``address``) or start a light local instance; True if this call started one."""
    if ray.is_initialized():
        return False
    if address:
        _join(address)
        return False
    _enable_local_token_auth()
    _loopback_only()
    _normal_priority()
    # address="local": always a private instance, never a Ray cluster that happens to run on this machine
    # (ray.init() without an address would join the one named in /tmp/ray/ray_current_cluster).
    ray.init(address="local", num_cpus=num_cpus or 2, num_gpus=0, include_dashboard=False,
             object_store_memory=_MIN_OBJECT_STORE, namespace=RAY_NAMESPACE, log_to_driver=False,
             configure_logging=False)
    _record_ray_processes()
    return True


def _record_ray_processes() -> None:
    """Record the local Ray instance's daemons (GCS, raylet, log monitor ...) in the process table of the
    ``kemu up`` running this driver (:mod:`emulator.processes`), so ``kemu down`` stops them even if this
    process dies. Their workers are the raylet's children; the daemons are started with Ray's own
    parent-death signal too. ``_global_node.all_processes`` is private Ray state: check it on a Ray upgrade."""
    table = processes.active()
    node = getattr(ray._private.worker, "_global_node", None)
    if table is None or node is None:
        return
    for kind, infos in getattr(node, "all_processes", {}).items():
        for i, info in enumerate(infos):
            table.record(f"ray-{kind}" + (f"-{i}" if i else ""), info.process.pid, part="the local Ray instance")


@dataclass
class KubeletLauncher:
    """K kubelet shard actors for one cluster (see the module docstring)."""

    redis_url: str
    shards: int
    kubelet: dict[str, Any] = field(default_factory=dict)
    pools: list[dict[str, Any]] = field(default_factory=list)
    prefix: str = "kemu:"
    stream_cap: int = 200_000
    node_shards: int = 16
    clock_speed: float = 1.0
    clock_start: float | None = None
    clock_wall: float | None = None
    ray_address: str | None = None
    num_cpus: int | None = None
    serve_metrics: bool = True
    actors: list[Any] = field(default_factory=list)
    _started_ray: bool = False

    def specs(self) -> list[ShardSpec]:
        return [ShardSpec(self.redis_url, i, self.shards, prefix=self.prefix, stream_cap=self.stream_cap,
                          node_shards=self.node_shards, kubelet=dict(self.kubelet), pools=list(self.pools),
                          clock_speed=self.clock_speed, clock_start=self.clock_start, clock_wall=self.clock_wall,
                          serve_metrics=self.serve_metrics) for i in range(self.shards)]

    def start(self, timeout: float = 180.0) -> list[dict[str, Any]]:
        """Start Ray if needed, place the actors, wait until each has ticked once; their health reports."""
        if not 1 <= self.shards <= self.node_shards:
            raise ValueError(f"kubelet shards must be between 1 and node_shards ({self.node_shards}), "
                             f"not {self.shards}")
        self._started_ray = init_ray(self.ray_address, num_cpus=self.num_cpus)
        for spec in self.specs():
            actor = KubeletShardRemote.options(
                name=ACTOR_NAME.format(spec.shard_index), namespace=RAY_NAMESPACE, max_restarts=-1,
                max_task_retries=-1, num_cpus=0, scheduling_strategy="SPREAD", get_if_exists=False,
            ).remote(spec)
            self.actors.append(actor)
        try:
            return ray.get([a.ready.remote() for a in self.actors], timeout=timeout)
        except BaseException:
            self.stop()
            raise

    def health(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        return ray.get([a.health.remote() for a in self.actors], timeout=timeout)

    def stop(self, timeout: float = 30.0) -> None:
        if self.actors:
            try:
                ray.get([a.stop.remote() for a in self.actors], timeout=timeout)
            except Exception as e:  # a dead or stuck actor must not keep the others alive
                log.warning("kubelet actors did not all stop cleanly: %s", e)
            for actor in self.actors:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception as e:
                    log.debug("ray.kill of a kubelet actor: %s", e)
            self.actors = []
        if self._started_ray and ray.is_initialized():
            ray.shutdown()
            self._started_ray = False

    def crash(self, index: int, timeout: float = 60.0) -> float:
        """kill -9 shard ``index`` (chaos): Ray restarts it; the seconds until the new incarnation answered."""
        old = ray.get(self.actors[index].ready.remote(), timeout=timeout)["incarnation"]
        t0 = time.monotonic()
        ray.kill(self.actors[index], no_restart=False)
        self.wait_restarted(index, old, timeout)
        return time.monotonic() - t0

    def wait_restarted(self, index: int, old_incarnation: str, timeout: float = 60.0) -> dict[str, Any]:
        """Wait until actor ``index`` answers as a new incarnation (after a crash); its health report."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                report = ray.get(self.actors[index].ready.remote(), timeout=max(1.0, deadline - time.monotonic()))
                if report["incarnation"] != old_incarnation:
                    return report
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                time.sleep(0.1)  # the actor is restarting in another process: nothing local to wait on
            if time.monotonic() > deadline:
                raise TimeoutError(f"kubelet actor {index} did not come back within {timeout} s")


def kubelet_runner(launch: Any) -> KubeletLauncher:
    """The :class:`emulator.cluster.KubeletRunnerFactory` the ``kemu`` entry point gives LocalCluster."""
    cfg = launch.config
    pools = list(cfg.node_pools or [])
    if cfg.nodes:
        pools.insert(0, {"name": "node", "count": int(cfg.nodes), **({"instance_type": cfg.instance_type}
                                                                      if cfg.instance_type else {})})
    total = sum(int(p.get("count", 0)) for p in pools)
    shards = cfg.kubelet_shards or auto_shards(total, cfg.node_shards)
    return KubeletLauncher(launch.redis_url, shards, kubelet=dict(cfg.kubelet or {}), pools=pools, prefix=cfg.prefix,
                           stream_cap=cfg.stream_cap, node_shards=cfg.node_shards, clock_speed=cfg.clock_speed,
                           clock_start=launch.clock_start, clock_wall=launch.clock_wall, ray_address=cfg.ray_address,
                           num_cpus=cfg.ray_num_cpus)
