"""Node groups of the emulated cloud: what a group's instances look like, cost, and how they boot.

A node group is what a cloud calls an Auto Scaling Group / managed instance
group / node pool: identical instances between ``min`` and ``max`` that the
Cluster Autoscaler resizes. Declared in ``kemu up --node-groups FILE`` or a
config's ``node_groups`` list::

    node_groups:
    - name: spot-small
      min: 0
      max: 20
      initial_size: 1
      instance_type: m5.large        # capacity from emulator.kubelet.nodes.INSTANCE_TYPES ...
      capacity: {cpu: "2"}           # ... or overridden here
      labels: {tier: web}
      taints: [{key: spot, value: "true", effect: NoSchedule}]
      zones: [zone-a, zone-b]
      price_per_hour: 0.096
      provisioning_delay: {min: 30s, max: 90s}   # uniform; or "60s"; or {mean: 60s, stddev: 10s}
      failure_probability: 0.0       # an instance that never comes up
      quota: 50                      # instances the cloud account allows in this group

Every error names the field (``node_groups[1].min (5) must not be greater than
max (3)``), so ``kemu up`` stops at once with a message the user can act on.
An instance of group ``g`` is the node ``g-<index:05d>``, registered as a pool
node of the :class:`~emulator.kubelet.nodes.NodePool` :meth:`NodeGroupSpec.pool`
returns (labels ``kemu.io/node-pool=g`` and ``kemu.io/node-group=g``,
``spec.providerID kemu://g/<name>``).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from emulator.api.gotime import parse_go_duration
from emulator.kubelet.nodes import INSTANCE_TYPES, NodeConfigError, NodePool

__all__ = ["LABEL_NODE_GROUP", "BootDelay", "NodeGroupConfigError", "NodeGroupSpec", "parse_node_groups"]

LABEL_NODE_GROUP = "kemu.io/node-group"


class NodeGroupConfigError(ValueError):
    """A node group setting is invalid; the message names the field."""


@dataclass(frozen=True)
class BootDelay:
    """Seconds from an instance's creation to its Node registering: fixed, uniform or normal (clipped at 0)."""

    low: float = 0.0
    high: float = 0.0
    mean: float | None = None
    stddev: float = 0.0

    @classmethod
    def parse(cls, value: Any, where: str) -> BootDelay:
        try:
            if value is None:
                return cls()
            if isinstance(value, Mapping):
                unknown = sorted(set(value) - {"min", "max", "mean", "stddev"})
                if unknown:
                    raise NodeGroupConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; "
                                               "known: min, max (uniform) or mean, stddev (normal)")
                if "mean" in value:
                    return cls(mean=parse_go_duration(value["mean"]),
                               stddev=parse_go_duration(value.get("stddev", 0)))
                low = parse_go_duration(value.get("min", 0))
                high = parse_go_duration(value.get("max", value.get("min", 0)))
                if high < low:
                    raise NodeGroupConfigError(f"{where}.max must not be less than {where}.min")
                return cls(low, high)
            fixed = parse_go_duration(value)
            return cls(fixed, fixed)
        except ValueError as e:
            if isinstance(e, NodeGroupConfigError):
                raise
            raise NodeGroupConfigError(f"{where}: {e}") from None

    def sample(self, rng: random.Random) -> float:
        if self.mean is not None:
            return max(0.0, rng.gauss(self.mean, self.stddev))
        return self.low if self.high <= self.low else rng.uniform(self.low, self.high)

    def to_dict(self) -> dict[str, Any]:
        if self.mean is not None:
            return {"mean": self.mean, "stddev": self.stddev}
        return {"min": self.low, "max": self.high}


_KNOWN = ("name", "min", "max", "initial_size", "instance_type", "capacity", "labels", "taints", "zones", "region",
          "price_per_hour", "provisioning_delay", "failure_probability", "quota")
_ALIASES = {"min_size": "min", "max_size": "max", "minsize": "min", "maxsize": "max", "price": "price_per_hour",
            "boot_delay": "provisioning_delay"}


@dataclass(frozen=True)
class NodeGroupSpec:
    """One node group (see the module docstring)."""

    name: str
    min_size: int = 0
    max_size: int = 0
    initial_size: int = 0
    instance_type: str = "m5.2xlarge"
    capacity: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    zones: tuple[str, ...] = ("zone-a", "zone-b", "zone-c")
    region: str = "region-1"
    price_per_hour: float = 0.0
    provisioning_delay: BootDelay = field(default_factory=BootDelay)
    failure_probability: float = 0.0
    quota: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "node group") -> NodeGroupSpec:
        if not isinstance(data, Mapping):
            raise NodeGroupConfigError(f"{where} must be a mapping, not {type(data).__name__}")
        values: dict[str, Any] = {}
        for key, value in data.items():
            name = str(key).replace("-", "_")
            values[_ALIASES.get(name.lower(), name)] = value
        unknown = sorted(set(values) - set(_KNOWN))
        if unknown:
            raise NodeGroupConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(_KNOWN)}")
        name = str(values.get("name") or "")
        if not name:
            raise NodeGroupConfigError(f"{where}.name is required")

        def integer(key: str, default: int | None) -> int | None:
            value = values.get(key, default)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).lstrip("-").isdigit():
                raise NodeGroupConfigError(f"{where}.{key}: {value!r} is not an integer")
            return int(value)

        def number(key: str, default: float) -> float:
            value = values.get(key, default)
            try:
                return float(value)
            except (TypeError, ValueError):
                raise NodeGroupConfigError(f"{where}.{key}: {value!r} is not a number") from None

        min_size = integer("min", 0) or 0
        max_size = integer("max", None)
        if max_size is None:
            raise NodeGroupConfigError(f"{where}.max is required")
        initial = integer("initial_size", min_size)
        try:
            spec = cls(name=name, min_size=min_size, max_size=max_size, initial_size=min_size if initial is None
                       else initial, instance_type=str(values.get("instance_type", "m5.2xlarge")),
                       capacity={str(k): str(v) for k, v in (values.get("capacity") or {}).items()},
                       labels={str(k): str(v) for k, v in (values.get("labels") or {}).items()},
                       taints=tuple(dict(t) for t in values.get("taints") or ()),
                       zones=tuple(str(z) for z in (values.get("zones") or ("zone-a", "zone-b", "zone-c"))),
                       region=str(values.get("region", "region-1")),
                       price_per_hour=number("price_per_hour", 0.0),
                       provisioning_delay=BootDelay.parse(values.get("provisioning_delay"),
                                                          f"{where}.provisioning_delay"),
                       failure_probability=number("failure_probability", 0.0), quota=integer("quota", None))
        except (AttributeError, TypeError) as e:
            raise NodeGroupConfigError(f"{where}: {e}") from None
        spec.validate(where)
        return spec

    def validate(self, where: str = "node group") -> None:
        if self.min_size < 0:
            raise NodeGroupConfigError(f"{where}.min ({self.min_size}) must not be negative")
        if self.max_size < 1:
            raise NodeGroupConfigError(f"{where}.max ({self.max_size}) must be at least 1")
        if self.min_size > self.max_size:
            raise NodeGroupConfigError(f"{where}.min ({self.min_size}) must not be greater than max ({self.max_size})")
        if not self.min_size <= self.initial_size <= self.max_size:
            raise NodeGroupConfigError(f"{where}.initial_size ({self.initial_size}) must be between min "
                                       f"({self.min_size}) and max ({self.max_size})")
        if self.price_per_hour < 0:
            raise NodeGroupConfigError(f"{where}.price_per_hour must not be negative")
        if not 0.0 <= self.failure_probability <= 1.0:
            raise NodeGroupConfigError(f"{where}.failure_probability ({self.failure_probability}) must be between "
                                       "0 and 1")
        if self.quota is not None and self.quota < 0:
            raise NodeGroupConfigError(f"{where}.quota must not be negative")
        if self.instance_type not in INSTANCE_TYPES and not self.capacity:
            raise NodeGroupConfigError(f"{where}.instance_type: unknown {self.instance_type!r} and no capacity "
                                       f"given; known: {', '.join(sorted(INSTANCE_TYPES))}")
        try:
            self.pool().validate(where)
        except NodeConfigError as e:
            raise NodeGroupConfigError(str(e)) from None

    def pool(self) -> NodePool:
        """The node pool an instance of this group registers as (its index is the instance's)."""
        return NodePool(name=self.name, count=0, instance_type=self.instance_type, capacity=dict(self.capacity),
                        zones=self.zones, region=self.region, labels={LABEL_NODE_GROUP: self.name, **self.labels},
                        taints=self.taints)

    def node_name(self, index: int) -> str:
        return self.pool().node_name(index)

    def instance_rng(self, index: int) -> random.Random:
        """A generator seeded by the instance's name: its boot delay and fate are the same in every run."""
        seed = hashlib.blake2b(self.node_name(index).encode(), digest_size=8).digest()
        return random.Random(int.from_bytes(seed, "big"))

    def to_json(self) -> str:
        data = asdict(self)
        data["provisioning_delay"] = self.provisioning_delay.to_dict()
        data["taints"] = [dict(t) for t in self.taints]
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> NodeGroupSpec:
        data = json.loads(text)
        data["provisioning_delay"] = BootDelay(**{k: v for k, v in {
            "low": data["provisioning_delay"].get("min", 0.0), "high": data["provisioning_delay"].get("max", 0.0),
            "mean": data["provisioning_delay"].get("mean"),
            "stddev": data["provisioning_delay"].get("stddev", 0.0)}.items()})
        data["taints"] = tuple(data.get("taints") or ())
        data["zones"] = tuple(data.get("zones") or ())
        return cls(**data)


def parse_node_groups(items: Sequence[Any], where: str = "node_groups") -> list[NodeGroupSpec]:
    """Parse and validate a ``node_groups`` list; names must be unique."""
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        raise NodeGroupConfigError(f"{where} must be a list of node groups")
    specs: list[NodeGroupSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        spec = NodeGroupSpec.from_dict(item, f"{where}[{i}]")
        if spec.name in seen:
            raise NodeGroupConfigError(f"{where}[{i}].name: {spec.name!r} is used twice")
        seen.add(spec.name)
        specs.append(spec)
    return specs
