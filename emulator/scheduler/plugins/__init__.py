"""In-tree scheduler plugins, one module per plugin (upstream ``pkg/scheduler/framework/plugins``).

:func:`in_tree_factories` maps each plugin name to its constructor
(``new(args, handle)``). Ported: PrioritySort, SchedulingGates,
NodeUnschedulable, NodeName, NodePorts, NodeResourcesFit,
NodeResourcesBalancedAllocation, NodeAffinity, TaintToleration,
ImageLocality, PodTopologySpread, InterPodAffinity, VolumeBinding,
VolumeZone, DefaultPreemption. The example research plugins of
:mod:`.examples` (GPUBinPack) are registered too, so a configuration can
enable them by name; they are in no default profile. So is :mod:`.load_aware`
(LoadAware, the dynamic scheduler on the node annotator's load annotations).

Shared modules (not plugins): :mod:`.helper` (score normalisation, Go
integer division), :mod:`.resource_allocation` (resource scorers),
:mod:`.listers` (read-only access to Services, PDBs, PVs...),
:mod:`.pod_index` (incrementally maintained per-node pod tables). Taint and
node-affinity matching are API semantics the kubelet and controllers share:
:mod:`emulator.api.taints`, :mod:`emulator.api.nodeaffinity`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.scheduler.plugins import (
    default_preemption,
    image_locality,
    inter_pod_affinity,
    load_aware,
    node_affinity,
    node_name,
    node_ports,
    node_resources_balanced_allocation,
    node_resources_fit,
    node_unschedulable,
    pod_topology_spread,
    priority_sort,
    scheduling_gates,
    taint_toleration,
    volume_binding,
    volume_zone,
)
from emulator.scheduler.plugins.examples import gpu_binpack

__all__ = ["in_tree_factories"]


def in_tree_factories() -> dict[str, Callable[..., Any]]:
    """Plugin name -> constructor for every in-tree plugin (feed it to ``Registry``)."""
    modules = (priority_sort, scheduling_gates, node_unschedulable, node_name, node_ports, node_resources_fit,
               node_resources_balanced_allocation, node_affinity, taint_toleration, image_locality,
               pod_topology_spread, inter_pod_affinity, volume_binding, volume_zone, default_preemption,
               gpu_binpack, load_aware)
    return {module.NAME: module.new for module in modules}
