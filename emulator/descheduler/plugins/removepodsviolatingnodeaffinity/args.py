"""``RemovePodsViolatingNodeAffinityArgs`` (upstream ``types.go``, ``validation.go``): ``nodeAffinityType``
(``requiredDuringSchedulingIgnoredDuringExecution`` and/or ``preferredDuringSchedulingIgnoredDuringExecution``;
default the first), ``namespaces``, ``labelSelector``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emulator.api.labels import LabelSelector
from emulator.descheduler.api import ArgsReader, Namespaces, PolicyError

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True)
class RemovePodsViolatingNodeAffinityArgs:
    node_affinity_type: tuple[str, ...] = (REQUIRED,)
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None


def parse_args(raw: Any, path: str) -> RemovePodsViolatingNodeAffinityArgs:
    r = ArgsReader(raw, path, ("nodeAffinityType", "namespaces", "labelSelector"))
    types = r.str_list("nodeAffinityType", (REQUIRED, PREFERRED))
    if raw is not None and "nodeAffinityType" in r.raw and not types:
        raise PolicyError(r.field("nodeAffinityType"), "nodeAffinityType needs to be set", kind="Required value")
    return RemovePodsViolatingNodeAffinityArgs(types or (REQUIRED,), r.namespaces(), r.selector("labelSelector"))
