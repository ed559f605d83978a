"""``RemoveFailedPodsArgs`` (upstream ``types.go``, ``validation.go``): ``reasons``, ``exitCodes``,
``excludeOwnerKinds``, ``minPodLifetimeSeconds``, ``includingInitContainers``, ``namespaces``,
``labelSelector``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emulator.api.labels import LabelSelector
from emulator.descheduler.api import ArgsReader, Namespaces, PolicyError


@dataclass(frozen=True)
class RemoveFailedPodsArgs:
    reasons: tuple[str, ...] = ()
    exit_codes: tuple[int, ...] = ()
    exclude_owner_kinds: tuple[str, ...] = ()
    min_pod_lifetime_seconds: int | None = None
    including_init_containers: bool = False
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None


def parse_args(raw: Any, path: str) -> RemoveFailedPodsArgs:
    r = ArgsReader(raw, path, ("reasons", "exitCodes", "excludeOwnerKinds", "minPodLifetimeSeconds",
                               "includingInitContainers", "namespaces", "labelSelector"))
    codes = r.raw.get("exitCodes") or []
    if not isinstance(codes, list) or not all(isinstance(c, int) and not isinstance(c, bool) for c in codes):
        raise PolicyError(r.field("exitCodes"), "must be a list of integers", codes)
    return RemoveFailedPodsArgs(r.str_list("reasons"), tuple(codes), r.str_list("excludeOwnerKinds"),
                                r.int("minPodLifetimeSeconds", minimum=0), r.bool("includingInitContainers"),
                                r.namespaces(), r.selector("labelSelector"))
