"""Scheduler profiles: which plugins run at which extension point, with what weights and arguments.

The shape of ``KubeSchedulerConfiguration.profiles[]`` (upstream
``pkg/scheduler/apis/config/types.go``): a ``multiPoint`` plugin set that
enables a plugin at every extension point it implements, per-point sets that
enable more plugins or disable (``"*"`` = all) multi-point ones there,
``pluginConfig`` arguments per plugin, and ``percentageOfNodesToScore``.

:func:`default_plugins` is upstream's default multi-point list and weights
(``pkg/scheduler/apis/config/v1/default_plugins.go``, v1.32+: the in-tree
cloud volume-limit plugins are gone); :meth:`Profile.default` keeps the ones a
registry provides (VolumeRestrictions, NodeVolumeLimits and DefaultBinder are
not in the in-tree registry yet, so they drop out).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from emulator.scheduler.framework.interface import EXTENSION_POINTS

__all__ = ["DEFAULT_SCHEDULER_NAME", "PluginRef", "PluginSet", "Profile", "default_plugins"]

DEFAULT_SCHEDULER_NAME = "default-scheduler"


@dataclass(frozen=True)
class PluginRef:
    """A plugin enabled in a set; ``weight`` matters for Score only (0 = default 1)."""

    name: str
    weight: int = 0


@dataclass
class PluginSet:
    enabled: list[PluginRef] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)


def default_plugins() -> list[PluginRef]:
    """Upstream's default ``multiPoint`` plugins, in order, with their score weights."""
    return [
        PluginRef("SchedulingGates"),
        PluginRef("PrioritySort"),
        PluginRef("NodeUnschedulable"),
        PluginRef("NodeName"),
        PluginRef("TaintToleration", 3),
        PluginRef("NodeAffinity", 2),
        PluginRef("NodePorts"),
        PluginRef("NodeResourcesFit", 1),
        PluginRef("VolumeRestrictions"),
        PluginRef("NodeVolumeLimits"),
        PluginRef("VolumeBinding"),
        PluginRef("VolumeZone"),
        PluginRef("PodTopologySpread", 2),
        PluginRef("InterPodAffinity", 2),
        PluginRef("DefaultPreemption"),
        PluginRef("NodeResourcesBalancedAllocation", 1),
        PluginRef("ImageLocality", 1),
        PluginRef("DefaultBinder"),
    ]


@dataclass
class Profile:
    """One scheduling profile (upstream ``KubeSchedulerProfile``).

    ``points`` maps an extension point name (``"filter"``, ``"score"``, ...,
    the keys of :data:`EXTENSION_POINTS`) to its own :class:`PluginSet`.
    """

    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    multi_point: PluginSet = field(default_factory=PluginSet)
    points: dict[str, PluginSet] = field(default_factory=dict)
    plugin_config: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None

    def __post_init__(self) -> None:
        unknown = set(self.points) - set(EXTENSION_POINTS)
        if unknown:
            raise ValueError(f"unknown extension point(s) {sorted(unknown)}; valid: {sorted(EXTENSION_POINTS)}")
        if self.percentage_of_nodes_to_score is not None and not 0 <= self.percentage_of_nodes_to_score <= 100:
            raise ValueError("percentageOfNodesToScore must be in the range [0, 100]")

    @classmethod
    def default(cls, available: Iterable[str] | None = None, **kwargs: Any) -> Profile:
        """Upstream's default profile, restricted to the plugins in ``available`` (e.g. a registry's names)."""
        have = None if available is None else set(available)
        enabled = [p for p in default_plugins() if have is None or p.name in have]
        return cls(multi_point=PluginSet(enabled), **kwargs)

    def point(self, name: str) -> PluginSet:
        return self.points.get(name) or PluginSet()
