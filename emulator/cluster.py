"""A local kemu cluster's lifecycle: start the parts, report on them, stop them.

:class:`LocalCluster` brings up, in order, Redis (embedded unless a URL is
given), the store with its bootstrap objects, and the Kubernetes HTTP API
server (:mod:`emulator.apiserver`, a child process running uvicorn, with a
fresh bearer token; :meth:`LocalCluster.write_kubeconfig` writes the
kubeconfig ``kemu up`` hands to kubectl), and ``controller_managers``
controller managers (leader-elected; :mod:`emulator.controllers.manager`);
kubelet shards when there are nodes to run (through a runner the caller
injects - ``emulator`` never imports Ray; the ``kemu`` entry point in
``actors/cli.py`` passes :func:`actors.launcher.kubelet_runner`); later
components (schedulers) are added to :meth:`LocalCluster.start` and stopped
in reverse order by :meth:`LocalCluster.stop`.

**Supervision.** :meth:`LocalCluster.supervised_parts` are the child
processes it started (redis-server, the API server, and with
``controller_processes`` - what ``kemu up`` asks for - one process per
controller manager, :mod:`emulator.controllers.process`), which ``kemu up``
hands to :class:`emulator.supervisor.Supervisor` to restart when they die.
``durability`` "strict" runs the embedded Redis with ``appendfsync always``.

A detached cluster is the foreground ``kemu up`` running in a background
process; it writes a state file (``$KEMU_HOME/cluster.json``) once it is
ready, which ``kemu status`` and ``kemu down`` read.

**Failed starts.** Given ``records`` (a :class:`~emulator.processes.ProcessTable`;
``kemu up`` passes one), each child process is recorded the moment it is
spawned, and :attr:`LocalCluster.starting` names the part being started
(a key of :data:`PARTS`, also written to the records for whoever waits). A
start that fails or is interrupted stops the parts already up, in reverse
order, and a failing stop of one part never keeps the next running.
:class:`StartGuard` is how ``kemu up`` aborts a start: SIGINT/SIGTERM raise
:class:`StartInterrupted` in the main thread, and its watchdog turns a child
that was ready and exited (:meth:`LocalCluster.exited_part`) into the same
abort.

**Components.** The same lifecycle runs one *part* of a cluster whose parts
live in several processes (``docker-compose.yml``: one container each),
because every part meets the others only in Redis: given an external
``redis_url``, a ``LocalCluster`` with ``api_enabled`` off, no controller
managers and only ``schedulers`` is a scheduler process, one with only an
API server is an API server replica, and so on. Each part bootstraps the
store (idempotent: system namespaces and PriorityClasses are created by
whichever part comes first) and keeps its own clock at ``clock_speed`` 1 from
wall time, which is why parts on different machines agree on cluster time
only at speed 1. API server replicas share one bearer token through
``api_token_file``; the kubeconfig beside it names ``api_advertise_url``.
A ``kemu up`` process keeps its state file in ``$KEMU_HOME``, so several
parts on one host each need their own ``KEMU_HOME`` (containers have theirs).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from emulator.clock import SystemClock
from emulator.config import Config, ConfigError, kemu_home
from emulator.processes import log_tail
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig, wait_for_redis
from emulator.store.store import Store, StoreConfig

if TYPE_CHECKING:
    from emulator.apiserver.process import ApiServerProcess
    from emulator.controllers.manager import ControllerManager, ManagerConfig
    from emulator.controllers.process import ControllerManagerProcess
    from emulator.metrics import MetricsEndpoint
    from emulator.processes import ProcessTable
    from emulator.supervisor import Part

log = logging.getLogger(__name__)

# The parts of a cluster in start order, as messages name them (LocalCluster.starting holds a key).
PARTS = {"redis": "Redis", "controller-managers": "the controller managers", "api-server": "the API server",
         "kubelets": "the kubelet shards", "schedulers": "the schedulers", "metrics": "the metrics endpoint",
         "store": "the store connection"}
# Set to a key of PARTS, the start holds before that part forever: a part that never becomes ready, for
# the tests of `kemu up`'s failure paths (tests/integration/test_cli_cleanup.py).
TEST_HANG_ENV = "KEMU_TEST_HANG_PART"


@dataclass
class ClusterState:
    """What ``kemu status`` / ``kemu down`` need to find a detached cluster."""

    pid: int
    redis_url: str
    embedded_redis: bool
    data_dir: str
    started_at: float
    api_url: str | None = None
    kubeconfig: str | None = None

    @staticmethod
    def path() -> Path:
        return kemu_home() / "cluster.json"

    def write(self) -> None:
        p = self.path()
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(p)

    @classmethod
    def read(cls) -> ClusterState | None:
        try:
            return cls(**json.loads(cls.path().read_text()))
        except (OSError, ValueError, TypeError):
            return None

    @classmethod
    def clear(cls) -> None:
        cls.path().unlink(missing_ok=True)


def running_redis_url() -> str | None:
    """The Redis of this KEMU_HOME's detached cluster while its ``kemu up`` is alive, else None."""
    from emulator.processes import pid_alive

    state = ClusterState.read()
    return state.redis_url if state is not None and pid_alive(state.pid) else None


DEFAULT_API_PORT = 6443  # kube-apiserver's customary secure port


@dataclass(frozen=True)
class KubeletLaunch:
    """What a kubelet runner needs from the cluster: Redis, the settings, one reading of the cluster clock."""

    redis_url: str
    config: Config
    clock_start: float  # cluster time ...
    clock_wall: float  # ... at this wall time (every process derives the same cluster time from the pair)


class KubeletRunner(Protocol):
    """Runs the kubelet shards somewhere (``actors.launcher.KubeletLauncher`` runs them as Ray actors)."""

    def start(self, timeout: float = ...) -> list[dict[str, Any]]: ...

    def health(self, timeout: float = ...) -> list[dict[str, Any]]: ...

    def stop(self, timeout: float = ...) -> None: ...


# ``emulator`` never imports Ray or ``actors`` (an import contract): whoever composes the program
# (the ``kemu`` entry point, ``actors/cli.py``) hands LocalCluster a factory for the runner.
KubeletRunnerFactory = Callable[[KubeletLaunch], KubeletRunner]
# Schedulers the same way (``actors.scheduler.scheduler_runner`` runs them as Ray actors); the launch
# facts they need are the kubelets' (Redis, settings, one clock reading), so they share KubeletLaunch.
SchedulerRunner = KubeletRunner
SchedulerRunnerFactory = Callable[[KubeletLaunch], SchedulerRunner]
# Controller managers the same way, when ``controllers_on_ray`` asks for them elsewhere
# (``actors.controllers.controller_runner``: one Ray actor per manager); otherwise they run in-process.
ControllerRunner = KubeletRunner
ControllerRunnerFactory = Callable[[KubeletLaunch], ControllerRunner]


class InProcessSchedulers:
    """The scheduler runner when none is injected: the replicas as threads of this process (one host).

    Fine for tests and small clusters; the ``kemu`` entry point runs them as Ray actors instead, each
    with its own process (and core).
    """

    def __init__(self, launch: KubeletLaunch) -> None:
        self.launch = launch
        self.host: Any = None

    def start(self, timeout: float = 120.0) -> list[dict[str, Any]]:
        from emulator.scheduler.scheduler import SchedulerOptions
        from emulator.scheduler_host import HostSettings, SchedulerHost

        cfg = self.launch.config
        n = cfg.scheduler_count()
        settings = HostSettings(self.launch.redis_url, cfg.prefix, config_path=cfg.scheduler_config,
                                clock_speed=cfg.clock_speed,
                                clock_start=self.launch.clock_start + (time.time() - self.launch.clock_wall)
                                * cfg.clock_speed)
        self.host = SchedulerHost(settings, [SchedulerOptions(name=f"kemu-scheduler-{i}", replica=i, replicas=n,
                                                              seed=i) for i in range(n)]).start(timeout)
        return self.health()

    def health(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        return self.host.stats() if self.host is not None else []

    def stop(self, timeout: float = 30.0) -> None:
        if self.host is not None:
            self.host.stop()
            self.host = None


class LocalCluster:
    def __init__(self, config: Config, *, kubelets: KubeletRunnerFactory | None = None,
                 schedulers: SchedulerRunnerFactory | None = None,
                 controllers: ControllerRunnerFactory | None = None, records: ProcessTable | None = None,
                 controller_processes: bool = False) -> None:
        self.config = config
        self.records = records
        # Controller managers as child processes (``kemu up``: supervised, see emulator.supervisor), not threads.
        self.controller_processes = controller_processes
        self.starting: str | None = None  # the part being started (a key of PARTS), None once all are up
        self.starting_log: Path | None = None
        self.stopping = False
        self._kubelet_factory = kubelets
        self.kubelets: KubeletRunner | None = None
        self._scheduler_factory = schedulers
        self._controller_factory = controllers
        self.controller_runner: ControllerRunner | None = None
        self.schedulers: SchedulerRunner | None = None
        self.redis: EmbeddedRedis | None = None
        self.redis_url: str | None = None
        self.store: Store | None = None
        self.core: ServerCore | None = None
        self.api: ApiServerProcess | None = None
        self.api_url: str | None = None
        self.api_token: str | None = None
        self.api_ca: bytes | None = None
        self.user_tokens: dict[str, str] = {}
        self.controller_managers: list[ControllerManager] = []
        self.manager_processes: list[ControllerManagerProcess] = []
        self.metrics: MetricsEndpoint | None = None

    def start(self) -> ServerCore:
        """Start the parts in order; if one fails (or the start is interrupted), stop those already started."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        assert self.core is not None
        return self.core

    def _start(self) -> None:
        cfg = self.config
        if cfg.redis_url:
            self._begin("redis")
            wait_for_redis(cfg.redis_url, timeout=cfg.redis_timeout)
            self.redis_url = cfg.redis_url
        else:
            redis_config = RedisServerConfig(data_dir=Path(cfg.data_dir), port=cfg.redis_port,
                                             appendfsync=APPENDFSYNC[cfg.durability])
            self.redis = EmbeddedRedis(redis_config, on_spawn=self._recorder("redis-server", "redis"))
            self._begin("redis", self.redis.log_path)
            self.redis_url = self.redis.start()
        self.store = Store.connect(self.redis_url, StoreConfig(prefix=cfg.prefix, stream_cap=cfg.stream_cap,
                                                               node_shards=cfg.node_shards))
        self.core = ServerCore(self.store, SystemClock(cfg.clock_speed))
        self.core.bootstrap()
        self._begin("controller-managers")
        self._start_controllers()
        if cfg.metrics:
            self._serve_metrics()
        if cfg.api_enabled:
            self._begin("api-server", self._api_log())
            self._start_api_server()
        if self.manager_processes:
            self._begin("controller-managers", self.manager_processes[0].log_path)
            for manager in self.manager_processes:
                manager.wait_ready()
        if cfg.wants_kubelets():
            self._begin("kubelets")
            self._start_kubelets()
        if cfg.scheduler_count():
            self._begin("schedulers")
            self._start_schedulers()
        self.starting = None
        if self.records is not None:
            self.records.note_ready()

    def _begin(self, part: str, log: Path | None = None) -> None:
        """``part`` (a key of :data:`PARTS`) starts now: say so (in the records too, for whoever waits)."""
        self.starting, self.starting_log = part, log
        if self.records is not None:
            self.records.note_starting(part, log)
        if os.environ.get(TEST_HANG_ENV) == part:
            # A part that never becomes ready, for the tests of `kemu up`'s failure paths. A signal ends
            # the wait (POSIX lock waits are interruptible), so SIGTERM and Ctrl-C still abort the start.
            threading.Event().wait()

    def _recorder(self, name: str, part: str) -> Callable[[int], None] | None:
        """The ``on_spawn`` callback that records a child process in :attr:`records` (None: no records)."""
        records = self.records
        if records is None:
            return None
        log = {"redis": lambda: self.redis.log_path if self.redis else None, "api-server": self._api_log,
               "controller-managers": lambda: self._manager_log(name)}[part]
        return lambda pid: records.record(name, pid, part=PARTS[part], log=log())

    def _manager_log(self, name: str) -> Path:
        return Path(self.config.data_dir).parent / f"{name}.log"

    def _api_log(self) -> Path:
        return Path(self.config.data_dir).parent / "apiserver.log"

    def exited_part(self) -> tuple[str, str, Path | None] | None:
        """A child process that had become ready and has exited since: (part, what happened, its log)."""
        if self.redis is not None and self.redis_url is not None and not self.redis.running:
            return "redis", "redis-server exited", self.redis.log_path
        api = self.api
        proc = api.proc if api is not None else None
        if api is not None and proc is not None and self.api_url is not None and proc.poll() is not None:
            return "api-server", f"the API server (pid {proc.pid}) exited with code {proc.returncode}", api.log_path
        for manager in self.manager_processes:
            code = manager.exit_status()
            if code is not None:
                return ("controller-managers", f"controller manager {manager.name} exited with code {code}",
                        manager.log_path)
        return None

    def supervised_parts(self) -> list[Part]:
        """The child processes this cluster started, for :class:`emulator.supervisor.Supervisor` to restart."""
        from emulator.supervisor import ApiServerPart, RedisPart

        parts: list[Part] = []
        if self.redis is not None:
            parts.append(RedisPart(self.redis))
        if self.api is not None:
            parts.append(ApiServerPart(self.api))
        parts.extend(self.manager_processes)
        return parts

    def _start_schedulers(self) -> None:
        """``scheduler_count()`` competing scheduler replicas, through the injected runner (Ray actors under
        ``kemu``) or in this process."""
        assert self.redis_url is not None and self.core is not None
        factory = self._scheduler_factory or InProcessSchedulers
        self.schedulers = factory(KubeletLaunch(self.redis_url, self.config, self.core.clock.now(), time.time()))
        self.schedulers.start()

    def _start_kubelets(self) -> None:
        """Kubelet shards for the configured nodes, through the injected runner (Ray actors under ``kemu``)."""
        if self._kubelet_factory is None:
            raise ConfigError("kubelet shards run as Ray actors: start kemu through its `kemu` command "
                              "(actors/cli.py), or pass LocalCluster a kubelet runner")
        assert self.redis_url is not None and self.core is not None
        self.kubelets = self._kubelet_factory(KubeletLaunch(self.redis_url, self.config, self.core.clock.now(),
                                                            time.time()))
        self.kubelets.start()

    def _start_api_server(self) -> None:
        """The HTTP API server as a child process (its own GIL), sharing Redis and the cluster clock."""
        from emulator.apiserver import kubeconfig
        from emulator.apiserver.process import ApiServerProcess
        from emulator.apiserver.settings import ServerSettings, is_loopback

        cfg = self.config
        assert self.redis_url is not None and self.core is not None
        require = cfg.api_require_token if cfg.api_require_token is not None else not is_loopback(cfg.api_host)
        # Replicas sharing a token file accept one credential, so any of them serves any client.
        self.api_token = (kubeconfig.shared_token(Path(cfg.api_token_file)) if cfg.api_token_file
                          else kubeconfig.generate_token())
        tls: dict[str, str] = {}
        if cfg.api_tls:
            from emulator.apiserver.tls import ensure_certificates

            pki = Path(cfg.api_token_file).with_name("pki") if cfg.api_token_file else kemu_home() / "pki"
            ca, cert, key = ensure_certificates(pki, [cfg.api_host])
            tls = {"tls_cert_file": str(cert), "tls_key_file": str(key), "tls_ca_file": str(ca)}
            self.api_ca = ca.read_bytes()
        if cfg.users_file:
            from emulator.apiserver import users

            assert self.store is not None
            for spec in users.read_users_file(Path(cfg.users_file)):
                self.user_tokens[spec.name] = users.add_user(self.store.redis, cfg.prefix, spec)
        settings = ServerSettings(
            redis_url=self.redis_url, prefix=cfg.prefix, stream_cap=cfg.stream_cap, node_shards=cfg.node_shards,
            host=cfg.api_host, port=DEFAULT_API_PORT if cfg.api_port is None else cfg.api_port, workers=cfg.api_workers,
            token=self.api_token, require_token=require, clock_speed=cfg.clock_speed,
            clock_start=self.core.clock.now(), clock_wall=time.time(), metrics_rules=cfg.metrics_rules,
            prometheus_url=cfg.prometheus_url, authorization_mode=cfg.api_authorization_mode, **tls)
        # Without an explicit port, 6443 if it is free, else any free port: the kubeconfig says which.
        self.api = ApiServerProcess(settings, log_path=self._api_log(), fallback_to_free_port=cfg.api_port is None,
                                    on_spawn=self._recorder("apiserver", "api-server"),
                                    records_home=self.records.home if self.records is not None else None)
        self.api.start()
        self.api_url = kubeconfig.client_url(cfg.api_host, self.api.settings.port, tls=cfg.api_tls)
        if cfg.api_token_file:
            # Written once the server answers, so whoever waits for the file finds a working server.
            kubeconfig.write(self.shared_kubeconfig_path(), cfg.api_advertise_url or self.api_url, self.api_token,
                             ca_pem=self.api_ca, users=self.user_tokens)

    def shared_kubeconfig_path(self) -> Path:
        """The kubeconfig next to ``api_token_file`` (for clients in other processes, containers, machines)."""
        assert self.config.api_token_file is not None
        return Path(self.config.api_token_file).with_name("kubeconfig")

    def write_kubeconfig(self, path: Path | None = None) -> Path:
        """Write a kubeconfig for this cluster's API server (default ``$KEMU_HOME/kubeconfig``)."""
        from emulator.apiserver import kubeconfig

        if self.api_url is None or self.api_token is None:
            raise RuntimeError("the cluster runs no API server (api_enabled is off)")
        return kubeconfig.write(path or kubeconfig.default_path(), self.api_url, self.api_token, ca_pem=self.api_ca,
                                users=self.user_tokens)

    def _start_controllers(self) -> None:
        """``controller_managers`` controller managers (garbage collector, disruption, ReplicaSet, Deployment ...).

        They elect one leader through the ``kube-system/kube-controller-manager`` Lease; the
        others stand by and take over if it stops renewing (see :mod:`emulator.controllers.manager`).
        """
        from emulator.controllers.manager import ControllerManager, ManagerConfig

        assert self.core is not None
        if self.config.node_groups:
            self._declare_node_groups()
        if self.config.controllers_on_ray and self.config.controller_managers:
            if self._controller_factory is None:
                raise ConfigError("controllers_on_ray runs controller managers as Ray actors: start kemu through "
                                  "its `kemu` command (actors/cli.py), or pass LocalCluster a controller runner")
            assert self.redis_url is not None
            self.controller_runner = self._controller_factory(
                KubeletLaunch(self.redis_url, self.config, self.core.clock.now(), time.time()))
            self.controller_runner.start()
            return
        config = ManagerConfig.from_dict(self.config.manager_settings())  # with the cluster-autoscaler's settings
        if self.controller_processes:
            self._start_manager_processes(config)
            return
        self.controller_managers = [ControllerManager(self.core, config).start()
                                    for _ in range(self.config.controller_managers)]

    def _start_manager_processes(self, config: ManagerConfig) -> None:
        """One ``python -m emulator.controllers.process`` per manager, each with a leader-election identity
        of its own that it keeps across restarts (so a restarted leader renews its Lease at once)."""
        import socket
        from dataclasses import asdict, replace

        from emulator.controllers.process import ControllerManagerProcess, ManagerProcessSettings

        assert self.redis_url is not None and self.core is not None
        cfg = self.config
        for i in range(cfg.controller_managers):
            name = f"controller-manager-{i}"
            identity = config.identity or f"{socket.gethostname()}_kemu-{os.getpid()}-{i}"
            settings = ManagerProcessSettings(
                self.redis_url, {**asdict(replace(config, identity=identity)),
                                 "controllers": list(config.controllers), "options": dict(config.options)},
                prefix=cfg.prefix, stream_cap=cfg.stream_cap, node_shards=cfg.node_shards,
                clock_speed=cfg.clock_speed, clock_start=self.core.clock.now(), clock_wall=time.time(),
                serve_metrics=cfg.metrics)
            self.manager_processes.append(ControllerManagerProcess(
                settings, name=name, log_path=self._manager_log(name),
                on_spawn=self._recorder(name, "controller-managers")))
        for manager in self.manager_processes:
            manager.spawn()  # ready is awaited once the API server is up: their interpreters start meanwhile

    def _declare_node_groups(self) -> None:
        """The node groups into the emulated cloud (Redis): new ones start at their initial size, known ones
        (a restart) keep their instances."""
        from emulator.cloud.nodegroups import parse_node_groups
        from emulator.cloud.provider import Cloud

        assert self.core is not None
        Cloud(self.core.store.redis, self.config.prefix).register_groups(parse_node_groups(self.config.node_groups),
                                                                         self.core.clock.now())

    def _serve_metrics(self) -> None:
        """This process's ``/metrics`` (controller managers' workqueues, the cluster-state counts, in-process
        schedulers) as a Prometheus target, labelled with the main thing it hosts."""
        from emulator.metrics import process_instance, serve_and_register

        assert self.store is not None
        cfg = self.config
        if cfg.controller_managers and not self.controller_processes:
            component = "controller-manager"
        elif cfg.scheduler_count() and self._scheduler_factory is None:
            component = "scheduler"  # a compose scheduler part: in-process schedulers, nothing else
        else:
            component = "kemu"
        self.metrics = serve_and_register(self.store.redis, process_instance(component), component,
                                          prefix=cfg.prefix)

    def stop(self) -> None:
        """Stop the parts in reverse order; one failing to stop never keeps the next ones running."""
        self.stopping = True
        try:
            self._stop_parts()
        finally:
            self.stopping = False

    def _stop_parts(self) -> None:
        for part, step in (("schedulers", self._stop_schedulers), ("kubelets", self._stop_kubelets),
                           ("controller-managers", self._stop_controllers), ("metrics", self._stop_metrics),
                           ("api-server", self._stop_api_server), ("store", self._close_store),
                           ("redis", self._stop_redis)):
            try:
                step()
            except Exception:
                log.exception("stopping %s failed; stopping the other parts", PARTS.get(part, part))

    def _stop_schedulers(self) -> None:
        schedulers, self.schedulers = self.schedulers, None
        if schedulers is not None:
            schedulers.stop()

    def _stop_kubelets(self) -> None:
        kubelets, self.kubelets = self.kubelets, None
        if kubelets is not None:
            kubelets.stop()

    def _stop_controllers(self) -> None:
        runner, self.controller_runner = self.controller_runner, None
        managers, self.controller_managers = self.controller_managers, []
        processes, self.manager_processes = self.manager_processes, []
        if runner is not None:
            runner.stop()
        for manager in reversed(managers):
            manager.stop()
        for process in reversed(processes):
            process.stop()
            if self.records is not None:
                self.records.forget(process.name)

    def _stop_metrics(self) -> None:
        metrics, self.metrics = self.metrics, None
        if metrics is not None:
            metrics.stop()

    def _stop_api_server(self) -> None:
        api, self.api = self.api, None
        if api is not None:
            api.stop()
            if self.records is not None:
                self.records.forget("apiserver")

    def _close_store(self) -> None:
        store, self.store = self.store, None
        if store is not None:
            store.close()

    def _stop_redis(self) -> None:
        redis, self.redis = self.redis, None
        if redis is not None:
            redis.stop()
            if self.records is not None:
                self.records.forget("redis-server")

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def state(self) -> ClusterState:
        assert self.redis_url is not None
        return ClusterState(os.getpid(), self.redis_url, self.redis is not None, str(self.config.data_dir),
                            time.time(), api_url=self.api_url)


# Redis's appendfsync for each --durability: "strict" fsyncs every write before it is acknowledged, as
# etcd does; "everysec" (the default) may lose the last second of acknowledged writes if the machine dies.
APPENDFSYNC = {"everysec": "everysec", "strict": "always"}


# ------------------------------------------------- the start of a supervised cluster (`kemu up`)


class StartInterrupted(KeyboardInterrupt):
    """The cluster's start was aborted: by SIGINT / SIGTERM, or because a part that was up exited."""

    def __init__(self, reason: str, signum: int = signal.SIGTERM) -> None:
        super().__init__(reason)
        self.reason = reason
        self.signum = signum


class StartGuard:
    """While the cluster starts, SIGINT and SIGTERM abort the start (:class:`StartInterrupted`, after which
    the cluster stops the parts it started), and a watchdog thread turns a part that exits into the same
    abort. Only the first signal aborts: the stop that follows is never interrupted halfway."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.failure: str | None = None  # set by the watchdog: which part exited, and its log
        self._aborting = False
        self._done = threading.Event()

    def __enter__(self) -> StartGuard:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._abort)
        threading.Thread(target=self._watch, name="kemu-start-watchdog", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()

    def _abort(self, signum: int, _frame: FrameType | None) -> None:
        if self._aborting or self._done.is_set() or self.cluster.stopping:
            return  # already stopping: let the stop finish
        self._aborting = True
        reason = self.failure or f"interrupted ({signal.Signals(signum).name})"
        raise StartInterrupted(reason, signal.SIGTERM if self.failure else signum)

    def _watch(self) -> None:
        while not self._done.wait(0.1):
            exited = self.cluster.exited_part()
            if exited is not None:
                self.failure = exited_message(exited, self.cluster.starting)
                # A real signal, not a flag: it interrupts whatever the main thread is blocked in.
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
                return


def part_name(part: str | None) -> str:
    """How messages name a part (a key of PARTS)."""
    return PARTS.get(part or "", "the cluster")


def exited_message(exited: tuple[str, str, Path | None], starting: str | None) -> str:
    """Which part exited while which was starting, with the exited part's last log lines."""
    _part, what, log = exited
    return f"{what} while {part_name(starting)} {were(starting)} starting" + tail_text(log)


def were(part: str | None) -> str:
    """The verb for a part's name: "the schedulers were", "Redis was"."""
    return "were" if (part or "").endswith("s") else "was"


def tail_text(log: Path | str | None, message: str = "") -> str:
    """The last lines of ``log`` for an error message (nothing if the message already ends with them)."""
    tail = log_tail(log)
    if not tail or tail[-1].strip() in message:
        return ""
    return f"\n  last lines of {log}:\n    " + "\n    ".join(tail)


def object_counts(store: Store) -> dict[str, Any]:
    """Objects per kind and the current resourceVersion, for ``kemu status``."""
    from emulator.api.kinds import all_kinds

    pipe = store.redis.pipeline(transaction=False)
    kinds = all_kinds()
    for kind in kinds:
        pipe.hlen(store.objects_key(kind))
    counts = dict(zip((k.resource for k in kinds), pipe.execute(), strict=True))
    return {"resourceVersion": store.current_rv(), "objects": {k: n for k, n in counts.items() if n}}

