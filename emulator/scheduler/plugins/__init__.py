"""In-tree scheduler plugins, one module per plugin (upstream ``pkg/scheduler/framework/plugins``).

:func:`in_tree_registry` maps each plugin name to its constructor. Ported so
far: PrioritySort, SchedulingGates, NodeUnschedulable, NodeName, NodePorts,
NodeResourcesFit, NodeResourcesBalancedAllocation, NodeAffinity,
TaintToleration, ImageLocality.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.scheduler.plugins import (
    image_locality,
    node_affinity,
    node_name,
    node_ports,
    node_resources_balanced_allocation,
    node_resources_fit,
    node_unschedulable,
    priority_sort,
    scheduling_gates,
    taint_toleration,
)

__all__ = ["in_tree_factories"]


def in_tree_factories() -> dict[str, Callable[..., Any]]:
    """Plugin name -> constructor for every in-tree plugin (feed it to ``Registry``)."""
    modules = (priority_sort, scheduling_gates, node_unschedulable, node_name, node_ports, node_resources_fit,
               node_resources_balanced_allocation, node_affinity, taint_toleration, image_locality)
    return {module.NAME: module.new for module in modules}
