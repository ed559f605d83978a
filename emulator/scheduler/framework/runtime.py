"""The framework runtime: one profile's plugins, run at each extension point over a snapshot.

Upstream ``pkg/scheduler/framework/runtime/framework.go``: building a
profile's plugins (``NewFramework``, ``expandMultiPointPlugins``) and
running them at each extension point (``RunPreFilterPlugins``,
``RunFilterPlugins``, ``RunFilterPluginsWithNominatedPods``,
``RunPostFilterPlugins``, ``RunPreScorePlugins``, ``RunScorePlugins``,
Reserve .. PostBind). The scheduling algorithm that drives them
(``schedulePod``: which nodes to filter, scoring, the host choice; upstream
``schedule_one.go``) is :class:`~.algorithm.SchedulingAlgorithm`, the base
class of :class:`Framework`, so ``Framework.schedule_one`` is one call.

How scoring runs. PreScore plugins run once on the feasible nodes; each
Score plugin scores them (``score_all`` or per node), its NormalizeScore
rescales them, every score must then lie in 0..100, and the weighted sum
ranks the nodes.

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
from typing import Any

import numpy as np

from emulator.scheduler.framework.algorithm import SchedulingAlgorithm, go_list
from emulator.scheduler.framework.interface import (
    EXTENSION_POINTS,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    Code,
    CycleState,
    PostFilterResult,
    PreFilterResult,
    Status,
    implements,
    is_success,
)
from emulator.scheduler.framework.nominated import (
    PER_NODE_LIMIT,
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
    NodeInfo,
    NodeScores,
    NodeToStatus,
    PodInfo,
    QueuedPodInfo,
    SchedulingError,
)
from emulator.scheduler.framework.visiting import (
    MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND,
    MIN_FEASIBLE_NODES_TO_FIND,
    num_feasible_nodes_to_find,
    select_host,
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

assert MIN_NODE_SCORE == 0  # run_score_plugins' range check relies on it
_FEW_NODES = 8  # filtering fewer nodes than this, their nominated pods are looked up one by one
_LAZY_LIMIT = 64  # up to this many nodes with nominations, a cycle's first pass judges only the nodes it visits


def _merge(result: PreFilterResult | None, other: PreFilterResult | None) -> PreFilterResult | None:
    if result is None:
        return other if other is not None and not other.all_nodes() else None
    return result.merge(other)


class Framework(SchedulingAlgorithm):
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
                           else f"node(s) didn't satisfy plugin(s) {go_list(names)} simultaneously")
                    return result, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg), with_nodes
            return result, returned, with_nodes
        finally:
            state.skip_filter_plugins = frozenset(skip)

    def run_filter_plugins_on_node(self, state: CycleState, pod: PodInfo, node_index: int,
                                   snapshot: Snapshot) -> Status | None:
        """Every Filter plugin on one node, per node (``RunFilterPlugins``); the first rejection, with its plugin."""
        return self.run_filter_plugins_on_info(state, pod, snapshot.node_info(node_index))

    def run_filter_plugins_on_info(self, state: CycleState, pod: PodInfo, info: NodeInfo) -> Status | None:
        """Every Filter plugin on one node's view ``info`` (which may hold more pods than the snapshot's node: the
        nominated-pods pass); the first rejection, with its plugin."""
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
        if self.nominator is None:
            return None
        by_node = self.nominator.nominated_pods_by_node()
        if not by_node:
            return None  # the common case: nothing nominated anywhere
        filters = [p for p in self._points["filter"] if p.name not in state.skip_filter_plugins] \
            if self.vectorised else None
        extensions = active_extensions(self._points["preFilter"], state)
        # Few nodes with nominations (the usual case, PreemptionAsync's): first_pass_failures judges them one
        # by one, at a cost in their number. Many: the nominated pods' columns, all nodes at once.
        if len(by_node) > PER_NODE_LIMIT and filters is not None and not extensions and vector_safe(filters) and (
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
        return self._first_pass_on(state, pod, snapshot, nominated, filters=filters, extensions=extensions)

    def _nominated_lazily(self, state: CycleState, pod: PodInfo,
                          snapshot: Snapshot) -> Mapping[int, Sequence[PodInfo]] | None:
        """The nodes with nominated pods ``pod`` counts (``nominated_on``; empty: none) when there are few enough
        to judge only those a visit meets (``_filter``); None when there are many: ``_nominated_failures``."""
        assert self.nominator is not None
        by_node = self.nominator.nominated_pods_by_node()
        if not by_node:
            return {}
        if len(by_node) > _LAZY_LIMIT:
            return None
        return nominated_on(self.nominator, pod, snapshot)

    def _first_pass_on(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                       nominated: Mapping[int, Sequence[PodInfo]], *, filters: Sequence[Any] | None = None,
                       extensions: Sequence[tuple[str, Any]] | None = None) -> FirstPass | None:
        """The first pass on the nodes of ``nominated`` (their counted pods added): ``first_pass_failures``."""
        if filters is None and self.vectorised:
            filters = [p for p in self._points["filter"] if p.name not in state.skip_filter_plugins]
        if extensions is None:
            extensions = active_extensions(self._points["preFilter"], state)
        return first_pass_failures(
            state, pod, snapshot, nominated, extensions=extensions,
            filters=filters,
            filter_nodes=lambda st, p, snap, nodes, diag: self._filter(
                st, p, snap, nodes, 0, wanted=len(nodes), diagnosis=diag, with_nominated=False),
            filter_node=self.run_filter_plugins_on_info)

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
        totals: np.ndarray | None = None
        per_plugin: dict[str, np.ndarray] = {}
        for plugin in self._points["score"]:
            name = plugin.name
            if name in state.skip_score_plugins:
                continue
            normalize = self._normalize.get(name)
            score_all = self._score_all.get(name) if self.vectorised else None
            if score_all is not None:
                result = score_all(state, pod, snapshot, nodes)
                if isinstance(result, Status):
                    raise SchedulingError(Status.error(f"plugin {name!r} failed with: {result.message}", name))
                # NormalizeScore rescales in place: then the plugin's array (maybe memoised) is copied first.
                scores = np.array(result, dtype=np.int64) if normalize is not None \
                    else np.asarray(result, dtype=np.int64)
            else:
                scores = np.empty(len(nodes), dtype=np.int64)
                for t, i in enumerate(nodes.tolist()):
                    value, status = plugin.score(state, pod, snapshot.node_info(i))
                    if not is_success(status):
                        raise SchedulingError(Status.error(f"plugin {name!r} failed with: {status.message}", name))  # type: ignore[union-attr]
                    scores[t] = value
            if normalize is not None:
                status = normalize(state, pod, scores)
                if not is_success(status):
                    raise SchedulingError(Status.error(f"plugin {name!r} failed with: {status.message}", name))  # type: ignore[union-attr]
            # One reduction checks both ends: seen unsigned, a negative score is above MAX_NODE_SCORE too.
            if len(scores) and scores.view(np.uint64).max() > MAX_NODE_SCORE:
                bad = int(scores[(scores > MAX_NODE_SCORE) | (scores < MIN_NODE_SCORE)][0])
                raise SchedulingError(Status.error(
                    f"plugin {name!r} returns an invalid score {bad}, it should in the range of "
                    f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing", name))
            per_plugin[name] = scores
            weight = self.score_weights[name]
            weighted = scores if weight == 1 else scores * weight
            if totals is None:
                totals = weighted.copy() if weighted is scores else weighted
            else:
                totals += weighted
        if totals is None:
            totals = np.zeros(len(nodes), dtype=np.int64)
        return NodeScores(nodes, totals, per_plugin, dict(self.score_weights))

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
