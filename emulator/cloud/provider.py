"""The emulated cloud: node groups and their instances, kept as data in Redis.

What a cloud's API keeps for an Auto Scaling Group - its instances, each
booting or running or being terminated - is four Redis keys under the store
prefix:

* ``cloud:groups`` (hash): group name → its :class:`~emulator.cloud.nodegroups.NodeGroupSpec` (JSON);
* ``cloud:instances`` (hash): instance (= node) name → record (JSON): group, index,
  ``created`` and ``ready`` (cluster clock: when the kubelet registers it),
  ``fails`` (it never comes up), ``deleting`` (termination asked at);
* ``cloud:seq`` (hash): group → next instance index;
* ``cloud:version`` (int): bumped on every change, so a reader can tell in one
  ``GET`` whether anything moved.

Who acts on it: the Cluster Autoscaler's provider
(:mod:`emulator.clusterautoscaler.cloudprovider.kemu`) calls
:meth:`Cloud.increase_size` and :meth:`Cloud.delete_instances`; every kubelet
shard, on its tick (:mod:`emulator.kubelet.cloudnodes`), registers the
instances it owns once their ``ready`` time has passed and removes the ones
being deleted, then :meth:`Cloud.forget` s them. Why data and not calls - the
same reasons as :mod:`emulator.chaos`: it works across processes (the CA in
the controller manager, kubelets in Ray actors), it survives a restart of any
of them, and nothing needs to know where the shards run.

Provider faults (``kemu chaos``) are entries of the chaos table for target
``nodegroup/<name>``: ``out-of-quota`` makes ``increase_size`` fail as a
cloud's quota error would; ``slow-boot`` multiplies boot delays by
:data:`SLOW_BOOT_FACTOR`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from emulator import chaos
from emulator.cloud.nodegroups import NodeGroupSpec

__all__ = ["SLOW_BOOT_FACTOR", "Cloud", "CloudError", "Instance"]

SLOW_BOOT_FACTOR = 20.0


class CloudError(RuntimeError):
    """The cloud refused a request (quota, size limits, unknown group); ``code`` is a short error class."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Instance:
    """One instance of a node group (its name is its Node's)."""

    name: str
    group: str
    index: int
    created: float
    ready: float
    fails: bool = False
    deleting: float | None = None

    def to_json(self) -> str:
        return json.dumps({"group": self.group, "index": self.index, "created": self.created, "ready": self.ready,
                           "fails": self.fails, "deleting": self.deleting})

    @classmethod
    def from_json(cls, name: str, text: str | bytes) -> Instance:
        d = json.loads(text)
        return cls(name, d["group"], int(d["index"]), float(d["created"]), float(d["ready"]), bool(d.get("fails")),
                   d.get("deleting"))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Cloud:
    """The cloud's API over one Redis (``client``) and store ``prefix``; see the module docstring."""

    def __init__(self, client: Any, prefix: str = "") -> None:
        self.redis = client
        self.prefix = prefix
        self.k_groups = f"{prefix}cloud:groups"
        self.k_instances = f"{prefix}cloud:instances"
        self.k_seq = f"{prefix}cloud:seq"
        self.k_version = f"{prefix}cloud:version"

    # ------------------------------------------------------------------ groups
    def register_groups(self, specs: Sequence[NodeGroupSpec], now: float) -> None:
        """Declare node groups (kemu up): new groups start with ``initial_size`` running instances; groups
        already in Redis (a restart) keep their instances and take the new spec."""
        known = {_text(k) for k in self.redis.hkeys(self.k_groups)}
        pipe = self.redis.pipeline(transaction=True)
        for spec in specs:
            pipe.hset(self.k_groups, spec.name, spec.to_json())
        pipe.incr(self.k_version)
        pipe.execute()
        for spec in specs:
            if spec.name not in known and spec.initial_size:
                self._create(spec, spec.initial_size, now, boot=False)

    def groups(self) -> dict[str, NodeGroupSpec]:
        return {_text(k): NodeGroupSpec.from_json(v) for k, v in (self.redis.hgetall(self.k_groups) or {}).items()}

    def group(self, name: str) -> NodeGroupSpec:
        raw = self.redis.hget(self.k_groups, name)
        if raw is None:
            raise CloudError("NotFound", f"node group {name!r} does not exist")
        return NodeGroupSpec.from_json(raw)

    # ------------------------------------------------------------------ instances
    def version(self) -> int:
        return int(self.redis.get(self.k_version) or 0)

    def instances(self, group: str | None = None) -> list[Instance]:
        out = [Instance.from_json(_text(k), v) for k, v in (self.redis.hgetall(self.k_instances) or {}).items()]
        out.sort(key=lambda i: (i.group, i.index))
        return out if group is None else [i for i in out if i.group == group]

    def target_size(self, group: str) -> int:
        """Instances asked for and not being deleted (upstream ``NodeGroup.TargetSize``)."""
        return sum(1 for i in self.instances(group) if i.deleting is None)

    def faults(self, group: str) -> set[str]:
        fault = chaos.faults(self.redis, self.prefix).get(f"nodegroup/{group}")
        return {fault} if fault else set()

    def increase_size(self, group: str, delta: int, now: float) -> list[Instance]:
        """Ask for ``delta`` more instances (upstream ``IncreaseSize``); they boot after the group's delay."""
        if delta <= 0:
            raise CloudError("InvalidArgument", f"size increase must be positive, not {delta}")
        spec = self.group(group)
        target = self.target_size(group)
        if target + delta > spec.max_size:
            raise CloudError("MaxSizeReached", f"size increase too large - desired:{target + delta} "
                                               f"max:{spec.max_size}")
        faults = self.faults(group)
        if chaos.OUT_OF_QUOTA in faults or (spec.quota is not None and target + delta > spec.quota):
            raise CloudError("QuotaExceeded", f"node group {group}: instance quota exceeded "
                                              f"(quota {spec.quota if spec.quota is not None else target})")
        return self._create(spec, delta, now, boot=True, slow=chaos.SLOW_BOOT in faults)

    def _create(self, spec: NodeGroupSpec, count: int, now: float, *, boot: bool, slow: bool = False) -> list[Instance]:
        last = int(self.redis.hincrby(self.k_seq, spec.name, count))
        created = []
        for index in range(last - count, last):
            rng = spec.instance_rng(index)
            delay = spec.provisioning_delay.sample(rng) * (SLOW_BOOT_FACTOR if slow else 1.0) if boot else 0.0
            fails = boot and spec.failure_probability > 0 and rng.random() < spec.failure_probability
            created.append(Instance(spec.node_name(index), spec.name, index, now, now + delay, fails))
        pipe = self.redis.pipeline(transaction=True)
        for inst in created:
            pipe.hset(self.k_instances, inst.name, inst.to_json())
        pipe.incr(self.k_version)
        pipe.execute()
        return created

    def delete_instances(self, names: Iterable[str], now: float) -> int:
        """Terminate instances (upstream ``DeleteNodes``); the owning kubelet shard removes their Nodes."""
        names = list(names)
        raws = self.redis.hmget(self.k_instances, names) if names else []
        pipe = self.redis.pipeline(transaction=True)
        n = 0
        for name, raw in zip(names, raws, strict=True):
            if raw is None:
                continue
            inst = Instance.from_json(name, raw)
            if inst.deleting is None:
                pipe.hset(self.k_instances, name, Instance(**{**inst.__dict__, "deleting": now}).to_json())
                n += 1
        pipe.incr(self.k_version)
        pipe.execute()
        return n

    def forget(self, names: Iterable[str]) -> None:
        """Drop terminated instances' records (the kubelet shard did its part)."""
        names = list(names)
        if names:
            pipe = self.redis.pipeline(transaction=True)
            pipe.hdel(self.k_instances, *names)
            pipe.incr(self.k_version)
            pipe.execute()
