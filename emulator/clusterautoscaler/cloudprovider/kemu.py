"""The kemu cloud provider: :class:`NodeGroup` over the emulated cloud in Redis (:mod:`emulator.cloud`).

The counterpart of upstream's provider packages (``cloudprovider/aws`` ...):
groups and instances come from :class:`~emulator.cloud.provider.Cloud`, a node
belongs to the group named by its ``kemu.io/node-group`` label, and a group's
template node is the Node its next instance would register (the kubelet's own
``new_pool_node`` with the kubelet's allocatable formula), so simulations see
exactly what will arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from emulator.api.types import Obj
from emulator.clock import Clock
from emulator.cloud.nodegroups import LABEL_NODE_GROUP, NodeGroupSpec
from emulator.cloud.provider import Cloud, Instance
from emulator.clusterautoscaler.cloudprovider import CloudProvider, InstanceState, NodeGroup, ProviderInstance
from emulator.kubelet import nodes as nd

__all__ = ["KemuCloudProvider", "KemuNodeGroup"]

TEMPLATE_PREFIX = "template-node-for-"


def _default_allocatable(capacity: Mapping[str, Any]) -> dict[str, str]:
    """The kubelet's default allocatable (no reservations, ``memory.available<100Mi``, ``nodefs.available<10%``)."""
    from emulator.kubelet import eviction as ev

    return nd.allocatable(capacity, eviction_hard=ev.parse_thresholds(dict(ev.DEFAULT_HARD_THRESHOLDS), hard=True))


class KemuNodeGroup(NodeGroup):
    def __init__(self, provider: KemuCloudProvider, spec: NodeGroupSpec) -> None:
        self.provider = provider
        self.spec = spec

    def id(self) -> str:
        return self.spec.name

    def min_size(self) -> int:
        return self.spec.min_size

    def max_size(self) -> int:
        return self.spec.max_size

    def _instances(self) -> list[Instance]:
        return self.provider.instances_of(self.spec.name)

    def target_size(self) -> int:
        return sum(1 for i in self._instances() if i.deleting is None)

    def increase_size(self, delta: int) -> None:
        self.provider.cloud.increase_size(self.spec.name, delta, self.provider.clock.now())
        self.provider.refresh()

    def delete_nodes(self, names: Sequence[str]) -> None:
        self.provider.cloud.delete_instances(names, self.provider.clock.now())
        self.provider.refresh()

    def nodes(self) -> list[ProviderInstance]:
        out = []
        for i in self._instances():
            state = InstanceState.DELETING if i.deleting is not None else InstanceState.RUNNING \
                if i.ready <= self.provider.clock.now() and not i.fails else InstanceState.CREATING
            out.append(ProviderInstance(i.name, state, i.created))
        return out

    def template_node_info(self) -> Obj:
        template = self.provider._templates.get(self.spec.name)
        if template is None:
            node = nd.new_pool_node(self.spec.pool(), 0, 0, allocatable_of=self.provider.allocatable_of)
            name = f"{TEMPLATE_PREFIX}{self.spec.name}"
            node["metadata"]["name"] = name
            node["metadata"]["labels"][nd.LABEL_HOSTNAME] = name
            node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
            template = self.provider._templates[self.spec.name] = node
        return template

    def price_per_hour(self) -> float:
        return self.spec.price_per_hour


class KemuCloudProvider(CloudProvider):
    """Node groups from the cloud's Redis keys, re-read by :meth:`refresh` (once per scan)."""

    def __init__(self, cloud: Cloud, clock: Clock,
                 allocatable_of: Callable[[Mapping[str, Any]], dict[str, str]] | None = None) -> None:
        self.cloud = cloud
        self.clock = clock
        self.allocatable_of = allocatable_of or _default_allocatable
        self._groups: dict[str, KemuNodeGroup] = {}
        self._instances: dict[str, list[Instance]] = {}
        self._templates: dict[str, Obj] = {}
        self.refresh()

    def refresh(self) -> None:
        specs = self.cloud.groups()
        for name, spec in specs.items():
            group = self._groups.get(name)
            if group is None or group.spec != spec:
                self._groups[name] = KemuNodeGroup(self, spec)
                self._templates.pop(name, None)
        for name in set(self._groups) - set(specs):
            del self._groups[name]
        by_group: dict[str, list[Instance]] = {}
        for inst in self.cloud.instances():
            by_group.setdefault(inst.group, []).append(inst)
        self._instances = by_group

    def instances_of(self, group: str) -> list[Instance]:
        return self._instances.get(group, [])

    def node_groups(self) -> list[NodeGroup]:
        return [self._groups[name] for name in sorted(self._groups)]

    def node_group_for_node(self, node: Obj) -> NodeGroup | None:
        name = ((node.get("metadata") or {}).get("labels") or {}).get(LABEL_NODE_GROUP)
        return self._groups.get(name) if name else None
