"""``RemovePodsViolatingTopologySpreadConstraintArgs`` (upstream ``types.go``, ``defaults.go``,
``validation.go``): ``namespaces``, ``labelSelector``, ``constraints`` (which ``whenUnsatisfiable``
values count; default ``[DoNotSchedule]``), ``topologyBalanceNodeFit`` (default true)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emulator.api.labels import LabelSelector
from emulator.descheduler.api import ArgsReader, Namespaces

WHEN = ("DoNotSchedule", "ScheduleAnyway")


@dataclass(frozen=True)
class RemovePodsViolatingTopologySpreadConstraintArgs:
    namespaces: Namespaces | None = None
    label_selector: LabelSelector | None = None
    constraints: tuple[str, ...] = ("DoNotSchedule",)
    topology_balance_node_fit: bool = True


def parse_args(raw: Any, path: str) -> RemovePodsViolatingTopologySpreadConstraintArgs:
    r = ArgsReader(raw, path, ("namespaces", "labelSelector", "constraints", "topologyBalanceNodeFit",
                               "includeSoftConstraints"))
    constraints = r.str_list("constraints", WHEN) or ("DoNotSchedule",)
    if r.bool("includeSoftConstraints"):  # the older spelling of constraints: [DoNotSchedule, ScheduleAnyway]
        constraints = WHEN
    return RemovePodsViolatingTopologySpreadConstraintArgs(r.namespaces(), r.selector("labelSelector"), constraints,
                                                           r.bool("topologyBalanceNodeFit", True))
