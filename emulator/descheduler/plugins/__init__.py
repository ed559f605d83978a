"""The descheduler's plugins, one package each (upstream ``pkg/framework/plugins/<name>/``).

:data:`REGISTRY` maps a plugin name (as a policy names it) to the module that
holds its ``new(args, handle)`` constructor and ``parse_args(raw, path)``; modules
are imported lazily, when a policy enables the plugin.
"""

from __future__ import annotations

REGISTRY: dict[str, str] = {
    "DefaultEvictor": "emulator.descheduler.plugins.defaultevictor.defaultevictor",
    "RemoveDuplicates": "emulator.descheduler.plugins.removeduplicates.removeduplicates",
    "LowNodeUtilization": "emulator.descheduler.plugins.nodeutilization.lownodeutilization",
    "HighNodeUtilization": "emulator.descheduler.plugins.nodeutilization.highnodeutilization",
    "RemovePodsViolatingInterPodAntiAffinity":
        "emulator.descheduler.plugins.removepodsviolatinginterpodantiaffinity.removepodsviolatinginterpodantiaffinity",
    "RemovePodsViolatingNodeAffinity":
        "emulator.descheduler.plugins.removepodsviolatingnodeaffinity.removepodsviolatingnodeaffinity",
    "RemovePodsViolatingNodeTaints":
        "emulator.descheduler.plugins.removepodsviolatingnodetaints.removepodsviolatingnodetaints",
    "RemovePodsViolatingTopologySpreadConstraint":
        "emulator.descheduler.plugins.removepodsviolatingtopologyspreadconstraint."
        "removepodsviolatingtopologyspreadconstraint",
    "RemovePodsHavingTooManyRestarts":
        "emulator.descheduler.plugins.removepodshavingtoomanyrestarts.removepodshavingtoomanyrestarts",
    "PodLifeTime": "emulator.descheduler.plugins.podlifetime.podlifetime",
    "RemoveFailedPods": "emulator.descheduler.plugins.removefailedpods.removefailedpods",
}
