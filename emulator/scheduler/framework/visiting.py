"""Which nodes a scheduling cycle looks at: how many feasible nodes to find, the visiting order, the host choice.

Upstream ``pkg/scheduler/schedule_one.go`` (``numFeasibleNodesToFind``, the
round-robin visit of ``findNodesThatPassFilters`` from ``nextStartNodeIndex``,
``selectHost``); our own Python, used by :mod:`.runtime`.
"""

from __future__ import annotations

import random

import numpy as np

__all__ = [
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "num_feasible_nodes_to_find",
    "rotated",
    "select_host",
    "visit_all_nodes",
]

# schedule_one.go: never score fewer than 100 nodes (or 5% of them) unless the cluster is smaller.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes to find before scoring (``numFeasibleNodesToFind``).

    All of them below 100 nodes; else ``percentage`` % of them, where 0 means
    the adaptive default ``max(5, 50 - nodes/125)`` %, and never fewer than 100.
    """
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND, 50 - num_all_nodes // 125)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def select_host(nodes: np.ndarray, totals: np.ndarray, rng: random.Random) -> int:
    """The node (a snapshot index from ``nodes``) with the highest total, ties broken by reservoir sampling.

    The k-th tied node (in ``nodes`` order, k >= 2) takes over with
    probability 1/k -- upstream's ``rand.Intn(k) == 0`` -- drawn as
    ``rng.random() * k < 1``; one draw per tie after the first, none when
    the best score is unique.
    """
    if len(nodes) == 0:
        raise ValueError("empty priority list")
    ties = np.flatnonzero(totals == totals.max())
    selected = int(ties[0])
    draw = rng.random
    for k, candidate in enumerate(ties[1:].tolist(), start=2):
        if draw() * k < 1.0:
            selected = candidate
    return int(nodes[selected])


def rotated(candidates: np.ndarray | None, n: int, start: int) -> np.ndarray:
    """The visiting order: the candidates (all nodes when None) from position ``start``, wrapping around."""
    if candidates is None:
        return (np.arange(n, dtype=np.intp) + start) % n if start else np.arange(n, dtype=np.intp)
    return candidates if start == 0 else np.concatenate((candidates[start:], candidates[:start]))

def visit_all_nodes(passes: np.ndarray, start: int, wanted: int) -> tuple[np.ndarray, np.ndarray]:
    """(feasible, rejected) nodes visited from ``start`` around all nodes, without building the visiting order.

    The same answer as walking ``(start + i) % n``: the feasible nodes in
    that order up to the quota, and the rejected nodes met before the
    first feasible node beyond it (or all of them).
    """
    feasible = np.flatnonzero(passes)
    split = int(np.searchsorted(feasible, start))
    if split:
        feasible = np.concatenate((feasible[split:], feasible[:split]))
    if len(feasible) > wanted:
        stop = int(feasible[wanted])  # the first feasible node beyond the quota stops the search
        feasible = feasible[:wanted]
        if stop > start:
            return feasible, start + np.flatnonzero(~passes[start:stop])
    else:
        stop = start  # every node was visited
    rejected = np.concatenate((start + np.flatnonzero(~passes[start:]), np.flatnonzero(~passes[:stop])))
    return feasible, rejected
