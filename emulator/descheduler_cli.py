"""``kemu deschedule --policy FILE [--dry-run]`` and ``kemu up --descheduler-policy FILE``.

``deschedule`` runs one descheduling loop against a running cluster (the
detached cluster's Redis, ``--redis-url`` or ``$KEMU_REDIS_URL``), as the
upstream binary does with ``--descheduling-interval 0``: it lists the cluster,
evicts through the eviction API (or, with ``--dry-run``, only reports), writes
the Events, and prints one line per eviction — ``pod/NAME evicted (PLUGIN,
node NODE)``. ``up --descheduler-policy FILE`` validates the policy and turns
on the controller manager's ``descheduler`` controller with it
(``--descheduling-interval`` cluster seconds, default 300).

Kept apart from :mod:`emulator.cli` (which only registers these) and outside
:mod:`emulator.descheduler`: this glue reads kemu's configuration and cluster
state, which the descheduler package itself never imports.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emulator.descheduler.api import PolicyError, load_policy_file

if TYPE_CHECKING:
    from emulator.store.store import Store


def add_up_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--descheduler-policy", help="run the Descheduler in the controller manager with this "
                                                "DeschedulerPolicy (descheduler/v1alpha2) YAML")
    p.add_argument("--descheduling-interval", type=float, help="cluster seconds between descheduling loops "
                                                               "(default 300; 0: once)")


def with_descheduler(cfg: Any, args: argparse.Namespace) -> Any:
    """``cfg`` with the descheduler controller on when ``--descheduler-policy`` was given (policy checked first)."""
    path = getattr(args, "descheduler_policy", None)
    if not path:
        return cfg
    from emulator.config import ConfigError

    path = str(Path(path).resolve())
    try:
        load_policy_file(path)
    except PolicyError as e:
        raise ConfigError(f"descheduler policy {path}: {e}") from None
    manager = dict(cfg.controller_manager)
    raw = manager.get("controllers", ("*",))
    controllers = [c for c in (raw.split(",") if isinstance(raw, str) else raw) if c != "-descheduler"]
    if "descheduler" not in controllers:
        controllers.append("descheduler")
    options = {**(manager.get("options") or {}), "descheduler_policy": path}
    interval = getattr(args, "descheduling_interval", None)
    if interval is not None:
        options["descheduling_interval"] = interval
    manager.update(controllers=controllers, options=options)
    return replace(cfg, controller_manager=manager)


def add_command(sub: Any) -> None:
    p = sub.add_parser("deschedule", help="run one descheduling loop (a DeschedulerPolicy) against the running "
                                          "cluster")
    p.add_argument("--policy", required=True, help="DeschedulerPolicy (descheduler/v1alpha2) YAML")
    p.add_argument("--dry-run", action="store_true", help="report what would be evicted; evict nothing")
    p.add_argument("--redis-url", help="the cluster's Redis (default: the detached cluster's, or $KEMU_REDIS_URL)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.set_defaults(fn=cmd_deschedule)


def cluster_redis_url(args: argparse.Namespace) -> str | None:
    """``--redis-url``, else ``$KEMU_REDIS_URL``, else the detached cluster's (None: no cluster runs)."""
    if args.redis_url:
        return str(args.redis_url)
    if os.environ.get("KEMU_REDIS_URL"):
        return os.environ["KEMU_REDIS_URL"]
    from emulator.cluster import running_redis_url

    return running_redis_url()


def connect_cluster_store(args: argparse.Namespace) -> Store | None:
    """A store client on the cluster :func:`cluster_redis_url` finds; None (with the error printed) if none runs."""
    from emulator.store.store import Store, StoreConfig

    url = cluster_redis_url(args)
    if url is None:
        print("kemu: error: no kemu cluster is running (start one with `kemu up --detach`, or pass --redis-url)",
              file=sys.stderr)
        return None
    return Store.connect(url, StoreConfig())


def cmd_deschedule(args: argparse.Namespace) -> int:
    from emulator.controllers.runtime import EventRecorder
    from emulator.descheduler.descheduler import Descheduler, snapshot_from_store
    from emulator.server.core import ServerCore

    try:
        policy = load_policy_file(args.policy)
    except PolicyError as e:
        print(f"kemu: error: descheduler policy {args.policy}: {e}", file=sys.stderr)
        return 1
    store = connect_cluster_store(args)
    if store is None:
        return 1
    try:
        core = ServerCore(store)
        recorder = None if args.dry_run else EventRecorder(core, "descheduler", clock=core.clock).start()
        descheduler = Descheduler(policy, core.clock, core=core, dry_run=args.dry_run, recorder=recorder)
        try:
            result = descheduler.run_once(snapshot_from_store(core, core.clock))
        finally:
            if recorder is not None:
                recorder.stop()
    finally:
        store.close()
    suffix = " (dry run)" if args.dry_run else ""
    if args.output == "json":
        print(json.dumps({"dryRun": args.dry_run, "nodes": result.nodes, "skipped": result.skipped,
                          "evicted": [{"namespace": e.namespace, "name": e.name, "node": e.node,
                                       "strategy": e.strategy, "profile": e.profile} for e in result.evicted],
                          "failed": [{"pod": k, "error": m} for k, m in result.failed], "errors": result.errors},
                         indent=2))
        return 0
    if result.skipped:
        print(result.skipped)
    for e in result.evicted:
        ns = "" if e.namespace == "default" else f" -n {e.namespace}"
        print(f"pod/{e.name}{ns} evicted ({e.strategy}, node {e.node}){suffix}")
    for key, message in result.failed:
        print(f"pod/{key} not evicted: {message}")
    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    print(f"{len(result.evicted)} pods evicted{suffix} over {result.nodes} nodes in {result.seconds:.3f} s")
    return 0
