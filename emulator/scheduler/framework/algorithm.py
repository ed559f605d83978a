"""The scheduling algorithm: filter the nodes, score the feasible ones, pick one.

Upstream ``pkg/scheduler/schedule_one.go`` (``schedulePod``,
``findNodesThatFitPod``, ``findNodesThatPassFilters``,
``findNodesThatPassExtenders``, ``prioritizeNodes``); the visiting order,
``numFeasibleNodesToFind`` and ``selectHost`` are in :mod:`.visiting`, and
running the plugins at each extension point (upstream ``framework.go``) is
:class:`~emulator.scheduler.framework.runtime.Framework`'s, which this class
is the base of. :meth:`SchedulingAlgorithm.schedule_one` is a pure function
of the pod, the snapshot and the framework's two pieces of state -- the
round-robin start index and the injected random generator -- so it serves a
scheduler and a Cluster Autoscaler simulation alike.

How filtering runs. Filter plugins run in profile order and a node is
rejected by the *first* plugin that fails it (its reasons are that plugin's).
Vectorised plugins (``filter_all``) judge every node of the snapshot at once;
the first failing vectorised plugin of each rejected node is found with one
``argmin`` over the stacked masks. Plugins without a vectorised form run per
node, only on the nodes that still need them, in the order upstream visits
nodes: starting at ``next_start_node_index`` and wrapping around. Like
upstream, the search stops once enough feasible nodes are found
(``percentageOfNodesToScore``); kemu reproduces upstream with parallelism 1,
where the nodes visited are exactly those before the feasible node that
exceeds the quota. Rejections of vectorised plugins stay as arrays in
:class:`~emulator.scheduler.framework.types.NodeToStatus` and become
``Status`` objects only when read.

Among the best-scoring nodes one is chosen by reservoir sampling (each tied
node in turn replaces the choice with probability 1/k), as upstream's
``selectHost``; ties are visited in evaluation order and the draws come from
the injected ``random.Random``, so a seed reproduces every choice.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from emulator.scheduler.framework.interface import Code, CycleState, FilterVerdict, Status, is_success
from emulator.scheduler.framework.nominated import FirstPass, PodNominator
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import (
    Diagnosis,
    FitError,
    NodeScores,
    NodeToStatus,
    NoNodesAvailable,
    PodInfo,
    ScheduleResult,
    SchedulingError,
)
from emulator.scheduler.framework.visiting import rotated, select_host, visit_all_but, visit_all_nodes

__all__ = ["SchedulingAlgorithm", "go_list"]

EMPTY = np.zeros(0, dtype=np.intp)


def _visit_all(masks: list[np.ndarray], failed: np.ndarray, n: int, start: int,
               wanted: int) -> tuple[np.ndarray, np.ndarray]:
    """(feasible, rejected met) visiting all ``n`` nodes from ``start``: those the ``masks`` reject and ``failed``."""
    if not masks:
        if len(failed):
            return visit_all_but(failed, n, start, wanted)
        feasible = rotated(None, n, start)[:wanted] if wanted >= n \
            else np.arange(start, start + wanted, dtype=np.intp) % n
        return feasible, np.zeros(0, dtype=np.intp)
    passes = masks[0] if len(masks) == 1 else np.logical_and.reduce(masks)
    if len(failed):
        passes = passes.copy()  # may be a plugin's (memoised) mask
        passes[failed] = False
    return visit_all_nodes(passes, start, wanted)


def go_list(names: Sequence[str]) -> str:
    """How Go's ``%v`` prints a string slice: ``[a b]``."""
    return "[" + " ".join(names) + "]"


class SchedulingAlgorithm:
    """``schedulePod`` and its helpers over the plugins a :class:`~.runtime.Framework` runs.

    A base class of ``Framework`` only: it reads the framework's plugin
    lists and state (declared below) and calls its ``run_*_plugins``
    methods (``run_pre_filter_plugins``, ``run_filter_plugins_on_node``,
    ``run_pre_score_plugins``, ``run_score_plugins``,
    ``run_post_filter_plugins``), its ``_nominated_failures``,
    ``_nominated_lazily`` and ``_first_pass_on`` (the first pass of
    ``RunFilterPluginsWithNominatedPods``) and ``_filter_failure``.
    """

    # Set by Framework.__init__.
    rng: random.Random
    vectorised: bool
    nominator: PodNominator | None
    next_start_node_index: int
    _snapshot: Snapshot | None
    _filters: list[Any]
    _extenders: list[Any]
    _filter_all: dict[str, Any]

    def _verdict(self, plugin: Any, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict | None:
        filter_all = self._filter_all.get(plugin.name) if self.vectorised else None
        if filter_all is None:
            return None
        verdict = filter_all(state, pod, snapshot)
        if isinstance(verdict, Status):
            raise SchedulingError(Status.error(f"running {plugin.name!r} filter plugin: {verdict.message}",
                                               plugin.name))
        return verdict

    def _filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, candidates: np.ndarray | None,
                start: int, *, wanted: int, diagnosis: Diagnosis, with_nominated: bool = True) -> np.ndarray:
        """Visit the candidates (all nodes when None) from position ``start``, wrapping around, until ``wanted``
        feasible nodes are found and one more feasible node is seen.

        Returns the feasible nodes (snapshot indices, in visiting order);
        rejected visited nodes get their status in ``diagnosis``. Nodes with
        nominated pods must also pass with them added (``with_nominated``).
        """
        n = snapshot.num_nodes if candidates is None else len(candidates)
        filters = [p for p in self._filters if p.name not in state.skip_filter_plugins]
        if not filters:
            return rotated(candidates, n, start)[:wanted]
        nominated = with_nominated and self.nominator is not None
        # Few nominations over all nodes: their first pass runs only on the nodes the visit meets (as upstream's,
        # which stops at numFeasibleNodesToFind), see _visit_judging_nominated; else all of them up front.
        lazy = self._nominated_lazily(state, pod, snapshot) if nominated and candidates is None and wanted else None
        first_pass = self._nominated_failures(state, pod, snapshot, candidates) \
            if nominated and lazy is None else None
        verdicts = [self._verdict(p, state, pod, snapshot) for p in filters]
        vec = [j for j, v in enumerate(verdicts) if v is not None and not v.passes_all]
        per_node = [j for j, v in enumerate(verdicts) if v is None]
        masks = [verdicts[j].mask for j in vec]  # type: ignore[union-attr]
        if lazy and per_node:  # the per-node walk below judges every node it meets: give it every first pass
            first_pass, lazy = self._first_pass_on(state, pod, snapshot, lazy), None
        if lazy:
            feasible, rejected, first_pass = self._visit_judging_nominated(
                state, pod, snapshot, masks=masks, nominated=lazy, start=start, wanted=wanted)
            self._record_rejections(diagnosis, filters, verdicts, rejected, first_pass)
            return feasible
        if not masks and not per_node and first_pass is None:
            # Nothing rejects any node (the usual case on a roomy cluster): the first ``wanted`` in visiting order.
            return rotated(candidates, n, start)[:wanted] if candidates is not None or wanted >= n \
                else (np.arange(start, start + wanted, dtype=np.intp) % n)
        if not masks and not per_node and candidates is None:
            # Only the nominated-pods pass rejects (a few nodes): the visit without a mask over every node.
            assert first_pass is not None
            feasible, rejected = visit_all_but(first_pass.failed, n, start, wanted)
            first_pass.record(diagnosis, rejected)
            return feasible
        if not masks:
            passes = np.ones(snapshot.num_nodes, dtype=bool)
        else:
            passes = masks[0] if len(masks) == 1 else np.logical_and.reduce(masks)
        if first_pass is not None:
            passes = passes.copy()  # may be a plugin's (memoised) mask
            passes[first_pass.failed] = False

        if not per_node and candidates is None:
            feasible, rejected = visit_all_nodes(passes, start, wanted)
            self._record_rejections(diagnosis, filters, verdicts, rejected, first_pass)
            return feasible

        order = rotated(candidates, n, start)
        if not per_node:
            ok = passes[order]
            positions = np.flatnonzero(ok)
            if len(positions) > wanted:
                cut = int(positions[wanted])  # the first feasible node beyond the quota stops the search
                feasible = order[positions[:wanted]]
            else:
                cut = len(order)
                feasible = order[positions]
            self._record_rejections(diagnosis, filters, verdicts, order[:cut][~ok[:cut]], first_pass)
            return feasible

        found: list[int] = []
        vector_failed: list[int] = []
        for i in order.tolist():
            if first_pass is not None and i in first_pass.failed_set:
                status = first_pass.status(i)
                diagnosis.node_to_status.set(i, status)
                diagnosis.add_plugin_status(status)
                continue
            status = None
            first_vec = None if passes[i] else next(j for j in vec if not verdicts[j].mask[i])  # type: ignore[union-attr]
            info = None
            for j in per_node:
                if first_vec is not None and j > first_vec:
                    break  # a vectorised plugin earlier in the profile already rejects the node
                info = info if info is not None else snapshot.node_info(i)
                result = filters[j].filter(state, pod, info)
                if not is_success(result):
                    status = self._filter_failure(filters[j].name, result)
                    break
            if status is not None:
                diagnosis.node_to_status.set(i, status)
                diagnosis.add_plugin_status(status)
            elif first_vec is not None:
                vector_failed.append(i)
            else:
                if len(found) == wanted:
                    break
                found.append(i)
        self._record_vector_failures(diagnosis, filters, verdicts, np.asarray(vector_failed, dtype=np.intp))
        return np.asarray(found, dtype=np.intp)

    def _visit_judging_nominated(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, *,
                                 masks: list[np.ndarray], nominated: Mapping[int, Sequence[PodInfo]], start: int,
                                 wanted: int) -> tuple[np.ndarray, np.ndarray, FirstPass | None]:
        """The visit over all nodes (feasible, rejected met, first-pass failures) where the first pass with
        nominated pods runs only on the nominated nodes the visit meets, up to and including the node that
        stops it: the same answer as judging them all first, at a cost in those met (about
        ``wanted / nodes`` of them on a roomy cluster). A node failing it pushes the stop further, which may
        meet more of them: repeat until none is left unjudged in the window."""
        n = snapshot.num_nodes
        failures: dict[int, Status] = {}
        judged: set[int] = set()
        while True:
            failed = np.fromiter(failures, dtype=np.intp, count=len(failures))
            feasible, rejected = _visit_all(masks, failed, n, start, wanted)
            if len(feasible) < wanted:
                last = n - 1  # every node was met
            else:
                met = [(int(a[-1]) - start) % n for a in (feasible, rejected) if len(a)]
                last = min(max(met) + 1, n - 1)  # and the feasible node one beyond, which stops the visit
            todo = {i: pods for i, pods in nominated.items() if i not in judged and (i - start) % n <= last}
            if not todo:
                break
            judged.update(todo)
            first_pass = self._first_pass_on(state, pod, snapshot, todo)
            if first_pass is not None:
                failures.update((i, first_pass.status(i)) for i in first_pass.failed.tolist())
        if not failures:
            return feasible, rejected, None
        return feasible, rejected, FirstPass(np.fromiter(failures, dtype=np.intp, count=len(failures)),
                                             explicit=failures)

    def _record_rejections(self, diagnosis: Diagnosis, filters: list[Any], verdicts: list[FilterVerdict | None],
                           rejected: np.ndarray, first_pass: FirstPass | None) -> None:
        """Record rejected nodes: those that failed the nominated-pods pass with its status, the rest lazily."""
        if first_pass is not None:
            hit = first_pass.among(rejected)
            self._record_vector_failures(diagnosis, filters, verdicts, rejected[~hit])
            first_pass.record(diagnosis, rejected[hit])
            return
        self._record_vector_failures(diagnosis, filters, verdicts, rejected)

    @staticmethod
    def _record_vector_failures(diagnosis: Diagnosis, filters: list[Any], verdicts: list[FilterVerdict | None],
                                failed: np.ndarray) -> None:
        """Record nodes rejected by vectorised plugins; which plugin was first is worked out when read."""
        if len(failed):
            diagnosis.node_to_status.add_pending(failed, [
                (filters[j].name, v) for j, v in enumerate(verdicts) if v is not None and not v.passes_all])

    def find_nodes_that_fit(self, state: CycleState, pod: PodInfo,
                            snapshot: Snapshot) -> tuple[np.ndarray, Diagnosis]:
        """PreFilter, the nominated node if any, then Filter over the nodes (``findNodesThatFitPod``)."""
        diagnosis = Diagnosis(NodeToStatus(snapshot))
        pre_result, status, narrowed_by = self.run_pre_filter_plugins(state, pod, snapshot)
        diagnosis.unschedulable_plugins = set(narrowed_by)
        if not is_success(status):
            assert status is not None
            if not status.is_rejected():
                raise SchedulingError(status)
            diagnosis.node_to_status.absent_status = status  # every node: nodes never looked at
            diagnosis.pre_filter_msg = status.message
            diagnosis.add_plugin_status(status)
            return EMPTY, diagnosis

        if pod.nominated_node_name:
            index = snapshot.index_of(pod.nominated_node_name)
            if index is not None:
                feasible = self._find_nodes_that_pass_filters(state, pod, snapshot, diagnosis,
                                                              np.asarray([index], dtype=np.intp))
                feasible = self._find_nodes_that_pass_extenders(state, pod, snapshot, diagnosis, feasible)
                if len(feasible):
                    return feasible, diagnosis

        nodes = None
        if pre_result is not None and not pre_result.all_nodes():
            assert pre_result.node_names is not None
            nodes = np.asarray(sorted(i for name in pre_result.node_names
                                      if (i := snapshot.index_of(name)) is not None), dtype=np.intp)
            diagnosis.node_to_status.absent_status = Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                f"node(s) didn't satisfy plugin(s) {go_list(sorted(narrowed_by))}")
        feasible = self._find_nodes_that_pass_filters(state, pod, snapshot, diagnosis, nodes)
        processed = len(feasible) + len(diagnosis.node_to_status)
        self.next_start_node_index = (self.next_start_node_index + processed) % snapshot.num_nodes
        return self._find_nodes_that_pass_extenders(state, pod, snapshot, diagnosis, feasible), diagnosis

    def _find_nodes_that_pass_extenders(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                                        diagnosis: Diagnosis, feasible: np.ndarray) -> np.ndarray:
        """``findNodesThatPassExtenders``: each extender in turn narrows the feasible nodes (order kept)."""
        for extender in self._extenders:
            if not len(feasible):
                break
            if extender.name in state.skip_filter_plugins:
                continue
            result = extender.filter_feasible(state, pod, snapshot, feasible)
            if result is None:
                continue  # not interested in the pod, or an ignorable extender failed
            if isinstance(result, Status):
                raise SchedulingError(Status.error(f"running {extender.name!r} filter plugin: {result.message}",
                                                   extender.name))
            feasible, rejected, verdict = result
            if verdict is not None:
                diagnosis.node_to_status.add_groups([(extender.name, rejected, verdict)])
        return feasible

    def _find_nodes_that_pass_filters(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                                      diagnosis: Diagnosis, nodes: np.ndarray | None) -> np.ndarray:
        n = snapshot.num_nodes if nodes is None else len(nodes)
        if n == 0:
            return EMPTY
        wanted = self.num_feasible_nodes_to_find(n) if self.has_score_plugins() else 1
        start = self.next_start_node_index % n
        return self._filter(state, pod, snapshot, nodes, start, wanted=wanted, diagnosis=diagnosis)


    def prioritize_nodes(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> NodeScores:
        """PreScore + Score (``prioritizeNodes``); without score plugins every node scores 1."""
        if not self.has_score_plugins():
            return NodeScores(nodes, np.ones(len(nodes), dtype=np.int64), {}, {})
        status = self.run_pre_score_plugins(state, pod, snapshot, nodes)
        if not is_success(status):
            raise SchedulingError(status)  # type: ignore[arg-type]
        return self.run_score_plugins(state, pod, snapshot, nodes)

    # ------------------------------------------------------------------ the scheduling algorithm
    def schedule_pod(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> ScheduleResult | FitError:
        """Filter, score and select a node for ``pod`` on ``snapshot`` (``schedulePod``).

        Returns a :class:`ScheduleResult`, or a :class:`FitError` when no node
        fits (``NoNodesAvailable`` for an empty snapshot). Raises
        :class:`SchedulingError` when a plugin fails unexpectedly.
        """
        self._snapshot = snapshot
        if snapshot.num_nodes == 0:
            return NoNodesAvailable(pod, 0, Diagnosis(NodeToStatus(snapshot)))
        feasible, diagnosis = self.find_nodes_that_fit(state, pod, snapshot)
        if len(feasible) == 0:
            return FitError(pod, snapshot.num_nodes, diagnosis)
        evaluated = len(feasible) + len(diagnosis.node_to_status)
        if len(feasible) == 1:
            index = int(feasible[0])
            return ScheduleResult(snapshot.node_names[index], index, evaluated, 1)
        scores = self.prioritize_nodes(state, pod, snapshot, feasible)
        index = select_host(feasible, scores.totals, self.rng)
        return ScheduleResult(snapshot.node_names[index], index, evaluated, len(feasible))

    def schedule_one(self, pod: Mapping[str, Any] | PodInfo, snapshot: Snapshot | None = None, *,
                     state: CycleState | None = None) -> ScheduleResult | FitError:
        """One scheduling cycle's algorithm for ``pod`` over ``snapshot`` (default: the framework's).

        A fresh CycleState is used unless one is given. When no node fits
        and the profile has PostFilter plugins, they run and their message
        ends the FitError's text. Nothing is assumed or bound: apply the
        result with ``snapshot.assume(pod, result.node_index)`` (in place) or
        ``snapshot.with_pod(...)`` (a new snapshot).
        """
        snap = snapshot if snapshot is not None else self._snapshot
        if snap is None:
            raise ValueError("no snapshot: pass one or call set_snapshot() first")
        info = PodInfo.of(pod)
        state = state if state is not None else CycleState()
        result = self.schedule_pod(state, info, snap)
        if isinstance(result, FitError) and not isinstance(result, NoNodesAvailable) and self.has_post_filter_plugins():
            post, status = self.run_post_filter_plugins(state, info, snap, result.diagnosis.node_to_status)
            result.diagnosis.post_filter_msg = status.message
            if post is not None:
                result.nominating_info = post.nominating_info
        return result
