"""``kemu load``: set and read the load targets of a running cluster (:mod:`emulator.loadtargets`).

For kubectl users, what a scenario's ``load`` phase does: ``kemu load set web
120`` offers 120 requests/s to the pods annotated ``kemu.io/load-target: web``
(their kubelet shards share it among the ready ones from their next tick on),
``kemu load set-queue jobs 40`` sets a work queue's depth, ``kemu load get``
lists both, ``kemu load clear web`` forgets one. The cluster is the detached
one (``kemu up --detach``) or the Redis given with ``--redis-url``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(sub: Any) -> None:
    """Add ``load`` to the ``kemu`` subcommands."""
    load = sub.add_parser("load", help="set or read load targets' request rates (and queue depths)")
    load.add_argument("--redis-url", help="the cluster's Redis (default: the detached cluster's)")
    actions = load.add_subparsers(dest="load_action", required=True)
    set_ = actions.add_parser("set", help="offer RATE requests/s to the pods of TARGET")
    set_.add_argument("target")
    set_.add_argument("rate", type=float)
    queue = actions.add_parser("set-queue", help="set the depth of work queue QUEUE")
    queue.add_argument("queue")
    queue.add_argument("depth", type=float)
    get = actions.add_parser("get", help="the targets' rates and the queues' depths")
    get.add_argument("-o", "--output", choices=("text", "json"), default="text")
    clear = actions.add_parser("clear", help="forget a target's rate (or a queue)")
    clear.add_argument("target")
    load.set_defaults(fn=cmd_load)


def _store(args: argparse.Namespace) -> Any:
    from emulator.cli import CLIError
    from emulator.cluster import running_redis_url
    from emulator.store.store import Store, StoreConfig

    url = args.redis_url or running_redis_url()
    if url is None:
        raise CLIError("no kemu cluster is running (start one with `kemu up --detach`, or give --redis-url)")
    return Store.connect(url, StoreConfig())


def cmd_load(args: argparse.Namespace) -> int:
    from emulator import loadtargets
    from emulator.cli import CLIError

    store = _store(args)
    client, prefix = store.redis, store.config.prefix
    try:
        if args.load_action == "set":
            rate = loadtargets.set_rate(client, prefix, args.target, args.rate)
            print(f"load target {args.target}: {rate:g} requests/s")
        elif args.load_action == "set-queue":
            depth = loadtargets.set_queue_depth(client, prefix, args.queue, args.depth)
            print(f"queue {args.queue}: {depth:g} items")
        elif args.load_action == "clear":
            had = loadtargets.clear(client, prefix, args.target)
            print(f"cleared {args.target}" if had else f"{args.target} had no rate or queue depth")
        else:
            rates, queues = loadtargets.rates(client, prefix), loadtargets.queues(client, prefix)
            if args.output == "json":
                print(json.dumps({"targets": rates, "queues": queues}, indent=2, sort_keys=True))
            elif not rates and not queues:
                print("no load targets")
            else:
                print(f"{'KIND':<8}{'NAME':<32}VALUE")
                for name, rate in sorted(rates.items()):
                    print(f"{'target':<8}{name:<32}{rate:g} requests/s")
                for name, depth in sorted(queues.items()):
                    print(f"{'queue':<8}{name:<32}{depth:g} items")
    except loadtargets.LoadTargetError as e:
        raise CLIError(str(e)) from None
    finally:
        store.close()
    return 0
