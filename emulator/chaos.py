"""Chaos controls: faults injected into emulated kubelets, kept as data in Redis.

The fault table is one Redis hash, ``<prefix>chaos``, one field per target:

* ``node/<name>`` → ``stop-kubelet``: the node's kubelet stops heartbeating - no
  Lease renewals, no node status, no pod status writes for its pods (so pods
  deleted there stay Terminating, as behind a dead kubelet upstream). The node
  lifecycle controller then sees a silent node: Ready=Unknown after the grace
  period, ``unreachable`` taints, evictions after tolerationSeconds.
* ``node/<name>`` → ``break-runtime``: the kubelet keeps heartbeating (the node
  stays Ready) but pods bound there are never admitted, so they stay Pending
  with no containers started. Nothing upstream notices a node that accepts
  pods and never runs them - the scheduler keeps placing pods there (the "no
  circuit breaker" case).
* ``shard/<n>`` → ``partition``: kubelet shard ``n`` is cut off from the API
  server: it writes nothing (leases, node status, pod status, events, usage)
  until restored. Its model keeps running, so on restore it writes the
  present state at once.
* ``nodegroup/<name>`` → ``out-of-quota``: the emulated cloud refuses to grow
  the group (:mod:`emulator.cloud.provider`), as a cloud's quota error would;
  ``slow-boot``: the group's new instances boot
  ``SLOW_BOOT_FACTOR`` times slower. The kubelets ignore these; the cloud reads
  them when asked for instances.

Why data in Redis and not a call to the kubelet actors: every shard already
holds a Redis connection, the faults survive a shard restart (a chaos
experiment should not end because Ray restarted an actor), and the CLI, an
HTTP endpoint or a test can all set them without knowing where the shards
run. The shards read the table once per tick with one ``HGETALL`` of a hash
that is empty in normal runs (:func:`read`), so the cost is one round trip per
tick per shard, not per node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BREAK_RUNTIME", "FAULTS", "OUT_OF_QUOTA", "PARTITION", "SLOW_BOOT", "STOP_KUBELET",
           "ChaosError", "ChaosState", "clear", "clear_all",
           "faults", "key", "node_target", "read", "set_fault", "shard_target"]

STOP_KUBELET = "stop-kubelet"
BREAK_RUNTIME = "break-runtime"
PARTITION = "partition"
OUT_OF_QUOTA = "out-of-quota"
SLOW_BOOT = "slow-boot"
# Which faults a kind of target can take.
FAULTS: Mapping[str, tuple[str, ...]] = {"node": (STOP_KUBELET, BREAK_RUNTIME), "shard": (PARTITION,),
                                         "nodegroup": (OUT_OF_QUOTA, SLOW_BOOT)}


class ChaosError(ValueError):
    """A target or fault that does not exist."""


def key(prefix: str) -> str:
    """The Redis hash holding the fault table."""
    return f"{prefix}chaos"


def node_target(name: str) -> str:
    return f"node/{name}"


def shard_target(index: int) -> str:
    return f"shard/{index}"


def _check(target: str, fault: str | None = None) -> None:
    kind, _, name = target.partition("/")
    if kind not in FAULTS or not name:
        raise ChaosError(f"chaos target must be node/<name>, shard/<n> or nodegroup/<name>, not {target!r}")
    if kind == "shard" and not name.isdigit():
        raise ChaosError(f"shard target needs a shard number, not {name!r}")
    if fault is not None and fault not in FAULTS[kind]:
        raise ChaosError(f"a {kind} takes {' or '.join(FAULTS[kind])}, not {fault!r}")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def set_fault(client: Any, prefix: str, target: str, fault: str) -> None:
    """Inject ``fault`` on ``target`` (``node/<name>`` or ``shard/<n>``); replaces the target's earlier fault."""
    _check(target, fault)
    client.hset(key(prefix), target, fault)


def clear(client: Any, prefix: str, target: str) -> bool:
    """Restore one target; True if it had a fault."""
    _check(target)
    return bool(client.hdel(key(prefix), target))


def clear_all(client: Any, prefix: str) -> int:
    """Restore every target; returns how many had a fault."""
    n = int(client.hlen(key(prefix)))
    client.delete(key(prefix))
    return n


def faults(client: Any, prefix: str) -> dict[str, str]:
    """The fault table: target -> fault."""
    return {_text(k): _text(v) for k, v in (client.hgetall(key(prefix)) or {}).items()}


@dataclass(frozen=True)
class ChaosState:
    """One reading of the fault table, shaped for the kubelet shard's questions."""

    stopped: frozenset[str] = field(default_factory=frozenset)  # nodes whose kubelet is stopped
    broken: frozenset[str] = field(default_factory=frozenset)  # nodes whose runtime is broken
    partitioned: frozenset[int] = field(default_factory=frozenset)  # kubelet shard indexes cut off

    def __bool__(self) -> bool:
        return bool(self.stopped or self.broken or self.partitioned)


NO_CHAOS = ChaosState()


def state_of(table: Mapping[str, str]) -> ChaosState:
    stopped, broken, partitioned = set(), set(), set()
    for target, fault in table.items():
        kind, _, name = target.partition("/")
        if kind == "node" and fault == STOP_KUBELET:
            stopped.add(name)
        elif kind == "node" and fault == BREAK_RUNTIME:
            broken.add(name)
        elif kind == "shard" and fault == PARTITION and name.isdigit():
            partitioned.add(int(name))
    if not (stopped or broken or partitioned):
        return NO_CHAOS
    return ChaosState(frozenset(stopped), frozenset(broken), frozenset(partitioned))


def read(client: Any, prefix: str) -> ChaosState:
    """The cheap per-tick reader: one ``HGETALL`` (of an empty hash, normally)."""
    return state_of(faults(client, prefix))
