"""``RemovePodsHavingTooManyRestartsArgs`` (upstream ``types.go``, ``validation.go``): ``podRestartThreshold``
(required, >= 1), ``includingInitContainers``, ``states`` (``Running``, ``CrashLoopBackOff``),
``namespaces``, ``labelSelector``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emulator.api.labels import LabelSelector
from emulator.descheduler.api import ArgsReader, Namespaces, PolicyError

STATES = ("Running", "CrashLoopBackOff")


@dataclass(frozen=True)
class RemovePodsHavingTooManyRestartsArgs:
    pod_restart_threshold: int = 0
    including_init_containers: bool = False
    states: tuple[str, ...] = ()
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None


def parse_args(raw: Any, path: str) -> RemovePodsHavingTooManyRestartsArgs:
    r = ArgsReader(raw, path, ("podRestartThreshold", "includingInitContainers", "states", "namespaces",
                               "labelSelector"))
    threshold = r.int("podRestartThreshold", 0) or 0
    if threshold < 1:
        raise PolicyError(r.field("podRestartThreshold"), "invalid PodsHavingTooManyRestarts threshold", threshold)
    return RemovePodsHavingTooManyRestartsArgs(threshold, r.bool("includingInitContainers"),
                                               r.str_list("states", STATES), r.namespaces(),
                                               r.selector("labelSelector"))
