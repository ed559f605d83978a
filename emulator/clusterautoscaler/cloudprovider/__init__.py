"""The cloud provider seam (upstream ``cluster-autoscaler/cloudprovider/cloud_provider.go``).

:class:`NodeGroup` and :class:`CloudProvider` are what every provider implements;
the core never looks past them. kemu ships one implementation,
:mod:`.kemu` (the emulated cloud in Redis, :mod:`emulator.cloud`).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

from emulator.api.types import Obj

__all__ = ["CloudProvider", "InstanceState", "NodeGroup", "ProviderInstance"]


@dataclass(frozen=True)
class InstanceState:
    """Upstream ``cloudprovider.InstanceState``: running, creating or deleting."""

    RUNNING = "InstanceRunning"
    CREATING = "InstanceCreating"
    DELETING = "InstanceDeleting"


@dataclass(frozen=True)
class ProviderInstance:
    """Upstream ``cloudprovider.Instance``: the node name it becomes, its state, when it was asked for."""

    name: str
    state: str
    created: float


class NodeGroup(abc.ABC):
    """One autoscaled group of identical nodes (upstream ``cloudprovider.NodeGroup``)."""

    @abc.abstractmethod
    def id(self) -> str: ...

    @abc.abstractmethod
    def min_size(self) -> int: ...

    @abc.abstractmethod
    def max_size(self) -> int: ...

    @abc.abstractmethod
    def target_size(self) -> int:
        """Instances asked for, booting or running (not being deleted)."""

    @abc.abstractmethod
    def increase_size(self, delta: int) -> None:
        """Ask for ``delta`` more nodes; raises on a cloud error (quota, max size)."""

    @abc.abstractmethod
    def delete_nodes(self, names: Sequence[str]) -> None:
        """Terminate these nodes' instances (the target size shrinks with them)."""

    @abc.abstractmethod
    def nodes(self) -> list[ProviderInstance]:
        """Every instance of the group, with its state."""

    @abc.abstractmethod
    def template_node_info(self) -> Obj:
        """A Node object as a new instance of the group will register (labels, taints, allocatable)."""

    @abc.abstractmethod
    def price_per_hour(self) -> float:
        """What one node of the group costs (upstream's pricing model, ``cloudprovider.PricingModel``)."""


class CloudProvider(abc.ABC):
    """Upstream ``cloudprovider.CloudProvider``: the node groups, and which group a node belongs to."""

    name = "kemu"

    @abc.abstractmethod
    def node_groups(self) -> list[NodeGroup]: ...

    @abc.abstractmethod
    def node_group_for_node(self, node: Obj) -> NodeGroup | None: ...

    @abc.abstractmethod
    def refresh(self) -> None:
        """Re-read provider state once per scan (upstream ``Refresh``)."""
