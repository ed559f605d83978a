"""InterPodAffinity: place pods near (affinity) or away from (anti-affinity) other pods, per topology domain.

Upstream ``pkg/scheduler/framework/plugins/interpodaffinity/`` (``filtering.go``,
``scoring.go``, ``plugin.go``) and ``framework/types.go`` (``AffinityTerm``).

Terms. A ``PodAffinityTerm`` selects pods by label selector in a set of
namespaces -- the listed ``namespaces``, else the pod's own namespace when
neither they nor a ``namespaceSelector`` are given -- or in the namespaces
whose labels match ``namespaceSelector`` (``{}`` = all). For the incoming pod
the namespace selector is resolved against the namespaces the plugin's lister
knows; for existing pods' terms it is matched against the incoming pod's
namespace labels. A term is satisfied per topology domain: the domain of a
node is its value of the term's ``topologyKey``.

Filter (PreFilter counts matching pods per domain once per cycle):

1. required affinity: the node must have every term's key, and its domain
   must hold a pod matching *all* the pod's affinity terms -- unless no pod in
   the cluster matches them and the pod matches its own terms (the first pod
   of a group may go anywhere); else UnschedulableAndUnresolvable
   ``node(s) didn't match pod affinity rules``;
2. required anti-affinity: no pod matching a term in the node's domain of that
   term, else Unschedulable ``node(s) didn't match pod anti-affinity rules``;
3. existing pods' required anti-affinity: no existing pod whose anti-affinity
   term matches the incoming pod may share the node's domain, else
   Unschedulable ``node(s) didn't satisfy existing pods anti-affinity rules``.

PreFilter answers Skip when there is nothing to check; AddPod/RemovePod keep
the counts right for preemption's "what if".

Score (PreScore builds a map topology key -> value -> weight): for every
existing pod, its node's domain gains the weight of each preferred affinity
term of the incoming pod it matches and loses that of each preferred
anti-affinity term; the incoming pod matching an existing pod's *required*
affinity term adds ``hardPodAffinityWeight`` (default 1); matching its
preferred affinity / anti-affinity terms adds / subtracts their weights. A
node scores the sum over its domains; NormalizeScore maps min..max onto
0..100 (``int64(100 * (s - min) / (max - min))`` in float64).
``ignorePreferredTermsOfExistingPods`` skips existing pods' terms when the
incoming pod has no preferred terms.

Vectorised: the per-node counts of pods matching the incoming pod's terms are
kept by a :class:`~emulator.scheduler.plugins.pod_index.PodIndex` (so a stream
of pods with the same terms -- a Deployment's replicas -- recounts only the
nodes that changed) and aggregated per domain with ``bincount`` over label
columns; pods carrying affinity are found through the same index instead of
a scan of every pod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.api.selectors import LabelSelector
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
from emulator.scheduler.plugins.listers import NAMESPACES, ObjectLister, lister_for
from emulator.scheduler.plugins.pod_index import PodIndex

__all__ = [
    "DEFAULT_HARD_POD_AFFINITY_WEIGHT",
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "NAME",
    "AffinityTerm",
    "InterPodAffinity",
    "PodTerms",
    "new",
    "pod_terms",
]

NAME = "InterPodAffinity"
PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME
ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"
DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
_NOTHING = LabelSelector.nothing()

TopologyPair = tuple[str, str]


@dataclass(frozen=True)
class AffinityTerm:
    """A parsed ``PodAffinityTerm`` (upstream ``framework.AffinityTerm``)."""

    namespaces: frozenset[str]
    selector: LabelSelector
    topology_key: str
    namespace_selector: LabelSelector

    def matches(self, pod: PodInfo, namespace_labels: Mapping[str, str] | None) -> bool:
        """``AffinityTerm.Matches``: the pod's namespace is selected and its labels match."""
        if pod.namespace in self.namespaces or self.namespace_selector.matches(namespace_labels or {}):
            return self.selector.matches(pod.labels)
        return False


@dataclass(frozen=True)
class PodTerms:
    """A pod's parsed required and preferred (weight, term) affinity / anti-affinity terms."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[tuple[int, AffinityTerm], ...] = ()
    preferred_anti_affinity: tuple[tuple[int, AffinityTerm], ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.required_affinity or self.required_anti_affinity or self.preferred_affinity
                    or self.preferred_anti_affinity)


_NO_TERMS = PodTerms()


def _term(namespace: str, raw: Mapping[str, Any]) -> AffinityTerm:
    """``newAffinityTerm``: selectors parsed; namespaces default to the pod's own when none are named."""
    listed = raw.get("namespaces") or ()
    ns_selector_raw = raw.get("namespaceSelector")
    namespaces = frozenset([namespace]) if not listed and ns_selector_raw is None else frozenset(listed)
    return AffinityTerm(namespaces, LabelSelector.from_dict(raw.get("labelSelector")), raw.get("topologyKey") or "",
                        LabelSelector.from_dict(ns_selector_raw))


def parse_pod_terms(pod: PodInfo) -> PodTerms:
    """Every affinity term of ``pod``; raises the selector's error when one is malformed."""
    affinity = pod.affinity or {}
    aff = affinity.get("podAffinity") or {}
    anti = affinity.get("podAntiAffinity") or {}
    if not aff and not anti:
        return _NO_TERMS

    def required(block: Mapping[str, Any]) -> tuple[AffinityTerm, ...]:
        return tuple(_term(pod.namespace, t) for t in block.get("requiredDuringSchedulingIgnoredDuringExecution") or ())

    def preferred(block: Mapping[str, Any]) -> tuple[tuple[int, AffinityTerm], ...]:
        return tuple((int(w.get("weight") or 0), _term(pod.namespace, w.get("podAffinityTerm") or {}))
                     for w in block.get("preferredDuringSchedulingIgnoredDuringExecution") or ())

    return PodTerms(required(aff), required(anti), preferred(aff), preferred(anti))


def incoming_terms(pod: PodInfo) -> PodTerms | Exception:
    """The terms of a pod being scheduled, parsed once; the parse error itself when a selector is malformed."""

    def compute(p: PodInfo) -> PodTerms | Exception:
        if not _has_pod_affinity(p):
            return _NO_TERMS
        try:
            return parse_pod_terms(p)
        except Exception as exc:
            return exc

    return pod.memo(NAME + "/incoming", compute)  # type: ignore[no-any-return]


def pod_terms(pod: PodInfo) -> PodTerms:
    """The pod's terms, parsed once; a pod whose terms do not parse has none (it was admitted invalid)."""

    def compute(p: PodInfo) -> PodTerms:
        try:
            return parse_pod_terms(p)
        except Exception:
            return _NO_TERMS

    return pod.memo(NAME + "/terms", compute)  # type: ignore[no-any-return]


def _has_pod_affinity(pod: PodInfo) -> bool:
    """Upstream ``podWithAffinity``: the pod has a podAffinity or podAntiAffinity block."""
    affinity = pod.affinity or {}
    return bool(affinity.get("podAffinity") or affinity.get("podAntiAffinity"))


def _matches_all(terms: Sequence[AffinityTerm], pod: PodInfo) -> bool:
    """``podMatchesAllAffinityTerms``: at least one term, and the pod matches every one (own namespaces only)."""
    return bool(terms) and all(t.matches(pod, None) for t in terms)


def _bump(counts: Counter[TopologyPair], labels: Mapping[str, str], key: str, delta: int) -> None:
    """Add ``delta`` to the node's domain of ``key``; entries that reach zero are dropped, as upstream."""
    value = labels.get(key)
    if value is None:
        return
    pair = (key, value)
    counts[pair] += delta
    if counts[pair] == 0:
        del counts[pair]


class _PreFilterState:
    """Upstream ``preFilterState``: the incoming pod's resolved terms and three per-domain counters."""

    __slots__ = ("affinity_counts", "anti_affinity_counts", "existing_anti_affinity_counts", "namespace_labels",
                 "terms")

    def __init__(self, terms: PodTerms, namespace_labels: Mapping[str, str]) -> None:
        self.terms = terms
        self.namespace_labels = namespace_labels
        self.existing_anti_affinity_counts: Counter[TopologyPair] = Counter()
        self.affinity_counts: Counter[TopologyPair] = Counter()
        self.anti_affinity_counts: Counter[TopologyPair] = Counter()

    def clone(self) -> _PreFilterState:
        copy = _PreFilterState(self.terms, self.namespace_labels)
        copy.existing_anti_affinity_counts = Counter(self.existing_anti_affinity_counts)
        copy.affinity_counts = Counter(self.affinity_counts)
        copy.anti_affinity_counts = Counter(self.anti_affinity_counts)
        return copy

    def update_with_pod(self, pod: PodInfo, incoming: PodInfo, labels: Mapping[str, str], delta: int) -> None:
        """``preFilterState.updateWithPod``: ``pod`` was added (+1) to or removed (-1) from a node."""
        for t in pod_terms(pod).required_anti_affinity:
            if t.matches(incoming, self.namespace_labels):
                _bump(self.existing_anti_affinity_counts, labels, t.topology_key, delta)
        if _matches_all(self.terms.required_affinity, pod):
            for t in self.terms.required_affinity:
                _bump(self.affinity_counts, labels, t.topology_key, delta)
        for t in self.terms.required_anti_affinity:
            if t.matches(pod, None):
                _bump(self.anti_affinity_counts, labels, t.topology_key, delta)


class _PreScoreState:
    __slots__ = ("topology_score",)

    def __init__(self, topology_score: dict[str, dict[str, int]]) -> None:
        self.topology_score = topology_score

    def clone(self) -> _PreScoreState:
        return self


class InterPodAffinity:
    """PreFilter, Filter, PreScore and Score plugin on pod (anti-)affinity."""

    name = NAME

    def __init__(self, hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT,
                 ignore_preferred_terms_of_existing_pods: bool = False,
                 listers: ObjectLister | None = None) -> None:
        self.hard_pod_affinity_weight = hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = ignore_preferred_terms_of_existing_pods
        self.listers = lister_for(listers, None)
        self.index = PodIndex()

    # -- namespaces -----------------------------------------------------------------------------------------------
    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        ns = self.listers.get(NAMESPACES, namespace)
        return ((ns or {}).get("metadata") or {}).get("labels") or {}

    def _merge_namespaces(self, term: AffinityTerm) -> AffinityTerm:
        """``mergeAffinityTermNamespacesIfNotEmpty``: resolve a non-empty namespaceSelector to names."""
        if term.namespace_selector.empty:
            return term
        names = {(ns.get("metadata") or {}).get("name") or "" for ns in self.listers.list(NAMESPACES)
                 if term.namespace_selector.matches((ns.get("metadata") or {}).get("labels") or {})}
        return AffinityTerm(term.namespaces | names, term.selector, term.topology_key, _NOTHING)

    # -- index tables ---------------------------------------------------------------------------------------------
    # A pod without an affinity block has no terms (parse_pod_terms): most pods, tested first (every cycle
    # re-reads the pods of the node the last one went to).
    def _pods_with_affinity(self, snapshot: Snapshot) -> dict[int, tuple[PodInfo, ...]]:
        return self.index.sparse(snapshot, (NAME, "with-affinity"),
                                 lambda pods: tuple(p for p in pods if p.affinity and _has_pod_affinity(p)))

    def _pods_with_required_anti_affinity(self, snapshot: Snapshot) -> dict[int, tuple[PodInfo, ...]]:
        return self.index.sparse(snapshot, (NAME, "with-required-anti-affinity"), lambda pods: tuple(
            p for p in pods if p.affinity and pod_terms(p).required_anti_affinity))

    def _count_matching_all(self, snapshot: Snapshot, terms: tuple[AffinityTerm, ...]) -> np.ndarray:
        return self.index.counts(snapshot, (NAME, "all", terms),
                                 lambda pods: sum(1 for p in pods if _matches_all(terms, p)))

    def _count_matching(self, snapshot: Snapshot, term: AffinityTerm) -> np.ndarray:
        return self.index.counts(snapshot, (NAME, "one", term),
                                 lambda pods: sum(1 for p in pods if term.matches(p, None)))

    @staticmethod
    def _per_domain(snapshot: Snapshot, key: str, per_node: np.ndarray) -> dict[str, int]:
        """Sum of ``per_node`` over the nodes of each domain of ``key`` (non-zero sums only)."""
        column = snapshot.label_column(key)
        has = column.codes >= 0
        sums = np.bincount(column.codes[has], weights=per_node[has], minlength=len(column.values)).astype(np.int64)
        return {column.values[v]: int(sums[v]) for v in np.flatnonzero(sums).tolist()}

    # -- PreFilter / Filter ---------------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        parsed = incoming_terms(pod)
        if isinstance(parsed, Exception):
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"parsing pod: {parsed}")
        terms = _NO_TERMS
        if parsed.required_affinity or parsed.required_anti_affinity:
            terms = PodTerms(tuple(self._merge_namespaces(t) for t in parsed.required_affinity),
                             tuple(self._merge_namespaces(t) for t in parsed.required_anti_affinity))
        s = _PreFilterState(terms, self._namespace_labels(pod.namespace))
        for index, pods in self._pods_with_required_anti_affinity(snapshot).items():
            labels = snapshot.labels(index)
            for existing in pods:
                for t in pod_terms(existing).required_anti_affinity:
                    if t.matches(pod, s.namespace_labels):
                        _bump(s.existing_anti_affinity_counts, labels, t.topology_key, 1)
        if terms.required_affinity:
            per_node = self._count_matching_all(snapshot, terms.required_affinity)
            if per_node.any():
                for t in terms.required_affinity:
                    for value, count in self._per_domain(snapshot, t.topology_key, per_node).items():
                        s.affinity_counts[(t.topology_key, value)] += count
        for t in terms.required_anti_affinity:
            per_node = self._count_matching(snapshot, t)
            if per_node.any():
                for value, count in self._per_domain(snapshot, t.topology_key, per_node).items():
                    s.anti_affinity_counts[(t.topology_key, value)] += count
        state.write(PRE_FILTER_KEY, s)
        if not s.existing_anti_affinity_counts and not terms.required_affinity and not terms.required_anti_affinity:
            return None, Status(Code.SKIP)
        return None, None

    def pre_filter_extensions(self) -> InterPodAffinity:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo) -> Status | None:
        s = state.get(PRE_FILTER_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        s.update_with_pod(pod_to_add, pod, node.labels, 1)
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo) -> Status | None:
        s = state.get(PRE_FILTER_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        s.update_with_pod(pod_to_remove, pod, node.labels, -1)
        return None

    @staticmethod
    def _satisfies_affinity(s: _PreFilterState, pod: PodInfo, labels: Mapping[str, str]) -> bool:
        pods_exist = True
        for t in s.terms.required_affinity:
            value = labels.get(t.topology_key)
            if value is None:
                return False  # every topology key must exist on the node
            if s.affinity_counts.get((t.topology_key, value), 0) <= 0:
                pods_exist = False
        if pods_exist:
            return True
        # The first pod of a group with affinity to itself: no pod matches anywhere yet, the pod matches its
        # own terms, and the node has all the keys -- let it in so the group can start.
        return not s.affinity_counts and _matches_all(s.terms.required_affinity, pod)

    @staticmethod
    def _satisfies_anti_affinity(s: _PreFilterState, labels: Mapping[str, str]) -> bool:
        for t in s.terms.required_anti_affinity:
            value = labels.get(t.topology_key)
            if value is not None and s.anti_affinity_counts.get((t.topology_key, value), 0) > 0:
                return False
        return True

    @staticmethod
    def _satisfies_existing_anti_affinity(s: _PreFilterState, labels: Mapping[str, str]) -> bool:
        counts = s.existing_anti_affinity_counts
        return not counts or not any(counts.get(pair, 0) > 0 for pair in labels.items())

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s = state.get(PRE_FILTER_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        if not self._satisfies_affinity(s, pod, node.labels):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY_RULES_NOT_MATCH)
        if not self._satisfies_anti_affinity(s, node.labels):
            return Status(Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
        if not self._satisfies_existing_anti_affinity(s, node.labels):
            return Status(Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
        return None

    @staticmethod
    def _domain_hits(snapshot: Snapshot, key: str, counts: Mapping[TopologyPair, int]) -> np.ndarray:
        """Bool per node: the node's domain of ``key`` has a positive count."""
        column = snapshot.label_column(key)
        table = np.fromiter((counts.get((key, v), 0) > 0 for v in column.values), dtype=bool,
                            count=len(column.values))
        return np.append(table, False)[column.codes]

    def filter_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict | Status:
        s = state.get(PRE_FILTER_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        n = snapshot.num_nodes
        affinity_fail = np.zeros(n, dtype=bool)
        if s.terms.required_affinity:
            has_keys = np.ones(n, dtype=bool)
            pods_exist = np.ones(n, dtype=bool)
            for t in s.terms.required_affinity:
                has_keys &= snapshot.label_column(t.topology_key).codes >= 0
                pods_exist &= self._domain_hits(snapshot, t.topology_key, s.affinity_counts)
            first_of_group = not s.affinity_counts and _matches_all(s.terms.required_affinity, pod)
            affinity_fail = ~has_keys | (~pods_exist & (not first_of_group))
        anti_fail = np.zeros(n, dtype=bool)
        for t in s.terms.required_anti_affinity:
            anti_fail |= self._domain_hits(snapshot, t.topology_key, s.anti_affinity_counts)
        anti_fail &= ~affinity_fail
        existing_fail = np.zeros(n, dtype=bool)
        # One pass over each key's distinct values, not one per (key, value) pair: with N existing pods that
        # have hostname anti-affinity there are N pairs, and a pass per pair made the filter O(N x nodes).
        blocked: dict[str, set[str]] = {}
        for (key, value), count in s.existing_anti_affinity_counts.items():
            if count > 0:
                blocked.setdefault(key, set()).add(value)
        for key, values in blocked.items():
            existing_fail |= snapshot.label_column(key).mask(values.__contains__, absent=False)
        existing_fail &= ~affinity_fail & ~anti_fail
        failed = affinity_fail | anti_fail | existing_fail
        if not failed.any():
            return all_pass(n)
        return FilterVerdict(~failed, (
            Rejection(ERR_REASON_AFFINITY_RULES_NOT_MATCH, affinity_fail, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
            Rejection(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, anti_fail),
            Rejection(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, existing_fail),
        ))

    # -- PreScore / Score -----------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> Status | None:
        if len(nodes) == 0:
            return Status(Code.SKIP)
        parsed = incoming_terms(pod)
        if isinstance(parsed, Exception):
            return Status.error(f"failed to parse pod: {parsed}")
        has_constraints = bool(parsed.preferred_affinity or parsed.preferred_anti_affinity)
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status(Code.SKIP)
        preferred = [(w, self._merge_namespaces(t), 1) for w, t in parsed.preferred_affinity]
        preferred += [(w, self._merge_namespaces(t), -1) for w, t in parsed.preferred_anti_affinity]
        namespace_labels = self._namespace_labels(pod.namespace)
        topology_score: dict[str, dict[str, int]] = {}

        def add(key: str, value: str, amount: int) -> None:
            scores = topology_score.setdefault(key, {})
            scores[value] = scores.get(value, 0) + amount

        # The incoming pod's preferred terms against every existing pod, per domain (vectorised).
        for weight, term, sign in preferred:
            per_node = self._count_matching(snapshot, term)
            if per_node.any():
                for value, count in self._per_domain(snapshot, term.topology_key, per_node).items():
                    add(term.topology_key, value, weight * sign * count)
        # Existing pods' terms against the incoming pod: only pods carrying affinity can contribute.
        hard = self.hard_pod_affinity_weight
        for index, pods in self._pods_with_affinity(snapshot).items():
            labels = snapshot.labels(index)
            if not labels:
                continue
            for existing in pods:
                terms = pod_terms(existing)
                contributions: Iterable[tuple[int, AffinityTerm]] = (
                    *(((hard, t) for t in terms.required_affinity) if hard > 0 else ()),
                    *terms.preferred_affinity,
                    *((-w, t) for w, t in terms.preferred_anti_affinity))
                for weight, t in contributions:
                    value = labels.get(t.topology_key)
                    if value is not None and t.matches(pod, namespace_labels):
                        add(t.topology_key, value, weight)
        if not topology_score:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_KEY, _PreScoreState(topology_score))
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        s = state.get(PRE_SCORE_KEY)
        if s is None:
            return 0, Status.error(f'reading "{PRE_SCORE_KEY}" from cycleState: not found')
        total = 0
        for key, values in s.topology_score.items():
            value = node.labels.get(key)
            if value is not None:
                total += values.get(value, 0)
        return total, None

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray | Status:
        s = state.get(PRE_SCORE_KEY)
        if s is None:
            return Status.error(f'reading "{PRE_SCORE_KEY}" from cycleState: not found')
        total = np.zeros(len(nodes), dtype=np.int64)
        for key, values in s.topology_score.items():
            column = snapshot.label_column(key)
            table = np.fromiter((values.get(v, 0) for v in column.values), dtype=np.int64, count=len(column.values))
            total += np.append(table, 0)[column.codes[nodes]]
        return total

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        s = state.get(PRE_SCORE_KEY)
        if s is None or not s.topology_score or not len(scores):
            return None
        min_count, max_count = int(scores.min()), int(scores.max())
        diff = max_count - min_count
        if diff <= 0:
            scores[:] = 0
            return None
        # float64 arithmetic in upstream's order, then truncation as int64() does.
        scaled = float(MAX_NODE_SCORE) * ((scores.astype(np.int64) - min_count).astype(np.float64) / float(diff))
        scores[:] = np.trunc(scaled).astype(np.int64)
        return None


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None, *,
        listers: ObjectLister | None = None) -> InterPodAffinity:
    """Build from ``InterPodAffinityArgs``: ``hardPodAffinityWeight`` (0..100, default 1) and
    ``ignorePreferredTermsOfExistingPods`` (default false). Namespaces come from ``listers`` or ``handle.listers``."""
    args = args or {}
    weight = args.get("hardPodAffinityWeight")
    weight = DEFAULT_HARD_POD_AFFINITY_WEIGHT if weight is None else int(weight)
    if not 0 <= weight <= 100:
        raise ValueError(f"hardPodAffinityWeight: Invalid value: {weight}: not in valid range [0-100]")
    return InterPodAffinity(weight, bool(args.get("ignorePreferredTermsOfExistingPods")), lister_for(listers, handle))
