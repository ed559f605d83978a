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
    "visit_all_but",
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
    the best score is unique. Many ties draw their numbers at once
    (:func:`_draws`): the same numbers, in the same order, leaving ``rng``
    in the same state.
    """
    if len(nodes) == 0:
        raise ValueError("empty priority list")
    ties = np.flatnonzero(totals == totals.max())
    count = len(ties) - 1  # draws to make
    if _MANY_TIES <= count <= len(_KS) and type(rng) is random.Random and _BATCHED_DRAWS_MATCH:
        # The last tie whose draw took over is the one chosen (each later draw either keeps or replaces it).
        took_over = np.flatnonzero(_draws(rng, count) * _KS[:count] < 1.0)
        return int(nodes[ties[took_over[-1] + 1]] if len(took_over) else nodes[ties[0]])
    selected = int(ties[0])
    draw = rng.random
    for k, candidate in enumerate(ties[1:].tolist(), start=2):
        if draw() * k < 1.0:
            selected = candidate
    return int(nodes[selected])


# Below this many ties, one rng.random() per tie is cheaper than drawing them in one go.
_MANY_TIES = 16
_KS = np.arange(2, 2 + 100_000, dtype=np.float64)  # k for the k-th tie (a bigger cluster takes the loop)


def _draws(rng: random.Random, count: int) -> np.ndarray:
    """``[rng.random() for _ in range(count)]`` as an array, in one call into the generator.

    CPython's ``random()`` (``random_random`` in ``Modules/_randommodule.c``)
    takes two 32-bit Mersenne Twister outputs a, b and returns
    ``((a >> 5) * 2**26 + (b >> 6)) / 2**53``; ``getrandbits(64 * count)``
    takes the same ``2 * count`` outputs in the same order, the first in the
    least significant word. Every step below is exact in float64, so the
    numbers are the same bit for bit (checked once at import:
    ``_BATCHED_DRAWS_MATCH``).
    """
    words = np.frombuffer(rng.getrandbits(64 * count).to_bytes(8 * count, "little"), dtype="<u4")
    return ((words[0::2] >> 5).astype(np.float64) * 67108864.0 + (words[1::2] >> 6)) * (1.0 / 9007199254740992.0)


def _batched_draws_match() -> bool:
    """Whether :func:`_draws` reproduces this interpreter's ``random()`` (else select_host only loops)."""
    try:
        a, b = random.Random(20_240_917), random.Random(20_240_917)
        batched = _draws(a, 257).tolist()
        return batched == [b.random() for _ in range(257)] and a.random() == b.random()
    except Exception:  # any difference at all means: do not use it
        return False


_BATCHED_DRAWS_MATCH = _batched_draws_match()


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


def visit_all_but(failed: np.ndarray, n: int, start: int, wanted: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`visit_all_nodes`' answer when only the nodes ``failed`` (distinct, few) of ``n`` are rejected:
    at a cost in ``wanted`` and their number, not in ``n`` (the nominated-pods pass rejecting a few nodes)."""
    rel = np.sort((np.asarray(failed, dtype=np.intp) - start) % n)  # their places in the visiting order
    stop = wanted  # the place of the first feasible node beyond the quota: every rejection before it pushes it on
    for r in rel.tolist():
        if r > stop:
            break
        stop += 1
    stop = min(stop, n)  # past the end: every node was visited
    met = rel[rel < stop]
    feasible = (np.delete(np.arange(stop, dtype=np.intp), met) + start) % n
    return feasible[:wanted], (met + start) % n
