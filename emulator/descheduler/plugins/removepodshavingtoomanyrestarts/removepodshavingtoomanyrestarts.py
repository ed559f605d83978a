"""RemovePodsHavingTooManyRestarts: evict pods whose containers restarted ``podRestartThreshold`` times or more.

Upstream ``toomanyrestarts.go``: restarts are the sum of the containers'
``restartCount`` (init containers too with ``includingInitContainers``); with
``states`` the pod must be in one of them — phase ``Running``, or a container
waiting in ``CrashLoopBackOff``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emulator.api.types import Obj
from emulator.descheduler import utils
from emulator.descheduler.framework import Handle, Status, evict_each, pod_filter
from emulator.descheduler.plugins.removepodshavingtoomanyrestarts.args import (
    RemovePodsHavingTooManyRestartsArgs,
    parse_args,
)

__all__ = ["EXTENSION_POINTS", "NAME", "RemovePodsHavingTooManyRestarts", "new", "parse_args"]

NAME = "RemovePodsHavingTooManyRestarts"
EXTENSION_POINTS = ("deschedule",)


class RemovePodsHavingTooManyRestarts:
    name = NAME

    def __init__(self, args: RemovePodsHavingTooManyRestartsArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.accept = pod_filter(handle, namespaces=args.namespaces, label_selector=args.label_selector)

    def violates(self, pod: Obj) -> bool:
        a = self.args
        if utils.restarts(pod, including_init=a.including_init_containers) < a.pod_restart_threshold:
            return False
        return not a.states or utils.in_states(pod, a.states, including_init=a.including_init_containers)

    def deschedule(self, nodes: Sequence[Obj]) -> Status | None:
        for node in nodes:
            candidates = self.handle.snapshot.having("restarts").get(node["metadata"]["name"], ())
            victims = [p for p in candidates if self.violates(p) and self.accept(p)]
            if not evict_each(self.handle, victims, NAME):
                return None
        return None


def new(args: Any, handle: Handle) -> RemovePodsHavingTooManyRestarts:
    return RemovePodsHavingTooManyRestarts(args, handle)
