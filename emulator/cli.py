"""The ``kemu`` command line.

Commands: ``up`` (foreground until Ctrl-C, or ``--detach``), ``status``,
``down``, ``kubeconfig`` (the path of the kubeconfig ``up`` wrote), ``run
SCENARIO`` (the main job: a cluster under load, with its summary), ``chaos``
(``stop-kubelet NODE``, ``break-runtime NODE``, ``partition-shard N``,
``restore TARGET|--all``, ``list``: faults for the detached cluster's kubelets,
see :mod:`emulator.chaos`), ``load set TARGET RATE|get`` (load targets'
request rates, :mod:`emulator.load_command`), ``dashboards push`` (the Grafana dashboards into a
Grafana, :mod:`emulator.dashboards`). ``up`` also runs one *component* of a cluster
whose parts share an external Redis (``--no-api-server``, ``--controller-managers
0``, ``--schedulers N``, ``--nodes N``, ``--api-token-file``; see
:mod:`emulator.cluster` and ``docs/compose.md``); whoever composes the
program may add subcommands (``actors.cli`` adds ``ray-node``). Each
failure a user can cause (busy port, unreachable Redis, bad config, no
cluster running) ends with one clear line on stderr and exit code 1, never a
traceback.

No process outlives its cluster. ``kemu up`` records itself and every process
it starts in ``$KEMU_HOME/processes`` (:mod:`emulator.processes`: pid and start
time, written as each is spawned). Every failure of the start - a part not
ready within ``--timeout`` (``--detach``), a part that exits, Ctrl-C or
SIGTERM, an error found late - stops what was started and says which part
and why (its last log lines) before exiting non-zero (128 + the signal for
a signal). ``kemu down`` stops the cluster's ``kemu up`` and then whatever is
still recorded, which is everything when that ``kemu up`` was killed;
``kemu status`` lists the records with their state.

Nothing stays dead: once the cluster is up, ``kemu up`` (the detached process
with ``--detach``) supervises its processes - redis-server, the API server,
the controller managers, each a child process - and restarts one that dies
with the kubelet's back-off (:mod:`emulator.supervisor`), its record updated
(new pid, restart count). ``kemu status`` prints a line per process, whether
Redis answers and the API server's ``/readyz`` passes, and exits 1 while a
part is down.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from emulator.api.errors import StatusError
from emulator.config import Config, ConfigError, kemu_home
from emulator.yamlfile import read_yaml_file

if TYPE_CHECKING:
    from emulator.cluster import (
        ClusterState,
        ControllerRunnerFactory,
        KubeletRunnerFactory,
        LocalCluster,
        SchedulerRunnerFactory,
    )
    from emulator.processes import ProcessTable
    from emulator.supervisor import Supervisor


class CLIError(Exception):
    pass


def _config(args: argparse.Namespace) -> Config:
    from emulator.descheduler_cli import with_descheduler

    cfg = Config.load(args.config, redis_url=args.redis_url, redis_port=args.redis_port, data_dir=args.data_dir,
                       node_shards=getattr(args, "node_shards", None), api_host=getattr(args, "api_host", None),
                       api_port=getattr(args, "api_port", None), api_workers=getattr(args, "api_workers", None),
                       controller_managers=getattr(args, "controller_managers", None),
                       nodes=getattr(args, "nodes", None), kubelet_shards=getattr(args, "kubelet_shards", None),
                       node_pools=_read_pools(getattr(args, "node_pools", None)),
                       node_groups=_read_pools(getattr(args, "node_groups", None), "node_groups"),
                       ray_address=getattr(args, "ray_address", None),
                       schedulers=getattr(args, "schedulers", None),
                       scheduler_config=getattr(args, "scheduler_config", None),
                       api_enabled=getattr(args, "api_enabled", None),
                       controllers_on_ray=getattr(args, "controllers_on_ray", None),
                       api_require_token=getattr(args, "api_require_token", None),
                       api_token_file=getattr(args, "api_token_file", None),
                       api_advertise_url=getattr(args, "api_advertise_url", None),
                       api_tls=getattr(args, "api_tls", None), users_file=getattr(args, "users", None),
                       api_authorization_mode=getattr(args, "authorization_mode", None),
                       clock_speed=getattr(args, "clock_speed", None),
                       durability=getattr(args, "durability", None),
                       prometheus_url=getattr(args, "prometheus_url", None),
                       metrics_rules=getattr(args, "metrics_rules", None))
    return with_descheduler(cfg, args)


def _read_pools(path: str | None, key: str = "node_pools") -> list[dict[str, Any]] | None:
    """A node pool (or node group) file: a YAML list, or a mapping with a ``node_pools`` (``node_groups``) list."""
    if path is None:
        return None
    data = read_yaml_file(path, "node pool file", CLIError)
    if isinstance(data, dict):
        data = data.get(key)
    if not isinstance(data, list) or not all(isinstance(p, dict) for p in data):
        raise CLIError(f"{key} file {path} must hold a list of mappings (or a {key}: list)")
    return data


def _add_kubelet_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, help="emulated nodes to run (a pool named node-00000...; default 0)")
    p.add_argument("--node-pools", help="YAML file of node pools (name, count, instance_type, capacity, zones, "
                                        "labels, taints, images)")
    p.add_argument("--node-groups", help="YAML file of autoscaled node groups (name, min, max, instance_type, "
                                         "price_per_hour, provisioning_delay ...); runs the cluster-autoscaler")
    p.add_argument("--kubelet-shards", type=int, help="kubelet shard actors (default: one per 1,250 nodes; "
                                                      "0: none)")
    p.add_argument("--ray-address", help="join this Ray cluster instead of starting a local one")


def _add_scheduler_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--schedulers", type=int, help="competing scheduler replicas (default: 1 when there are nodes; "
                                                  "0: none); they split pending pods and bind optimistically")
    p.add_argument("--scheduler-config", help="KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) YAML "
                                              "the schedulers run (profiles, plugins, pluginConfig, ...)")


def _add_cluster_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML config file")
    p.add_argument("--redis-url", help="use this Redis instead of starting one (env KEMU_REDIS_URL)")
    p.add_argument("--redis-port", type=int, help="port for the embedded Redis (default: a free one)")
    p.add_argument("--data-dir", help="data directory of the embedded Redis (default $KEMU_HOME/data)")
    p.add_argument("--durability", choices=("everysec", "strict"),
                   help="the embedded Redis's AOF fsync: everysec (default; a machine crash may lose the last "
                        "second of acknowledged writes) or strict (appendfsync always, as etcd fsyncs every write)")
    p.add_argument("--api-host", help="address the Kubernetes API server binds (default 127.0.0.1; any other "
                                      "address makes the kubeconfig's token required)")
    p.add_argument("--api-port", type=int, help="port of the Kubernetes API server (default 6443, or a free one "
                                                "if 6443 is taken; 0: a free one)")
    p.add_argument("--api-workers", type=int, help="API server worker processes (default 1)")
    p.add_argument("--controller-managers", type=int, help="controller managers to run; they elect one leader "
                                                           "through a Lease (default 1; 0: no controllers)")
    p.add_argument("--prometheus-url", help="serve custom/external metrics from this Prometheus (its HTTP API) "
                                            "instead of kemu's own series; the node annotator (node-annotator "
                                            "controller) reads its utilization windows there too")
    p.add_argument("--metrics-rules", help="prometheus-adapter rules file for custom/external metrics (default: "
                                           "kemu's, emulator/metricsapi/rules.yaml)")


def _add_component_flags(p: argparse.ArgumentParser) -> None:
    """What lets one ``kemu up`` be one part of a cluster whose parts share a Redis (docker-compose.yml)."""
    p.add_argument("--api-server", dest="api_enabled", action=argparse.BooleanOptionalAction,
                   help="run the Kubernetes API server (default: yes); --no-api-server for a process that runs "
                        "only controllers, kubelets or schedulers against --redis-url")
    p.add_argument("--controllers-on-ray", action="store_true", default=None,
                   help="run the --controller-managers as Ray actors (on --ray-address's cluster) instead of in "
                        "this process")
    p.add_argument("--api-require-token", dest="api_require_token", action=argparse.BooleanOptionalAction,
                   help="answer 401 to requests without the bearer token (default: only when --api-host is not "
                        "loopback); kubectl sends tokens only over TLS, so use --tls for kubectl to reach a server "
                        "bound to 0.0.0.0 (or --no-api-require-token over plain HTTP; a wrong token is still refused)")
    p.add_argument("--tls", dest="api_tls", action="store_true", default=None,
                   help="serve HTTPS with a generated CA and certificate ($KEMU_HOME/pki), written into the "
                        "kubeconfig: kubectl sends users' tokens only over TLS")
    p.add_argument("--users", help="YAML file of users ({users: [{name: alice, groups: [team-a]}]}): each gets a "
                                   "bearer token and a kubeconfig context named after it; RBAC decides what they "
                                   "may do (bind them with kubectl create rolebinding ...)")
    p.add_argument("--authorization-mode", choices=("RBAC", "AlwaysAllow"),
                   help="how the API server authorizes requests (default RBAC)")
    p.add_argument("--api-token-file", help="bearer token file shared by API server replicas: read if it exists, "
                                            "else created; a kubeconfig is written next to it")
    p.add_argument("--api-advertise-url", help="server URL for the kubeconfig next to --api-token-file, as other "
                                               "hosts or containers reach this API server (e.g. "
                                               "http://apiserver:6443)")


SUPERVISOR = "kemu-up"  # the record of the `kemu up` process itself (emulator.processes)


def _quiet_while_stopping() -> None:
    """SIGINT / SIGTERM while the cluster stops: noted, never allowed to cut the stop short."""
    def note(signum: int, _frame: FrameType | None) -> None:
        print(f"kemu: {signal.Signals(signum).name} while stopping: still stopping every part", file=sys.stderr,
              flush=True)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, note)


def _refuse_second_cluster(table: ProcessTable) -> None:
    """A live process recorded for this KEMU_HOME (other than this one) means a cluster runs, or left
    processes behind: never start a second one over it."""
    me = os.getpid()
    live = [r for r in table.records() if r.pid != me and r.running()]
    supervisor = next((r for r in live if r.name == SUPERVISOR), None)
    if supervisor is not None:
        raise CLIError(f"a kemu cluster is already running (pid {supervisor.pid}); run `kemu down` first")
    if live:
        names = ", ".join(f"{r.name} (pid {r.pid})" for r in live)
        raise CLIError(f"processes of an earlier kemu cluster are still running: {names}; `kemu down` stops them")


def _record_self(table: ProcessTable) -> None:
    # `kemu up --detach` recorded this process (with its log) when it spawned it: keep that record.
    rec = table.get(SUPERVISOR)
    if rec is None or rec.pid != os.getpid() or not rec.running():
        table.record(SUPERVISOR, os.getpid(), part="kemu up")


def cmd_up(args: argparse.Namespace) -> int:
    from emulator import processes
    from emulator.cluster import LocalCluster, StartGuard, StartInterrupted, exited_message, part_name, tail_text, were
    from emulator.supervisor import Supervisor

    table = processes.ProcessTable(kemu_home())
    _refuse_second_cluster(table)
    if args.detach:
        return _detach(args, table)
    cfg = _config(args)
    table.forget_exited()
    # Every child carries KEMU_HOME: how `kemu down` tells a dead part's forked workers from strangers.
    os.environ["KEMU_HOME"] = str(table.home)
    _record_self(table)
    processes.activate(table)  # the local Ray instance, if a runner starts one, is recorded here too
    stop = threading.Event()
    cluster = LocalCluster(cfg, kubelets=getattr(args, "kubelets", None),
                           schedulers=getattr(args, "scheduler_runner", None),
                           controllers=getattr(args, "controller_runner", None), records=table,
                           controller_processes=True)
    supervisor: Supervisor | None = None
    try:
        try:
            with StartGuard(cluster):
                cluster.start()
            exited = cluster.exited_part()  # a part that died after the watchdog's last look
            if exited is not None:
                raise StartInterrupted(exited_message(exited, None))
        except StartInterrupted as e:
            _quiet_while_stopping()
            if e.signum == signal.SIGINT or e.reason.startswith("interrupted"):
                print(f"kemu: {e.reason} while {part_name(cluster.starting)} {were(cluster.starting)} starting; "
                      "stopping every part", file=sys.stderr, flush=True)
                return 128 + e.signum
            raise CLIError(e.reason) from None
        except Exception as e:
            _quiet_while_stopping()
            part = cluster.starting
            if not isinstance(e, (CLIError, ConfigError, StatusError, *_user_errors())):  # a bug: show where
                traceback.print_exc()
            message = str(e.message if isinstance(e, StatusError) else e) or type(e).__name__
            raise CLIError(f"{part_name(part)} did not start: {message}"
                           + tail_text(cluster.starting_log, message)) from None
        for sig in (signal.SIGTERM, signal.SIGINT):  # from now on a signal means "stop, in order"
            signal.signal(sig, lambda *_: stop.set())
        # Every process it started is restarted if it dies, with back-off (emulator.supervisor).
        supervisor = Supervisor(cluster.supervised_parts(), table).start()
        state = cluster.state()
        if cluster.api_url is not None:
            state.kubeconfig = str(cluster.write_kubeconfig())
        state.write()  # the readiness signal: --detach, `kemu status` and compose healthchecks wait for it

        print(f"kemu cluster up: redis {state.redis_url} ({'embedded' if state.embedded_redis else 'external'}, "
              f"data in {cfg.data_dir}). Ctrl-C to stop.", flush=True)
        if state.api_url:
            print(f"Kubernetes API at {state.api_url}; kubeconfig: {state.kubeconfig}\n"
                  f"  export KUBECONFIG={state.kubeconfig}", flush=True)
            if cfg.api_token_file:
                print(f"shared kubeconfig: {cluster.shared_kubeconfig_path()}", flush=True)
        if cfg.controller_managers:
            where = " as Ray actors" if cfg.controllers_on_ray else ""
            print(f"controller managers: {cfg.controller_managers}{where} (one leads)", flush=True)
        if cluster.kubelets is not None:
            reports = cluster.kubelets.health()
            print(f"kubelets: {len(reports)} shard actor(s) running {sum(r['nodes'] for r in reports)} nodes",
                  flush=True)
        if cluster.schedulers is not None:
            print(f"schedulers: {len(cluster.schedulers.health())} competing replica(s)", flush=True)
        stop.wait()
        _quiet_while_stopping()
    finally:
        if supervisor is not None:
            supervisor.stop()  # before the parts stop: none is started again meanwhile
        _stop_cluster(cluster, table)
    print("kemu cluster stopped.", flush=True)
    return 0


def _user_errors() -> tuple[type[Exception], ...]:
    from emulator.apiserver.process import ApiServerError
    from emulator.store.redis_server import RedisServerError

    return RedisServerError, ApiServerError


def _stop_cluster(cluster: LocalCluster, table: ProcessTable) -> None:
    """Stop the parts in order, then whatever is still recorded (a part that failed to stop its process)."""
    from emulator import processes
    from emulator.cluster import ClusterState

    cluster.stop()
    try:
        leftovers = table.stop(exclude={SUPERVISOR})
    except processes.StillRunning as e:  # its record stays: `kemu down` tries again
        print(f"kemu: {e}", file=sys.stderr, flush=True)
        leftovers = []
    for leftover in leftovers:
        if leftover.how != "exited":
            print(f"kemu: {leftover.name} (pid {leftover.pid}, {leftover.part}) outlived its part's stop: "
                  f"{leftover.how}", file=sys.stderr, flush=True)
    current = ClusterState.read()
    if current and current.pid == os.getpid():
        ClusterState.clear()
    table.note_ready()
    table.forget(SUPERVISOR)
    processes.activate(None)


def _detach(args: argparse.Namespace, table: ProcessTable) -> int:
    from emulator.cluster import ClusterState, part_name, tail_text, were

    # Re-run the program that was started (``actors.cli`` under the ``kemu`` command: it brings the kubelets).
    argv = [sys.executable, "-m", getattr(args, "module", "emulator.cli"), "up"]
    for flag in ("config", "redis_url", "redis_port", "data_dir", "api_host", "api_port", "api_workers",
                 "controller_managers", "nodes", "node_pools", "node_groups", "kubelet_shards", "ray_address",
                 "schedulers",
                 "scheduler_config", "api_token_file", "api_advertise_url", "clock_speed", "prometheus_url",
                 "metrics_rules", "descheduler_policy", "descheduling_interval", "users",
                 "authorization_mode", "durability"):
        value = getattr(args, flag)
        if value is not None:
            argv += [f"--{flag.replace('_', '-')}", str(value)]
    if args.controllers_on_ray:
        argv.append("--controllers-on-ray")
    if args.api_tls:
        argv.append("--tls")
    for flag, value in (("api-server", args.api_enabled), ("api-require-token", args.api_require_token)):
        if value is not None:
            argv.append(f"--{flag}" if value else f"--no-{flag}")
    table.forget_exited()
    table.note_ready()  # a marker left by an earlier start that was killed
    log = kemu_home() / "cluster.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "KEMU_HOME": str(table.home)}
    with log.open("wb") as out:
        # A session of its own: it outlives this command and the terminal; its group is the cluster's.
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)
    table.record(SUPERVISOR, proc.pid, part="kemu up", log=log)
    deadline = time.monotonic() + args.timeout
    try:
        while time.monotonic() < deadline:
            state = ClusterState.read()
            if state and state.pid == proc.pid:
                print(f"kemu cluster up in the background (pid {proc.pid}): redis {state.redis_url}. "
                      f"Logs: {log}. Stop it with `kemu down`.")
                if state.api_url:
                    print(f"Kubernetes API at {state.api_url}; kubeconfig: {state.kubeconfig}")
                return 0
            if proc.poll() is not None:
                _abort_start(proc, table)
                raise CLIError("the cluster failed to start:\n  " + "\n  ".join(_failure_lines(log)))
            time.sleep(0.05)  # waiting on another process's readiness file: nothing to block on
    except KeyboardInterrupt:
        starting = table.starting()
        stopped = _abort_start(proc, table)
        raise CLIError(f"interrupted while {part_name(starting[0] if starting else None)} "
                       f"{were(starting[0] if starting else None)} starting; stopped {stopped}") from None
    starting = table.starting()
    part, part_log = starting if starting else (None, None)
    stopped = _abort_start(proc, table)
    raise CLIError(f"the cluster was not ready after {args.timeout:g} s: {part_name(part)} "
                   f"{were(part)} not ready (stopped {stopped}); see {log}"
                   + (tail_text(part_log) or tail_text(log)))


def _abort_start(proc: subprocess.Popen[bytes], table: ProcessTable, timeout: float = 30.0) -> str:
    """Stop a detached start that failed: SIGTERM its ``kemu up`` (it stops the parts it started, in order),
    then whatever is still recorded. Says what was stopped."""
    from emulator.processes import StillRunning

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):  # the sweep below SIGKILLs its group
            proc.wait(timeout)
    try:
        names = [s.name for s in table.stop(timeout=10.0) if s.how != "exited"]
    except StillRunning as e:
        raise CLIError(f"the cluster failed to start, and could not be stopped entirely: {e}") from None
    proc.poll()  # reap it if the sweep killed it
    return "every part" + (f" ({', '.join(names)} by signal, after their kemu up)" if names else "")


def _failure_lines(log: Path) -> list[str]:
    """What a ``kemu up`` that exited said about why: its log from the last error on (or the last lines)."""
    from emulator.processes import log_tail

    lines = log_tail(log, 40)
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("kemu: "):
            return lines[i:]
    return lines[-5:]


def cmd_status(args: argparse.Namespace) -> int:
    from emulator.status_command import status

    return status(kemu_home(), _running_state, args.output)


def _running_state(table: ProcessTable) -> ClusterState | None:
    """The state file of a cluster whose ``kemu up`` is alive (its record, or its pid without one), else None."""
    from emulator.cluster import ClusterState
    from emulator.processes import pid_alive

    state = ClusterState.read()
    if state is None:
        return None
    rec = table.get(SUPERVISOR)
    alive = rec.running() if rec is not None and rec.pid == state.pid else pid_alive(state.pid)
    return state if alive else None


def cmd_down(args: argparse.Namespace) -> int:
    """Stop the cluster: its ``kemu up`` first (it stops the parts in order), then every process still
    recorded for this KEMU_HOME - all of them when that ``kemu up`` died (SIGTERM, then SIGKILL)."""
    from emulator.cluster import ClusterState
    from emulator.processes import ProcessTable, StillRunning

    table = ProcessTable(kemu_home())
    state = _running_state(table)
    supervisor = table.get(SUPERVISOR)
    stopped_supervisor = None
    if state is not None and (supervisor is None or supervisor.pid != state.pid):
        # A cluster without a record (a state file from before records): its pid, as before.
        stopped_supervisor = _stop_pid(state.pid, args.timeout)
    elif supervisor is not None and supervisor.running():
        with contextlib.suppress(ProcessLookupError):
            os.kill(supervisor.pid, signal.SIGTERM)
        deadline = time.monotonic() + args.timeout
        while supervisor.running() and time.monotonic() < deadline:
            time.sleep(0.05)  # another process's exit: nothing to block on
        stopped_supervisor = supervisor.pid
    # What is left: everything, if the supervisor died or did not stop in time (SIGKILL after 10 s).
    try:
        swept = [s for s in table.stop(timeout=min(args.timeout, 10.0)) if s.how != "exited"]
    except StillRunning as e:
        raise CLIError(f"could not stop every process of the cluster: {e}") from None
    ClusterState.clear()
    table.note_ready()
    if stopped_supervisor is None and not swept:
        print("no kemu cluster is running")
        return 0
    if stopped_supervisor is not None:
        print(f"kemu cluster (pid {stopped_supervisor}) stopped")
    for s in swept:
        print(f"stopped {s.name} (pid {s.pid}, {s.part}) with {s.how}")
    return 0


def _stop_pid(pid: int, timeout: float) -> int:
    from emulator.processes import pid_alive

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            raise CLIError(f"the cluster (pid {pid}) did not stop within {timeout:.0f} s")
        time.sleep(0.05)  # another process's exit: nothing to block on
    return pid


def cmd_kubeconfig(args: argparse.Namespace) -> int:
    from emulator.apiserver import kubeconfig

    path = kubeconfig.default_path()
    if not path.exists():
        raise CLIError(f"no kubeconfig at {path} yet: start a cluster with `kemu up`")
    print(path)
    return 0


def cmd_user_add(args: argparse.Namespace) -> int:
    """Give a running cluster a user: a token in its Redis, a context in the kubeconfig ``kemu up`` wrote."""
    from emulator.apiserver import kubeconfig, users
    from emulator.cluster import ClusterState
    from emulator.store.store import Store, StoreConfig

    state = ClusterState.read()
    if state is None:
        raise CLIError("no detached cluster is running: start one with `kemu up --detach`")
    prefix = Config.load(args.config).prefix
    store = Store.connect(state.redis_url, StoreConfig(prefix=prefix))
    try:
        token = users.add_user(store.redis, prefix, users.UserSpec(args.name, tuple(args.group or ())))
    except ValueError as e:
        raise CLIError(str(e)) from None
    path = Path(state.kubeconfig) if state.kubeconfig else kubeconfig.default_path()
    if path.exists():
        kubeconfig.add_user(path, args.name, token)
        print(f"user {args.name} added; kubectl --context {args.name} (kubeconfig {path})")
    else:
        print(token)
    return 0


def cmd_dashboards(args: argparse.Namespace) -> int:
    from emulator import dashboards

    try:
        pushed = dashboards.push(args.grafana_url, token=args.token or os.environ.get("GRAFANA_TOKEN"),
                                 user=args.user or os.environ.get("GRAFANA_USER"),
                                 password=args.password or os.environ.get("GRAFANA_PASSWORD"), folder=args.folder)
    except dashboards.PushError as e:
        raise CLIError(str(e)) from None
    print(f"pushed {len(pushed)} dashboards to {args.grafana_url} (folder {args.folder}): {', '.join(pushed)}")
    return 0


# A subcommand contributed by whoever composes the program: it adds its parser (with ``fn`` set) to these
# subparsers. ``actors.cli`` adds ``ray-node`` this way, since only ``actors`` may import Ray.
SubParsers = argparse._SubParsersAction  # argparse exposes no public name for the type add_subparsers returns
CommandRegistration = Callable[[SubParsers], None]


def build_parser(commands: Sequence[CommandRegistration] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kemu", description="An emulator of large Kubernetes clusters.")
    sub = parser.add_subparsers(dest="command", required=True)
    from emulator import chaos_cli, descheduler_cli

    up = sub.add_parser("up", help="run a local cluster (foreground until Ctrl-C, or --detach)")
    _add_cluster_flags(up)
    up.add_argument("--detach", action="store_true", help="return once the cluster is ready; stop with kemu down")
    up.add_argument("--clock-speed", type=float, help="cluster clock speed factor: 10 runs every period, delay and "
                                                      "window (a 5-minute stabilization window: 30 s) 10x faster "
                                                      "(default 1)")
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for readiness with --detach")
    _add_kubelet_flags(up)
    _add_scheduler_flags(up)
    _add_component_flags(up)
    descheduler_cli.add_up_flags(up)
    up.set_defaults(fn=cmd_up)

    status = sub.add_parser("status", help="report on the detached cluster")
    status.add_argument("-o", "--output", choices=("text", "json"), default="text")
    status.set_defaults(fn=cmd_status)

    down = sub.add_parser("down", help="stop the detached cluster")
    down.add_argument("--timeout", type=float, default=30.0)
    down.set_defaults(fn=cmd_down)

    chaos_cli.register(sub)  # kemu chaos ... (emulator/chaos_cli.py)

    kube = sub.add_parser("kubeconfig", help="print the path of the kubeconfig `kemu up` wrote")
    kube.set_defaults(fn=cmd_kubeconfig)

    user = sub.add_parser("user", help="users of the detached cluster (bearer tokens, kubeconfig contexts)")
    user_sub = user.add_subparsers(dest="user_action", required=True)
    add = user_sub.add_parser("add", help="create a user (or rotate its token) and add its kubeconfig context")
    add.add_argument("name")
    add.add_argument("--group", action="append", help="a group the user is in (repeatable)")
    add.add_argument("--config", help="YAML config file (for its Redis key prefix)")
    add.set_defaults(fn=cmd_user_add)

    dash = sub.add_parser("dashboards", help="kemu's Grafana dashboards (dashboards/*.json)")
    dash_sub = dash.add_subparsers(dest="dashboards_action", required=True)
    push = dash_sub.add_parser("push", help="create or update the dashboards in a Grafana")
    push.add_argument("--grafana-url", required=True, help="Grafana's base URL, e.g. http://localhost:3000")
    push.add_argument("--token", "--api-key", dest="token", help="API key or service-account token "
                                                                 "(default: $GRAFANA_TOKEN)")
    push.add_argument("--user", help="basic-auth user (default: $GRAFANA_USER)")
    push.add_argument("--password", help="basic-auth password (default: $GRAFANA_PASSWORD)")
    push.add_argument("--folder", default="kemu", help="folder to put them in, created if missing (default kemu)")
    push.set_defaults(fn=cmd_dashboards)

    from emulator import load_command

    load_command.register(sub)  # kemu load set|set-queue|get|clear (emulator/load_command.py)
    descheduler_cli.add_command(sub)  # kemu deschedule (emulator/descheduler_cli.py)
    from emulator import annotator_cli

    annotator_cli.add_command(sub)  # kemu node-annotator (emulator/annotator_cli.py)
    for register in commands:
        register(sub)
    return parser


def main(argv: list[str] | None = None, *, kubelets: KubeletRunnerFactory | None = None,
         module: str = "emulator.cli", schedulers: SchedulerRunnerFactory | None = None,
         controllers: ControllerRunnerFactory | None = None, commands: Sequence[CommandRegistration] = ()) -> int:
    """Run the CLI. ``kubelets`` runs kubelet shards (``emulator`` cannot: they are Ray actors, and
    ``emulator`` never imports Ray), ``schedulers`` and ``controllers`` likewise (None: in this process);
    ``module`` is what ``up --detach`` re-runs; ``commands`` add
    subcommands (see :data:`CommandRegistration`). The ``kemu`` command is ``actors.cli.main``, which
    passes all of them."""
    args = build_parser(commands).parse_args(argv)
    args.kubelets = kubelets
    args.scheduler_runner = schedulers  # None: LocalCluster runs the schedulers in-process
    args.controller_runner = controllers  # used only with --controllers-on-ray
    args.module = module
    try:
        return int(args.fn(args) or 0)
    except (CLIError, ConfigError) as e:
        print(f"kemu: error: {e}", file=sys.stderr)
        return 1
    except StatusError as e:
        print(f"kemu: error: {e.message}", file=sys.stderr)
        return 1
    except Exception as e:
        from emulator.apiserver.process import ApiServerError
        from emulator.store.redis_server import RedisServerError

        if isinstance(e, RedisServerError | ApiServerError):
            print(f"kemu: error: {e}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
