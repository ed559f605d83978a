"""PodLifeTime: evict pods older than ``maxPodLifeTimeSeconds``, oldest first.

Upstream ``pod_lifetime.go``: age is cluster time since
``metadata.creationTimestamp``; with ``states`` the pod's phase or a
container's waiting reason must be one of them. Candidates from every node
are sorted oldest first and evicted in that order (a per-node limit skips to
the next pod, the total limit stops).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emulator.api.types import Obj
from emulator.clock import parse_rfc3339
from emulator.descheduler import utils
from emulator.descheduler.evictions import (
    EvictionError,
    EvictionLimitError,
    EvictionTotalLimitError,
)
from emulator.descheduler.framework import Handle, Status, pod_filter
from emulator.descheduler.plugins.podlifetime.args import PodLifeTimeArgs, parse_args

__all__ = ["EXTENSION_POINTS", "NAME", "PodLifeTime", "new", "parse_args"]

NAME = "PodLifeTime"
EXTENSION_POINTS = ("deschedule",)


def created(pod: Obj) -> float:
    ts = pod["metadata"].get("creationTimestamp")
    return parse_rfc3339(ts) if ts else 0.0


class PodLifeTime:
    name = NAME

    def __init__(self, args: PodLifeTimeArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.accept = pod_filter(handle, namespaces=args.namespaces, label_selector=args.label_selector)

    def deschedule(self, nodes: Sequence[Obj]) -> Status | None:
        now = self.handle.clock.now()
        limit = self.args.max_pod_life_time_seconds
        candidates = []
        for node in nodes:
            for pod in self.handle.snapshot.pods_on(node["metadata"]["name"]):
                if now - created(pod) <= limit:
                    continue
                if self.args.states and not utils.in_states(pod, self.args.states):
                    continue
                if self.accept(pod):
                    candidates.append(pod)
        candidates.sort(key=created)  # oldest first
        for pod in candidates:
            try:
                self.handle.evictor.evict(pod, NAME)
            except EvictionTotalLimitError:
                return None
            except (EvictionLimitError, EvictionError):
                continue
        return None


def new(args: Any, handle: Handle) -> PodLifeTime:
    return PodLifeTime(args, handle)
