"""``kemu ray-node``: run this machine (or container) as a Ray head or worker node, in the foreground.

A thin wrapper around ``ray start --block`` so that every container of
``docker-compose.yml`` runs a ``kemu`` invocation (one image, one command
line, checked by the CLI's own parser in the tests) and so that kemu's Ray
settings live in one place:

* ``--head`` starts the head: GCS on ``--port`` (default 6379, Ray's) and the
  Ray Client server on ``--client-port`` (default 10001). kemu components in
  *other* containers join with ``--ray-address ray://HEAD:10001``: a plain
  ``HOST:PORT`` address makes the driver look for a raylet on its own machine,
  which only Ray nodes have, whereas Ray Client needs none.
* ``--address HOST:PORT`` starts a worker that joins the head (scale these:
  the kubelet shard and scheduler actors spread over them).
* No dashboard (kemu installs core Ray without its extras) and a 75 MiB
  object store (Ray's minimum; the actors exchange only small reports), as
  for the private local Ray of :mod:`actors.launcher`.
* Token authentication, which Ray 2.60 turns on for new clusters: every node
  and driver needs the cluster's token. When ``RAY_AUTH_TOKEN_PATH`` names a
  file (compose points it into a volume every container mounts), the head
  creates it if it does not exist yet (:func:`emulator.apiserver.kubeconfig.
  shared_token`), so the whole cluster - workers and kemu drivers, which Ray
  lets read the same variable - shares one token without any being baked
  into the image.

The process ``exec``s ``ray start``, so container signals reach Ray directly
and ``docker compose stop`` shuts the node down cleanly.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import sys
from pathlib import Path

from emulator.apiserver.kubeconfig import shared_token
from emulator.cli import CLIError, SubParsers

DEFAULT_GCS_PORT = 6379
DEFAULT_CLIENT_PORT = 10001
# Ray's minimum object store (actors.launcher's too; not imported from there, which would import Ray for
# every `kemu` command: this module is loaded to register the subcommand).
MIN_OBJECT_STORE = 75 * 1024 * 1024


def register(sub: SubParsers) -> None:
    """Add ``ray-node`` to the ``kemu`` subcommands (an :data:`emulator.cli.CommandRegistration`)."""
    p = sub.add_parser("ray-node", help="run a Ray head or worker node in the foreground (ray start --block)")
    role = p.add_mutually_exclusive_group(required=True)
    role.add_argument("--head", action="store_true", help="start the head node")
    role.add_argument("--address", help="join the head's GCS at HOST:PORT as a worker node")
    p.add_argument("--port", type=int, default=DEFAULT_GCS_PORT, help="the head's GCS port (default 6379)")
    p.add_argument("--client-port", type=int, default=DEFAULT_CLIENT_PORT,
                   help="the head's Ray Client port, what kemu's --ray-address ray://HOST:PORT names (default 10001)")
    p.add_argument("--num-cpus", type=int, help="CPUs this node offers (default: what Ray detects; kemu's actors "
                                                "reserve none)")
    p.add_argument("--object-store-memory", type=int, default=MIN_OBJECT_STORE,
                   help="object store bytes (default: Ray's minimum, 75 MiB)")
    p.add_argument("--node-ip-address", help="the address other nodes reach this one on (default: Ray's guess)")
    p.set_defaults(fn=cmd_ray_node)


def ray_start_argv(args: argparse.Namespace, ray: str = "ray") -> list[str]:
    """The ``ray start`` command line ``kemu ray-node`` runs."""
    argv = [ray, "start", "--block", "--disable-usage-stats", f"--object-store-memory={args.object_store_memory}"]
    if args.head:
        argv += ["--head", f"--port={args.port}", f"--ray-client-server-port={args.client_port}",
                 "--include-dashboard=false"]
    else:
        argv += [f"--address={args.address}"]
    if args.num_cpus is not None:
        argv.append(f"--num-cpus={args.num_cpus}")
    if args.node_ip_address:
        argv.append(f"--node-ip-address={args.node_ip_address}")
    return argv


def _ray_executable() -> str:
    # The ``ray`` script installed beside this interpreter (the same venv as kemu), else the one on PATH.
    beside = Path(sys.executable).with_name("ray")
    found = str(beside) if beside.exists() else shutil.which("ray")
    if found is None:
        raise CLIError("the `ray` command is not installed (pip install 'ray[client]')")
    return found


def cmd_ray_node(args: argparse.Namespace) -> int:
    token_path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if token_path and os.environ.get("RAY_AUTH_MODE", "token") != "disabled":
        if args.head:
            shared_token(Path(token_path), lambda: secrets.token_hex(32))
        elif not Path(token_path).exists():
            raise CLIError(f"RAY_AUTH_TOKEN_PATH={token_path} does not exist: the head node creates it; start the "
                           "head first (with the same file mounted)")
    argv = ray_start_argv(args, _ray_executable())
    # The actors are the emulator, not background work: normal priority (see actors.launcher._normal_priority).
    os.environ.setdefault("RAY_worker_niceness", "0")
    print("kemu ray-node: " + " ".join(argv), flush=True)
    os.execv(argv[0], argv)  # Ray becomes this process: signals (docker stop, Ctrl-C) reach it directly
    return 0  # not reached
