"""Load targets: the traffic emulated workloads answer to, kept as data in Redis.

Upstream, a Deployment's pods receive requests through a Service; its load
balancer spreads the clients' request rate over the *ready* endpoints. kemu
has no clients, so the offered load is data: a named *load target* (``web``)
has a request rate (requests per second), set by a scenario's ``load`` phase
(:mod:`loadgen.runner`) or by hand with ``kemu load set TARGET RATE``. Pods
join a target with the annotation ``kemu.io/load-target: web`` (on the pod
template); the kubelet shards share the rate equally among the target's ready
pods, and each pod's CPU and ``http_requests_per_second`` follow its share
(:mod:`emulator.kubelet.load`). Work queues (``kemu_loadgen_queue_depth``,
what a KEDA-style scaler reads) are kept beside the rates.

Layout (``P`` the store's key prefix)::

    P load:rate      hash  target -> requests per second (text)
    P load:queue     hash  queue  -> items waiting (text)
    P load:ready     hash  "<shard>/<target>" -> "<ready pods> <cluster time>"

The share is ``rate / ready pods of the target cluster-wide``, but a kubelet
shard only hosts some of the target's pods. Each shard therefore writes its
own ready-pod count per target into ``load:ready`` and reads every shard's
counts, all in one pipelined round trip per tick (:func:`exchange`), and
uses its *live* count for itself and the others' last published ones. That
costs one ``HSET`` and two ``HGETALL`` per shard per tick, independent of the
number of pods, and needs no pod informer over the whole cluster (a shard
watches only its own nodes' pods). Others' counts lag by at most one tick, as
a load balancer lags behind endpoint changes. Counts a dead shard left behind
are ignored once older than :data:`READY_MAX_AGE` seconds of cluster time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["READY_MAX_AGE", "LoadTargetError", "clear", "exchange", "queues", "rates", "set_queue_depth",
           "set_rate", "validate_name"]

RATE_KEY = "load:rate"
QUEUE_KEY = "load:queue"
READY_KEY = "load:ready"
# Cluster seconds after which a shard's published ready count no longer counts (its shard is gone).
READY_MAX_AGE = 30.0

_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


class LoadTargetError(ValueError):
    """A bad target name or rate."""


def validate_name(name: str) -> str:
    """Target and queue names are lowercase DNS subdomains, as the Services they stand for."""
    if not isinstance(name, str) or len(name) > 253 or not _NAME.fullmatch(name):
        raise LoadTargetError(f"load target name {name!r} must be a lowercase DNS subdomain (e.g. web)")
    return name


def _value(value: float, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LoadTargetError(f"{what} {value!r} is not a number") from None
    if not math.isfinite(number) or number < 0:
        raise LoadTargetError(f"{what} must be a finite number >= 0, not {value!r}")
    return number


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def set_rate(client: Any, prefix: str, target: str, rate: float) -> float:
    """Set the request rate (requests/s) offered to ``target``; returns it as stored."""
    value = _value(rate, "request rate")
    client.hset(prefix + RATE_KEY, validate_name(target), repr(value))
    return value


def set_queue_depth(client: Any, prefix: str, queue: str, depth: float) -> float:
    value = _value(depth, "queue depth")
    client.hset(prefix + QUEUE_KEY, validate_name(queue), repr(value))
    return value


def _table(client: Any, key: str) -> dict[str, float]:
    return {_text(k): float(_text(v)) for k, v in (client.hgetall(key) or {}).items()}


def rates(client: Any, prefix: str) -> dict[str, float]:
    """Every target's request rate."""
    return _table(client, prefix + RATE_KEY)


def queues(client: Any, prefix: str) -> dict[str, float]:
    """Every queue's depth."""
    return _table(client, prefix + QUEUE_KEY)


def clear(client: Any, prefix: str, target: str) -> bool:
    """Forget a target's rate (and a queue of that name); whether there was one."""
    removed = client.hdel(prefix + RATE_KEY, target) + client.hdel(prefix + QUEUE_KEY, target)
    return bool(removed)


def exchange(client: Any, prefix: str, shard: int, ready: Mapping[str, int], now: float) -> dict[str, float]:
    """One shard's per-tick round trip: publish its ready pods per target, get each target's rate per ready pod.

    ``ready`` is the shard's live count of ready pods per target (targets it
    hosts pods of, zeros included so a count that drops to 0 is published).
    Returns ``{target: rate / ready pods cluster-wide}`` for every target with
    a rate and at least one ready pod anywhere.
    """
    pipe = client.pipeline(transaction=False)
    if ready:
        pipe.hset(prefix + READY_KEY, mapping={f"{shard}/{t}": f"{n} {now!r}" for t, n in ready.items()})
    pipe.hgetall(prefix + RATE_KEY)
    pipe.hgetall(prefix + READY_KEY)
    replies = pipe.execute()
    rate_table, ready_table = replies[-2], replies[-1]
    totals: dict[str, int] = dict(ready)
    own = f"{shard}/"
    for raw_key, raw_value in (ready_table or {}).items():
        field = _text(raw_key)
        if field.startswith(own):
            continue  # our own live count is already in
        _, _, target = field.partition("/")
        count, _, at = _text(raw_value).partition(" ")
        if now - float(at) > READY_MAX_AGE:
            continue
        totals[target] = totals.get(target, 0) + int(count)
    shares: dict[str, float] = {}
    for raw_key, raw_value in (rate_table or {}).items():
        target = _text(raw_key)
        pods = totals.get(target, 0)
        if pods > 0:
            shares[target] = float(_text(raw_value)) / pods
    return shares
