"""RemoveFailedPods: evict (delete) pods in phase Failed.

Upstream ``failedpods.go``: a Failed pod is a candidate when — if set —
``reasons`` contains its ``status.reason`` or a container's terminated/waiting
reason, ``exitCodes`` contains a container's terminated exit code, none of its
owners is of an ``excludeOwnerKinds`` kind, and it started at least
``minPodLifetimeSeconds`` ago. The DefaultEvictor still decides: a bare Failed
pod goes only with ``evictFailedBarePods``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emulator.api.types import Obj
from emulator.clock import parse_rfc3339
from emulator.descheduler import utils
from emulator.descheduler.framework import Handle, Status, evict_each, pod_filter
from emulator.descheduler.plugins.removefailedpods.args import RemoveFailedPodsArgs, parse_args

__all__ = ["EXTENSION_POINTS", "NAME", "RemoveFailedPods", "new", "parse_args"]

NAME = "RemoveFailedPods"
EXTENSION_POINTS = ("deschedule",)


class RemoveFailedPods:
    name = NAME

    def __init__(self, args: RemoveFailedPodsArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.accept = pod_filter(handle, namespaces=args.namespaces, label_selector=args.label_selector)

    def _statuses(self, pod: Obj) -> list[Obj]:
        status = pod.get("status") or {}
        out = list(status.get("containerStatuses") or [])
        if self.args.including_init_containers:
            out += status.get("initContainerStatuses") or []
        return out

    def violates(self, pod: Obj) -> bool:
        if utils.phase(pod) != "Failed":
            return False
        a = self.args
        if a.exclude_owner_kinds and any(r.get("kind") in a.exclude_owner_kinds for r in utils.owner_refs(pod)):
            return False
        if a.min_pod_lifetime_seconds is not None:
            started = (pod.get("status") or {}).get("startTime")
            if not started or self.handle.clock.now() - parse_rfc3339(started) < a.min_pod_lifetime_seconds:
                return False
        statuses = self._statuses(pod)
        if a.reasons:
            reasons = {(pod.get("status") or {}).get("reason")}
            for c in statuses:
                state = c.get("state") or {}
                reasons.add((state.get("terminated") or {}).get("reason"))
                reasons.add((state.get("waiting") or {}).get("reason"))
            if not reasons & set(a.reasons):
                return False
        if a.exit_codes:
            codes = {((c.get("state") or {}).get("terminated") or {}).get("exitCode") for c in statuses}
            if not codes & set(a.exit_codes):
                return False
        return True

    def deschedule(self, nodes: Sequence[Obj]) -> Status | None:
        for node in nodes:
            candidates = self.handle.snapshot.having("failed").get(node["metadata"]["name"], ())
            victims = [p for p in candidates if self.violates(p) and self.accept(p)]
            if not evict_each(self.handle, victims, NAME):
                return None
        return None


def new(args: Any, handle: Handle) -> RemoveFailedPods:
    return RemoveFailedPods(args, handle)
