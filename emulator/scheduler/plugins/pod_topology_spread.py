"""PodTopologySpread: spread matching pods evenly across topology domains (zones, hosts, racks...).

Upstream ``pkg/scheduler/framework/plugins/podtopologyspread/`` (``common.go``,
``filtering.go``, ``scoring.go``, ``plugin.go``) and
``plugins/helper/spread.go`` (``DefaultSelector``).

Constraints. A pod's ``topologySpreadConstraints`` split by
``whenUnsatisfiable``: DoNotSchedule ones filter, ScheduleAnyway ones score.
Each has ``maxSkew``, ``topologyKey``, a label selector (plus
``matchLabelKeys``: the pod's own values of those labels are ANDed into the
selector -- kemu's API server does not merge them at admission, so the
scheduler does, as upstream did before the selector-merge gate),
``minDomains`` (default 1), ``nodeAffinityPolicy`` (default Honor: only nodes
matching the pod's nodeSelector/required node affinity count) and
``nodeTaintsPolicy`` (default Ignore; Honor: only nodes whose NoSchedule /
NoExecute taints the pod tolerates count). A pod with no constraints of its
own gets the plugin's **default constraints** -- upstream's system defaults
(hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway) unless the
``PodTopologySpreadArgs`` say ``defaultingType: List`` -- with a selector made
from the Services selecting the pod and the ReplicationController /
ReplicaSet / StatefulSet controlling it; a pod in none of those has no
default constraints.

Filter. PreFilter counts, per constraint, the matching pods (same namespace,
not terminating; an empty selector counts nothing) on every eligible node --
one that has *all* the constraints' topology keys and passes the inclusion
policies -- per domain, and the global minimum. A node passes when for every
constraint ``matching(domain) + selfMatch - minimum <= maxSkew``; when fewer
than ``minDomains`` domains are eligible the minimum is 0. A node without a
topology key is UnschedulableAndUnresolvable (``... (missing required
label)``); a skew violation is Unschedulable (preemption can lower it).
AddPod/RemovePod adjust the counts for preemption's "what if"; the minimum
stays exact through a histogram of domains by count, as upstream's.

Score. PreScore takes the soft constraints; nodes lacking a topology key are
ignored (score 0) unless only system defaults apply. Each domain present
among the feasible nodes gets the count of matching pods on all eligible
nodes (hostname domains are counted per node at Score); a node scores
``round(sum_c count_c * log(domains_c + 2) + maxSkew_c - 1)`` and
NormalizeScore maps it to ``100 * (max + min - score) / max`` -- fewer
matching pods, higher score.

Vectorised: PreFilter/PreScore aggregate per-node match counts (kept current
by :class:`~emulator.scheduler.plugins.pod_index.PodIndex`) per domain with
``bincount`` over label columns; ``filter_all``/``score_all`` look domain
values up through the same columns. The per-node ``filter``/``score`` read
the same state and are the reference semantics.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.api.gomath import go_round, go_round_array
from emulator.api.nodeaffinity import RequiredNodeAffinity
from emulator.api.selectors import LabelSelector
from emulator.api.taints import find_untolerated_taint, taint_of
from emulator.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    Code,
    CycleState,
    FilterVerdict,
    Handle,
    PreFilterResult,
    Rejection,
    Status,
    all_pass,
)
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import NodeInfo, PodInfo
from emulator.scheduler.plugins.listers import (
    REPLICASETS,
    REPLICATIONCONTROLLERS,
    SERVICES,
    STATEFULSETS,
    ObjectLister,
    lister_for,
)
from emulator.scheduler.plugins.pod_index import PodIndex
from emulator.scheduler.plugins.taint_toleration import tolerations_key

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "NAME",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "Constraint",
    "PodTopologySpread",
    "default_selector",
    "new",
]

NAME = "PodTopologySpread"
PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
MAX_INT32 = 2**31 - 1  # the "no eligible domain" minimum upstream starts from

# plugin.go systemDefaultConstraints (used when PodTopologySpreadArgs.defaultingType is System).
SYSTEM_DEFAULT_CONSTRAINTS: tuple[Mapping[str, Any], ...] = (
    {"topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": LABEL_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)

_DO_NOT_SCHEDULE_TAINTS = frozenset({"NoSchedule", "NoExecute"})
_NOTHING = LabelSelector.nothing()


@dataclass(frozen=True)
class Constraint:
    """A parsed spread constraint (upstream ``topologySpreadConstraint``)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


def _terminating(pod: PodInfo) -> bool:
    return bool((pod.pod.get("metadata") or {}).get("deletionTimestamp"))


def count_pods_match_selector(pods: Sequence[PodInfo], selector: LabelSelector, namespace: str) -> int:
    """``countPodsMatchSelector``: non-terminating pods of ``namespace`` matching; an empty selector counts 0."""
    if selector.empty:
        return 0
    return sum(1 for p in pods if p.namespace == namespace and not _terminating(p) and selector.matches(p.labels))


def _merge_label_set(match_labels: Mapping[str, str], selector: LabelSelector) -> LabelSelector:
    """``mergeLabelSetWithSelector``: the labels as equality requirements AND the selector's requirements."""
    if selector == _NOTHING:
        return selector  # Nothing has no requirements to add to (upstream returns it unchanged)
    return LabelSelector([*LabelSelector.from_set(match_labels).requirements, *selector.requirements])


def parse_constraints(raw: Sequence[Mapping[str, Any]], pod_labels: Mapping[str, str],
                      action: str) -> tuple[Constraint, ...]:
    """``filterTopologySpreadConstraints``: the constraints with ``whenUnsatisfiable == action``, parsed.

    Raises the selector's StatusError when a label selector is malformed.
    """
    out = []
    for c in raw:
        if (c.get("whenUnsatisfiable") or "") != action:
            continue
        selector = LabelSelector.from_dict(c.get("labelSelector"))
        keys = c.get("matchLabelKeys") or ()
        match_labels = {k: pod_labels[k] for k in keys if k in pod_labels}
        if match_labels:
            selector = _merge_label_set(match_labels, selector)
        min_domains = c.get("minDomains")
        out.append(Constraint(
            max_skew=int(c.get("maxSkew") or 0), topology_key=c.get("topologyKey") or "", selector=selector,
            min_domains=int(min_domains) if min_domains is not None else 1,
            node_affinity_policy=c.get("nodeAffinityPolicy") or HONOR,
            node_taints_policy=c.get("nodeTaintsPolicy") or IGNORE))
    return tuple(out)


def _controller_ref(pod: PodInfo) -> Mapping[str, Any] | None:
    for ref in (pod.pod.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def default_selector(pod: PodInfo, listers: ObjectLister) -> LabelSelector:
    """``helper.DefaultSelector``: the selectors of the Services selecting the pod and of its controller.

    Service selectors (maps) and a ReplicationController's are merged into one
    label set; a ReplicaSet's or StatefulSet's ``metav1.LabelSelector``
    requirements are added to it.
    """
    label_set: dict[str, str] = {}
    for service in listers.list(SERVICES, pod.namespace):
        service_selector = (service.get("spec") or {}).get("selector")
        if service_selector is None:
            continue  # a Service without a selector selects nothing
        if all(pod.labels.get(k) == v for k, v in service_selector.items()):
            label_set.update(service_selector)
    selector = LabelSelector.from_set(label_set)
    owner = _controller_ref(pod)
    if owner is None:
        return selector
    api_version, kind, name = owner.get("apiVersion") or "", owner.get("kind") or "", owner.get("name") or ""
    if (api_version, kind) == ("v1", "ReplicationController"):
        rc = listers.get(REPLICATIONCONTROLLERS, name, pod.namespace)
        if rc is not None:
            label_set.update((rc.get("spec") or {}).get("selector") or {})
            selector = LabelSelector.from_set(label_set)
    elif (api_version, kind) in (("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")):
        resource = REPLICASETS if kind == "ReplicaSet" else STATEFULSETS
        owner_obj = listers.get(resource, name, pod.namespace)
        if owner_obj is not None:
            try:
                other = LabelSelector.from_dict((owner_obj.get("spec") or {}).get("selector"))
            except Exception:  # a malformed selector contributes nothing, as upstream ignores the error
                return selector
            if other != _NOTHING:
                selector = LabelSelector([*selector.requirements, *other.requirements])
    return selector


# -- PreFilter state ------------------------------------------------------------------------------------------


class _PreFilterState:
    """Upstream ``preFilterState``: per constraint, matching pods per domain, the minimum and a histogram."""

    __slots__ = ("constraints", "domains_at_count", "match", "min_match")

    def __init__(self, constraints: tuple[Constraint, ...], match: list[dict[str, int]]) -> None:
        self.constraints = constraints
        self.match = match
        self.min_match: list[int] = []
        self.domains_at_count: list[Counter[int]] = []
        for counts in match:
            self.domains_at_count.append(Counter(counts.values()))
            self.min_match.append(min(counts.values(), default=MAX_INT32))

    def clone(self) -> _PreFilterState:
        copy = _PreFilterState.__new__(_PreFilterState)
        copy.constraints = self.constraints
        copy.match = [dict(m) for m in self.match]
        copy.min_match = list(self.min_match)
        copy.domains_at_count = [Counter(h) for h in self.domains_at_count]
        return copy

    def min_match_num(self, i: int, min_domains: int) -> int:
        """The global minimum for constraint ``i``; 0 when fewer than ``minDomains`` domains are eligible."""
        if len(self.match[i]) < min_domains:
            return 0
        return self.min_match[i]

    def update(self, i: int, value: str, delta: int) -> None:
        """One pod more (+1) or less (-1) in domain ``value`` of constraint ``i``, keeping the minimum exact."""
        old = self.match[i].get(value, 0)
        cur = old + delta
        self.match[i][value] = cur
        hist = self.domains_at_count[i]
        hist[old] -= 1
        if hist[old] <= 0:
            del hist[old]
        hist[cur] += 1
        if cur < self.min_match[i]:
            self.min_match[i] = cur
        elif old == self.min_match[i] and hist[old] == 0:
            self.min_match[i] = cur  # the last domain at the minimum moved up by one


class _PreScoreState:
    """Upstream ``preScoreState``, plus what the vectorised score needs."""

    __slots__ = ("constraints", "counts", "ignored", "ignored_nodes", "nodes", "tables", "weights")

    def __init__(self) -> None:
        self.constraints: tuple[Constraint, ...] = ()
        self.nodes = np.zeros(0, dtype=np.intp)
        self.ignored = np.zeros(0, dtype=bool)  # aligned with ``nodes``
        self.ignored_nodes: frozenset[int] = frozenset()
        self.counts: list[dict[str, int] | None] = []  # per constraint; None for hostname (counted per node)
        self.tables: list[tuple[tuple[str, ...], np.ndarray] | None] = []
        self.weights: list[float] = []

    def clone(self) -> _PreScoreState:
        return self  # read-only after PreScore, as upstream's


class PodTopologySpread:
    """PreFilter, Filter, PreScore and Score plugin on topology spread constraints."""

    name = NAME

    def __init__(self, default_constraints: Sequence[Mapping[str, Any]] = SYSTEM_DEFAULT_CONSTRAINTS,
                 system_defaulted: bool = True, listers: ObjectLister | None = None) -> None:
        self.default_constraints = tuple(default_constraints)
        self.system_defaulted = system_defaulted
        self.listers = lister_for(listers, None)
        self.index = PodIndex()
        # Default constraints have no selector of their own; unless they use matchLabelKeys they parse once.
        self._parsed_defaults: dict[str, tuple[Constraint, ...]] = {}
        if not any(c.get("matchLabelKeys") for c in self.default_constraints):
            for action in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                self._parsed_defaults[action] = parse_constraints(self.default_constraints, {}, action)

    # -- constraints ------------------------------------------------------------------------------------------
    @staticmethod
    def _raw(pod: PodInfo) -> Sequence[Mapping[str, Any]]:
        return (pod.pod.get("spec") or {}).get("topologySpreadConstraints") or ()

    def constraints(self, pod: PodInfo, action: str) -> tuple[Constraint, ...]:
        """The pod's own constraints for ``action``, else the default ones (``getConstraints``)."""
        raw = self._raw(pod)
        if raw:
            return pod.memo(f"{NAME}/{action}", lambda p: parse_constraints(raw, p.labels, action))  # type: ignore[no-any-return]
        defaults = self._parsed_defaults.get(action)
        if defaults is None:  # the defaults use matchLabelKeys: they depend on the pod's labels
            defaults = parse_constraints(self.default_constraints, pod.labels, action)
        if not defaults:
            return ()
        selector = default_selector(pod, self.listers)
        if selector.empty:
            return ()
        return tuple(Constraint(c.max_skew, c.topology_key, selector, c.min_domains, c.node_affinity_policy,
                                c.node_taints_policy) for c in defaults)

    # -- inclusion policies -----------------------------------------------------------------------------------
    @staticmethod
    def _required(pod: PodInfo) -> RequiredNodeAffinity:
        return pod.memo(NAME + "/required", lambda p: RequiredNodeAffinity.of(p.node_selector, p.affinity))  # type: ignore[no-any-return]

    def _includes(self, c: Constraint, pod: PodInfo, node: NodeInfo) -> bool:
        """``matchNodeInclusionPolicies`` for one node."""
        if c.node_affinity_policy == HONOR and not self._required(pod).matches(node.labels, node.name):
            return False
        return c.node_taints_policy != HONOR or find_untolerated_taint(
            (taint_of(t) for t in node.taints), pod.tolerations, _DO_NOT_SCHEDULE_TAINTS) is None

    def _inclusion_mask(self, c: Constraint, pod: PodInfo, snapshot: Snapshot) -> np.ndarray:
        mask = np.ones(snapshot.num_nodes, dtype=bool)
        if c.node_affinity_policy == HONOR:
            required = self._required(pod)
            mask &= snapshot.node_memo((NAME, "affinity", required), lambda: required.mask(snapshot))
        if c.node_taints_policy == HONOR:
            mask &= snapshot.node_memo((NAME, "taints", tolerations_key(pod)), lambda: self._tolerated(pod, snapshot))
        return mask

    @staticmethod
    def _tolerated(pod: PodInfo, snapshot: Snapshot) -> np.ndarray:
        codes, groups = snapshot.taint_groups()
        ok = np.fromiter((find_untolerated_taint(g, pod.tolerations, _DO_NOT_SCHEDULE_TAINTS) is None
                          for g in groups), dtype=bool, count=len(groups))
        return np.append(ok, True)[codes]

    def _match_counts(self, snapshot: Snapshot, selector: LabelSelector, namespace: str) -> np.ndarray:
        """Matching pods per node for (selector, namespace), from the incremental index."""
        if selector.empty:
            return np.zeros(snapshot.num_nodes, dtype=np.int64)
        return self.index.counts(snapshot, (NAME, selector, namespace),
                                 lambda pods: count_pods_match_selector(pods, selector, namespace))

    # -- PreFilter / Filter -----------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except Exception as exc:
            return None, Status.error(f"get constraints from pod: {exc}")
        if not constraints:
            state.write(PRE_FILTER_KEY, _PreFilterState((), []))
            return None, Status(Code.SKIP)
        state.write(PRE_FILTER_KEY, self._pre_filter_state(pod, snapshot, constraints))
        return None, None

    def _pre_filter_state(self, pod: PodInfo, snapshot: Snapshot,
                          constraints: tuple[Constraint, ...]) -> _PreFilterState:
        columns = [snapshot.label_column(c.topology_key) for c in constraints]
        has_all = np.ones(snapshot.num_nodes, dtype=bool)
        for column in columns:
            has_all &= column.codes >= 0
        match: list[dict[str, int]] = []
        for c, column in zip(constraints, columns, strict=True):
            eligible = has_all & self._inclusion_mask(c, pod, snapshot)
            codes = column.codes[eligible]
            present = np.bincount(codes, minlength=len(column.values)) > 0
            counts = self._match_counts(snapshot, c.selector, pod.namespace)[eligible]
            sums = np.bincount(codes, weights=counts, minlength=len(column.values))
            match.append({column.values[v]: int(sums[v]) for v in np.flatnonzero(present).tolist()})
        return _PreFilterState(constraints, match)

    def pre_filter_extensions(self) -> PodTopologySpread:
        return self

    def _update_with_pod(self, state: CycleState, updated: PodInfo, preemptor: PodInfo, node: NodeInfo,
                         delta: int) -> Status | None:
        s = state.get(PRE_FILTER_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        if updated.namespace != preemptor.namespace:
            return None
        if not all(c.topology_key in node.labels for c in s.constraints):
            return None
        for i, c in enumerate(s.constraints):
            if not c.selector.matches(updated.labels) or not self._includes(c, preemptor, node):
                continue
            s.update(i, node.labels[c.topology_key], delta)
        return None

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo) -> Status | None:
        return self._update_with_pod(state, pod_to_add, pod, node, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo) -> Status | None:
        return self._update_with_pod(state, pod_to_remove, pod, node, -1)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s = state.get(PRE_FILTER_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        for i, c in enumerate(s.constraints):
            value = node.labels.get(c.topology_key)
            if value is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NODE_LABEL_NOT_MATCH)
            self_match = 1 if c.selector.matches(pod.labels) else 0
            skew = s.match[i].get(value, 0) + self_match - s.min_match_num(i, c.min_domains)
            if skew > c.max_skew:
                return Status(Code.UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH)
        return None

    def filter_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict | Status:
        s = state.get(PRE_FILTER_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        n = snapshot.num_nodes
        if not s.constraints:
            return all_pass(n)
        decided = np.zeros(n, dtype=bool)
        missing = np.zeros(n, dtype=bool)
        skewed = np.zeros(n, dtype=bool)
        for i, c in enumerate(s.constraints):
            column = snapshot.label_column(c.topology_key)
            lacks = (column.codes < 0) & ~decided  # the first failing constraint decides a node's reason
            missing |= lacks
            decided |= lacks
            table = np.fromiter((s.match[i].get(v, 0) for v in column.values), dtype=np.int64,
                                count=len(column.values))
            self_match = 1 if c.selector.matches(pod.labels) else 0
            skew = np.append(table, 0)[column.codes] + self_match - s.min_match_num(i, c.min_domains)
            too_big = (skew > c.max_skew) & ~decided
            skewed |= too_big
            decided |= too_big
        if not decided.any():
            return all_pass(n)
        return FilterVerdict(~decided, (
            Rejection(ERR_REASON_NODE_LABEL_NOT_MATCH, missing, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
            Rejection(ERR_REASON_CONSTRAINTS_NOT_MATCH, skewed, Code.UNSCHEDULABLE),
        ))

    # -- PreScore / Score ---------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> Status | None:
        if snapshot.num_nodes == 0:
            return Status(Code.SKIP)
        try:
            constraints = self.constraints(pod, SCHEDULE_ANYWAY)
        except Exception as exc:
            return Status.error(f"setting default soft topology spread constraints: {exc}")
        if not constraints:
            return Status(Code.SKIP)
        # Only pods with their own constraints (or non-system defaults) need every topology key on a node:
        # nodes without a zone label still get hostname spreading from the system defaults.
        require_all = bool(self._raw(pod)) or not self.system_defaulted
        s = _PreScoreState()
        s.constraints = constraints
        s.nodes = np.asarray(nodes, dtype=np.intp)
        columns = [snapshot.label_column(c.topology_key) for c in constraints]
        has_all = np.ones(snapshot.num_nodes, dtype=bool)
        if require_all:
            for column in columns:
                has_all &= column.codes >= 0
        s.ignored = ~has_all[s.nodes]
        s.ignored_nodes = frozenset(s.nodes[s.ignored].tolist())
        considered = s.nodes[~s.ignored]
        for c, column in zip(constraints, columns, strict=True):
            if c.topology_key == LABEL_HOSTNAME:
                s.weights.append(math.log(len(considered) + 2))
                s.counts.append(None)
                s.tables.append(None)
                continue
            # Without require_all a node lacking the key counts as domain "" (upstream reads a missing label as "").
            values = (*column.values, "")
            blank = column.values.index("") if "" in column.values else len(column.values)
            codes = np.where(column.codes >= 0, column.codes, blank)
            present = np.bincount(codes[considered], minlength=len(values)) > 0
            s.weights.append(math.log(int(present.sum()) + 2))
            eligible = has_all & self._inclusion_mask(c, pod, snapshot)
            counts = self._match_counts(snapshot, c.selector, pod.namespace)[eligible]
            sums = np.bincount(codes[eligible], weights=counts, minlength=len(values)).astype(np.int64)
            table = np.where(present, sums, 0)
            s.counts.append({values[v]: int(table[v]) for v in np.flatnonzero(present).tolist()})
            s.tables.append((values, table))
        state.write(PRE_SCORE_KEY, s)
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        s = state.get(PRE_SCORE_KEY)
        if s is None:
            return 0, Status.error(f'reading "{PRE_SCORE_KEY}" from cycleState: not found')
        if node.index in s.ignored_nodes:
            return 0, None
        total = 0.0
        for i, c in enumerate(s.constraints):
            value = node.labels.get(c.topology_key)
            if value is None:
                continue
            counts = s.counts[i]  # None: a hostname constraint, counted on the node itself
            count = count_pods_match_selector(node.pods, c.selector, pod.namespace) if counts is None \
                else counts[value]
            total += float(count) * s.weights[i] + float(c.max_skew - 1)
        return go_round(total), None

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray | Status:
        s = state.get(PRE_SCORE_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_SCORE_KEY}" from cycleState: not found')
        total = np.zeros(len(nodes), dtype=np.float64)
        for i, c in enumerate(s.constraints):
            column = snapshot.label_column(c.topology_key)
            codes = column.codes[nodes]
            has = codes >= 0
            table = s.tables[i]
            if table is None:
                count = self._match_counts(snapshot, c.selector, pod.namespace)[nodes]
            else:
                count = table[1][np.where(has, codes, 0)]
            term = count.astype(np.float64) * s.weights[i] + float(c.max_skew - 1)
            total = total + np.where(has, term, 0.0)
        scores = go_round_array(total).astype(np.int64)
        ignored = np.isin(nodes, np.fromiter(s.ignored_nodes, dtype=np.intp, count=len(s.ignored_nodes)))
        scores[ignored] = 0
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        s = state.get(PRE_SCORE_KEY)
        if s is None:
            return None
        ignored = s.ignored if len(s.ignored) == len(scores) else np.zeros(len(scores), dtype=bool)
        valid = scores[~ignored]
        if not len(valid):
            scores[:] = 0
            return None
        min_score = int(valid.min())
        max_score = max(int(valid.max()), 0)
        if max_score == 0:
            out = np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
        else:
            out = MAX_NODE_SCORE * (max_score + min_score - scores.astype(np.int64)) // max_score
        out[ignored] = 0
        scores[:] = out
        return None


def _check_default_constraints(constraints: Sequence[Mapping[str, Any]]) -> None:
    """``validateDefaultConstraints``: valid fields, no label selector, no duplicate key/action pairs."""
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(constraints):
        path = f"defaultConstraints[{i}]"
        if int(c.get("maxSkew") or 0) <= 0:
            raise ValueError(f"{path}.maxSkew: Invalid value: {c.get('maxSkew')}: must be greater than zero")
        if not c.get("topologyKey"):
            raise ValueError(f"{path}.topologyKey: Required value: can not be empty")
        action = c.get("whenUnsatisfiable") or ""
        if action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise ValueError(f'{path}.whenUnsatisfiable: Unsupported value: "{action}"')
        if c.get("labelSelector") is not None:
            raise ValueError(f"{path}.labelSelector: Forbidden: constraint must not define a selector, "
                             "as they deduced for each pod")
        key = (c["topologyKey"], action)
        if key in seen:
            raise ValueError(f"{path}: Duplicate value: {{{key[0]}, {key[1]}}}")
        seen.add(key)


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None, *,
        listers: ObjectLister | None = None) -> PodTopologySpread:
    """Build from ``PodTopologySpreadArgs``: ``defaultingType`` (System, the default, or List) and
    ``defaultConstraints`` (only with List). Services/controllers for the default selector come from
    ``listers`` or ``handle.listers``."""
    args = args or {}
    defaulting = args.get("defaultingType") or SYSTEM_DEFAULTING
    configured = list(args.get("defaultConstraints") or ())
    if defaulting == SYSTEM_DEFAULTING:
        if configured:
            raise ValueError('defaultConstraints: Invalid value: when .defaultingType is "System"')
        defaults: Sequence[Mapping[str, Any]] = SYSTEM_DEFAULT_CONSTRAINTS
    elif defaulting == LIST_DEFAULTING:
        _check_default_constraints(configured)
        defaults = configured
    else:
        raise ValueError(f'defaultingType: Unsupported value: "{defaulting}": supported values: "List", "System"')
    return PodTopologySpread(defaults, defaulting == SYSTEM_DEFAULTING, lister_for(listers, handle))
