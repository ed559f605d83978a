"""RemovePodsViolatingTopologySpreadConstraint: even out domains whose skew exceeds ``maxSkew``.

Upstream ``topologyspreadconstraint.go`` (a *balance* plugin), per namespace
and per distinct constraint its pods declare (``whenUnsatisfiable`` in the
args' ``constraints``):

1. domains are the values of ``topologyKey`` on the nodes (the constraint's
   pod's required node affinity honoured, taints ignored: the default
   ``nodeAffinityPolicy`` / ``nodeTaintsPolicy``), empty ones included; each
   pod of the namespace matching the constraint's selector counts in its
   node's domain;
2. balanced (max - min <= maxSkew): nothing to do; otherwise
   ``balanceDomains``: domains sorted by size, ``idealAvg = pods / domains``,
   two pointers from the smallest (i) and largest (j) domain; each step moves
   ``min(ceil(len(j) - idealAvg), ceil(idealAvg - len(i)), ceil((skew - maxSkew) / 2))``
   pods from the back of j's list (ordered: non-evictable, with node
   selector/affinity, then by descending priority — so the back holds
   evictable, unconstrained, low-priority pods), until every pair is within
   ``maxSkew``;
3. the chosen pods that the evictor's filter accepts (and, with
   ``topologyBalanceNodeFit``, that fit some other node) are evicted, after
   the preEvictionFilter.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from emulator.api.labels import LabelSelector
from emulator.api.types import Obj
from emulator.descheduler import utils
from emulator.descheduler.evictions import (
    EvictionError,
    EvictionLimitError,
    EvictionTotalLimitError,
)
from emulator.descheduler.framework import Handle, Status
from emulator.descheduler.plugins.removepodsviolatingtopologyspreadconstraint.args import (
    RemovePodsViolatingTopologySpreadConstraintArgs,
    parse_args,
)

__all__ = ["EXTENSION_POINTS", "NAME", "RemovePodsViolatingTopologySpreadConstraint", "balance_domains", "new",
           "parse_args"]

NAME = "RemovePodsViolatingTopologySpreadConstraint"
EXTENSION_POINTS = ("balance",)


def balance_domains(domains: list[list[Obj]], max_skew: int) -> list[Obj]:
    """``balanceDomains``: the pods to move so every domain is within ``max_skew`` of the others.

    ``domains`` are pod lists, each ordered so its back holds the pods to move first; they are
    sorted by size here and changed in place (moved pods are appended to the receiving domain).
    """
    domains.sort(key=len)
    total = sum(len(d) for d in domains)
    if not domains:
        return []
    ideal = total / len(domains)
    chosen: list[Obj] = []
    i, j = 0, len(domains) - 1
    while i < j:
        if len(domains[j]) <= ideal:  # j cannot give without falling below the average
            j -= 1
            continue
        skew = len(domains[j]) - len(domains[i])
        if skew <= max_skew:
            i += 1
            continue
        above = math.ceil(len(domains[j]) - ideal)
        below = math.ceil(ideal - len(domains[i]))
        half_skew = math.ceil((skew - max_skew) / 2)
        move = int(min(above, below, half_skew))
        if move <= 0:
            i += 1
            continue
        moved = domains[j][len(domains[j]) - move:]
        chosen.extend(moved)
        del domains[j][len(domains[j]) - move:]
        domains[i].extend(moved)
    return chosen


# A pod's spread constraints, by uid: (resourceVersion, [(dedup key, constraint, parsed selector or None when it
# does not parse, the selector's key)]); and parsed selectors by key. Read from the pod alone: kept across passes.
Declared = list[tuple[str, Obj, LabelSelector | None, str]]
_selectors: dict[str, LabelSelector | None] = {}
_CACHE_MAX = 200_000


def _selector(key: str, raw: Any) -> LabelSelector | None:
    if key in _selectors:
        return _selectors[key]
    try:
        selector: LabelSelector | None = LabelSelector.from_dict(raw)
    except Exception:
        selector = None
    if len(_selectors) >= _CACHE_MAX:
        _selectors.clear()
    _selectors[key] = selector
    return selector


def _declare(pod: Obj) -> Declared:
    out: Declared = []
    for c in pod["spec"].get("topologySpreadConstraints") or ():
        raw = c.get("labelSelector")
        selector_key = json.dumps(raw, sort_keys=True)
        key = json.dumps([c.get("maxSkew"), c.get("topologyKey"), c.get("whenUnsatisfiable"), raw], sort_keys=True)
        out.append((key, c, _selector(selector_key, raw), selector_key))
    return out


_declared = utils.PodMemo(_declare, _CACHE_MAX)


def _has_placement_constraints(pod: Obj) -> bool:
    spec = pod["spec"]
    return bool(spec.get("nodeSelector") or (spec.get("affinity") or {}).get("nodeAffinity"))


class RemovePodsViolatingTopologySpreadConstraint:
    name = NAME

    def __init__(self, args: RemovePodsViolatingTopologySpreadConstraintArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle

    def _constraints(self, pods: Sequence[Obj]) -> list[tuple[Obj, Obj, LabelSelector | None, str]]:
        """Distinct (constraint, declaring pod, its parsed selector, the selector's key) the args count, in the
        order first seen."""
        out: dict[str, tuple[Obj, Obj, LabelSelector | None, str]] = {}
        for pod in pods:
            if self.args.namespaces is not None and not self.args.namespaces.allows(
                    pod["metadata"].get("namespace") or ""):
                continue
            if self.args.label_selector is not None and not self.args.label_selector.matches(
                    pod["metadata"].get("labels")):
                continue
            for key, c, selector, selector_key in _declared(pod):
                if (c.get("whenUnsatisfiable") or "DoNotSchedule") not in self.args.constraints:
                    continue
                if key not in out:
                    out[key] = (c, pod, selector, selector_key)
        return list(out.values())

    def balance(self, nodes: Sequence[Obj]) -> Status | None:
        snapshot, evictor = self.handle.snapshot, self.handle.evictor
        node_map = {n["metadata"]["name"]: n for n in nodes}
        declaring: dict[str, list[Obj]] = {}  # namespace -> pods that declare a constraint
        spreading = snapshot.having("topologySpread")
        for name in node_map:
            for pod in spreading.get(name, ()):
                declaring.setdefault(pod["metadata"].get("namespace") or "", []).append(pod)
        values_by_key: dict[str, dict[str, str]] = {}  # topology key -> node -> value
        distinct: dict[str, list[str]] = {}  # topology key -> its values, in node order
        chosen: dict[str, Obj] = {}

        def node_values(key: str) -> dict[str, str]:
            if key not in values_by_key:
                values_by_key[key] = {name: (n["metadata"].get("labels") or {})[key] for name, n in node_map.items()
                                      if key in (n["metadata"].get("labels") or {})}
            return values_by_key[key]

        def domain_values(key: str) -> list[str]:
            if key not in distinct:
                distinct[key] = list(dict.fromkeys(node_values(key).values()))
            return distinct[key]

        for namespace, pods in declaring.items():
            for constraint, owner, selector, selector_key in self._constraints(pods):
                key = constraint.get("topologyKey") or ""
                if selector is None:
                    continue
                values = node_values(key)
                spec = owner["spec"]
                if spec.get("nodeSelector") or (spec.get("affinity") or {}).get("nodeAffinity"):
                    domains: dict[str, list[Obj]] = {v: [] for name, v in values.items()
                                                     if snapshot.matches_node_selector(owner, node_map[name])}
                else:
                    domains = {v: [] for v in domain_values(key)}
                for pod in snapshot.select(namespace, selector, memo_key=selector_key):
                    value = values.get(pod["spec"].get("nodeName") or "")
                    if value is not None and value in domains:
                        domains[value].append(pod)
                sizes = [len(d) for d in domains.values()]
                max_skew = int(constraint.get("maxSkew") or 1)
                if not sizes or max(sizes) - min(sizes) <= max_skew:
                    continue
                ordered = [sorted(d, key=lambda p: (evictor.filter(p), not _has_placement_constraints(p),
                                                    -(utils.priority(p) or 0))) for d in domains.values()]
                for pod in balance_domains(ordered, max_skew):
                    if not evictor.filter(pod):
                        continue
                    if self.args.topology_balance_node_fit and not snapshot.pod_fits_any_other_node(pod, nodes):
                        continue
                    chosen[utils.pod_key(pod)] = pod
        for pod in chosen.values():
            if evictor.node_limit_reached(pod["spec"].get("nodeName") or ""):
                continue
            if not evictor.pre_eviction_filter(pod):
                continue
            try:
                evictor.evict(pod, NAME)
            except EvictionTotalLimitError:
                return None
            except (EvictionLimitError, EvictionError):
                continue
        return None


def new(args: Any, handle: Handle) -> RemovePodsViolatingTopologySpreadConstraint:
    return RemovePodsViolatingTopologySpreadConstraint(args, handle)
