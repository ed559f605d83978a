"""NodeAffinity: ``spec.nodeSelector`` and node affinity -- required terms filter, preferred terms score.

Upstream ``pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go`` and
``component-helpers/scheduling/corev1/nodeaffinity``.

* PreFilter: Skip when the pod has neither a nodeSelector nor required node
  affinity (and the plugin has no ``addedAffinity``). When every required
  term pins ``metadata.name`` with ``In``, the union of those names becomes
  the PreFilterResult, so only those nodes are evaluated; terms that pin
  disjoint names make the pod UnschedulableAndUnresolvable
  (``pod affinity terms conflict``).
* Filter: nodeSelector (exact label matches) AND the required terms (ORed;
  within a term all requirements ANDed: In, NotIn, Exists, DoesNotExist,
  Gt, Lt on labels, In/NotIn on ``metadata.name``). Terms that do not parse
  are ignored, as upstream's lazy selector does. Rejection:
  ``node(s) didn't match Pod's node affinity/selector``.
* Score: the summed weights of the preferred terms the node matches;
  NormalizeScore scales by the best node onto 0..100. PreScore answers Skip
  when there are no preferred terms; a preferred term that does not parse is
  an Error.
* ``addedAffinity`` (NodeAffinityArgs): scheduler-enforced terms applied to
  every pod, rejection ``node(s) didn't match scheduler-enforced node affinity``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from emulator.api.nodeaffinity import (
    NodeSelectorTerm,
    RequiredNodeAffinity,
    WeightedTerms,
    is_empty_term,
    parse_node_selector_term,
    parse_preferred_terms,
)
from emulator.scheduler.framework.interface import (
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
from emulator.scheduler.plugins.helper import default_normalize_score

NAME = "NodeAffinity"
PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

def _node_affinity(pod: PodInfo) -> Mapping[str, Any]:
    return (pod.affinity or {}).get("nodeAffinity") or {}


def required_affinity(pod: PodInfo) -> RequiredNodeAffinity:
    """The pod's nodeSelector + required terms, parsed once per pod."""
    return pod.memo(PRE_FILTER_KEY, lambda p: RequiredNodeAffinity.of(p.node_selector, p.affinity))


def preferred_affinity(pod: PodInfo) -> WeightedTerms | Status | None:
    """The pod's preferred terms (None when it has none); an Error status if one does not parse."""

    def compute(p: PodInfo) -> WeightedTerms | Status | None:
        raw = _node_affinity(p).get("preferredDuringSchedulingIgnoredDuringExecution")
        if raw is None:
            return None
        terms, errors = parse_preferred_terms(raw)
        return Status.error("; ".join(errors)) if errors else terms

    return pod.memo(PRE_SCORE_KEY, compute)


def _score_one(terms: WeightedTerms, node: NodeInfo) -> int:
    return sum(weight for weight, term in terms if term.matches(node.labels, node.name))


def _term_mask(term: NodeSelectorTerm, snapshot: Snapshot) -> np.ndarray:
    return snapshot.node_memo((NAME, "term", term), lambda: term.mask(snapshot))


def _score_many(terms: WeightedTerms, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray:
    scores = np.zeros(len(nodes), dtype=np.int64)
    for weight, term in terms:
        scores += weight * _term_mask(term, snapshot)[nodes]
    return scores


class NodeAffinity:
    """PreFilter, Filter, PreScore and Score plugin on node labels and names."""

    name = NAME

    def __init__(self, added_required: tuple[NodeSelectorTerm, ...] | None = None,
                 added_preferred: WeightedTerms | None = None) -> None:
        self.added_required = added_required
        self.added_preferred = added_preferred

    # -- PreFilter / Filter ----------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        required = _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is None and self.added_required is None and not pod.node_selector:
            return None, Status(Code.SKIP)
        state.write(PRE_FILTER_KEY, required_affinity(pod))
        terms = (required or {}).get("nodeSelectorTerms") or ()
        if not terms:
            return None, None
        # Only nodes named by metadata.name In ... can match when every term names some.
        node_names: set[str] | None = None
        for term in terms:
            term_names: set[str] | None = None
            for req in term.get("matchFields") or ():
                if req.get("key") == "metadata.name" and req.get("operator") == "In":
                    values = set(req.get("values") or ())
                    term_names = values if term_names is None else term_names & values
            if term_names is None:
                return None, None  # this term may match any node, and terms are ORed
            node_names = term_names if node_names is None else node_names | term_names
        if node_names is not None and not node_names:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)
        return PreFilterResult(frozenset(node_names or ())), None

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if self.added_required is not None and not any(t.matches(node.labels, node.name) for t in self.added_required):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED)
        required = state.get(PRE_FILTER_KEY) or required_affinity(pod)
        if not required.matches(node.labels, node.name):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD)
        return None

    def filter_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict:
        required = state.get(PRE_FILTER_KEY) or required_affinity(pod)
        # Labels and names only: pods with the same selector and affinity share the verdict.
        return snapshot.node_memo((NAME, "filter", self.added_required, required),
                                  lambda: self._verdict(required, snapshot))

    def _verdict(self, required: RequiredNodeAffinity, snapshot: Snapshot) -> FilterVerdict:
        enforced_fail = np.zeros(snapshot.num_nodes, dtype=bool)
        if self.added_required is not None:
            allowed = np.zeros(snapshot.num_nodes, dtype=bool)
            for term in self.added_required:
                allowed |= term.mask(snapshot)
            enforced_fail = ~allowed
        pod_fail = ~required.mask(snapshot) & ~enforced_fail
        if not enforced_fail.any() and not pod_fail.any():
            return all_pass(snapshot.num_nodes)
        return FilterVerdict(~(enforced_fail | pod_fail), (
            Rejection(ERR_REASON_ENFORCED, enforced_fail, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
            Rejection(ERR_REASON_POD, pod_fail, Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
        ))

    # -- PreScore / Score ------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> Status | None:
        preferred = preferred_affinity(pod)
        if isinstance(preferred, Status):
            return preferred
        if preferred is None and self.added_preferred is None:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_KEY, preferred)
        return None

    def _preferred(self, state: CycleState, pod: PodInfo) -> WeightedTerms | Status:
        preferred = state.get(PRE_SCORE_KEY) if PRE_SCORE_KEY in state else preferred_affinity(pod)
        if isinstance(preferred, Status):
            return preferred
        return (self.added_preferred or ()) + (preferred or ())

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        terms = self._preferred(state, pod)
        if isinstance(terms, Status):
            return 0, terms
        return _score_one(terms, node), None

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray | Status:
        terms = self._preferred(state, pod)
        if isinstance(terms, Status):
            return terms
        return _score_many(terms, snapshot, nodes)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        default_normalize_score(scores, reverse=False)
        return None


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> NodeAffinity:
    """Build from ``NodeAffinityArgs``: ``{"addedAffinity": <a v1.NodeAffinity>}`` (optional)."""
    added = (args or {}).get("addedAffinity") or {}
    added_required: tuple[NodeSelectorTerm, ...] | None = None
    required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        terms = []
        for i, term in enumerate(required.get("nodeSelectorTerms") or ()):
            if is_empty_term(term):
                continue
            compiled, errors = parse_node_selector_term(term, f"addedAffinity.nodeSelectorTerms[{i}]")
            if compiled is None:
                raise ValueError("parsing addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: "
                                 + "; ".join(errors))
            terms.append(compiled)
        added_required = tuple(terms)
    added_preferred: WeightedTerms | None = None
    if added.get("preferredDuringSchedulingIgnoredDuringExecution"):
        added_preferred, errors = parse_preferred_terms(added["preferredDuringSchedulingIgnoredDuringExecution"])
        if errors:
            raise ValueError("parsing addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: "
                             + "; ".join(errors))
    return NodeAffinity(added_required, added_preferred)
