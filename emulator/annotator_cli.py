"""``kemu node-annotator``: the node annotator on its own, as crane-scheduler's ``crane-scheduler-controller``.

Upstream the annotator is its own Deployment started with
``--prometheus-address``; in kemu it is the controller manager's
``node-annotator`` controller (``--controllers=*,node-annotator``, which
reads ``kemu up --prometheus-url`` as its ``prometheus_url`` option). This
command runs that controller alone against a running cluster (the detached
cluster's Redis, ``--redis-url`` or ``$KEMU_REDIS_URL``), in the foreground
until Ctrl-C: ``--prometheus-url`` makes it read the six windows from a real
Prometheus over PromQL instead of kemu's Redis history, ``--period`` and
``--policy`` (a ``DynamicSchedulerPolicy``: its ``hotValue`` rules) as the
controller options. Its own Lease (``kube-system/crane-scheduler-controller``)
elects one leader among several; run it *or* the manager's ``node-annotator``,
not both. Its clock is wall time at speed 1 (``--clock-speed`` for a sped-up
cluster; it starts from the wall clock, as ``kemu deschedule`` does).

Kept apart from :mod:`emulator.cli` (which only registers it), like
:mod:`emulator.descheduler_cli`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from emulator.controllers.manager import ManagerConfig

LEASE_NAME = "crane-scheduler-controller"


class AnnotatorArgsError(ValueError):
    """A bad ``kemu node-annotator`` flag; the message names it."""


def add_command(sub: Any) -> None:
    p = sub.add_parser("node-annotator", help="run the load-aware node annotator on its own (crane-scheduler's "
                                              "annotator) against the running cluster, until Ctrl-C")
    p.add_argument("--prometheus-url", help="read the utilization windows from this Prometheus (PromQL over the "
                                            "kubelets' series) instead of kemu's Redis usage history")
    p.add_argument("--period", type=float, help="cluster seconds between annotator passes (default 60)")
    p.add_argument("--policy", help="DynamicSchedulerPolicy YAML (its hotValue rules; default crane's)")
    p.add_argument("--clock-speed", type=float, default=1.0, help="the cluster's clock speed (default 1)")
    p.add_argument("--redis-url", help="the cluster's Redis (default: the detached cluster's, or $KEMU_REDIS_URL)")
    p.set_defaults(fn=cmd_node_annotator)


def manager_config(args: argparse.Namespace) -> ManagerConfig:
    """The one-controller manager the command runs; errors name the flag."""
    options: dict[str, Any] = {}
    url = getattr(args, "prometheus_url", None)
    if url:
        if not str(url).startswith(("http://", "https://")):
            raise AnnotatorArgsError(f"--prometheus-url must be an http:// or https:// URL, not {url!r}")
        options["prometheus_url"] = str(url)
    period = getattr(args, "period", None)
    if period is not None:
        if not period > 0:
            raise AnnotatorArgsError(f"--period must be a positive number of seconds, not {period}")
        options["node_annotator_period"] = float(period)
    path = getattr(args, "policy", None)
    if path:
        import yaml

        from emulator.loadaware.policy import Policy

        try:
            with open(path, encoding="utf-8") as f:
                raw = yaml.safe_load(f) or {}
            Policy.from_dict(raw)
        except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as e:
            raise AnnotatorArgsError(f"--policy {path}: {e}") from None
        options["load_aware_policy"] = raw
    return ManagerConfig(controllers=("node-annotator",), lease_name=LEASE_NAME, options=options,
                         cluster_state_metrics=False)


def cmd_node_annotator(args: argparse.Namespace) -> int:
    from emulator.clock import SystemClock
    from emulator.controllers.manager import ControllerManager
    from emulator.descheduler_cli import connect_cluster_store
    from emulator.server.core import ServerCore

    try:
        config = manager_config(args)
        clock = SystemClock(args.clock_speed)
    except ValueError as e:
        print(f"kemu: error: {e}", file=sys.stderr)
        return 1
    store = connect_cluster_store(args)
    if store is None:
        return 1
    done = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: done.set())
    manager = ControllerManager(ServerCore(store, clock), config)
    try:
        manager.start()
        source = config.options.get("prometheus_url") or "the Redis usage history"
        print(f"node annotator running (windows from {source}); Ctrl-C stops it", flush=True)
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        manager.stop()
        store.close()
    return 0
