"""``PodLifeTimeArgs`` (upstream ``types.go``, ``validation.go``): ``maxPodLifeTimeSeconds`` (required),
``states`` (pod phases or container waiting reasons), ``namespaces``, ``labelSelector``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emulator.api.labels import LabelSelector
from emulator.descheduler.api import ArgsReader, Namespaces, PolicyError

STATES = ("Running", "Pending", "Succeeded", "Failed", "Unknown", "PodInitializing", "ContainerCreating",
          "CrashLoopBackOff", "CreateContainerConfigError", "ErrImagePull", "ImagePullBackOff",
          "CreateContainerError", "InvalidImageName")


@dataclass(frozen=True)
class PodLifeTimeArgs:
    max_pod_life_time_seconds: int = 0
    states: tuple[str, ...] = ()
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None


def parse_args(raw: Any, path: str) -> PodLifeTimeArgs:
    r = ArgsReader(raw, path, ("maxPodLifeTimeSeconds", "states", "namespaces", "labelSelector"))
    seconds = r.int("maxPodLifeTimeSeconds", minimum=0)
    if seconds is None:
        raise PolicyError(r.field("maxPodLifeTimeSeconds"), "MaxPodLifeTimeSeconds not set", kind="Required value")
    return PodLifeTimeArgs(seconds, r.str_list("states", STATES), r.namespaces(), r.selector("labelSelector"))
