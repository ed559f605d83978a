"""The ``kemu`` command line.

Commands: ``up`` (foreground until Ctrl-C, or ``--detach``), ``status``,
``down``, ``kubeconfig`` (the path of the kubeconfig ``up`` wrote), ``run
SCENARIO`` (the main job: a cluster under load, with its summary), ``chaos``
(``stop-kubelet NODE``, ``break-runtime NODE``, ``partition-shard N``,
``restore TARGET|--all``, ``list``: faults for the detached cluster's kubelets,
see :mod:`emulator.chaos`), ``dashboards push`` (the Grafana dashboards into a
Grafana, :mod:`emulator.dashboards`). ``up`` also runs one *component* of a cluster
whose parts share an external Redis (``--no-api-server``, ``--controller-managers
0``, ``--schedulers N``, ``--nodes N``, ``--api-token-file``; see
:mod:`emulator.cluster` and ``docs/compose.md``); whoever composes the
program may add subcommands (``actors.cli`` adds ``ray-node``). Each
failure a user can cause (busy port, unreachable Redis, bad config, no
cluster running) ends with one clear line on stderr and exit code 1, never a
traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emulator.api.errors import StatusError
from emulator.config import Config, ConfigError, kemu_home

if TYPE_CHECKING:
    from emulator.cluster import ControllerRunnerFactory, KubeletRunnerFactory, SchedulerRunnerFactory


class CLIError(Exception):
    pass


def _config(args: argparse.Namespace) -> Config:
    return Config.load(args.config, redis_url=args.redis_url, redis_port=args.redis_port, data_dir=args.data_dir,
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
                       api_advertise_url=getattr(args, "api_advertise_url", None))


def _read_pools(path: str | None, key: str = "node_pools") -> list[dict[str, Any]] | None:
    """A node pool (or node group) file: a YAML list, or a mapping with a ``node_pools`` (``node_groups``) list."""
    if path is None:
        return None
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise CLIError(f"cannot read node pool file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise CLIError(f"node pool file {path} is not valid YAML: {e}") from None
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
    p.add_argument("--api-host", help="address the Kubernetes API server binds (default 127.0.0.1; any other "
                                      "address makes the kubeconfig's token required)")
    p.add_argument("--api-port", type=int, help="port of the Kubernetes API server (default 6443, or a free one "
                                                "if 6443 is taken; 0: a free one)")
    p.add_argument("--api-workers", type=int, help="API server worker processes (default 1)")
    p.add_argument("--controller-managers", type=int, help="controller managers to run; they elect one leader "
                                                           "through a Lease (default 1; 0: no controllers)")


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
                        "loopback); kubectl sends tokens only over TLS and kemu serves plain HTTP, so "
                        "--no-api-require-token is how kubectl reaches a server bound to 0.0.0.0 (a wrong token is "
                        "still refused)")
    p.add_argument("--api-token-file", help="bearer token file shared by API server replicas: read if it exists, "
                                            "else created; a kubeconfig is written next to it")
    p.add_argument("--api-advertise-url", help="server URL for the kubeconfig next to --api-token-file, as other "
                                               "hosts or containers reach this API server (e.g. "
                                               "http://apiserver:6443)")


def cmd_up(args: argparse.Namespace) -> int:
    from emulator.cluster import ClusterState, LocalCluster, pid_alive

    existing = ClusterState.read()
    # A state file naming this very pid is a previous life of this process slot (a restarted container,
    # where kemu is always the same pid), not another cluster.
    if existing and existing.pid != os.getpid() and pid_alive(existing.pid):
        raise CLIError(f"a kemu cluster is already running (pid {existing.pid}); run `kemu down` first")
    if args.detach:
        return _detach(args)
    cfg = _config(args)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    cluster = LocalCluster(cfg, kubelets=getattr(args, "kubelets", None),
                           schedulers=getattr(args, "scheduler_runner", None),
                           controllers=getattr(args, "controller_runner", None))
    try:
        cluster.start()
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
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    finally:
        cluster.stop()
        current = ClusterState.read()
        if current and current.pid == os.getpid():
            ClusterState.clear()
    print("kemu cluster stopped.", flush=True)
    return 0


def _detach(args: argparse.Namespace) -> int:
    from emulator.cluster import ClusterState

    # Re-run the program that was started (``actors.cli`` under the ``kemu`` command: it brings the kubelets).
    argv = [sys.executable, "-m", getattr(args, "module", "emulator.cli"), "up"]
    for flag in ("config", "redis_url", "redis_port", "data_dir", "api_host", "api_port", "api_workers",
                 "controller_managers", "nodes", "node_pools", "kubelet_shards", "ray_address", "schedulers",
                 "scheduler_config", "api_token_file", "api_advertise_url"):
        value = getattr(args, flag)
        if value is not None:
            argv += [f"--{flag.replace('_', '-')}", str(value)]
    if args.controllers_on_ray:
        argv.append("--controllers-on-ray")
    for flag, value in (("api-server", args.api_enabled), ("api-require-token", args.api_require_token)):
        if value is not None:
            argv.append(f"--{flag}" if value else f"--no-{flag}")
    log = kemu_home() / "cluster.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        state = ClusterState.read()
        if state and state.pid == proc.pid:
            print(f"kemu cluster up in the background (pid {proc.pid}): redis {state.redis_url}. "
                  f"Logs: {log}. Stop it with `kemu down`.")
            if state.api_url:
                print(f"Kubernetes API at {state.api_url}; kubeconfig: {state.kubeconfig}")
            return 0
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-5:]
            raise CLIError("the cluster failed to start:\n  " + "\n  ".join(tail))
        time.sleep(0.05)  # waiting on another process's readiness file: nothing to block on
    proc.terminate()
    raise CLIError(f"the cluster was not ready after {args.timeout:.0f} s; see {log}")


def cmd_status(args: argparse.Namespace) -> int:
    from emulator.cluster import ClusterState, object_counts, pid_alive
    from emulator.store.store import Store, StoreConfig

    state = ClusterState.read()
    if state is None or not pid_alive(state.pid):
        print("no kemu cluster is running (start one with `kemu up --detach`)")
        return 1
    store = Store.connect(state.redis_url, StoreConfig())
    try:
        info: dict[str, Any] = {"pid": state.pid, "redis": state.redis_url, "api": state.api_url,
                                "kubeconfig": state.kubeconfig, "uptimeSeconds":
                                round(time.time() - state.started_at, 1), **object_counts(store)}
    finally:
        store.close()
    if args.output == "json":
        print(json.dumps(info, indent=2))
    else:
        print(f"kemu cluster running (pid {info['pid']}, up {info['uptimeSeconds']} s), redis {info['redis']}")
        if info["api"]:
            print(f"Kubernetes API at {info['api']}; kubeconfig: {info['kubeconfig']}")
        print(f"resourceVersion {info['resourceVersion']}")
        for resource, n in sorted(info["objects"].items()):
            print(f"  {resource:<40} {n}")
    return 0


def _chaos_target(text: str) -> str:
    """``node/NAME``, ``shard/N``, or a bare node name."""
    return text if text.startswith(("node/", "shard/", "nodegroup/")) else f"node/{text}"


def cmd_chaos(args: argparse.Namespace) -> int:
    """Set, clear or list faults in the detached cluster's fault table (its kubelet shards act on their next tick)."""
    from emulator import chaos
    from emulator.cluster import ClusterState, pid_alive
    from emulator.store.store import Store, StoreConfig

    state = ClusterState.read()
    if state is None or not pid_alive(state.pid):
        raise CLIError("no kemu cluster is running (start one with `kemu up --detach`)")
    store = Store.connect(state.redis_url, StoreConfig())  # the cluster's prefix, as `kemu status` reads it
    client, prefix = store.redis, store.config.prefix
    try:
        action = args.chaos_action
        if action == "list":
            table = chaos.faults(client, prefix)
            if args.output == "json":
                print(json.dumps(table, indent=2, sort_keys=True))
            elif not table:
                print("no faults injected")
            for target, fault in sorted(table.items()):
                if args.output != "json":
                    print(f"{target:<40} {fault}")
            return 0
        if action == "restore":
            if args.all == (args.target is not None):
                raise CLIError("kemu chaos restore: give a TARGET (node/NAME, shard/N or a node name) or --all")
            if args.all:
                print(f"restored {chaos.clear_all(client, prefix)} target(s)")
                return 0
            target = _chaos_target(args.target)
            had = chaos.clear(client, prefix, target)
            print(f"restored {target}" if had else f"{target} had no fault")
            return 0
        target, fault = {"stop-kubelet": (f"node/{args.target}", chaos.STOP_KUBELET),
                         "break-runtime": (f"node/{args.target}", chaos.BREAK_RUNTIME),
                         "partition-shard": (f"shard/{args.target}", chaos.PARTITION),
                         "nodegroup-out-of-quota": (f"nodegroup/{args.target}", chaos.OUT_OF_QUOTA),
                         "nodegroup-slow-boot": (f"nodegroup/{args.target}", chaos.SLOW_BOOT)}[action]
        chaos.set_fault(client, prefix, target, fault)
        print(f"{target}: {fault} (undo with `kemu chaos restore {target}`)")
        return 0
    except chaos.ChaosError as e:
        raise CLIError(str(e)) from None
    finally:
        store.close()


def cmd_down(args: argparse.Namespace) -> int:
    from emulator.cluster import ClusterState, pid_alive, stop_detached

    state = ClusterState.read()
    if state is None or not pid_alive(state.pid):
        ClusterState.clear()
        print("no kemu cluster is running")
        return 0
    if not stop_detached(state, timeout=args.timeout):
        raise CLIError(f"the cluster (pid {state.pid}) did not stop within {args.timeout:.0f} s")
    ClusterState.clear()
    print(f"kemu cluster (pid {state.pid}) stopped")
    return 0


def cmd_kubeconfig(args: argparse.Namespace) -> int:
    from emulator.apiserver import kubeconfig

    path = kubeconfig.default_path()
    if not path.exists():
        raise CLIError(f"no kubeconfig at {path} yet: start a cluster with `kemu up`")
    print(path)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from loadgen.runner import RunOptions, run_scenario

    cfg = _config(args)
    if args.attach and not cfg.redis_url:
        raise CLIError("kemu run --attach drives a running cluster: give its Redis with --redis-url "
                       "(or KEMU_REDIS_URL)")
    if args.api_port is None:
        # A run's API server takes any free port, so runs never clash with a `kemu up` on 6443.
        cfg = replace(cfg, api_port=0)
    # The injected runners: under `kemu` (actors/cli.py) kubelet shards and schedulers are Ray actors.
    options = RunOptions(seed=args.seed, output=args.output, report=args.report, attach=args.attach,
                         driver=args.driver, processes=args.driver_processes, kubeconfig=args.kubeconfig)
    return run_scenario(Path(args.scenario), cfg, options,
                        kubelets=getattr(args, "kubelets", None), schedulers=getattr(args, "scheduler_runner", None))


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

    up = sub.add_parser("up", help="run a local cluster (foreground until Ctrl-C, or --detach)")
    _add_cluster_flags(up)
    up.add_argument("--detach", action="store_true", help="return once the cluster is ready; stop with kemu down")
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for readiness with --detach")
    _add_kubelet_flags(up)
    _add_scheduler_flags(up)
    _add_component_flags(up)
    up.set_defaults(fn=cmd_up)

    status = sub.add_parser("status", help="report on the detached cluster")
    status.add_argument("-o", "--output", choices=("text", "json"), default="text")
    status.set_defaults(fn=cmd_status)

    down = sub.add_parser("down", help="stop the detached cluster")
    down.add_argument("--timeout", type=float, default=30.0)
    down.set_defaults(fn=cmd_down)

    ch = sub.add_parser("chaos", help="inject faults into the detached cluster's kubelets, or restore them")
    ch_sub = ch.add_subparsers(dest="chaos_action", required=True)
    for name, what, help_ in (("stop-kubelet", "NODE", "the node stops heartbeating (leases, node and pod status)"),
                              ("break-runtime", "NODE", "pods bound to the node never start (it stays Ready)"),
                              ("partition-shard", "N", "kubelet shard N writes nothing until restored"),
                              ("nodegroup-out-of-quota", "GROUP", "the cloud refuses to grow the node group"),
                              ("nodegroup-slow-boot", "GROUP", "the node group's new instances boot 20x slower")):
        c = ch_sub.add_parser(name, help=help_)
        c.add_argument("target", metavar=what, type=int if what == "N" else str)
    restore = ch_sub.add_parser("restore", help="clear a target's fault (node/NAME, shard/N, NAME) or --all")
    restore.add_argument("target", nargs="?")
    restore.add_argument("--all", action="store_true")
    listing = ch_sub.add_parser("list", help="the faults in force")
    listing.add_argument("-o", "--output", choices=("text", "json"), default="text")
    ch.set_defaults(fn=cmd_chaos)

    kube = sub.add_parser("kubeconfig", help="print the path of the kubeconfig `kemu up` wrote")
    kube.set_defaults(fn=cmd_kubeconfig)

    run = sub.add_parser("run", help="bring a cluster up, run a scenario, print its summary")
    run.add_argument("scenario", help="scenario YAML, e.g. loadgen/scenarios/quickstart.yaml")
    _add_cluster_flags(run)
    run.add_argument("--seed", type=int, help="override the scenario's seed")
    run.add_argument("--output", help="write the summary as JSON to this file (default "
                                      "kemu-runs/<scenario>-<seed>/summary.json)")
    run.add_argument("--report", help="write the HTML report to this file (default: report.html next to the JSON)")
    run.add_argument("--attach", action="store_true", help="drive the running cluster at --redis-url (compose, "
                                                          "kemu up) instead of starting one")
    run.add_argument("--driver", choices=("store", "http", "null"), help="override the scenario's driver.kind")
    run.add_argument("--driver-processes", type=int, help="override the scenario's driver.processes")
    run.add_argument("--kubeconfig", help="with --attach: the API server (and token) for kubectl and the http "
                                          "driver")
    run.set_defaults(fn=cmd_run)

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
