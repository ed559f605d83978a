"""``RemovePodsViolatingInterPodAntiAffinityArgs`` (upstream ``types.go``): ``namespaces``, ``labelSelector``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emulator.api.labels import LabelSelector
from emulator.descheduler.api import ArgsReader, Namespaces


@dataclass(frozen=True)
class RemovePodsViolatingInterPodAntiAffinityArgs:
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None


def parse_args(raw: Any, path: str) -> RemovePodsViolatingInterPodAntiAffinityArgs:
    r = ArgsReader(raw, path, ("namespaces", "labelSelector"))
    return RemovePodsViolatingInterPodAntiAffinityArgs(r.namespaces(), r.selector("labelSelector"))
