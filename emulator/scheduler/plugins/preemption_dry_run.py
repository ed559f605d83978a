"""Preemption's dry run over many nodes at once: ``SelectVictimsOnNode`` vectorised across candidate nodes.

Upstream ``pkg/scheduler/framework/preemption/preemption.go`` (``DryRunPreemption``)
and ``plugins/defaultpreemption/default_preemption.go`` (``SelectVictimsOnNode``)
run, per node and in parallel goroutines: remove every lower-priority pod,
check the pod fits (with the nominated pods of equal or higher priority:
``RunFilterPluginsWithNominatedPods``), then give the removed pods back most
important first -- those whose eviction would violate a PodDisruptionBudget
first -- keeping each that still lets the pod fit. kemu does the same per node
(:meth:`DefaultPreemption.select_victims_on_node`) whenever a Filter plugin
may read more than the node object and its requested resources; this module
is the fast path for the common case where every Filter plugin active for the
pod is one of :data:`~emulator.scheduler.framework.overlay.VECTOR_SAFE_FILTERS`. Those judge a node from its object
(name, labels, taints, ``spec.unschedulable``) and its requested resources and
pod count only, and are monotone in them, so the whole dry run becomes
arithmetic on the snapshot's columns:

1. For the nodes of a chunk (in the dry run's visiting order), subtract the
   requests of their lower-priority pods from a copy of the requested
   columns and add those of their nominated pods (upstream's first pass; for
   monotone filters the second pass, without them, cannot fail when the first
   passed), then run every Filter plugin's ``filter_all`` once over that
   overlay: nodes that fail are no candidates, with that status.
2. Then ``k = 0, 1, ...``: every surviving node gives back its ``k``-th
   potential victim (the same order as upstream), one ``filter_all`` pass
   decides for all of them, and the nodes where the pod no longer fits take
   that pod back out: it is a victim.

Per node the result -- victims, PDB violations, status -- is exactly what the
per-node dry run gives; only the work is shared. The caller walks the
results in visiting order with upstream's stopping rule, so nodes after the
stop are computed but, as upstream never visits them, not reported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from emulator.scheduler.framework.interface import Code, CycleState, Status
from emulator.scheduler.framework.nominated import active_extensions
from emulator.scheduler.framework.overlay import (
    RequestOverlay,
    VectorFallback,
    first_failure,
    passes,
    requests_of,
    vector_safe,
)
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo

__all__ = ["NodeOutcome", "VectorFallback", "select_victims_on_nodes", "vector_filters"]

NodeOutcome = tuple[list[PodInfo], int, Status | None]  # (victims, PDB violations, status), as select_victims_on_node


def vector_filters(handle: Any, state: CycleState) -> list[Any] | None:
    """The Filter plugins active this cycle when the vectorised dry run is exact for them, else None."""
    if handle is None or not getattr(handle, "vectorised", False) or not hasattr(handle, "plugins_at"):
        return None
    plugins = [p for p in handle.plugins_at("filter") if p.name not in state.skip_filter_plugins]
    if not vector_safe(plugins):
        return None
    if active_extensions(handle.plugins_at("preFilter"), state):
        return None  # some PreFilter state must be updated per removed pod (RemovePod): the per-node path
    return plugins


def select_victims_on_nodes(filters: Sequence[Any], state: CycleState, pod: PodInfo, snapshot: Snapshot, *,
                            nodes: Sequence[int], orders: Sequence[tuple[list[PodInfo], list[PodInfo]]],
                            nominated: Mapping[int, Sequence[PodInfo]], no_victims: Status,
                            sort_key: Callable[[PodInfo], Any]) -> list[NodeOutcome]:
    """``SelectVictimsOnNode`` for each of ``nodes`` (snapshot indices), at once; see the module docstring.

    ``orders[t]`` is node ``nodes[t]``'s lower-priority pods split as upstream gives them back:
    (PDB-violating, the rest), each most important first (``sort_key`` order). ``nominated`` holds, per node,
    the nominated pods of equal or higher priority (other than ``pod``). Nodes without lower-priority pods get
    ``no_victims``. Raises :class:`VectorFallback` when a filter answers an error.
    """
    outcomes: list[NodeOutcome] = [([], 0, no_victims)] * len(nodes)
    work = [t for t in range(len(nodes)) if orders[t][0] or orders[t][1]]  # nodes with potential victims
    if not work:
        return outcomes
    overlay = RequestOverlay(snapshot)
    positions = np.asarray([nodes[t] for t in work], dtype=np.intp)
    sequences = {t: orders[t][0] + orders[t][1] for t in work}  # the order pods are given back in
    overlay.change(positions, [sequences[t] for t in work], -1)
    with_nominated = [t for t in work if nodes[t] in nominated]
    overlay.change([nodes[t] for t in with_nominated], [nominated[nodes[t]] for t in with_nominated], +1)
    verdicts = overlay.verdicts(filters, state, pod)
    fits = passes(verdicts, snapshot.num_nodes)[positions].tolist()
    alive = []
    for t, fit in zip(work, fits, strict=True):
        if fit:
            alive.append(t)
        else:
            outcomes[t] = ([], 0, first_failure(verdicts, nodes[t]))
    victims: dict[int, list[PodInfo]] = {t: [] for t in alive}
    violations = dict.fromkeys(alive, 0)
    lengths = {t: len(sequences[t]) for t in alive}
    k = 0
    while True:
        step = [t for t in alive if lengths[t] > k]
        if not step:
            break
        where = np.asarray([nodes[t] for t in step], dtype=np.intp)
        given = [sequences[t][k] for t in step]
        amounts = requests_of(given)
        overlay.add(where, amounts, 1, +1)
        fails = ~passes(overlay.verdicts(filters, state, pod), snapshot.num_nodes)[where]
        if fails.any():
            overlay.add(where[fails], {name: values[fails] for name, values in amounts.items()}, 1, -1)
            for j in np.flatnonzero(fails).tolist():
                t = step[j]
                victims[t].append(given[j])
                violations[t] += k < len(orders[t][0])
        k += 1
    for t in alive:
        chosen = victims[t]
        if orders[t][0] and orders[t][1]:
            chosen.sort(key=sort_key)
        outcomes[t] = (chosen, violations[t], Status(Code.SUCCESS))
    return outcomes
