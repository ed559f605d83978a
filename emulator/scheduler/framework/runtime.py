"""The framework runtime: runs one profile's plugins over a snapshot and picks a node.

Upstream ``pkg/scheduler/framework/runtime/framework.go`` (running plugins at
each extension point) and the scheduling algorithm of
``pkg/scheduler/schedule_one.go`` (``schedulePod``, ``findNodesThatFitPod``,
``findNodesThatPassFilters``, ``numFeasibleNodesToFind``, ``prioritizeNodes``,
``selectHost``). :meth:`Framework.schedule_one` is a pure function of the pod,
the snapshot and the framework's two pieces of state -- the round-robin start
index and the injected random generator -- so it serves a scheduler and a
Cluster Autoscaler simulation alike.

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

How scoring runs. PreScore plugins run once on the feasible nodes; each
Score plugin scores them (``score_all`` or per node), its NormalizeScore
rescales them, every score must then lie in 0..100, and the weighted sum
ranks the nodes. Among the best, one is chosen by reservoir sampling (each
tied node in turn replaces the choice with probability 1/k), as upstream's
``selectHost``; ties are visited in evaluation order and the draws come from
the injected ``random.Random``, so a seed reproduces every choice.

Nominated pods. With a ``nominator`` (the scheduler wires its queue), nodes
holding nominated pods of equal or higher priority are filtered twice, as
upstream's ``RunFilterPluginsWithNominatedPods`` (:mod:`.nominated`).

Not here: extenders (``extender.with_extenders`` makes them plugins), waiting
pods for Permit and metrics (the scheduling loop's), parallelism, the
OpportunisticBatching hint.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.scheduler.framework.interface import (
    EXTENSION_POINTS,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    Code,
    CycleState,
    FilterVerdict,
    PostFilterResult,
    PreFilterResult,
    Status,
    implements,
    is_success,
)
from emulator.scheduler.framework.nominated import (
    FirstPass,
    NominatedColumns,
    PodNominator,
    active_extensions,
    first_pass_by_columns,
    first_pass_failures,
    nominated_on,
)
from emulator.scheduler.framework.overlay import VectorFallback, vector_safe
from emulator.scheduler.framework.profile import Profile
from emulator.scheduler.framework.registry import PluginFactory
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import (
    Diagnosis,
    FitError,
    NodeToStatus,
    NoNodesAvailable,
    PodInfo,
    QueuedPodInfo,
    ScheduleResult,
    SchedulingError,
)
from emulator.scheduler.framework.visiting import (
    MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND,
    MIN_FEASIBLE_NODES_TO_FIND,
    num_feasible_nodes_to_find,
    rotated,
    select_host,
    visit_all_nodes,
)

__all__ = [
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "Framework",
    "NodeScores",
    "num_feasible_nodes_to_find",
    "select_host",
]

MAX_PERMIT_TIMEOUT = 15 * 60.0  # framework.go maxTimeout

_EMPTY = np.zeros(0, dtype=np.intp)
_FEW_NODES = 8  # filtering fewer nodes than this, their nominated pods are looked up one by one


@dataclass(frozen=True)
class NodeScores:
    """Scores of the feasible nodes: ``totals[t]`` is for snapshot node ``nodes[t]``.

    ``plugin_scores`` holds each plugin's normalised (unweighted) scores,
    ``weights`` the weights that made the totals.
    """

    nodes: np.ndarray
    totals: np.ndarray
    plugin_scores: Mapping[str, np.ndarray]
    weights: Mapping[str, int]


def _merge(result: PreFilterResult | None, other: PreFilterResult | None) -> PreFilterResult | None:
    if result is None:
        return other if other is not None and not other.all_nodes() else None
    return result.merge(other)


def _go_list(names: Sequence[str]) -> str:
    """How Go's ``%v`` prints a string slice: ``[a b]``."""
    return "[" + " ".join(names) + "]"


class Framework:
    """One profile's plugins, instantiated and ordered per extension point (upstream ``frameworkImpl``).

    ``registry`` maps plugin names to constructors; ``profile`` defaults to
    upstream's default profile restricted to the registry's plugins. ``rng``
    breaks score ties (inject a seeded one for reproducible runs);
    ``percentage_of_nodes_to_score`` is the global setting the profile may
    override. ``vectorised=False`` ignores ``filter_all``/``score_all`` and
    runs every plugin per node -- the reference the vectorised path must
    match, placement for placement.
    """

    def __init__(self, registry: Mapping[str, PluginFactory], profile: Profile | None = None, *,
                 rng: random.Random | None = None, percentage_of_nodes_to_score: int = 0,
                 vectorised: bool = True, snapshot: Snapshot | None = None,
                 nominator: PodNominator | None = None) -> None:
        self.profile = profile if profile is not None else Profile.default(registry)
        self.nominator = nominator  # upstream's PodNominator: whose nominated pods Filter reserves room for
        self.nominated_columns = NominatedColumns()  # their requests per node, kept across cycles
        self.rng = rng if rng is not None else random.Random()
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.vectorised = vectorised
        self.next_start_node_index = 0
        self._snapshot = snapshot
        self.plugins: dict[str, Any] = {}
        for name in self._needed():
            factory = registry.get(name)
            if factory is None:
                raise ValueError(f"plugin {name!r} does not exist in the registry")
            self.plugins[name] = factory(self.profile.plugin_config.get(name), self)
        self._points = {point: self._expand(point) for point in EXTENSION_POINTS}
        if len(self._points["queueSort"]) > 1:
            raise ValueError(f"only one queue sort plugin allowed for profile {self.profile.scheduler_name!r}, "
                             f"got {len(self._points['queueSort'])}")
        self.score_weights = self._score_weights()
        # Scheduler extenders (emulator.scheduler.extender.ExtenderPlugin) sit in the filter point but judge only
        # the nodes every plugin let through, after them, as upstream's findNodesThatPassExtenders; preemption's
        # per-node filter never calls them (upstream's SelectVictimsOnNode runs the plugins only).
        self._extenders = [p for p in self._points["filter"] if getattr(p, "filter_feasible", None) is not None]
        self._filters = [p for p in self._points["filter"] if p not in self._extenders]
        # Per-plugin capabilities, looked up once instead of every cycle.
        self._filter_all = {p.name: getattr(p, "filter_all", None) for p in self._filters}
        self._score_all = {p.name: getattr(p, "score_all", None) for p in self._points["score"]}
        self._normalize = {p.name: getattr(p, "normalize_score", None) for p in self._points["score"]}

    # ------------------------------------------------------------------ construction
    def _needed(self) -> list[str]:
        names = [ref.name for ref in self.profile.multi_point.enabled]
        for pset in self.profile.points.values():
            names.extend(ref.name for ref in pset.enabled)
        return list(dict.fromkeys(names))

    def _expand(self, point: str) -> list[Any]:
        """The plugins of one extension point, ordered as upstream ``expandMultiPointPlugins`` orders them:
        plugins both in multiPoint and in this point's own set first (in the point's order), then the other
        multiPoint plugins, then the rest of the point's own set."""
        pset = self.profile.point(point)
        specific: list[str] = []
        for ref in pset.enabled:
            if not implements(self.plugins[ref.name], point):
                raise ValueError(f"plugin {ref.name!r} does not extend {point} plugin")
            if ref.name in specific:
                raise ValueError(f"plugin {ref.name!r} already registered as {point!r}")
            specific.append(ref.name)
        disabled = set(pset.disabled)
        if "*" in disabled:
            return [self.plugins[name] for name in specific]
        overrides: set[str] = set()
        multi: list[str] = []
        for ref in self.profile.multi_point.enabled:
            if not implements(self.plugins[ref.name], point) or ref.name in disabled:
                continue
            if ref.name in specific:
                overrides.add(ref.name)
                continue
            if ref.name in multi:
                raise ValueError(f"plugin {ref.name!r} already registered as {point!r}")
            multi.append(ref.name)
        order = [n for n in specific if n in overrides] + multi + [n for n in specific if n not in overrides]
        return [self.plugins[name] for name in order]

    def _score_weights(self) -> dict[str, int]:
        weights: dict[str, int] = {}
        for ref in [*self.profile.point("score").enabled, *self.profile.multi_point.enabled]:
            if ref.name in weights or not implements(self.plugins[ref.name], "score"):
                continue
            weights[ref.name] = ref.weight or 1  # weight 0 is not allowed; it means the default, 1
        return weights

    # ------------------------------------------------------------------ handle
    @property
    def profile_name(self) -> str:
        return self.profile.scheduler_name

    def snapshot(self) -> Snapshot | None:
        """The snapshot of the running (or last) cycle."""
        return self._snapshot

    def set_snapshot(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def plugins_at(self, point: str) -> list[Any]:
        """The plugins running at extension point ``point`` (a key of ``EXTENSION_POINTS``), in order."""
        return list(self._points[point])

    def has_score_plugins(self) -> bool:
        return bool(self._points["score"])

    def has_post_filter_plugins(self) -> bool:
        return bool(self._points["postFilter"])

    def percentage(self) -> int:
        own = self.profile.percentage_of_nodes_to_score
        return own if own is not None else self.percentage_of_nodes_to_score

    def num_feasible_nodes_to_find(self, num_all_nodes: int) -> int:
        return num_feasible_nodes_to_find(num_all_nodes, self.percentage())

    # ------------------------------------------------------------------ queue-side points
    def run_pre_enqueue_plugins(self, pod: Mapping[str, Any]) -> Status | None:
        """The first non-success PreEnqueue status (the pod stays gated), else None."""
        for plugin in self._points["preEnqueue"]:
            status = plugin.pre_enqueue(pod)
            if not is_success(status):
                return status.with_plugin(plugin.name)  # type: ignore[union-attr]
        return None

    def queue_sort_less(self) -> Callable[[QueuedPodInfo, QueuedPodInfo], bool]:
        plugins = self._points["queueSort"]
        if not plugins:
            return lambda a, b: False
        return plugins[0].less

    # ------------------------------------------------------------------ PreFilter / Filter
    def run_pre_filter_plugins(self, state: CycleState, pod: PodInfo,
                               snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """Run PreFilter plugins (``RunPreFilterPlugins``): (allowed nodes, status, plugins that narrowed nodes).

        Skip statuses switch the plugin's Filter off for this cycle. An
        UnschedulableAndUnresolvable status stops at once; an Unschedulable
        one lets the others run (preemption needs their state) and is
        returned at the end; anything else is an Error.
        """
        skip: set[str] = set()
        result: PreFilterResult | None = None
        with_nodes: set[str] = set()
        returned: Status | None = None
        try:
            for plugin in self._points["preFilter"]:
                res, status = plugin.pre_filter(state, pod, snapshot)
                if status is not None and status.is_skip():
                    skip.add(plugin.name)
                    continue
                if not is_success(status):
                    assert status is not None
                    status.plugin = plugin.name
                    if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                        return None, status, set()
                    if status.code == Code.UNSCHEDULABLE:
                        returned = status
                        continue
                    return None, Status.error(f"running PreFilter plugin {plugin.name!r}: {status.message}",
                                              plugin.name), set()
                if res is not None and not res.all_nodes():
                    with_nodes.add(plugin.name)
                result = _merge(result, res)
                if result is not None and not result.node_names:
                    names = sorted(with_nodes)
                    msg = (f"node(s) didn't satisfy plugin {names[0]}" if len(names) == 1
                           else f"node(s) didn't satisfy plugin(s) {_go_list(names)} simultaneously")
                    return result, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg), with_nodes
            return result, returned, with_nodes
        finally:
            state.skip_filter_plugins = frozenset(skip)

    def run_filter_plugins_on_node(self, state: CycleState, pod: PodInfo, node_index: int,
                                   snapshot: Snapshot) -> Status | None:
        """Every Filter plugin on one node, per node (``RunFilterPlugins``); the first rejection, with its plugin."""
        info = snapshot.node_info(node_index)
        for plugin in self._filters:
            if plugin.name in state.skip_filter_plugins:
                continue
            status = plugin.filter(state, pod, info)
            if not is_success(status):
                return self._filter_failure(plugin.name, status)  # type: ignore[arg-type]
        return None

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: PodInfo, node_index: int,
                                               snapshot: Snapshot) -> Status | None:
        """``RunFilterPluginsWithNominatedPods`` on one node: with the nominated pods of equal or higher
        priority added (if any), then as the node is; the first rejection."""
        first_pass = self._nominated_failures(state, pod, snapshot, np.asarray([node_index], dtype=np.intp))
        if first_pass is not None and node_index in first_pass.failed_set:
            return first_pass.status(node_index)
        return self.run_filter_plugins_on_node(state, pod, node_index, snapshot)

    def _nominated_failures(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                            candidates: np.ndarray | None) -> FirstPass | None:
        """The first pass of ``RunFilterPluginsWithNominatedPods`` over the candidates with nominated pods."""
        if self.nominator is None or not self.nominator.nominated_pods_by_node():
            return None  # the common case: nothing nominated anywhere
        filters = [p for p in self._points["filter"] if p.name not in state.skip_filter_plugins] \
            if self.vectorised else None
        extensions = active_extensions(self._points["preFilter"], state)
        if filters is not None and not extensions and vector_safe(filters) and (
                candidates is None or len(candidates) > _FEW_NODES):
            counted = self.nominated_columns.counted(self.nominator, pod, snapshot)
            if counted is not None:
                try:
                    return first_pass_by_columns(counted, state, pod, snapshot, filters=filters,
                                                 candidates=candidates)
                except VectorFallback:
                    pass  # an error answer: the general path below reports it as the runtime does
        nominated = nominated_on(self.nominator, pod, snapshot, candidates)
        if not nominated:
            return None
        return first_pass_failures(
            state, pod, snapshot, nominated, extensions=extensions,
            filters=filters,
            filter_nodes=lambda st, p, snap, nodes, diag: self._filter(
                st, p, snap, nodes, 0, wanted=len(nodes), diagnosis=diag, with_nominated=False),
            filter_node=self.run_filter_plugins_on_node)

    def run_filter_plugins(self, state: CycleState, pod: PodInfo,
                           snapshot: Snapshot, nodes: np.ndarray | None = None) -> tuple[np.ndarray, NodeToStatus]:
        """Judge every node (or ``nodes``) without stopping early: (feasible bool mask over the snapshot, statuses)."""
        candidates = None if nodes is None else np.asarray(nodes, dtype=np.intp)
        wanted = snapshot.num_nodes if candidates is None else len(candidates)
        diagnosis = Diagnosis(NodeToStatus(snapshot))
        feasible = self._filter(state, pod, snapshot, candidates, 0, wanted=wanted, diagnosis=diagnosis)
        mask = np.zeros(snapshot.num_nodes, dtype=bool)
        mask[feasible] = True
        return mask, diagnosis.node_to_status

    @staticmethod
    def _filter_failure(plugin: str, status: Status) -> Status:
        if not status.is_rejected():
            raise SchedulingError(Status.error(f"running {plugin!r} filter plugin: {status.message}", plugin))
        status.plugin = plugin
        return status

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
        first_pass = self._nominated_failures(state, pod, snapshot, candidates) \
            if with_nominated and self.nominator is not None else None
        verdicts = [self._verdict(p, state, pod, snapshot) for p in filters]
        vec = [j for j, v in enumerate(verdicts) if v is not None and not v.passes_all]
        per_node = [j for j, v in enumerate(verdicts) if v is None]
        masks = [verdicts[j].mask for j in vec]  # type: ignore[union-attr]
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

    def _record_rejections(self, diagnosis: Diagnosis, filters: list[Any], verdicts: list[FilterVerdict | None],
                           rejected: np.ndarray, first_pass: FirstPass | None) -> None:
        """Record rejected nodes: those that failed the nominated-pods pass with its status, the rest lazily."""
        if first_pass is not None:
            hit = np.isin(rejected, first_pass.failed)
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
            return _EMPTY, diagnosis

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
                f"node(s) didn't satisfy plugin(s) {_go_list(sorted(narrowed_by))}")
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
            return _EMPTY
        wanted = self.num_feasible_nodes_to_find(n) if self.has_score_plugins() else 1
        start = self.next_start_node_index % n
        return self._filter(state, pod, snapshot, nodes, start, wanted=wanted, diagnosis=diagnosis)

    def run_post_filter_plugins(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                                node_to_status: NodeToStatus) -> tuple[PostFilterResult | None, Status]:
        """``RunPostFilterPlugins``: until the first Success, Error or UnschedulableAndUnresolvable."""
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        for plugin in self._points["postFilter"]:
            res, status = plugin.post_filter(state, pod, snapshot, node_to_status)
            if is_success(status):
                return res, status if status is not None else Status(Code.SUCCESS)
            assert status is not None
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return res, status.with_plugin(plugin.name)
            if not status.is_rejected():
                return None, Status.error(status.message, plugin.name)
            if res is not None and res.nominating_info is not None and res.nominating_info.override:
                result = res
            reasons.extend(status.all_reasons())
            rejector = rejector or plugin.name
        return result, Status(Code.UNSCHEDULABLE, *reasons, plugin=rejector)

    # ------------------------------------------------------------------ PreScore / Score
    def run_pre_score_plugins(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                              nodes: np.ndarray) -> Status | None:
        """``RunPreScorePlugins``: Skip switches the plugin's Score off; other failures are errors."""
        skip: set[str] = set()
        try:
            for plugin in self._points["preScore"]:
                status = plugin.pre_score(state, pod, snapshot, nodes)
                if status is not None and status.is_skip():
                    skip.add(plugin.name)
                    continue
                if not is_success(status):
                    assert status is not None
                    return Status.error(f"running PreScore plugin {plugin.name!r}: {status.message}", plugin.name)
            return None
        finally:
            state.skip_score_plugins = frozenset(skip)

    def run_score_plugins(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                          nodes: np.ndarray) -> NodeScores:
        """Score, normalise, range-check and weight (``RunScorePlugins``). Raises SchedulingError on a failure."""
        totals = np.zeros(len(nodes), dtype=np.int64)
        per_plugin: dict[str, np.ndarray] = {}
        for plugin in self._points["score"]:
            name = plugin.name
            if name in state.skip_score_plugins:
                continue
            score_all = self._score_all.get(name) if self.vectorised else None
            if score_all is not None:
                result = score_all(state, pod, snapshot, nodes)
                if isinstance(result, Status):
                    raise SchedulingError(Status.error(f"plugin {name!r} failed with: {result.message}", name))
                scores = np.array(result, dtype=np.int64)
            else:
                scores = np.empty(len(nodes), dtype=np.int64)
                for t, i in enumerate(nodes.tolist()):
                    value, status = plugin.score(state, pod, snapshot.node_info(i))
                    if not is_success(status):
                        raise SchedulingError(Status.error(f"plugin {name!r} failed with: {status.message}", name))  # type: ignore[union-attr]
                    scores[t] = value
            normalize = self._normalize.get(name)
            if normalize is not None:
                status = normalize(state, pod, scores)
                if not is_success(status):
                    raise SchedulingError(Status.error(f"plugin {name!r} failed with: {status.message}", name))  # type: ignore[union-attr]
            if len(scores) and (scores.max() > MAX_NODE_SCORE or scores.min() < MIN_NODE_SCORE):
                bad = int(scores[(scores > MAX_NODE_SCORE) | (scores < MIN_NODE_SCORE)][0])
                raise SchedulingError(Status.error(
                    f"plugin {name!r} returns an invalid score {bad}, it should in the range of "
                    f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing", name))
            per_plugin[name] = scores
            totals += scores * self.score_weights[name]
        return NodeScores(nodes, totals, per_plugin, dict(self.score_weights))

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

    # ------------------------------------------------------------------ Reserve .. PostBind
    def run_reserve_plugins_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        for plugin in self._points["reserve"]:
            status = plugin.reserve(state, pod, node_name)
            if not is_success(status):
                assert status is not None
                if status.is_rejected():
                    return status.with_plugin(plugin.name)
                return Status.error(f"running Reserve plugin {plugin.name!r}: {status.message}", plugin.name)
        return None

    def run_reserve_plugins_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        # In reverse order, so that state taken by later plugins is given back first.
        for plugin in reversed(self._points["reserve"]):
            plugin.unreserve(state, pod, node_name)

    def run_permit_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Success, a rejection, an Error, or Wait (with ``state`` key ``"permit/timeouts"`` listing who waits)."""
        waiting: dict[str, float] = {}
        for plugin in self._points["permit"]:
            status, timeout = plugin.permit(state, pod, node_name)
            if is_success(status):
                continue
            assert status is not None
            if status.is_rejected():
                return status.with_plugin(plugin.name)
            if status.is_wait():
                waiting[plugin.name] = min(timeout, MAX_PERMIT_TIMEOUT)
                continue
            return Status.error(f"running Permit plugin {plugin.name!r}: {status.message}", plugin.name)
        if waiting:
            state.write("permit/timeouts", waiting)
            return Status(Code.WAIT, "one or more plugins asked to wait and no plugin rejected pod")
        return None

    def run_pre_bind_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        for plugin in self._points["preBind"]:
            status = plugin.pre_bind(state, pod, node_name)
            if not is_success(status):
                assert status is not None
                if status.is_rejected():
                    return status.with_plugin(plugin.name)
                return Status.error(f"running PreBind plugin {plugin.name!r}: {status.message}", plugin.name)
        return None

    def run_bind_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """The first bind plugin that does not Skip decides; Skip from all of them is returned as Skip."""
        for plugin in self._points["bind"]:
            status = plugin.bind(state, pod, node_name)
            if status is not None and status.is_skip():
                continue
            if not is_success(status):
                assert status is not None
                if status.is_rejected():
                    return status.with_plugin(plugin.name)
                return Status.error(f"running Bind plugin {plugin.name!r}: {status.message}", plugin.name)
            return Status(Code.SUCCESS)
        return Status(Code.SKIP)

    def run_post_bind_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for plugin in self._points["postBind"]:
            plugin.post_bind(state, pod, node_name)
