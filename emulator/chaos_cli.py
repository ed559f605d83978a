"""``kemu chaos``: set, clear and list faults in the detached cluster's fault table.

The faults themselves are data (:mod:`emulator.chaos`: stop a node's kubelet,
break its runtime, partition a kubelet shard, make a node group out of quota or
slow to boot); the kubelet shards and the emulated cloud act on them at their
next tick. This module is only the command line over that table.
"""

from __future__ import annotations

import argparse
import json

from emulator import cli


def register(sub: cli.SubParsers) -> None:
    """Add ``chaos`` to the ``kemu`` subcommands."""
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


def _chaos_target(text: str) -> str:
    """``node/NAME``, ``shard/N``, or a bare node name."""
    return text if text.startswith(("node/", "shard/", "nodegroup/")) else f"node/{text}"


def cmd_chaos(args: argparse.Namespace) -> int:
    """Set, clear or list faults in the detached cluster's fault table (its kubelet shards act on their next tick)."""
    from emulator import chaos
    from emulator.cluster import ClusterState
    from emulator.processes import pid_alive
    from emulator.store.store import Store, StoreConfig

    state = ClusterState.read()
    if state is None or not pid_alive(state.pid):
        raise cli.CLIError("no kemu cluster is running (start one with `kemu up --detach`)")
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
                raise cli.CLIError("kemu chaos restore: give a TARGET (node/NAME, shard/N or a node name) or --all")
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
        raise cli.CLIError(str(e)) from None
    finally:
        store.close()
