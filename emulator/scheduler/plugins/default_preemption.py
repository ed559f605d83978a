"""DefaultPreemption: when no node fits, find the node where evicting the fewest, least important pods helps.

Upstream ``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go``
and ``pkg/scheduler/framework/preemption/preemption.go`` (``Evaluator.Preempt``,
``DryRunPreemption``, ``SelectCandidate``, ``pickOneNodeForPreemption``),
``pkg/scheduler/util/utils.go`` (``MoreImportantPod``,
``GetEarliestPodStartTime``).

PostFilter, synchronous as upstream without async preemption:

1. **Eligibility.** ``preemptionPolicy: Never`` never preempts. A pod already
   nominated to a node does not preempt again while a lower-priority pod there
   is terminating because of preemption (deletionTimestamp set and a
   ``DisruptionTarget=True`` condition with reason ``PreemptionByScheduler``),
   unless the filters now find that node UnschedulableAndUnresolvable.
2. **Candidates.** Only nodes the filters rejected as Unschedulable (not
   UnschedulableAndUnresolvable: evicting pods cannot fix those) are tried,
   from a random offset (the plugin's own seeded generator), until
   ``max(MinCandidateNodesPercentage% of them, MinCandidateNodesAbsolute)``
   candidates are found, at least one of them violating no PDB (defaults 10 %
   and 100). On each, on a private fork of the snapshot and a clone of the
   CycleState: remove every lower-priority pod (running the PreFilter
   plugins' RemovePod extensions), check the pod fits with every Filter
   plugin (with the nominated pods of equal or higher priority:
   ``RunFilterPluginsWithNominatedPods``), then give pods back, most
   important first -- those whose eviction would violate a
   PodDisruptionBudget first -- keeping each one that still lets the pod fit
   (AddPod extensions). What could not be given back are the victims. When
   every active Filter plugin only reads node objects and requested
   resources, the same dry run runs over many nodes at once
   (:mod:`.preemption_dry_run`); the PDBs are listed once per preemption.
3. **Extenders** that support preemption may veto or trim candidates.
4. **Choice**, in upstream's order: fewest PDB violations, lowest
   highest-victim priority, lowest sum of priorities (each shifted by
   2^31 so negatives count), fewest victims, latest start among the
   highest-priority victims, then the first candidate. Without PDBs and
   extenders the vectorised dry run makes this choice itself, over arrays
   (``VectorDryRun.best``), the same node and victims. Upstream's last tie is
   the first of a Go map (random); kemu takes the first in visiting order.

The result is a :class:`PreemptionResult` (a ``PostFilterResult``) naming the
node (``nominating_info`` in override mode, for ``status.nominatedNodeName``)
and the victims; the scheduling loop executes it -- deletes the victims and
sets the nomination -- and it is also left in the CycleState under
:data:`RESULT_KEY`. When preemption cannot help, the status message is
upstream's (``preemption: 0/N nodes are available: ...``).

Lower-priority pods nominated to the chosen node lose their nomination when
the loop executes the result (:mod:`emulator.scheduler.api_writer`). What
upstream does and this does not (Permit victims, asynchronous preemption) is
listed under Simplifications in ``docs/architecture.md``. A pod
without ``status.startTime`` counts as started "now" (later than any recorded
start), as upstream's ``GetPodStartTime``.

PDBs come from the lister (``poddisruptionbudgets.policy``) given to
:func:`new` or found on the handle; filter and extension runs go through the
framework handle (``plugins_at`` and ``run_filter_plugins_with_nominated_pods``), never
through runtime imports.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from emulator.api import errors as api_errors
from emulator.api.selectors import LabelSelector
from emulator.scheduler.framework.interface import (
    Code,
    CycleState,
    NominatingInfo,
    PostFilterResult,
    Status,
    is_success,
)
from emulator.scheduler.framework.nominated import Counted, nominated_on
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import Diagnosis, FitError, NodeToStatus, PodInfo, SchedulingError
from emulator.scheduler.plugins.listers import PDBS, ObjectLister, lister_for
from emulator.scheduler.plugins.preemption_dry_run import (
    NodeOutcome,
    PickKey,
    ScoredOutcome,
    VectorDryRun,
    VectorFallback,
    Visit,
    vector_filters,
)

__all__ = [
    "DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE",
    "DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE",
    "NAME",
    "RESULT_KEY",
    "Candidate",
    "DefaultPreemption",
    "PreemptionResult",
    "Victims",
    "more_important_pod",
    "new",
    "pick_one_node_for_preemption",
]

NAME = "DefaultPreemption"
RESULT_KEY = NAME + "/result"
DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
_MAX_INT32 = 2**31 - 1
_START_KEY = NAME + "/startTime"


class PreemptionHandle(Protocol):
    """What preemption needs from the framework (a subset of upstream's ``framework.Handle``)."""

    def plugins_at(self, point: str) -> list[Any]: ...

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: PodInfo, node_index: int,
                                               snapshot: Snapshot) -> Status | None: ...


@dataclass
class Victims:
    """Pods to evict on one node, most important first, and how many PDBs that violates (extender ``Victims``)."""

    pods: list[PodInfo]
    num_pdb_violations: int = 0
    # The pods' scores for pickOneNodeForPreemption when the dry run worked them out (see _pick_key).
    pick_key: PickKey | None = field(default=None, compare=False, repr=False)


@dataclass
class Candidate:
    name: str
    victims: Victims


@dataclass(frozen=True)
class PreemptionResult(PostFilterResult):
    """The nominated node and what must be evicted for the pod to fit there."""

    node_name: str = ""
    victims: tuple[PodInfo, ...] = field(default=())
    num_pdb_violations: int = 0


# -- pod ordering ---------------------------------------------------------------------------------------------------


def pod_start_time(pod: PodInfo) -> float:
    """``GetPodStartTime`` as a timestamp: ``status.startTime``, or +inf ("now") when the pod has not started."""
    return pod.memo(_START_KEY, _start_time)  # type: ignore[no-any-return]


def _start_time(pod: PodInfo) -> float:
    text = (pod.pod.get("status") or {}).get("startTime")
    if not text:
        return math.inf
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return math.inf


def more_important_pod(a: PodInfo, b: PodInfo) -> bool:
    """``MoreImportantPod``: higher priority, or equal priority and started earlier."""
    if a.priority != b.priority:
        return a.priority > b.priority
    return pod_start_time(a) < pod_start_time(b)


def _importance_key(pod: PodInfo) -> tuple[int, float]:
    start = pod.memo_cache.get(_START_KEY)
    return (-pod.priority, start if start is not None else pod_start_time(pod))


def earliest_start_of_highest_priority(victims: Victims) -> float:
    """``GetEarliestPodStartTime``: the earliest start among the highest-priority victims."""
    top = max(p.priority for p in victims.pods)
    return min(pod_start_time(p) for p in victims.pods if p.priority == top)


def _pick_key(candidate: Candidate) -> PickKey:
    """Upstream's default score functions for one candidate, in order (higher is better): fewest PDB violations,
    lowest highest-priority victim, lowest sum of priorities (each shifted by 2^31), fewest victims, latest
    earliest start among the highest-priority victims (``GetEarliestPodStartTime``)."""
    if candidate.victims.pick_key is not None:
        return candidate.victims.pick_key  # the vectorised dry run's, for the same pods
    pods = candidate.victims.pods
    # Lists, not generators: this runs for every candidate of every preemption (~100 per preemption).
    priorities = [p.priority for p in pods]
    top = max(priorities)
    total = sum(priorities) + len(pods) * (_MAX_INT32 + 1)
    starts = [p.memo_cache.get(_START_KEY) for p in pods if p.priority == top]  # memoised by the dry run's sort
    earliest = min(starts if None not in starts else [pod_start_time(p) for p in pods if p.priority == top])
    return (-candidate.victims.num_pdb_violations, -pods[0].priority, -total, -len(pods), earliest)


def pick_one_node_for_preemption(candidates: Sequence[Candidate]) -> str:
    """``pickOneNodeForPreemption`` with the default score functions, ties broken by candidate order.

    Upstream narrows the candidates score function by score function; keeping the first candidate whose
    scores, compared in that order, are the greatest is the same choice, in one pass.
    """
    if not candidates:
        return ""
    best = candidates[0]
    best_key = _pick_key(best)
    for candidate in candidates[1:]:
        key = _pick_key(candidate)
        if key > best_key:
            best, best_key = candidate, key
    return best.name


def _terminating_by_preemption(pod: PodInfo) -> bool:
    """``podTerminatingByPreemption``: being deleted, with DisruptionTarget=True for PreemptionByScheduler."""
    if not (pod.pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    for condition in (pod.pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "DisruptionTarget":
            return condition.get("status") == "True" and condition.get("reason") == "PreemptionByScheduler"
    return False


def filter_pods_with_pdb_violation(pods: Sequence[PodInfo], pdbs: Sequence[Mapping[str, Any]]
                                   ) -> tuple[list[PodInfo], list[PodInfo]]:
    """``filterPodsWithPDBViolation``: split (in order) into pods whose eviction violates a PDB and the rest."""
    allowed = [int((pdb.get("status") or {}).get("disruptionsAllowed") or 0) for pdb in pdbs]
    selectors: list[LabelSelector | None] = []
    for pdb in pdbs:
        try:
            selectors.append(LabelSelector.from_dict((pdb.get("spec") or {}).get("selector")))
        except api_errors.StatusError:
            selectors.append(None)  # an invalid selector matches nothing
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pod in pods:
        violated = False
        if pod.labels:  # a pod without labels matches no PDB
            for i, pdb in enumerate(pdbs):
                meta = pdb.get("metadata") or {}
                selector = selectors[i]
                if (meta.get("namespace") or "") != pod.namespace or selector is None:
                    continue
                if selector.empty or not selector.matches(pod.labels):
                    continue  # a nil or empty selector matches nothing here
                if pod.name in ((pdb.get("status") or {}).get("disruptedPods") or {}):
                    continue  # already counted by the API server's eviction
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pod)
    return violating, non_violating


class DefaultPreemption:
    """PostFilter plugin: preemption."""

    name = NAME

    def __init__(self, handle: PreemptionHandle | None = None, *,
                 min_candidate_nodes_percentage: int = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE,
                 min_candidate_nodes_absolute: int = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE,
                 listers: ObjectLister | None = None, extenders: Sequence[Any] = (),
                 rng: random.Random | None = None) -> None:
        self.handle = handle
        self.min_candidate_nodes_percentage = min_candidate_nodes_percentage
        self.min_candidate_nodes_absolute = min_candidate_nodes_absolute
        self.listers = lister_for(listers, handle)
        self.extenders = tuple(extenders)
        self.rng = rng if rng is not None else random.Random(0)
        self._vector = VectorDryRun(_importance_key, _START_KEY)  # the vectorised dry run, and what it keeps

    # -- PostFilter ---------------------------------------------------------------------------------------------
    def post_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    node_to_status: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        result, status = self.preempt(state, pod, snapshot, node_to_status)
        if status is not None and status.message:
            status = Status(status.code, "preemption: " + status.message, plugin=NAME)
        if isinstance(result, PreemptionResult):
            state.write(RESULT_KEY, result)
        return result, status

    def preempt(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                node_to_status: NodeToStatus) -> tuple[PostFilterResult | None, Status]:
        """``Evaluator.Preempt`` without the execution step (see the module docstring)."""
        nominated_status = node_to_status.get(pod.nominated_node_name) if pod.nominated_node_name else None
        eligible, reason = self.pod_eligible_to_preempt_others(pod, snapshot, nominated_status)
        if not eligible:
            return None, Status(Code.UNSCHEDULABLE, reason)
        if snapshot.num_nodes == 0:
            return None, Status.error("no nodes available")
        potential = self._potential_array(snapshot, node_to_status)
        if not len(potential):
            return (PostFilterResult(NominatingInfo("", override=True)),
                    Status(Code.UNSCHEDULABLE, self._not_helpful(pod, snapshot, NodeToStatus(snapshot))))
        pdbs = self.listers.list(PDBS)
        offset = self.rng.randrange(len(potential))
        if not pdbs and not self.extenders:
            chosen = self._best_vectorised(state, pod, snapshot, potential, offset=offset,
                                           num_candidates=self.calculate_num_candidates(len(potential)))
            if chosen is not None:
                return chosen
        candidates, statuses, failures = self.dry_run_preemption(
            state, pod, snapshot, potential.tolist(), pdbs, offset=offset,
            num_candidates=self.calculate_num_candidates(len(potential)))
        if failures and not candidates:
            return None, Status.error("; ".join(failures))
        if not candidates:
            return (PostFilterResult(NominatingInfo("", override=True)),
                    Status(Code.UNSCHEDULABLE, self._not_helpful(pod, snapshot, statuses)))
        candidates, status = self.call_extenders(pod, candidates, snapshot)
        if not is_success(status):
            return None, status  # type: ignore[return-value]
        best = self.select_candidate(candidates)
        if best is None or not best.name:
            return None, Status(Code.UNSCHEDULABLE, "no candidate node for preemption")
        result = PreemptionResult(NominatingInfo(best.name, override=True), best.name, tuple(best.victims.pods),
                                  best.victims.num_pdb_violations)
        return result, Status(Code.SUCCESS)

    def _best_vectorised(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                         potential: Sequence[int] | np.ndarray, *,
                         offset: int, num_candidates: int) -> tuple[PostFilterResult | None, Status] | None:
        """``DryRunPreemption`` + ``SelectCandidate`` when no PDB and no extender has a say and the filters allow
        the vectorised dry run: the chosen node's victims only (:meth:`.VectorDryRun.best`), not every
        candidate's. None when this path cannot answer (then :meth:`dry_run_preemption` does, the same way)."""
        filters = vector_filters(self.handle, state)
        if filters is None:
            return None
        statuses = NodeToStatus(snapshot)
        try:
            order = np.concatenate((potential[offset:], potential[:offset])).astype(np.intp, copy=False)
            chosen = self._vector.best(filters, state, pod, snapshot, order,
                                       nominated=self._nominated(pod, snapshot), statuses=statuses,
                                       no_victims=Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS),
                                       wanted=num_candidates)
        except VectorFallback:
            return None
        if chosen is None:
            return (PostFilterResult(NominatingInfo("", override=True)),
                    Status(Code.UNSCHEDULABLE, self._not_helpful(pod, snapshot, statuses)))
        index, victims, _ = chosen
        name = snapshot.node_names[index]
        return PreemptionResult(NominatingInfo(name, override=True), name, tuple(victims), 0), Status(Code.SUCCESS)

    @staticmethod
    def _not_helpful(pod: PodInfo, snapshot: Snapshot, statuses: NodeToStatus) -> str:
        statuses.absent_status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NOT_HELPFUL)
        return FitError(pod, snapshot.num_nodes, Diagnosis(statuses)).message

    @classmethod
    def _potential_nodes(cls, snapshot: Snapshot, node_to_status: NodeToStatus) -> list[int]:
        """``NodesForStatusCode(Unschedulable)``, in snapshot order."""
        return cls._potential_array(snapshot, node_to_status).tolist()  # type: ignore[no-any-return]

    @staticmethod
    def _potential_array(snapshot: Snapshot, node_to_status: NodeToStatus) -> np.ndarray:
        """:meth:`_potential_nodes` as an array of snapshot indices."""
        codes = node_to_status.code_array()
        absent = node_to_status.absent_status
        potential = codes == int(Code.UNSCHEDULABLE)
        if absent is not None and absent.code == Code.UNSCHEDULABLE:
            potential |= codes < 0
        return np.flatnonzero(potential)

    def pod_eligible_to_preempt_others(self, pod: PodInfo, snapshot: Snapshot,
                                       nominated_status: Status | None) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers``: (eligible, why not)."""
        if (pod.pod.get("spec") or {}).get("preemptionPolicy") == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        if pod.nominated_node_name:
            if nominated_status is not None and nominated_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            index = snapshot.index_of(pod.nominated_node_name)
            if index is not None:
                for p in snapshot.pods_on(index):
                    if p.priority < pod.priority and _terminating_by_preemption(p):
                        return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    def calculate_num_candidates(self, num_nodes: int) -> int:
        """``calculateNumCandidates``: the percentage of the nodes, at least the absolute minimum, at most all."""
        n = num_nodes * self.min_candidate_nodes_percentage // 100
        n = max(n, self.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    # -- dry run ------------------------------------------------------------------------------------------------
    def dry_run_preemption(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, potential: Sequence[int],
                           pdbs: Sequence[Mapping[str, Any]], *, offset: int,
                           num_candidates: int) -> tuple[list[Candidate], NodeToStatus, list[str]]:
        """``DryRunPreemption``: candidates (PDB-respecting first), statuses of the others, errors.

        Nodes are visited from ``offset`` as upstream does, stopping once ``num_candidates`` are found and one
        respects every PDB; their victims come from :class:`.preemption_dry_run.VectorDryRun` (many nodes at
        once) when the active filters allow, else from :meth:`select_victims_on_node` one by one.
        """
        order = [*potential[offset:], *potential[:offset]]
        filters = vector_filters(self.handle, state)
        if filters is not None:
            try:
                return self._walk(snapshot, num_candidates, lambda statuses, visit: self._vector.run(
                    filters, state, pod, snapshot, order, statuses=statuses, visit=visit, wanted=num_candidates,
                    nominated=self._nominated(pod, snapshot),
                    no_victims=Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS),
                    split=(lambda pods: filter_pods_with_pdb_violation(pods, pdbs)) if pdbs else None))
            except VectorFallback:
                pass  # a filter answered an error: the per-node path reports it as upstream does

        def per_node(statuses: NodeToStatus, visit: Visit) -> None:
            for index in order:
                if visit(index, self.select_victims_on_node(state, pod, snapshot, index, pdbs)):
                    return

        return self._walk(snapshot, num_candidates, per_node)

    def _nominated(self, pod: PodInfo, snapshot: Snapshot) -> Mapping[int, Sequence[PodInfo]] | Counted:
        """The nominated pods of equal or higher priority per node (other than ``pod``), as the framework's
        columns when it keeps them."""
        nominator = getattr(self.handle, "nominator", None)
        columns = getattr(self.handle, "nominated_columns", None)
        counted = columns.counted(nominator, pod, snapshot) if columns is not None else None
        return counted if counted is not None else nominated_on(nominator, pod, snapshot)

    @staticmethod
    def _walk(snapshot: Snapshot, num_candidates: int, run: Callable[[NodeToStatus, Visit], None]
              ) -> tuple[list[Candidate], NodeToStatus, list[str]]:
        """Upstream's walk over the dry run's outcomes in visiting order: ``run(statuses, visit)`` hands each
        node's outcome to ``visit``, which stops it once ``num_candidates`` are found and one respects every PDB."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses = NodeToStatus(snapshot)
        failures: list[str] = []

        def visit(index: int, outcome: NodeOutcome | ScoredOutcome) -> bool:
            victims, num_violations, status = outcome[0], outcome[1], outcome[2]
            key = outcome[3] if len(outcome) > 3 else None  # type: ignore[misc]
            name = snapshot.node_names[index]
            if is_success(status) and victims:
                candidate = Candidate(name, Victims(victims, num_violations, key))
                (non_violating if num_violations == 0 else violating).append(candidate)
                return bool(non_violating) and len(non_violating) + len(violating) >= num_candidates
            if is_success(status):
                status = Status.error(f'expected at least one victim pod on node "{name}"')
            assert status is not None
            if status.code == Code.ERROR:
                failures.append(status.message)
            statuses.set(index, status)
            return False

        run(statuses, visit)
        return non_violating + violating, statuses, failures

    def _extensions(self, state: CycleState) -> list[tuple[str, Any]]:
        if self.handle is None:
            return []
        out = []
        for plugin in self.handle.plugins_at("preFilter"):
            ext = plugin.pre_filter_extensions() if hasattr(plugin, "pre_filter_extensions") else None
            if ext is not None and plugin.name not in state.skip_filter_plugins:
                out.append((plugin.name, ext))
        return out

    def _fits(self, state: CycleState, pod: PodInfo, index: int, snapshot: Snapshot) -> Status | None:
        if self.handle is None:
            return Status.error("DefaultPreemption needs a framework handle to run the filter plugins")
        try:
            return self.handle.run_filter_plugins_with_nominated_pods(state, pod, index, snapshot)
        except SchedulingError as exc:
            return exc.status

    def select_victims_on_node(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, index: int,
                               pdbs: Sequence[Mapping[str, Any]]) -> tuple[list[PodInfo], int, Status | None]:
        """``SelectVictimsOnNode`` on a private fork of ``snapshot`` and a clone of ``state`` (neither changes)."""
        potential = [p for p in snapshot.pods_on(index) if p.priority < pod.priority]
        if not potential:
            # Checked before copying anything: most nodes of a big cluster end here for a low-priority pod.
            return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS)
        fork = snapshot.fork()
        state = state.clone()
        extensions = self._extensions(state)

        def change(victim: PodInfo, add: bool) -> Status | None:
            if add:
                fork.assume(victim, index)
            else:
                fork.forget(victim, index)
            node = fork.node_info(index)
            for plugin_name, ext in extensions:
                status = ext.add_pod(state, pod, victim, node) if add else ext.remove_pod(state, pod, victim, node)
                if not is_success(status):
                    verb = "AddPod" if add else "RemovePod"
                    return Status.error(f'running {verb} on PreFilter plugin "{plugin_name}": '
                                        f'{status.message}')  # type: ignore[union-attr]
            return None

        for victim in potential:
            failed = change(victim, add=False)
            if failed is not None:
                return [], 0, failed
        status = self._fits(state, pod, index, fork)
        if not is_success(status):
            return [], 0, status
        potential.sort(key=_importance_key)  # most important first: they are given back first
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []
        num_violating = 0
        for group, counts in ((violating, True), (non_violating, False)):
            for p in group:
                failed = change(p, add=True)
                if failed is not None:
                    return [], 0, failed
                if not is_success(self._fits(state, pod, index, fork)):
                    failed = change(p, add=False)
                    if failed is not None:
                        return [], 0, failed
                    victims.append(p)
                    num_violating += counts
        if violating and non_violating:
            victims.sort(key=_importance_key)
        return victims, num_violating, Status(Code.SUCCESS)

    # -- extenders and the final choice -------------------------------------------------------------------------
    def call_extenders(self, pod: PodInfo, candidates: list[Candidate],
                       snapshot: Snapshot) -> tuple[list[Candidate], Status | None]:
        """``callExtenders``: extenders supporting preemption may drop candidates or change their victims."""
        if not self.extenders:
            return candidates, None
        victims_map = {c.name: c.victims for c in candidates}
        for extender in self.extenders:
            if not extender.supports_preemption() or not extender.is_interested(pod):
                continue
            try:
                result = extender.process_preemption(pod, victims_map, snapshot)
            except Exception as exc:
                if extender.is_ignorable():
                    continue
                return [], Status.error(str(exc))
            for node_name, victims in list(result.items()):
                if victims is None or not victims.pods:
                    if extender.is_ignorable():
                        del result[node_name]
                        continue
                    return [], Status.error(f'expected at least one victim pod on node "{node_name}"')
            victims_map = result
            if not victims_map:
                break
        return [Candidate(name, victims) for name, victims in victims_map.items()], None

    @staticmethod
    def select_candidate(candidates: Sequence[Candidate]) -> Candidate | None:
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        chosen = pick_one_node_for_preemption(candidates)
        return next((c for c in candidates if c.name == chosen), candidates[0])


def new(args: Mapping[str, Any] | None = None, handle: Any = None, *, listers: ObjectLister | None = None,
        extenders: Sequence[Any] | None = None, rng: random.Random | None = None) -> DefaultPreemption:
    """Build from ``DefaultPreemptionArgs`` (``minCandidateNodesPercentage`` 0..100, default 10;
    ``minCandidateNodesAbsolute`` >= 0, default 100; not both 0).

    The candidate offset generator is seeded from the framework's ``rng`` state when the handle has one
    (reproducible with a seeded framework, without consuming the framework's own draws), else with 0.
    Extenders default to ``handle.extenders``.
    """
    args = args or {}
    pct = args.get("minCandidateNodesPercentage")
    pct = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE if pct is None else int(pct)
    absolute = args.get("minCandidateNodesAbsolute")
    absolute = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE if absolute is None else int(absolute)
    if not 0 <= pct <= 100:
        raise ValueError(f"minCandidateNodesPercentage: Invalid value: {pct}: not in valid range [0, 100]")
    if absolute < 0:
        raise ValueError(f"minCandidateNodesAbsolute: Invalid value: {absolute}: not in valid range [0, inf)")
    if pct == 0 and absolute == 0:
        raise ValueError("minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as "
                         "minCandidateNodesAbsolute")
    if rng is None:
        base = getattr(handle, "rng", None)
        rng = random.Random(str(base.getstate())) if isinstance(base, random.Random) else random.Random(0)
    if extenders is None:
        extenders = tuple(getattr(handle, "extenders", ()) or ())
    return DefaultPreemption(handle, min_candidate_nodes_percentage=pct, min_candidate_nodes_absolute=absolute,
                             listers=lister_for(listers, handle), extenders=extenders, rng=rng)
