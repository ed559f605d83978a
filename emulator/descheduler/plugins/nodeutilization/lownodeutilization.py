"""LowNodeUtilization: move pods off nodes above ``targetThresholds`` while nodes under ``thresholds`` can take them.

Upstream ``nodeutilization/lownodeutilization.go`` (a *balance* plugin):

1. usage per node (requests, or actual usage with ``metricsUtilization``) as a
   percentage of allocatable;
2. *underutilized*: schedulable and every thresholded resource <=
   ``thresholds``; *overutilized* (otherwise): some thresholded resource >
   ``targetThresholds``; the rest are appropriately utilized. With
   ``useDeviationThresholds`` both limits are the average usage -/+ the
   given percentages;
3. nothing happens when no node is underutilized, when at most
   ``numberOfNodes`` are, when every node is, or when none is overutilized;
4. overutilized nodes, busiest first, lose pods (see
   :func:`~emulator.descheduler.plugins.nodeutilization.nodeutilization.evict_pods_from_source_nodes`)
   while the node is still above its target on some resource (its usage over
   ``targetThresholds`` x allocatable) and the underutilized nodes still have
   room under their targets on every resource.
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
from emulator.descheduler.plugins.nodeutilization.args import LowNodeUtilizationArgs, parse_low_args

__all__ = ["EXTENSION_POINTS", "NAME", "Classification", "LowNodeUtilization", "new", "parse_args"]

log = logging.getLogger(__name__)
NAME = "LowNodeUtilization"
EXTENSION_POINTS = ("balance",)
parse_args = parse_low_args


class Classification:
    """The result of step 2: row indices of the under- and overutilized nodes, and the thresholds used."""

    def __init__(self, table: nu.UsageTable, under: np.ndarray, over: np.ndarray, low: np.ndarray,
                 high: np.ndarray) -> None:
        self.table = table
        self.under = under
        self.over = over
        self.low = low
        self.high = high

    def names(self, mask: np.ndarray) -> list[str]:
        return [self.table.nodes[i]["metadata"]["name"] for i in np.flatnonzero(mask)]


class LowNodeUtilization:
    name = NAME

    def __init__(self, args: LowNodeUtilizationArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.resources = nu.resource_names(list(args.thresholds))

    def classify(self, nodes: Sequence[Obj]) -> Classification:
        table = nu.usage_table(self.handle, nodes, self.resources, actual=self.args.actual_usage)
        pct = nu.percentages(table)
        cols, low = nu.threshold_vector(table, dict(self.args.thresholds))
        _, high = nu.threshold_vector(table, dict(self.args.target_thresholds))
        if self.args.use_deviation_thresholds:
            low, high = nu.deviation_thresholds(pct, cols, low, high)
        schedulable = np.array([not utils.is_unschedulable(n) for n in nodes], dtype=bool)
        under = nu.below(pct, cols, low) & schedulable
        over = nu.above(pct, cols, high) & ~under
        return Classification(table, under, over, low, high)

    def balance(self, nodes: Sequence[Obj]) -> Status | None:
        try:
            c = self.classify(nodes)
        except nu.UsageUnavailable as e:
            return Status(f"error getting node usage: {e}")
        n_under, n_over = int(c.under.sum()), int(c.over.sum())
        log.info("descheduler: LowNodeUtilization: %d underutilized, %d overutilized of %d nodes", n_under, n_over,
                 len(nodes))
        if n_under == 0 or n_under <= self.args.number_of_nodes or n_under == len(nodes) or n_over == 0:
            return None
        table = c.table
        # Each node's capacity capped at the target thresholds (per node: deviation thresholds are shared too).
        targets = dict(zip(self.args.target_thresholds, c.high.tolist(), strict=True))
        capped = nu.capped_capacity(table, targets)

        def continue_eviction(node_usage: list[float], node_cap: list[float], available: list[float]) -> bool:
            # isNodeAboveTargetUtilization, then every resource still has room on the destinations.
            for cap, used in zip(node_cap, node_usage, strict=True):  # loops: this runs after every eviction
                if cap < used:
                    break
            else:
                return False
            return min(available) > 0

        sources = nu.sort_by_usage(np.flatnonzero(c.over), table, ascending=False)
        nu.evict_pods_from_source_nodes(self.handle, table, sources, np.flatnonzero(c.under).tolist(),
                                        available_capacity=capped, continue_eviction=continue_eviction, strategy=NAME,
                                        evictable_namespaces=self.args.evictable_namespaces,
                                        max_per_node=self.args.max_evictions_per_node, actual=self.args.actual_usage)
        return None


def new(args: Any, handle: Handle) -> LowNodeUtilization:
    return LowNodeUtilization(args, handle)
