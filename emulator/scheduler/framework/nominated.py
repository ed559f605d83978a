"""Nominated pods in Filter: room preemption freed is held for the preemptor until it binds.

Upstream ``pkg/scheduler/framework/runtime/framework.go``
(``RunFilterPluginsWithNominatedPods``, ``addGENominatedPods``); our own
Python. A pod that preempted is *nominated* to a node
(``status.nominatedNodeName``) while its victims terminate. When any pod is
filtered against a node that has nominated pods of equal or higher priority
(other than the pod itself), the filters run twice: first with those
nominated pods added to a copy of the node (and the PreFilter extensions'
``AddPod`` run on a clone of the CycleState), then as the node is. The pod
fits only if both passes do: the first keeps a lower-priority pod off the
preemptor's room, the second keeps a pod from counting on a nominated pod
that may never come (its required pod affinity, say). A node that fails the
first pass reports the first pass's status, as upstream returns it.

Cost: only nodes with such nominated pods pay for a first pass, and only
when a nominator is wired in (the scheduler wires its queue). With few of
them (the usual case), a cycle runs it only on those its visit meets
(``SchedulingAlgorithm._visit_judging_nominated``), each judged on its own
as upstream (:func:`first_pass_failures`: the node's view with its
nominated pods added, ``AddPod`` on a CycleState clone, every Filter
plugin); with many, the vectorised filters judge them all at once on a
what-if view with the nominated pods' requests added
(:class:`NominatedColumns`, :func:`first_pass_by_columns`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from emulator.scheduler.framework.interface import CycleState, FilterVerdict, Status, is_success
from emulator.scheduler.framework.overlay import RequestOverlay, VectorFallback, first_failure, passes, vector_safe
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import (
    Diagnosis,
    NodeInfo,
    NodeToStatus,
    PodInfo,
    SchedulingError,
    attribute_rejections,
)

__all__ = ["PER_NODE_LIMIT", "Counted", "FirstPass", "NominatedColumns", "PodNominator", "active_extensions",
           "first_pass_by_columns", "first_pass_failures", "nominated_on"]


class PodNominator(Protocol):
    """Where the nominated pods come from (upstream ``framework.PodNominator``: the scheduling queue)."""

    def nominated_pods_by_node(self) -> Mapping[str, Sequence[PodInfo]]: ...


def nominated_on(nominator: PodNominator | None, pod: PodInfo, snapshot: Snapshot,
                 nodes: np.ndarray | None = None) -> dict[int, list[PodInfo]]:
    """Snapshot index -> the pods nominated there with priority >= ``pod``'s, other than ``pod``
    (``addGENominatedPods``' choice), for the nodes in ``nodes`` (all when None); empty in the common case.

    kemu's one addition: of two equal-priority pods of *competing replicas* both nominated to the same node
    (each replica chose it before it saw the other's nomination), the one with the smaller uid does not count
    the other there, so that it binds instead of both giving up the node. A pod not nominated to that node
    counts both, as upstream.
    """
    if nominator is None:
        return {}
    by_node = nominator.nominated_pods_by_node()
    if not by_node:
        return {}
    is_foreign = getattr(nominator, "is_foreign_nomination", None)
    own_node = getattr(nominator, "nominated_node", lambda _: None)(pod.pod) if is_foreign is not None else None
    if nodes is None:
        items: Any = by_node.items()
    elif len(by_node) < len(nodes):  # few nominations among many nodes: look each up in the asked-for set
        asked = np.zeros(snapshot.num_nodes, dtype=bool)
        asked[nodes] = True
        items = ((name, pods) for name, pods in by_node.items()
                 if (index := snapshot.index_of(name)) is not None and asked[index])
    else:  # only the nodes asked about: a cycle filtering one node does not pay for every nomination
        names = snapshot.node_names
        items = ((name, pods) for name in (names[i] for i in np.asarray(nodes).tolist())
                 if (pods := by_node.get(name)))
    out: dict[int, list[PodInfo]] = {}
    for name, pods in items:
        index = snapshot.index_of(name)
        if index is None:
            continue
        tie_break = name == own_node  # the pod itself is nominated here too
        chosen = [p for p in pods if p.priority > pod.priority or (
            p.priority == pod.priority and p.key != pod.key and (not p.uid or p.uid != pod.uid)
            and not (tie_break and is_foreign(p.key) and (p.uid, p.key) > (pod.uid, pod.key)))]  # type: ignore[misc]
        if chosen:
            out[index] = chosen
    return out


def active_extensions(pre_filter_plugins: Sequence[Any], state: CycleState) -> list[tuple[str, Any]]:
    """(name, PreFilterExtensions) of the PreFilter plugins not skipped this cycle that have extensions."""
    out = []
    for plugin in pre_filter_plugins:
        if plugin.name in state.skip_filter_plugins:  # first: most are skipped for a plain pod
            continue
        ext = plugin.pre_filter_extensions() if hasattr(plugin, "pre_filter_extensions") else None
        if ext is not None:
            out.append((plugin.name, ext))
    return out


class FirstPass:
    """The nodes where the pod does not fit with its nominated pods added, and why (lazily, when vectorised)."""

    __slots__ = ("_explicit", "_verdicts", "failed", "failed_set")

    def __init__(self, failed: np.ndarray, explicit: Mapping[int, Status] | None = None,
                 verdicts: list[tuple[str, FilterVerdict]] | None = None) -> None:
        self.failed = failed
        self.failed_set = frozenset(failed.tolist())
        self._explicit = explicit or {}
        self._verdicts = [(name, v) for name, v in verdicts or () if not v.passes_all]

    def __bool__(self) -> bool:
        return bool(len(self.failed))

    def among(self, indices: np.ndarray) -> np.ndarray:
        """Bool per node of ``indices``: whether it failed (a few comparisons when few failed, not ``np.isin``'s
        sort)."""
        if len(self.failed) > 8:
            return np.isin(indices, self.failed)
        hit = np.zeros(len(indices), dtype=bool)
        for index in self.failed.tolist():
            hit |= indices == index
        return hit

    def status(self, index: int) -> Status:
        """Node ``index``'s first-pass status (it must have failed)."""
        explicit = self._explicit.get(index)
        return explicit if explicit is not None else first_failure(self._verdicts, index)

    def record(self, diagnosis: Diagnosis, indices: np.ndarray) -> None:
        """Record these failed nodes' statuses in ``diagnosis`` (vectorised ones as lazy groups)."""
        if not len(indices):
            return
        if self._explicit:
            for index in indices.tolist():
                status = self._explicit[index]
                diagnosis.node_to_status.set(index, status)
                diagnosis.add_plugin_status(status)
            return
        diagnosis.node_to_status.add_groups(attribute_rejections(np.sort(indices), self._verdicts))


PER_NODE_LIMIT = 16  # up to this many nodes with counted nominated pods, the first pass runs per node


def first_pass_failures(
        state: CycleState, pod: PodInfo, snapshot: Snapshot, nominated: Mapping[int, Sequence[PodInfo]], *,
        extensions: Sequence[tuple[str, Any]], filters: Sequence[Any] | None,
        filter_nodes: Callable[[CycleState, PodInfo, Snapshot, np.ndarray, Diagnosis], np.ndarray],
        filter_node: Callable[[CycleState, PodInfo, NodeInfo], Status | None]) -> FirstPass | None:
    """The nodes of ``nominated`` where ``pod`` does not fit with the nominated pods added (the first pass), with
    their statuses; None when it fits on all. Raises what the filters raise (a SchedulingError on a plugin error).

    Up to :data:`PER_NODE_LIMIT` nodes, each is judged as upstream's ``addGENominatedPods`` +
    ``RunFilterPlugins`` do: a copy of the node's view with its nominated pods added
    (``Snapshot.node_info_with``), their ``AddPod`` extensions run on a clone of the CycleState, every Filter
    plugin run on that view (``filter_node``, ``RunFilterPlugins``) -- a cost in the number of those nodes,
    not in the cluster's size. Beyond that, the vectorised filters judge them all at once: ``filters`` are the
    active Filter plugins when the vectorised ones may be used (None: per node only); when they are all
    vector-safe the nominated pods' requests are added to a :class:`RequestOverlay`, else
    ``filter_nodes(state, pod, snapshot, nodes, diagnosis)`` (the runtime's filter, without nominated pods)
    judges the nodes on a fork with the pods assumed.
    """
    if not nominated:
        return None
    many = len(nominated) > PER_NODE_LIMIT and not extensions
    if many and filters is not None and vector_safe(filters):
        overlay = RequestOverlay(snapshot)
        overlay.change(list(nominated), list(nominated.values()), +1)
        try:
            verdicts = overlay.verdicts(filters, state, pod)
        except VectorFallback:
            pass  # an error answer: the general path below reports it as the runtime does
        else:
            nodes = np.fromiter(nominated, dtype=np.intp, count=len(nominated))
            failed = nodes[~passes(verdicts, snapshot.num_nodes)[nodes]]
            return FirstPass(failed, verdicts=verdicts) if len(failed) else None
    failures: dict[int, Status] = {}
    if many:
        fork = snapshot.fork()
        for index, pods in nominated.items():
            for p in pods:
                fork.assume(p, index)
        nodes = np.asarray(sorted(nominated), dtype=np.intp)
        diagnosis = Diagnosis(NodeToStatus(fork))
        feasible = set(filter_nodes(state, pod, fork, nodes, diagnosis).tolist())
        names = fork.node_names
        for index in nodes.tolist():
            if index not in feasible:
                status = diagnosis.node_to_status.get(names[index])
                assert status is not None
                failures[index] = status
        return _explicit(failures)
    for index, pods in nominated.items():
        info = snapshot.node_info_with(index, pods)
        cloned = state.clone() if extensions else state  # without extensions nothing writes to it
        for p in pods:
            for plugin_name, ext in extensions:
                status = ext.add_pod(cloned, pod, p, info)
                if not is_success(status):  # upstream: an error, which ends the cycle
                    raise SchedulingError(Status.error(f'running AddPod on PreFilter plugin "{plugin_name}": '
                                                       f'{status.message}'))  # type: ignore[union-attr]
        status = filter_node(cloned, pod, info)
        if not is_success(status):
            assert status is not None
            failures[index] = status
    return _explicit(failures)


def _explicit(failures: dict[int, Status]) -> FirstPass | None:
    if not failures:
        return None
    return FirstPass(np.fromiter(failures, dtype=np.intp, count=len(failures)), explicit=failures)


class NominatedColumns:
    """Per snapshot node, the summed requests and count of its nominated pods of priority >= p (a table for each
    preemptor priority p asked about), kept up to date from the nominator's change log: a cycle pays for the
    nodes whose nominations changed since the last, not for every nominated pod (upstream's Filter looks up
    only the nodes it visits; kemu visits every node at once, so it keeps the sums instead).

    The pod's own node is the exception (:meth:`add_to`): there the pod itself and, between competing replicas,
    the tie-break of :func:`nominated_on` decide, so it is computed exactly.
    """

    _MAX_TABLES = 16

    def __init__(self) -> None:
        self._names: Sequence[str] | None = None
        self._version = -1
        self._pods: dict[int, tuple[PodInfo, ...]] = {}  # snapshot index -> pods nominated there
        self._tables: dict[int, tuple[dict[str, np.ndarray], np.ndarray]] = {}  # priority -> (amounts, counts)

    def _sync(self, nominator: Any, snapshot: Snapshot) -> bool:
        since = getattr(nominator, "nominated_since", None)
        if since is None:
            return False
        if snapshot.node_names is not self._names:  # another node set: indices moved
            self._names, self._version, self._pods, self._tables = snapshot.node_names, -1, {}, {}
        version, changed, complete = since(self._version)
        if complete:
            self._pods, self._tables = {}, {}
        self._version = version
        for name, pods in changed.items():
            index = snapshot.index_of(name)
            if index is None:
                continue
            if pods:
                self._pods[index] = pods
            else:
                self._pods.pop(index, None)
            for priority, (amounts, counts) in self._tables.items():
                self._set(amounts, counts, index, pods, priority)
        return True

    def _set(self, amounts: dict[str, np.ndarray], counts: np.ndarray, index: int, pods: Sequence[PodInfo],
             priority: int) -> None:
        for column in amounts.values():
            column[index] = 0
        counts[index] = 0
        for p in pods:
            if p.priority >= priority:
                counts[index] += 1
                for name, amount in p.requests.items():
                    column = amounts.get(name)
                    if column is None:
                        column = amounts[name] = np.zeros(len(counts), dtype=np.int64)
                    column[index] += amount

    def _table(self, priority: int, num_nodes: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        table = self._tables.get(priority)
        if table is None:
            if len(self._tables) >= self._MAX_TABLES:
                self._tables.clear()
            table = self._tables[priority] = ({}, np.zeros(num_nodes, dtype=np.int64))
            for index, pods in self._pods.items():
                self._set(table[0], table[1], index, pods, priority)
        return table

    def counted(self, nominator: Any, pod: PodInfo, snapshot: Snapshot) -> Counted | None:
        """The nominated pods ``pod``'s Filter counts on each node (:func:`nominated_on`'s choice), as columns;
        None when the nominator keeps no change log (then use :func:`nominated_on`)."""
        if nominator is None or not self._sync(nominator, snapshot):
            return None
        amounts, counts = self._table(pod.priority, snapshot.num_nodes)
        mask = counts > 0
        own = nominator.nominated_node(pod.pod)
        index = snapshot.index_of(own) if own else None
        if index is None or not counts[index]:
            return Counted(amounts, counts, mask)
        # The pod itself, or the tie-break between competing replicas, may leave some out on its own node.
        exact = nominated_on(nominator, pod, snapshot, np.asarray([index], dtype=np.intp)).get(index, [])
        counted = [p for p in self._pods.get(index, ()) if p.priority >= pod.priority]
        if len(exact) == len(counted):
            return Counted(amounts, counts, mask)
        mask[index] = bool(exact)
        return Counted(amounts, counts, mask, index, counted, exact)


@dataclass(frozen=True, slots=True)
class Counted:
    """:meth:`NominatedColumns.counted`'s answer: ``mask`` marks the nodes with counted nominated pods."""

    amounts: dict[str, np.ndarray]
    counts: np.ndarray
    mask: np.ndarray
    own: int | None = None  # the node where the columns count ``extra`` pods instead of ``exact``
    extra: Sequence[PodInfo] = ()
    exact: Sequence[PodInfo] = ()

    def add_to(self, overlay: RequestOverlay) -> None:
        """Add the counted pods' requests to ``overlay``, on every node."""
        overlay.add_columns(self.amounts, self.counts)
        if self.own is not None:
            overlay.change([self.own], [self.extra], -1)
            if self.exact:
                overlay.change([self.own], [self.exact], +1)


def first_pass_by_columns(counted: Counted, state: CycleState, pod: PodInfo, snapshot: Snapshot, *,
                          filters: Sequence[Any], candidates: np.ndarray | None) -> FirstPass | None:
    """:func:`first_pass_failures`' vectorised answer from the nominated pods' columns, for vector-safe
    ``filters`` without PreFilter extensions, over ``candidates`` (all nodes when None). Raises
    :class:`VectorFallback` on a filter's error answer."""
    nodes = np.flatnonzero(counted.mask) if candidates is None else candidates[counted.mask[candidates]]
    if not len(nodes):
        return None
    overlay = RequestOverlay(snapshot)
    counted.add_to(overlay)
    verdicts = overlay.verdicts(filters, state, pod)
    failed = nodes[~passes(verdicts, snapshot.num_nodes)[nodes]]
    return FirstPass(np.sort(failed), verdicts=verdicts) if len(failed) else None
