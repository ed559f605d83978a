"""``RemovePodsViolatingNodeTaintsArgs`` (upstream ``types.go``, ``validation.go``).

``namespaces`` (include or exclude), ``labelSelector``, ``includePreferNoSchedule``
(PreferNoSchedule taints count too), ``excludedTaints`` / ``includedTaints``
(``key`` or ``key=value``; at most one of the two lists).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emulator.api.labels import LabelSelector
from emulator.descheduler.api import ArgsReader, Namespaces, PolicyError


@dataclass(frozen=True)
class RemovePodsViolatingNodeTaintsArgs:
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    include_prefer_no_schedule: bool = False
    excluded_taints: tuple[str, ...] = ()
    included_taints: tuple[str, ...] = ()


def parse_args(raw: Any, path: str) -> RemovePodsViolatingNodeTaintsArgs:
    r = ArgsReader(raw, path, ("namespaces", "labelSelector", "includePreferNoSchedule", "excludedTaints",
                               "includedTaints"))
    args = RemovePodsViolatingNodeTaintsArgs(r.namespaces(), r.selector("labelSelector"),
                                             r.bool("includePreferNoSchedule"), r.str_list("excludedTaints"),
                                             r.str_list("includedTaints"))
    if args.excluded_taints and args.included_taints:
        raise PolicyError(path, "either includedTaints or excludedTaints can be set, but not both", kind="Forbidden")
    return args
