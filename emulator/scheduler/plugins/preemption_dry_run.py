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

1. Over every node of the visiting order at once: subtract the summed
   requests (and count) of its lower-priority pods from a copy of the
   requested columns and add those of the nominated pods the preemptor's
   Filter counts (upstream's first pass; for monotone filters the second
   pass, without them, cannot fail when the first passed), then run every
   Filter plugin's ``filter_all`` once over that overlay. Nodes without
   lower-priority pods, and nodes that fail, are no candidates; their
   statuses are recorded as groups, turned into ``Status`` objects only if
   read. The per-node sums come from a :class:`LowerSums` table per preemptor
   priority, kept across cycles and recomputed (one pass over the node's pods
   for every resource) only for the nodes whose pods changed, so this step
   costs a few array operations, not a pass over pods.
2. Then, for the nodes that passed, in visiting order and in rounds of as
   many nodes as candidates are wanted: ``k = 0, 1, ...`` every node gives
   back its ``k``-th potential victim (the same order as upstream: each
   node's pods by importance, cached until its pods change), one
   ``filter_all`` pass decides for all of them, and the nodes where the pod
   no longer fits take that pod back out: it is a victim. A pod asking for
   at least what its node already refused is a victim without a filter run
   (the filters are monotone and the node only fills up).
3. Without PDB-violating pods, each candidate's ``pickOneNodeForPreemption``
   scores are worked out here for all nodes at once (``Victims.pick_key``).
   Without PDBs and extenders (:meth:`VectorDryRun.best`), the walk's stop
   is known in advance -- the ``wanted``-th node with victims -- so the
   choice itself is made here, upstream's score functions narrowing the
   candidates as arrays, and only the chosen node's victims become a list:
   no Candidate per node.

Per node the result -- victims, PDB violations, status -- is exactly what the
per-node dry run gives; only the work is shared. The caller's walk stops at
upstream's rule; statuses are reported for the nodes visited before the stop,
as upstream visits them.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.scheduler.framework.interface import Code, CycleState, FilterVerdict, Status, reject_where
from emulator.scheduler.framework.nominated import Counted, active_extensions
from emulator.scheduler.framework.overlay import (
    RequestOverlay,
    VectorFallback,
    passes,
    requests_of,
    vector_safe,
)
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import NodeToStatus, PodInfo, attribute_rejections

__all__ = ["Chosen", "GiveBack", "ImportanceIndex", "LowerSums", "NodeOutcome", "PickKey", "ScoredOutcome",
           "VectorDryRun", "VectorFallback", "vector_filters"]

NodeOutcome = tuple[list[PodInfo], int, Status | None]  # (victims, PDB violations, status), as select_victims_on_node
# The victims' scores for pickOneNodeForPreemption, compared as a tuple (higher is better): see
# default_preemption._pick_key, which works them out one candidate at a time.
PickKey = tuple[int, int, int, int, float]
ScoredOutcome = tuple[list[PodInfo], int, Status | None, PickKey | None]  # and the scores, when worked out here
Chosen = tuple[int, list[PodInfo], PickKey]  # VectorDryRun.best's answer: the node, its victims, their scores
# The caller's walk: take one node's outcome, answer whether to stop.
Visit = Callable[[int, NodeOutcome | ScoredOutcome], bool]
_SHIFT = 2**31  # pickOneNodeForPreemption's sum of priorities shifts each by MaxInt32 + 1 so negatives count


@dataclass(frozen=True, slots=True)
class GiveBack:
    """One node's potential victims in the order the dry run gives them back: the ``violating`` PDB-violating
    ones first, each group most important first; ``amounts`` (resource -> request per pod, same order) when known.
    From :class:`ImportanceIndex` also the same as one ``matrix`` (a row per resource of ``names``) and each pod's
    ``priorities`` and ``starts`` (the start times the importance order used)."""

    pods: Sequence[PodInfo]
    violating: int = 0
    amounts: Mapping[str, np.ndarray] | None = None
    names: tuple[str, ...] = ()
    matrix: np.ndarray | None = None
    priorities: np.ndarray | None = None
    starts: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class _Ranked:
    pods: tuple[PodInfo, ...]  # the snapshot's tuple this was built from (checked by identity)
    ordered: list[PodInfo]  # most important first
    memos: list[dict[str, Any]]  # each one's memos: the sort key's memo gone means its start time changed
    neg_priorities: list[int]  # -priority of each, ascending
    names: tuple[str, ...]  # the resources any of them requests, sorted
    matrix: np.ndarray  # a row per resource of ``names``: request of each, in ``ordered`` order
    priorities: np.ndarray  # priority of each
    starts: np.ndarray | None  # start time of each (``sort_key``'s memo; None if it left none)
    below: dict[int, GiveBack | None]  # preemptor priority -> what :meth:`ImportanceIndex.lower_than` answered


class ImportanceIndex:
    """Per node, its pods most important first (``MoreImportantPod``) with their requests as arrays, kept across
    scheduling cycles and rebuilt for a node only when its pods change (the snapshot gives a node a new tuple).
    ``sort_key`` gives ``(-priority, start time)`` and leaves the start time as the pod's ``memo_key`` memo
    (ties in both keep the snapshot's order).

    The pods of lower priority than a preemptor are a suffix of that order (importance sorts by priority first),
    so a node's potential victims, and their requests, are slices.
    """

    def __init__(self, sort_key: Callable[[PodInfo], Any], memo_key: str) -> None:
        self.sort_key = sort_key
        self.memo_key = memo_key  # the memo ``sort_key`` leaves on every pod it ranks (their start time)
        self._nodes: dict[int, _Ranked] = {}

    def lower_than(self, snapshot: Snapshot, index: int, priority: int) -> GiveBack | None:
        """Node ``index``'s pods of priority below ``priority``, most important first (None when it has none)."""
        pods = snapshot.pods_on(index)
        if not pods:
            return None
        ranked = self._nodes.get(index)
        key = self.memo_key
        if ranked is not None and ranked.pods is pods:
            for memos in ranked.memos:
                if key not in memos:
                    # (The cache updates a pod's status in place and drops its memos when its start time changed.)
                    ranked = None
                    break
        else:
            ranked = None
        if ranked is None:
            ranked = self._nodes[index] = self._rank(pods)
        try:
            return ranked.below[priority]
        except KeyError:
            pass
        start = bisect.bisect_right(ranked.neg_priorities, -priority)
        given: GiveBack | None
        if start == len(ranked.ordered):
            given = None
        else:
            matrix = ranked.matrix[:, start:] if start else ranked.matrix
            given = GiveBack(ranked.ordered[start:] if start else ranked.ordered, 0,
                             dict(zip(ranked.names, matrix, strict=True)), ranked.names, matrix,
                             ranked.priorities[start:], None if ranked.starts is None else ranked.starts[start:])
        ranked.below[priority] = given
        return given

    def _rank(self, pods: tuple[PodInfo, ...]) -> _Ranked:
        # One key per pod, (-priority, start time) as ``sort_key`` gives it, read back as the two arrays; the
        # requests as one nested list into one matrix (a node's few pods: the Python calls are the cost).
        keyed = sorted([(self.sort_key(p), i) for i, p in enumerate(pods)])
        ordered = [pods[i] for _, i in keyed]
        names = tuple(sorted({name for p in ordered for name in p.requests}))
        matrix = np.array([[p.requests.get(name, 0) for p in ordered] for name in names],
                          dtype=np.int64).reshape(len(names), len(ordered))
        keys = np.array([k for k, _ in keyed], dtype=np.float64).reshape(len(ordered), 2)
        neg = [k[0] for k, _ in keyed]
        return _Ranked(pods, ordered, [p.memo_cache for p in ordered], neg, names, matrix,
                       np.array([-n for n in neg], dtype=np.int64), keys[:, 1].copy(), {})


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


class LowerSums:
    """Per node, the summed requests (of the snapshot's resources) and the count of its pods below a preemptor
    priority, one table per priority asked about, kept over one snapshot object as its owner assumes and forgets
    pods: a node whose pods changed (``Snapshot.changed_nodes_since``) is summed again, in one pass over its pods
    for every resource; another snapshot object, a node set change or a lost log starts the tables over."""

    _MAX_TABLES = 8

    def __init__(self) -> None:
        self._snapshot: Snapshot | None = None
        self._generation = -1
        # priority -> (resource -> sums, counts)
        self._tables: dict[int, tuple[dict[str, np.ndarray], np.ndarray]] = {}

    def columns(self, snapshot: Snapshot, priority: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """(resource -> per-node sum, per-node count) of the pods below ``priority`` (read-only arrays)."""
        self._sync(snapshot)
        table = self._tables.get(priority)
        if table is None:
            if len(self._tables) >= self._MAX_TABLES:
                self._tables.clear()
            n = snapshot.num_nodes
            table = self._tables[priority] = ({name: np.zeros(n, dtype=np.int64)
                                               for name in snapshot.resource_names}, np.zeros(n, dtype=np.int64))
            for index in np.flatnonzero(snapshot.pod_counts).tolist():
                self._set(table, index, snapshot.pods_on(index), priority)
        return table

    def _sync(self, snapshot: Snapshot) -> None:
        if snapshot is self._snapshot and snapshot.generation == self._generation:
            return
        changed = snapshot.changed_nodes_since(self._generation) if snapshot is self._snapshot else None
        names = set(snapshot.resource_names)
        if changed is None or any(len(counts) != snapshot.num_nodes or amounts.keys() != names
                                  for amounts, counts in self._tables.values()):
            self._tables = {}
        else:
            for index in set(changed):
                pods = snapshot.pods_on(index)
                for priority, table in self._tables.items():
                    self._set(table, index, pods, priority)
        self._snapshot = snapshot
        self._generation = snapshot.generation

    @staticmethod
    def _set(table: tuple[dict[str, np.ndarray], np.ndarray], index: int, pods: Sequence[PodInfo],
             priority: int) -> None:
        amounts, counts = table
        sums: dict[str, int] = dict.fromkeys(amounts, 0)
        count = 0
        for p in pods:
            if p.priority < priority:
                count += 1
                for name, amount in p.requests.items():
                    if name in sums:
                        sums[name] += amount
        counts[index] = count
        for name, total in sums.items():
            amounts[name][index] = total


class VectorDryRun:
    """``DryRunPreemption`` for vector-safe filters (see the module docstring), with what it keeps across cycles:
    per node, the summed requests of the pods below each preemptor priority seen (:class:`LowerSums`, updated
    for the nodes whose pods changed) and its pods by importance (:class:`ImportanceIndex`)."""

    def __init__(self, sort_key: Callable[[PodInfo], Any], memo_key: str) -> None:
        self.sort_key = sort_key
        self.ranked = ImportanceIndex(sort_key, memo_key)
        self.lower = LowerSums()

    def _first_step(self, filters: Sequence[Any], state: CycleState, pod: PodInfo, snapshot: Snapshot, *,
                    order: Sequence[int] | np.ndarray, nominated: Mapping[int, Sequence[PodInfo]] | Counted) -> _Step:
        """Step 1 of the module docstring, over the nodes of ``order``."""
        nodes = np.asarray(order, dtype=np.intp)
        lower, counts = self.lower.columns(snapshot, pod.priority)
        has_lower = counts[nodes] > 0
        overlay = RequestOverlay(snapshot)
        overlay.add(nodes, {name: column[nodes] for name, column in lower.items()}, counts[nodes], -1)
        if isinstance(nominated, Counted):
            nominated.add_to(overlay)
        else:
            overlay.change(list(nominated), list(nominated.values()), +1)
        verdicts = overlay.verdicts(filters, state, pod)
        fits = has_lower & passes(verdicts, snapshot.num_nodes)[nodes]
        return _Step(snapshot, nodes, has_lower, overlay, verdicts, fits)

    def run(self, filters: Sequence[Any], state: CycleState, pod: PodInfo, snapshot: Snapshot,
            order: Sequence[int] | np.ndarray, *, nominated: Mapping[int, Sequence[PodInfo]] | Counted,
            statuses: NodeToStatus, no_victims: Status,
            split: Callable[[Sequence[PodInfo]], tuple[list[PodInfo], list[PodInfo]]] | None,
            wanted: int, visit: Visit) -> None:
        """Visit ``order``'s nodes in turn with their outcomes until ``visit`` answers stop.

        Only the nodes where the pod fits with every lower-priority pod removed (and the nominated pods of
        equal or higher priority added) get a give-back dry run and a call to ``visit``; the others visited
        before the stop get their status in ``statuses`` (as groups: no Status objects until read). ``split``
        divides a node's potential victims into PDB-violating and the rest (None: no PDBs). ``wanted``: how many
        candidates ``visit`` takes before it stops when all respect the PDBs (the give-back runs in rounds of
        that many nodes, so the nodes after the stop are rarely computed). Raises
        :class:`VectorFallback` when a filter answers an error (before anything was visited).
        """
        priority = pod.priority
        step = self._first_step(filters, state, pod, snapshot, order=order, nominated=nominated)
        nodes, overlay = step.nodes, step.overlay
        reachable = np.flatnonzero(step.fits)  # positions in ``order`` of the nodes worth a give-back run
        stop = len(order)
        done = 0
        while done < len(reachable) and stop == len(order):
            chunk = reachable[done:done + max(1, wanted)]
            done += len(chunk)
            chunk_nodes = nodes[chunk]
            sequences = []
            for index in chunk_nodes.tolist():
                given = self.ranked.lower_than(snapshot, index, priority)
                assert given is not None
                if split is not None:
                    violating, rest = split(given.pods)
                    given = GiveBack(violating + rest, len(violating))
                sequences.append(given)
            for position, index, outcome in zip(chunk.tolist(), chunk_nodes.tolist(),
                                                self._give_back(overlay, filters, state, pod, nodes=chunk_nodes,
                                                                sequences=sequences), strict=True):
                if visit(index, outcome):
                    stop = position + 1
                    break
        step.record(statuses, stop, no_victims)

    def best(self, filters: Sequence[Any], state: CycleState, pod: PodInfo, snapshot: Snapshot,
             order: Sequence[int] | np.ndarray, *, nominated: Mapping[int, Sequence[PodInfo]] | Counted,
             statuses: NodeToStatus, no_victims: Status, wanted: int) -> Chosen | None:
        """``DryRunPreemption`` + ``SelectCandidate`` without PDBs and extenders, for the chosen node only:
        its index, victims and scores -- what :meth:`run`'s walk and ``pickOneNodeForPreemption`` would choose.

        Without PDBs every candidate respects them, so the walk stops at the ``wanted``-th node with victims:
        the first ``wanted`` nodes of the give-back run, when each of them has victims. Their scores are worked
        out as arrays (:func:`_pick_keys`' formulas), and upstream's narrowing -- each score function keeps the
        best, the first node in visiting order wins a tie -- picks one; only its victims are made a list.
        None: no node is a candidate (``statuses`` then holds every visited node's, as :meth:`run` leaves
        them). Raises :class:`VectorFallback` as :meth:`run`, and when this path cannot tell (a node without
        victims: the walk's error status; start times not known): then :meth:`run` answers.
        """
        step = self._first_step(filters, state, pod, snapshot, order=order, nominated=nominated)
        reachable = np.flatnonzero(step.fits)
        if not len(reachable):
            step.record(statuses, len(order), no_victims)
            return None
        chunk_nodes = step.nodes[reachable[:max(1, wanted)]]
        lower_than = self.ranked.lower_than
        priority = pod.priority
        sequences = [lower_than(snapshot, index, priority) for index in chunk_nodes.tolist()]
        rounds = self._rounds(step.overlay, filters, state, pod, nodes=chunk_nodes,
                              sequences=sequences)  # type: ignore[arg-type]
        if rounds.scored is None:
            raise VectorFallback("the victims' start times are not known")
        at, flat, offsets = rounds.at, rounds.pods, rounds.offsets
        count = np.bincount(at, minlength=len(sequences))
        if not len(at) or not count.all():
            raise VectorFallback("a node where the pod fits with all its pods given back")
        priorities, starts = rounds.scored
        first = flat[np.flatnonzero(np.concatenate(([True], at[1:] != at[:-1])))]  # each node's first victim
        total = np.zeros(len(sequences), dtype=np.int64)
        np.add.at(total, at, priorities[flat])
        total += count * _SHIFT
        # pickOneNodeForPreemption's score functions in order, each keeping the best (higher is better).
        alive = np.ones(len(sequences), dtype=bool)
        for score in (-priorities[first], -total, -count, starts[first]):
            alive &= score == score[alive].max()
            if alive.sum() == 1:
                break
        w = int(np.argmax(alive))
        mine = flat[at == w] - offsets[w]
        pods = sequences[w].pods  # type: ignore[union-attr]
        victims = [pods[j] for j in mine.tolist()]
        key = (0, -int(priorities[first[w]]), -int(total[w]), -int(count[w]), float(starts[first[w]]))
        return int(chunk_nodes[w]), victims, key

    def _rounds(self, overlay: RequestOverlay, filters: Sequence[Any], state: CycleState, pod: PodInfo, *,
                nodes: np.ndarray, sequences: Sequence[GiveBack]) -> _Rounds:
        """Give each node's potential victims back in order (``k = 0, 1, ...`` for all nodes at once), keeping
        those the pod still fits with; the rest are the victims. ``overlay`` has them all removed."""
        amounts, scored = _flatten(sequences)
        lengths = np.fromiter((len(s.pods) for s in sequences), dtype=np.int64, count=len(sequences))
        offsets = np.zeros(len(sequences), dtype=np.intp)
        np.cumsum(lengths[:-1], out=offsets[1:])
        failed_at: list[np.ndarray] = []  # per step: which nodes (positions in ``sequences``) kept out a pod
        failed_pod: list[np.ndarray] = []  # and that pod (position in the flattened order)
        alive = np.arange(len(sequences))
        # Per node, the last pod it could not take back (flattened position; -1: none yet). The filters are
        # monotone and a node only fills up as pods are given back, so a later pod asking for at least as much
        # of every resource cannot fit either: it is a victim without a filter run (the common case: a node's
        # pods of one shape, the first failure decides the rest).
        last_failed = np.full(len(sequences), -1, dtype=np.intp)
        k = 0
        while True:
            alive = alive[lengths[alive] > k]
            if not len(alive):
                break
            picked = offsets[alive] + k
            prior = last_failed[alive]
            known = prior >= 0
            if known.any():
                ahead = picked[known]
                behind = prior[known]
                known[known] = np.logical_and.reduce([column[ahead] >= column[behind] for column in amounts.values()]) \
                    if amounts else True
            fails = known
            trying = ~known
            if trying.any():
                tried = picked[trying]
                where = nodes[alive[trying]]
                step = {name: column[tried] for name, column in amounts.items()}
                overlay.add(where, step, 1, +1)
                rejected = ~passes(overlay.verdicts(filters, state, pod), len(overlay.pod_counts))[where]
                if rejected.any():
                    overlay.add(where[rejected], {name: values[rejected] for name, values in step.items()}, 1, -1)
                    fails = known.copy()
                    fails[trying] = rejected
            if fails.any():
                failed_at.append(alive[fails])
                failed_pod.append(picked[fails])
                last_failed[alive[fails]] = picked[fails]
            k += 1
        if not failed_at:
            return _Rounds(_NONE, _NONE, offsets, scored)
        at = np.concatenate(failed_at)
        pods = np.concatenate(failed_pod)
        by_node = np.argsort(at, kind="stable")  # each node's victims in give-back order
        return _Rounds(at[by_node], pods[by_node], offsets, scored)

    def _give_back(self, overlay: RequestOverlay, filters: Sequence[Any], state: CycleState, pod: PodInfo, *,
                   nodes: np.ndarray, sequences: Sequence[GiveBack]) -> list[ScoredOutcome]:
        """:meth:`_rounds`, as each node's outcome: victims, PDB violations, status and (without PDB-violating
        pods) the scores."""
        rounds = self._rounds(overlay, filters, state, pod, nodes=nodes, sequences=sequences)
        at, pods, offsets = rounds.at, rounds.pods, rounds.offsets
        victims: list[list[PodInfo]] = [[] for _ in sequences]
        violations = [0] * len(sequences)
        keys: list[PickKey | None] = [None] * len(sequences)
        if len(at):
            flat = [p for s in sequences for p in s.pods]
            for w, j in zip(at.tolist(), pods.tolist(), strict=True):
                victims[w].append(flat[j])
            if rounds.scored is not None:
                keys = _pick_keys(victims, at, pods, *rounds.scored)
            violating = np.fromiter((s.violating for s in sequences), dtype=np.int64, count=len(sequences)) \
                if any(s.violating for s in sequences) else None
            if violating is not None:
                violations = np.bincount(at, weights=(pods - offsets[at]) < violating[at],
                                         minlength=len(sequences)).astype(int).tolist()
        success = Status(Code.SUCCESS)
        out: list[ScoredOutcome] = []
        for s, chosen, violated, key in zip(sequences, victims, violations, keys, strict=True):
            if 0 < s.violating < len(s.pods):
                chosen.sort(key=self.sort_key)
            out.append((chosen, violated, success, key))
        return out


_NONE = np.zeros(0, dtype=np.intp)


@dataclass(frozen=True, slots=True)
class _Step:
    """Step 1's outcome: the nodes in visiting order, whether each has lower-priority pods, the overlay with them
    removed and the counted nominated pods added, the filters' verdicts on it, and whether the pod fits each."""

    snapshot: Snapshot
    nodes: np.ndarray
    has_lower: np.ndarray
    overlay: RequestOverlay
    verdicts: list[tuple[str, FilterVerdict]]
    fits: np.ndarray

    def record(self, statuses: NodeToStatus, stop: int, no_victims: Status) -> None:
        """The statuses of the nodes visited before ``stop`` (a position in ``nodes``) that were no candidates,
        as groups."""
        nodes = self.nodes
        seen = np.zeros(len(nodes), dtype=bool)
        seen[:stop] = True
        no_lower = nodes[seen & ~self.has_lower]
        if len(no_lower):
            mask = np.zeros(self.snapshot.num_nodes, dtype=bool)
            mask[no_lower] = True
            statuses.add_groups([(no_victims.plugin, no_lower,
                                  reject_where(mask, no_victims.message, no_victims.code))])
        rejected = nodes[seen & self.has_lower & ~self.fits]
        if len(rejected):
            statuses.add_groups(attribute_rejections(np.sort(rejected),
                                                     [(n, v) for n, v in self.verdicts if not v.passes_all]))


@dataclass(frozen=True, slots=True)
class _Rounds:
    """What the give-back rounds found: each victim's node (position in the sequences, ascending; a node's
    victims in give-back order) and its position in the flattened order, each sequence's first position, and
    every pod's priority and start time (None as :func:`_flatten`)."""

    at: np.ndarray
    pods: np.ndarray
    offsets: np.ndarray
    scored: tuple[np.ndarray, np.ndarray] | None




def _pick_keys(victims: list[list[PodInfo]], at: np.ndarray, pods: np.ndarray, priorities: np.ndarray,
               starts: np.ndarray) -> list[PickKey | None]:
    """Each node's ``pickOneNodeForPreemption`` scores (None: no victims), for all nodes at once. ``at``/``pods``:
    each victim's node (ascending) and its position in the flattened give-back order.

    Without PDB violations each node's victims are in importance order (priority, then earlier start, as given
    back), so the first is the highest-priority victim and the earliest started among those
    (``GetEarliestPodStartTime``). Upstream ``pickOneNodeForPreemption``'s scores, as in ``_pick_key``."""
    nodes = len(victims)
    count = np.bincount(at, minlength=nodes)
    total = np.zeros(nodes, dtype=np.int64)
    np.add.at(total, at, priorities[pods])
    total += count * _SHIFT
    first = np.zeros(nodes, dtype=np.intp)
    starts_at = np.flatnonzero(np.concatenate(([True], at[1:] != at[:-1])))
    first[at[starts_at]] = pods[starts_at]
    top = priorities[first].tolist()
    earliest = starts[first].tolist()
    totals = total.tolist()
    return [(0, -top[w], -totals[w], -len(chosen), earliest[w]) if chosen else None
            for w, chosen in enumerate(victims)]


def _flatten(sequences: Sequence[GiveBack]) -> tuple[dict[str, np.ndarray], tuple[np.ndarray, np.ndarray] | None]:
    """Resource -> each pod's request (0 where it asks for none) over all pods of ``sequences`` in order, and each
    one's priority and start time (None unless every sequence knows them and none has PDB-violating pods)."""
    first = sequences[0]
    if first.matrix is not None and all(s.matrix is not None and s.names == first.names for s in sequences):
        matrix = np.concatenate([s.matrix for s in sequences], axis=1)  # type: ignore[misc]
        amounts = dict(zip(first.names, matrix, strict=True))
        scored = None
        if all(s.starts is not None and s.priorities is not None and not s.violating for s in sequences):
            scored = (np.concatenate([s.priorities for s in sequences]),  # type: ignore[misc]
                      np.concatenate([s.starts for s in sequences]))  # type: ignore[misc]
        return amounts, scored
    if any(s.amounts is None for s in sequences):
        return requests_of([p for s in sequences for p in s.pods]), None
    names: set[str] = set().union(*(s.amounts for s in sequences))  # type: ignore[arg-type]
    out = {}
    for name in names:
        parts = []
        for s in sequences:
            column = s.amounts.get(name)  # type: ignore[union-attr]
            parts.append(column if column is not None else np.zeros(len(s.pods), dtype=np.int64))
        out[name] = np.concatenate(parts)
    return out, None
