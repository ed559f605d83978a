"""kemu's scheduler: kube-scheduler's framework and plugins over array-backed cluster snapshots.

Pure Python + numpy, no I/O: :func:`new_framework` gives a framework with the
in-tree plugins, and ``framework.schedule_one(pod, snapshot)`` answers where
a pod goes on any :class:`~emulator.scheduler.framework.snapshot.Snapshot` --
the scheduler's own or a Cluster Autoscaler's hypothetical one::

    from emulator.scheduler import Snapshot, new_framework

    snapshot = Snapshot.build(nodes, pods)
    framework = new_framework(rng=random.Random(0))
    result = framework.schedule_one(pod, snapshot)   # ScheduleResult | FitError
"""

from __future__ import annotations

import random

from emulator.scheduler.framework.profile import Profile
from emulator.scheduler.framework.registry import Registry
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import FitError, PodInfo, ScheduleResult
from emulator.scheduler.plugins import in_tree_factories

__all__ = ["FitError", "Framework", "PodInfo", "Profile", "Registry", "ScheduleResult", "Snapshot",
           "in_tree_registry", "new_framework"]


def in_tree_registry() -> Registry:
    """A registry with every in-tree plugin; add research plugins with ``register``."""
    return Registry(in_tree_factories())


def new_framework(profile: Profile | None = None, *, registry: Registry | None = None,
                  rng: random.Random | None = None, **kwargs: object) -> Framework:
    """A framework running ``profile`` (default: upstream's default profile, ported plugins only)."""
    registry = registry if registry is not None else in_tree_registry()
    return Framework(registry, profile, rng=rng, **kwargs)  # type: ignore[arg-type]
