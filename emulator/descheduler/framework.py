"""The descheduling framework: extension points, the handle plugins get, profiles (upstream ``pkg/framework``).

* Extension points (``pkg/framework/types``): a *deschedule* plugin looks at
  each node and evicts pods that violate something there (taints, affinity,
  age ...); a *balance* plugin looks across nodes and evicts to even them out
  (duplicates, utilization, topology spread); *filter* and *preEvictionFilter*
  plugins (evictors, :class:`EvictorPlugin`) say whether a pod may be evicted
  at all — the first when a plugin lists candidates, the second just before
  the eviction. Deschedule and balance return a :class:`Status` (None: fine).
* :class:`ClusterSnapshot` — what one descheduling pass sees: nodes, pods by
  node (upstream ``GetPodsAssignedToNodeFunc`` over the pod informer's node
  index), priority classes, namespaces, PDBs, and actual usage from
  ``metrics.k8s.io`` when a plugin asks for it. A snapshot does not change
  during a pass, so it memoises what plugins ask again and again. The pod
  indexes (running pods per node, what they request, the label and owner
  indexes spanning nodes, the pods with node affinity, required
  anti-affinity, spread constraints, restarts or phase Failed, each node's
  pods in eviction order) are the descheduler's
  :class:`~emulator.descheduler.podindex.PodIndex`, kept across passes: only
  the nodes whose pods changed are indexed again. NodeFit facts (taints,
  allocatable) are computed once per node per pass; a pod's parsed placement
  is kept by uid and resourceVersion, and the required-placement verdict per
  (placement, node labels) across passes.
* :class:`Handle` — the snapshot, the clock and the profile's
  :class:`ProfileEvictor` (the evictors' filters in front of the shared
  :class:`~emulator.descheduler.evictions.PodEvictor`; filter verdicts are
  memoised per pod for the pass).
* :class:`RunningProfile` — a profile's plugins built from the policy
  (``profile.go``): ``run_deschedule`` and ``run_balance`` call each enabled
  plugin in order, timing it (``descheduler_descheduler_strategy_duration_seconds``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from emulator.api.labels import LabelSelector
from emulator.api.nodeaffinity import RequiredNodeAffinity
from emulator.api.taints import Taint, node_taints
from emulator.api.types import Obj
from emulator.clock import Clock
from emulator.descheduler import utils
from emulator.descheduler.api import Namespaces, Profile, plugin_module
from emulator.descheduler.evictions import (
    EvictionError,
    EvictionLimitError,
    EvictionNodeLimitError,
    EvictionTotalLimitError,
    EvictOptions,
    PodEvictor,
)
from emulator.descheduler.metrics import STRATEGY_DURATION
from emulator.descheduler.podindex import PodIndex

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Status:
    """``frameworktypes.Status``: None or a Status without ``err`` means success."""

    err: str = ""


@runtime_checkable
class DeschedulePlugin(Protocol):
    name: str

    def deschedule(self, nodes: Sequence[Obj]) -> Status | None: ...


@runtime_checkable
class BalancePlugin(Protocol):
    name: str

    def balance(self, nodes: Sequence[Obj]) -> Status | None: ...


@runtime_checkable
class EvictorPlugin(Protocol):
    name: str

    def filter(self, pod: Obj) -> bool: ...

    def pre_eviction_filter(self, pod: Obj) -> bool: ...


# Usage of one node or pod from metrics.k8s.io: {"cpu": millicores, "memory": bytes}.
Usage = dict[str, int]


@dataclass
class ClusterSnapshot:
    """The cluster as one pass sees it. ``pods_by_node`` holds every pod assigned to a node, terminal ones too."""

    nodes: list[Obj]
    pods_by_node: dict[str, list[Obj]]
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    namespaces: Mapping[str, Obj] = field(default_factory=dict)
    pdbs: list[Obj] = field(default_factory=list)
    # Actual usage (metrics.k8s.io): loaded on first use by the callables below.
    node_usage_source: Callable[[], dict[str, Usage]] | None = None
    pod_usage_source: Callable[[], dict[tuple[str, str], Usage]] | None = None
    _node_usage: dict[str, Usage] | None = None
    _pod_usage: dict[tuple[str, str], Usage] | None = None
    _caches: dict[str, dict[Any, Any]] = field(default_factory=dict)
    # Kept across passes by the descheduler (a snapshot without one builds its own on first use).
    index: PodIndex | None = None

    @classmethod
    def build(cls, nodes: Iterable[Obj], pods: Iterable[Obj], **kwargs: Any) -> ClusterSnapshot:
        by_node: dict[str, list[Obj]] = {}
        for pod in pods:
            node = pod["spec"].get("nodeName")
            if node:
                by_node.setdefault(node, []).append(pod)
        return cls(list(nodes), by_node, **kwargs)

    def pods_on(self, node: str) -> list[Obj]:
        """Every pod assigned to ``node`` (``ListAllPodsOnANode`` without a filter)."""
        return self.pods_by_node.get(node, [])

    def active_pods_on(self, node: str) -> list[Obj]:
        """``ListPodsOnANode``: Succeeded and Failed pods do not occupy the node."""
        return self._indexed()["active"].get(node, [])

    def active_pods_low_to_high(self, node: str) -> list[Obj]:
        """:meth:`active_pods_on` sorted by ``utils.sort_pods_low_to_high`` (kept across passes while the node's
        pods stay the same; a stable sort, so filtering this list gives the sorted filtered pods)."""
        return self._index().low_to_high(node)

    def all_pods(self) -> Iterable[Obj]:
        for pods in self.pods_by_node.values():
            yield from pods

    def having(self, feature: str) -> dict[str, list[Obj]]:
        """node -> its pods with ``feature``, in node order.

        ``nodeAffinity``, ``podAntiAffinity`` (required terms), ``topologySpread`` and ``restarts``
        (some container restarted) index running pods; ``failed`` the Failed ones. Plugins look at
        these few pods instead of every pod of the cluster, as informer indexes let upstream do.
        """
        return self._indexed()[feature]

    def by_first_owner(self) -> dict[str, list[Obj]]:
        """Running pods by the uid (else name) of their first ownerReference, in node order."""
        index = self._index()
        return {first: index.owner_pods(first) for first in index.owner_keys()}

    def multi_owned(self) -> list[Obj]:
        """Running pods with more than one ownerReference."""
        return self._index().multi_owned()

    def crowded_owners(self) -> Mapping[str, int]:
        """First owners (uid, else name) with two or more running pods on one node: RemoveDuplicates' candidates."""
        return self._index().crowded_owners()

    def owner_keys(self) -> list[str]:
        return self._index().owner_keys()

    def owner_pods(self, first: str) -> list[Obj]:
        return self._index().owner_pods(first)

    def _index(self) -> PodIndex:
        """The pod index, brought to this snapshot's pods (once per pass: it is kept across passes)."""
        index = self.index
        if index is None:
            index = self.index = PodIndex()
        if index.source is not self.pods_by_node or "indexes" not in self._caches:
            self._caches["indexes"] = index.update(self.pods_by_node)
        return index

    def _indexed(self) -> dict[str, Any]:
        """This pass's per-node indexes: running pods, what they request, Failed pods, the feature indexes."""
        indexes = self._caches.get("indexes")
        if indexes is None:
            self._index()
            indexes = self._caches["indexes"]
        return indexes

    # -- memoised facts (a snapshot does not change during a pass) -------------------------------------
    def _cache(self, name: str) -> dict[Any, Any]:
        cache = self._caches.get(name)
        if cache is None:
            cache = self._caches[name] = {}
        return cache

    def node_taints(self, node: Obj) -> tuple[Taint, ...]:
        cache = self._cache("taints")
        name = node["metadata"]["name"]
        if name not in cache:
            cache[name] = node_taints(node)
        return cache[name]

    def allocatable(self, node: Obj) -> dict[str, int]:
        cache = self._cache("allocatable")
        name = node["metadata"]["name"]
        if name not in cache:
            cache[name] = utils.allocatable(node)
        return cache[name]

    def requested(self, node: str) -> dict[str, int]:
        """What the node's running pods request (``pods``: how many there are)."""
        return self._indexed()["requested"].get(node) or {"pods": 0}

    def required_affinity(self, pod: Obj) -> RequiredNodeAffinity:
        return _parsed_placement(_placement_key(pod), pod)

    def matches_node_selector(self, pod: Obj, node: Obj) -> bool:
        """``PodMatchNodeSelector``: nodeSelector and required node affinity."""
        spec = pod["spec"]
        if not spec.get("nodeSelector") and not (spec.get("affinity") or {}).get("nodeAffinity"):
            return True
        # Pods of one owner share their placement: the verdict is kept per (placement, node) across passes,
        # while the node's labels stay the same (they and the name are all a node selector reads).
        key = _placement_key(pod)
        meta = node["metadata"]
        name, labels = meta["name"], meta.get("labels") or {}
        by_node = self._index().placement_verdicts
        entry = by_node.get(name)
        if entry is None or (entry[0] is not labels and entry[0] != labels):
            if len(by_node) >= _PLACEMENT_CACHE_MAX:
                by_node.clear()
            entry = by_node[name] = (labels, {})
        verdicts = entry[1]
        verdict = verdicts.get(key)
        if verdict is None:
            verdict = verdicts[key] = _parsed_placement(key, pod).matches(labels, name)
        return verdict

    def _fit_facts(self, node: Obj) -> tuple[tuple[Taint, ...], bool, dict[str, int], dict[str, int]]:
        """(NoSchedule-relevant taints, unschedulable, allocatable, requested) of a node, once per pass."""
        cache = self._cache("fit")
        name = node["metadata"]["name"]
        facts = cache.get(name)
        if facts is None:
            facts = cache[name] = (self.node_taints(node), utils.is_unschedulable(node), self.allocatable(node),
                                   self.requested(name))
        return facts  # type: ignore[no-any-return]

    def pod_fits_node(self, pod: Obj, node: Obj) -> bool:
        """``NodeFit``: NoSchedule taints tolerated, node selector / affinity, schedulable, resources."""
        taints, unschedulable, alloc, used = self._fit_facts(node)
        if taints and not utils.tolerates_taints(pod, taints):
            return False
        if unschedulable or not self.matches_node_selector(pod, node):
            return False
        if used.get("pods", 0) + 1 > alloc.get("pods", 110):
            return False
        for name, amount in utils.requests_of(pod).items():
            if amount and used.get(name, 0) + amount > alloc.get(name, 0):
                return False
        return True

    def pod_fits_any_other_node(self, pod: Obj, nodes: Iterable[Obj]) -> bool:
        """``PodFitsAnyOtherNode``: some node other than the pod's own passes :meth:`pod_fits_node`."""
        current = pod["spec"].get("nodeName")
        return any(n["metadata"]["name"] != current and self.pod_fits_node(pod, n) for n in nodes)

    def pod_fits_any_node(self, pod: Obj, nodes: Iterable[Obj]) -> bool:
        return any(self.pod_fits_node(pod, n) for n in nodes)

    def select(self, namespace: str, selector: LabelSelector, *, memo_key: str | None = None) -> list[Obj]:
        """The running pods of ``namespace`` (on nodes) that ``selector`` matches, through a label index.

        With ``memo_key`` (a key for the selector: the same key, the same selector) the answer is kept across
        passes while the label bucket it came from is unchanged (every pod it can match is in that bucket).
        Callers must not change the list they get.
        """
        # Every bucket holds a superset of the matching pods in node order: the smallest one gives the same list.
        index = self._index()
        item: tuple[str, str] | None = None
        size = index.label_count(namespace, None)
        for key, _, _ in selector.requirements:
            value = selector.exact(key)
            if value is not None:
                narrowed = index.label_count(namespace, (key, value))
                if narrowed < size:
                    item, size = (key, value), narrowed
        if not size:
            return []
        bucket = index.label_pods(namespace, item)
        if memo_key is None:
            return [p for p in bucket if selector.matches(p["metadata"].get("labels"))]
        memo = index.selected
        hit = memo.get((namespace, memo_key))
        if hit is not None and hit[1] is bucket:
            return hit[2]
        out = [p for p in bucket if selector.matches(p["metadata"].get("labels"))]
        memo[(namespace, memo_key)] = ((namespace, item), bucket, out)
        return out

    def node_usage(self) -> dict[str, Usage]:
        if self._node_usage is None:
            self._node_usage = self.node_usage_source() if self.node_usage_source else {}
        return self._node_usage

    def pod_usage(self) -> dict[tuple[str, str], Usage]:
        if self._pod_usage is None:
            self._pod_usage = self.pod_usage_source() if self.pod_usage_source else {}
        return self._pod_usage


# A pod's placement (nodeSelector and required node affinity) as a key, by uid and resourceVersion; and
# each key's parsed affinity. Both are read from the pod alone, so they are kept across passes.
_placements: dict[str, RequiredNodeAffinity] = {}
_PLACEMENT_CACHE_MAX = 200_000


def _placement_text(pod: Obj) -> str:
    spec = pod["spec"]
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    return repr((spec.get("nodeSelector"), required))


_placement_key = utils.PodMemo(_placement_text, _PLACEMENT_CACHE_MAX)


def _parsed_placement(key: str, pod: Obj) -> RequiredNodeAffinity:
    parsed = _placements.get(key)
    if parsed is None:
        if len(_placements) >= _PLACEMENT_CACHE_MAX:
            _placements.clear()
        parsed = _placements[key] = utils.required_affinity(pod)
    return parsed


class ProfileEvictor:
    """``evictorImpl``: the profile's filter and preEvictionFilter plugins in front of the shared PodEvictor."""

    def __init__(self, profile: str, pod_evictor: PodEvictor, filters: Sequence[EvictorPlugin],
                 pre_eviction_filters: Sequence[EvictorPlugin]) -> None:
        self.profile = profile
        self.pod_evictor = pod_evictor
        self.filters = list(filters)
        self.pre_eviction_filters = list(pre_eviction_filters)
        # Verdicts by id(pod): the snapshot's pod objects live for the whole pass, so ids stay unique.
        self._filtered: dict[int, bool] = {}
        self._pre_filtered: dict[int, bool] = {}
        self._options: dict[str, EvictOptions] = {}  # per strategy: one pass may evict thousands

    def filter(self, pod: Obj) -> bool:
        """Every filter plugin accepts ``pod`` (memoised per pod for the pass: plugins ask about the same pods)."""
        key = id(pod)
        verdict = self._filtered.get(key)
        if verdict is None:
            verdict = True
            for f in self.filters:
                if not f.filter(pod):
                    verdict = False
                    break
            self._filtered[key] = verdict
        return verdict

    def pre_eviction_filter(self, pod: Obj) -> bool:
        key = id(pod)
        verdict = self._pre_filtered.get(key)
        if verdict is None:
            verdict = self._pre_filtered[key] = all(f.pre_eviction_filter(pod) for f in self.pre_eviction_filters)
        return verdict

    def evict(self, pod: Obj, strategy: str) -> None:
        """Evict (raises limit errors and :class:`EvictionError`, as upstream's ``Evict`` returns them)."""
        options = self._options.get(strategy)
        if options is None:
            options = self._options[strategy] = EvictOptions(strategy=strategy, profile=self.profile)
        self.pod_evictor.evict_pod(pod, options)

    def node_limit_reached(self, node: str) -> bool:
        limit = self.pod_evictor.max_per_node
        return limit is not None and self.pod_evictor.node_evicted(node) >= limit


@dataclass
class Handle:
    """What a plugin is built with (``frameworktypes.Handle``)."""

    snapshot: ClusterSnapshot
    clock: Clock
    evictor: ProfileEvictor
    all_nodes: list[Obj] = field(default_factory=list)  # ready nodes the pass considers (NodeFit looks at these)


def pod_filter(handle: Handle, *, namespaces: Namespaces | None = None, label_selector: Any = None,
               pre_eviction: bool = True) -> Callable[[Obj], bool]:
    """``podutil.NewOptions().WithFilter(...).WithNamespaces(...).WithLabelSelector(...)``."""
    evictor = handle.evictor

    def accept(pod: Obj) -> bool:
        if namespaces is not None and not namespaces.allows(pod["metadata"].get("namespace") or ""):
            return False
        if label_selector is not None and not label_selector.matches(pod["metadata"].get("labels")):
            return False
        if not evictor.filter(pod):
            return False
        return not pre_eviction or evictor.pre_eviction_filter(pod)

    return accept


def evict_each(handle: Handle, pods: Iterable[Obj], strategy: str) -> bool:
    """Evict ``pods`` of one node in order; False when the total limit stops the whole plugin.

    A per-node limit ends this node; a namespace limit or a refused eviction (429 ...) is logged
    and the next pod tried — the switch every upstream deschedule plugin has.
    """
    for pod in pods:
        try:
            handle.evictor.evict(pod, strategy)
        except EvictionTotalLimitError:
            return False
        except EvictionNodeLimitError:
            return True
        except (EvictionLimitError, EvictionError):
            continue
    return True


class RunningProfile:
    """One policy profile's plugins, instantiated for one pass (upstream ``profile.NewProfile``)."""

    def __init__(self, profile: Profile, snapshot: ClusterSnapshot, clock: Clock, pod_evictor: PodEvictor,
                 nodes: list[Obj]) -> None:
        self.name = profile.name
        built: dict[str, Any] = {}
        evictor = ProfileEvictor(profile.name, pod_evictor, [], [])
        self.handle = Handle(snapshot, clock, evictor, nodes)

        def plugin(name: str) -> Any:
            if name not in built:
                module = plugin_module(name, f"profiles[{profile.name}]")
                built[name] = module.new(profile.args_of(name), self.handle)
            return built[name]

        # Evictors first: other plugins capture the evictor's filters when they are built.
        evictor.filters.extend(plugin(n) for n in profile.plugins.get("filter", ()))
        evictor.pre_eviction_filters.extend(plugin(n) for n in profile.plugins.get("preEvictionFilter", ()))
        self.deschedule_plugins = [plugin(n) for n in profile.plugins.get("deschedule", ())]
        self.balance_plugins = [plugin(n) for n in profile.plugins.get("balance", ())]

    def _run(self, plugins: list[Any], point: str, nodes: Sequence[Obj]) -> list[str]:
        errors: list[str] = []
        pod_evictor = self.handle.evictor.pod_evictor
        for pl in plugins:
            before = pod_evictor.total
            started = time.perf_counter()
            try:
                status = getattr(pl, point)(nodes)
            except Exception as e:  # one broken plugin must not stop the others
                log.exception("descheduler: plugin %s failed", pl.name)
                status = Status(str(e))
            STRATEGY_DURATION.labels(pl.name, self.name).observe(time.perf_counter() - started)
            if status is not None and status.err:
                errors.append(f"plugin {pl.name!r} finished with error: {status.err}")
            log.debug("descheduler: profile %s %s %s evicted %d pods", self.name, point, pl.name,
                      pod_evictor.total - before)
        return errors

    def run_deschedule(self, nodes: Sequence[Obj]) -> list[str]:
        return self._run(self.deschedule_plugins, "deschedule", nodes)

    def run_balance(self, nodes: Sequence[Obj]) -> list[str]:
        return self._run(self.balance_plugins, "balance", nodes)
