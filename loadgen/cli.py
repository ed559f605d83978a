"""``kemu run SCENARIO`` and ``kemu bench ...``: the subcommands the load generator contributes to ``kemu``.

``emulator`` never imports ``loadgen`` (an import-linter contract): the
scenario runner drives the emulator, not the other way round. So ``run``
is registered the way ``actors.cli`` registers ``ray-node`` — a
:data:`emulator.cli.CommandRegistration` the composing entry point passes to
:func:`emulator.cli.main` — and ``python -m loadgen.cli run ...`` is the
Ray-less form of ``kemu run`` (kubelets and schedulers in this process).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from emulator import cli
from loadgen import bench_openb
from loadgen.runner import RunOptions, run_scenario

__all__ = ["cmd_run", "main", "register"]


def cmd_run(args: argparse.Namespace) -> int:
    cfg = cli._config(args)
    if args.attach and not cfg.redis_url:
        raise cli.CLIError("kemu run --attach drives a running cluster: give its Redis with --redis-url "
                           "(or KEMU_REDIS_URL)")
    if args.api_port is None:
        # A run's API server takes any free port, so runs never clash with a `kemu up` on 6443.
        cfg = replace(cfg, api_port=0)
    # The injected runners: under `kemu` (actors/cli.py) kubelet shards and schedulers are Ray actors.
    options = RunOptions(seed=args.seed, output=args.output, report=args.report, attach=args.attach,
                         driver=args.driver, processes=args.driver_processes, kubeconfig=args.kubeconfig,
                         compare=args.compare)
    return run_scenario(Path(args.scenario), cfg, options,
                        kubelets=getattr(args, "kubelets", None), schedulers=getattr(args, "scheduler_runner", None),
                        controllers=getattr(args, "controller_runner", None))


def register(sub: cli.SubParsers) -> None:
    """Add ``run`` and ``bench`` to the ``kemu`` subcommands (a :data:`emulator.cli.CommandRegistration`)."""
    run = sub.add_parser("run", help="bring a cluster up, run a scenario, print its summary")
    run.add_argument("scenario", help="scenario YAML, e.g. loadgen/scenarios/quickstart.yaml")
    cli._add_cluster_flags(run)
    run.add_argument("--seed", type=int, help="override the scenario's seed")
    run.add_argument("--output", help="write the summary as JSON to this file (default "
                                      "kemu-runs/<scenario>-<seed>/summary.json)")
    run.add_argument("--report", help="write the HTML report to this file (default: report.html next to the JSON)")
    run.add_argument("--attach", action="store_true", help="drive the running cluster at --redis-url (compose, "
                                                          "kemu up) instead of starting one")
    run.add_argument("--driver", choices=("store", "http", "null"), help="override the scenario's driver.kind")
    run.add_argument("--driver-processes", type=int, help="override the scenario's driver.processes")
    run.add_argument("--compare", action="store_true", help="run every variant of the scenario's `compare` "
                                                             "section on the same seed and print them side by side")
    run.add_argument("--kubeconfig", help="with --attach: the API server (and token) for kubectl and the http "
                                          "driver")
    run.set_defaults(fn=cmd_run)
    bench = sub.add_parser("bench", help="in-process experiments over kemu's scheduler framework (no cluster)")
    experiments = bench.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    bench_openb.add_parser(experiments)


def main(argv: list[str] | None = None) -> int:
    """The Ray-less ``kemu`` with ``run``: :func:`emulator.cli.main` plus :func:`register`."""
    return cli.main(argv, module="loadgen.cli", commands=[register])


if __name__ == "__main__":
    sys.exit(main())
