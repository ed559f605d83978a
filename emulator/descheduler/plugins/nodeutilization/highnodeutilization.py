"""HighNodeUtilization: empty the least used nodes so the rest are packed (for a cluster autoscaler to remove them).

Upstream ``nodeutilization/highnodeutilization.go`` (a *balance* plugin): nodes
with every thresholded resource <= ``thresholds`` are the *sources*; every
other schedulable node is a destination, able to take pods up to its full
allocatable. Nothing happens when no node is a source, when at most
``numberOfNodes`` are, when all are, or when there is no destination. Sources,
least used first, lose their evictable pods (lowest priority first) while the
destinations have room on every resource.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from emulator.api.types import Obj
from emulator.descheduler import utils
from emulator.descheduler.framework import Handle, Status
from emulator.descheduler.plugins.nodeutilization import nodeutilization as nu
from emulator.descheduler.plugins.nodeutilization.args import HighNodeUtilizationArgs, parse_high_args

__all__ = ["EXTENSION_POINTS", "NAME", "HighNodeUtilization", "new", "parse_args"]

log = logging.getLogger(__name__)
NAME = "HighNodeUtilization"
EXTENSION_POINTS = ("balance",)
parse_args = parse_high_args


class HighNodeUtilization:
    name = NAME

    def __init__(self, args: HighNodeUtilizationArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.resources = nu.resource_names(list(args.thresholds))

    def classify(self, nodes: Sequence[Obj]) -> tuple[nu.UsageTable, np.ndarray, np.ndarray]:
        """(table, source mask, destination mask)."""
        table = nu.usage_table(self.handle, nodes, self.resources, actual=self.args.actual_usage)
        pct = nu.percentages(table)
        cols, low = nu.threshold_vector(table, dict(self.args.thresholds))
        sources = nu.below(pct, cols, low)
        schedulable = np.array([not utils.is_unschedulable(n) for n in nodes], dtype=bool)
        return table, sources, ~sources & schedulable

    def balance(self, nodes: Sequence[Obj]) -> Status | None:
        try:
            table, sources, destinations = self.classify(nodes)
        except nu.UsageUnavailable as e:
            return Status(f"error getting node usage: {e}")
        n_src = int(sources.sum())
        log.info("descheduler: HighNodeUtilization: %d underutilized of %d nodes", n_src, len(nodes))
        if n_src == 0 or n_src <= self.args.number_of_nodes or n_src == len(nodes) or not destinations.any():
            return None

        def continue_eviction(_usage: list[float], _cap: list[float], available: list[float]) -> bool:
            return all(a > 0 for a in available)

        order = nu.sort_by_usage(np.flatnonzero(sources), table, ascending=True)
        nu.evict_pods_from_source_nodes(self.handle, table, order, np.flatnonzero(destinations).tolist(),
                                        available_capacity=nu.capped_capacity(table, None),
                                        continue_eviction=continue_eviction, strategy=NAME,
                                        evictable_namespaces=self.args.evictable_namespaces,
                                        max_per_node=self.args.max_evictions_per_node, actual=self.args.actual_usage)
        return None


def new(args: Any, handle: Handle) -> HighNodeUtilization:
    return HighNodeUtilization(args, handle)
