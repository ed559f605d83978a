"""What-if requested resources: the snapshot with some pods' requests added or removed, for node-local filters.

kemu's own piece, serving two upstream steps that try pods on nodes without
placing them: ``RunFilterPluginsWithNominatedPods``' first pass (nominated
pods added) and preemption's ``SelectVictimsOnNode`` (lower-priority pods
removed, then given back). Upstream copies one ``NodeInfo`` per node and runs
the Filter plugins on it; when every active Filter plugin is one of
:data:`VECTOR_SAFE_FILTERS` -- plugins that judge a node from its object and
its requested resources and pod count only, monotone in them -- kemu changes
private copies of the requested columns instead (:class:`RequestOverlay`) and
runs the plugins' ``filter_all`` over all nodes at once: each node's verdict
is the one upstream's copy of that node would get.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from emulator.scheduler.framework.interface import CycleState, FilterVerdict, Status
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo

__all__ = ["VECTOR_SAFE_FILTERS", "RequestOverlay", "VectorFallback", "first_failure", "passes", "requests_of",
           "vector_safe"]

# Filter plugins whose verdict on a node depends only on the node object and its requested resources and pod count
# (NodeResourcesFit), each monotone: more pods never make a node fit.
VECTOR_SAFE_FILTERS = frozenset({"NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity",
                                 "NodeResourcesFit"})


def vector_safe(filters: Sequence[Any]) -> bool:
    """Whether every one of these (active) Filter plugins is vector-safe and vectorised."""
    return all(p.name in VECTOR_SAFE_FILTERS and getattr(p, "filter_all", None) is not None for p in filters)


class VectorFallback(Exception):
    """A vectorised filter answered an error Status: redo the work on the per-node path (which handles it)."""


class RequestOverlay:
    """The snapshot with private requested columns and pod counts, changed in place (:meth:`change`), and
    the verdicts of vector-safe filters over it (:meth:`verdicts`)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.requested = {name: snapshot.requested(name).copy() for name in snapshot.resource_names}
        self.pod_counts = snapshot.pod_counts.copy()
        self.snapshot = snapshot.with_requested(self.requested, self.pod_counts)

    def _column(self, name: str) -> np.ndarray:
        column = self.requested.get(name)
        if column is None:  # a resource no node offers: a column of zeros (the pod can never fit anyway)
            column = self.requested[name] = np.zeros(len(self.pod_counts), dtype=np.int64)
            self.snapshot = self.snapshot.with_requested(self.requested, self.pod_counts)
        return column

    def change(self, indices: Sequence[int] | np.ndarray, groups: Sequence[Sequence[PodInfo]], sign: int) -> None:
        """For each ``j``: add (``sign`` 1) or remove (-1) the requests of the pods ``groups[j]`` (not empty) on
        node ``indices[j]`` (distinct nodes); a few array operations per resource for all of them."""
        if not len(groups):
            return
        flat = [pod for pods in groups for pod in pods]
        counts = np.fromiter((len(pods) for pods in groups), dtype=np.int64, count=len(groups))
        starts = np.zeros(len(groups), dtype=np.intp)
        np.cumsum(counts[:-1], out=starts[1:])
        per_pod = requests_of(flat)
        self.add(indices, {name: np.add.reduceat(amounts, starts) for name, amounts in per_pod.items()},
                 counts, sign)

    def add(self, indices: Sequence[int] | np.ndarray, amounts: dict[str, np.ndarray], counts: np.ndarray | int,
            sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) ``amounts[resource][j]`` and ``counts[j]`` pods on node
        ``indices[j]`` (distinct nodes)."""
        where = np.asarray(indices, dtype=np.intp)
        for name, values in amounts.items():
            self._column(name)[where] += sign * values
        self.pod_counts[where] += sign * counts
        self.snapshot.columns_changed()

    def add_columns(self, amounts: dict[str, np.ndarray], counts: np.ndarray) -> None:
        """Add ``amounts[resource]`` and ``counts`` (one entry per snapshot node) to every node."""
        for name, values in amounts.items():
            self._column(name)[:] += values
        self.pod_counts += counts
        self.snapshot.columns_changed()

    def verdicts(self, filters: Sequence[Any], state: CycleState, pod: PodInfo) -> list[tuple[str, FilterVerdict]]:
        out = []
        for plugin in filters:
            verdict = plugin.filter_all(state, pod, self.snapshot)
            if isinstance(verdict, Status):
                raise VectorFallback(verdict.message)
            out.append((plugin.name, verdict))
        return out


def requests_of(pods: Sequence[PodInfo]) -> dict[str, np.ndarray]:
    """Resource -> int64 array of each pod's request (0 where it asks for none), over every resource requested."""
    names: set[str] = set().union(*(pod.requests for pod in pods)) if pods else set()
    return {name: np.fromiter((pod.requests.get(name, 0) for pod in pods), dtype=np.int64, count=len(pods))
            for name in names}


def passes(verdicts: list[tuple[str, FilterVerdict]], num_nodes: int) -> np.ndarray:
    """Bool per node: every verdict lets it through."""
    masks = [v.mask for _, v in verdicts if not v.passes_all]
    if not masks:
        return np.ones(num_nodes, dtype=bool)
    return masks[0] if len(masks) == 1 else np.logical_and.reduce(masks)


def first_failure(verdicts: list[tuple[str, FilterVerdict]], index: int) -> Status:
    """The status of the first plugin (in profile order) rejecting node ``index`` (which must be rejected)."""
    for name, verdict in verdicts:
        if not verdict.passes_all and not verdict.mask[index]:
            return verdict.status_for(index, name)
    raise ValueError(f"node {index} is not rejected")
