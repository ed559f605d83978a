"""SchedulingGates: a pod with ``spec.schedulingGates`` stays out of the active queue.

Upstream ``pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates.go``;
the message lists the gates as Go prints a string slice: ``[a b]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from emulator.scheduler.framework.interface import Code, Handle, Status

NAME = "SchedulingGates"


class SchedulingGates:
    """PreEnqueue plugin."""

    name = NAME

    def pre_enqueue(self, pod: Mapping[str, Any]) -> Status | None:
        gates = (pod.get("spec") or {}).get("schedulingGates") or ()
        if not gates:
            return None
        names = " ".join(gate.get("name") or "" for gate in gates)
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"waiting for scheduling gates: [{names}]")


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> SchedulingGates:
    return SchedulingGates()
