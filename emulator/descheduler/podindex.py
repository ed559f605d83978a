"""The descheduler's pod indexes, kept across passes (upstream: the pod informer's indexers).

Upstream's descheduler lists pods through the shared informer's indexers
(``GetPodsAssignedToNodeFunc`` over the ``nodeName`` index) and, for the plugins
that look across nodes (RemoveDuplicates' owners, the label selectors of
RemovePodsViolatingInterPodAntiAffinity and RemovePodsViolatingTopologySpreadConstraint),
lists and filters the namespace's pods. Here one :class:`PodIndex` per
descheduler keeps those indexes between passes and brings them up to date from
what changed, node by node:

* a *node part* (:class:`NodePart`) is what one node's pods give a pass: its
  running pods, their summed requests, its Failed pods, the running pods with
  node affinity / required anti-affinity / spread constraints / restarts, and
  the node-local buckets of the cross-node indexes (first owner -> pods,
  (namespace, label) -> pods, (namespace, None) -> the namespace's pods, pods with
  several owners). A node holding the very pod objects of the last pass at the
  same resourceVersions keeps its part; the informer hands the controller the
  same objects until they change.
* the cross-node indexes hold, per key, each node's bucket; a changed node
  swaps its buckets (the cost is the changed nodes' keys, not the cluster's
  pods). A key's list in node order (the order a walk node by node gives) is
  built on first use and kept until a node touching the key changes, or the
  node order does.
* the owners with two or more running pods on one node (RemoveDuplicates'
  candidates) are counted per node part and summed.

:meth:`PodIndex.update` leaves the indexes equal to those a fresh
:class:`PodIndex` builds from the same pods (tests/unit/descheduler/test_podindex.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import itemgetter
from typing import Any

from emulator.api.types import Obj
from emulator.descheduler import utils

FEATURES = ("nodeAffinity", "podAntiAffinity", "topologySpread", "restarts")
_F_NODE_AFFINITY, _F_ANTI_AFFINITY, _F_SPREAD, _F_RESTARTED = 1, 2, 4, 8
_FEATURE_BITS = tuple(enumerate((_F_NODE_AFFINITY, _F_ANTI_AFFINITY, _F_SPREAD, _F_RESTARTED)))
_METADATA, _RV = itemgetter("metadata"), itemgetter("resourceVersion")

LabelKey = tuple[str, Any]  # (namespace, (label, value)), or (namespace, None) for every pod of the namespace
# What a pass needs to know of a pod, by uid: (resourceVersion, phase, requests, feature bits, first owner,
# several owners, label index keys). A pod's facts cannot change under one resourceVersion, and the informer
# hands the controller the same pods pass after pass, so most passes compute none.
Facts = tuple[Any, Any, tuple[tuple[str, int], ...], int, str | None, bool, tuple[LabelKey, ...]]
_FACTS_CACHE_MAX = 500_000


def _restarted(statuses: list[Obj] | None) -> bool:
    if statuses:
        for c in statuses:
            if c.get("restartCount"):
                return True
    return False


def _facts(pod: Obj) -> Facts:
    meta = pod["metadata"]
    rv = meta.get("resourceVersion")
    status, spec = pod.get("status") or {}, pod["spec"]
    flags = 0
    affinity = spec.get("affinity")
    if affinity:
        if affinity.get("nodeAffinity"):
            flags |= _F_NODE_AFFINITY
        if (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution"):
            flags |= _F_ANTI_AFFINITY
    if spec.get("topologySpreadConstraints"):
        flags |= _F_SPREAD
    if _restarted(status.get("containerStatuses")) or _restarted(status.get("initContainerStatuses")):
        flags |= _F_RESTARTED
    refs = meta.get("ownerReferences")
    first = (refs[0].get("uid") or refs[0].get("name") or "") if refs else None
    ns = meta.get("namespace") or ""
    label_keys: tuple[LabelKey, ...] = ((ns, None), *((ns, item) for item in (meta.get("labels") or {}).items()))
    facts: Facts = (rv, status.get("phase"), tuple(utils.requests_of(pod).items()), flags, first,
                    bool(refs) and len(refs) > 1, label_keys)
    return facts


pod_facts = utils.PodMemo(_facts, _FACTS_CACHE_MAX)


class NodePart:
    """What one node's pods give a pass; valid while the node holds the same objects at the same versions
    (the part holds the objects, so their ids cannot be reused meanwhile)."""

    __slots__ = ("crowded", "failed", "features", "ids", "labels", "multi", "owners", "running", "sorted_running",
                 "total", "versions")

    def __init__(self, pods: list[Obj], versions: tuple[Any, ...], ids: tuple[int, ...]) -> None:
        self.ids, self.versions = ids, versions
        running: list[Obj] = []
        total: dict[str, int] = {}
        failed: list[Obj] = []
        features: tuple[list[Obj], ...] = ([], [], [], [])  # by the _F_* bits, in order
        owners: dict[str, list[Obj]] = {}
        labels: dict[LabelKey, list[Obj]] = {}
        multi: list[Obj] = []
        cached_facts = pod_facts.cache.get
        for pod in pods:
            meta = pod["metadata"]
            hit = cached_facts(meta.get("uid"))  # pod_facts' own look-up, inlined: this loop sees every pod
            facts = hit[1] if hit is not None and hit[0] == meta.get("resourceVersion") else pod_facts(pod)
            _, phase, requests, flags, first, several_owners, label_keys = facts
            if phase in ("Failed", "Succeeded"):
                if phase == "Failed":
                    failed.append(pod)
                continue
            running.append(pod)
            for name, amount in requests:
                total[name] = total.get(name, 0) + amount
            if flags:
                for k, bit in _FEATURE_BITS:
                    if flags & bit:
                        features[k].append(pod)
            if first is not None:
                if several_owners:
                    multi.append(pod)
                bucket = owners.get(first)
                if bucket is None:
                    owners[first] = [pod]
                else:
                    bucket.append(pod)
            for key in label_keys:
                bucket = labels.get(key)
                if bucket is None:
                    labels[key] = [pod]
                else:
                    bucket.append(pod)
        total["pods"] = len(running)
        self.running, self.total, self.failed = running, total, failed
        self.features = [(k, f) for k, f in enumerate(features) if f]
        self.owners, self.labels, self.multi = owners, labels, multi
        self.crowded = tuple(first for first, pods in owners.items() if len(pods) > 1)
        self.sorted_running: list[Obj] | None = None

    def low_to_high(self) -> list[Obj]:
        """The running pods in eviction order (``SortPodsBasedOnPriorityLowToHigh``: priority and QoS, both
        read from the pod alone), sorted once while the node's pods stay the same."""
        if self.sorted_running is None:
            self.sorted_running = utils.sort_pods_low_to_high(list(self.running))
        return self.sorted_running


class PodIndex:
    """Per-node parts and the cross-node indexes over them, updated pass by pass (see the module docstring)."""

    def __init__(self) -> None:
        self.parts: dict[str, NodePart] = {}
        self.source: Mapping[str, list[Obj]] | None = None  # the pods_by_node the indexes were last brought to
        self._order: tuple[str, ...] = ()
        self._pos: dict[str, int] = {}
        self._owners: dict[str, dict[str, list[Obj]]] = {}  # first owner -> node -> its running pods there
        self._labels: dict[LabelKey, dict[str, list[Obj]]] = {}
        self._label_counts: dict[LabelKey, int] = {}  # how many pods each label bucket holds
        self._multi: dict[str, list[Obj]] = {}
        self._crowded: dict[str, int] = {}  # first owner -> nodes holding two or more of its running pods
        self._lists: dict[tuple[str, Any], list[Obj]] = {}  # a key's pods in node order, built on first use
        # node -> (its labels, placement key -> whether they match): ClusterSnapshot.matches_node_selector's
        # verdicts, kept across passes while the node's labels stay the same.
        self.placement_verdicts: dict[str, tuple[Mapping[str, str], dict[str, bool]]] = {}
        # (namespace, selector key) -> (label key, the bucket it was answered from, the matching pods): select's
        # answers, valid while that bucket's list is the same object (any change to it builds a new one).
        self.selected: dict[tuple[str, str], tuple[LabelKey, list[Obj], list[Obj]]] = {}
        self.changed_nodes = 0  # how many node parts the last update rebuilt (for tests and the bench)

    def update(self, pods_by_node: Mapping[str, list[Obj]]) -> dict[str, Any]:
        """Bring the indexes to ``pods_by_node``; returns this pass's per-node indexes (running pods, requests,
        Failed pods, the feature indexes)."""
        order = tuple(pods_by_node)
        reordered = order != self._order
        if reordered:
            self._order, self._pos = order, {name: i for i, name in enumerate(order)}
            self._lists.clear()
            for name in [name for name in self.parts if name not in self._pos]:
                self._unapply(name, self.parts.pop(name))
        active: dict[str, list[Obj]] = {}
        requested: dict[str, dict[str, int]] = {}
        failed: dict[str, list[Obj]] = {}
        features: tuple[dict[str, list[Obj]], ...] = ({}, {}, {}, {})
        parts = self.parts
        changed = 0
        for node, pods in pods_by_node.items():
            try:  # in C: this runs for every pod of the cluster
                versions = tuple(map(_RV, map(_METADATA, pods)))
            except KeyError:  # a pod without a resourceVersion (not from the store): never reused
                versions = tuple([p["metadata"].get("resourceVersion") for p in pods])
            ids = tuple(map(id, pods))
            part = parts.get(node)
            if part is None or part.ids != ids or part.versions != versions or None in versions:
                new = NodePart(pods, versions, ids)
                if part is not None:
                    self._unapply(node, part)
                self._apply(node, new)
                parts[node] = part = new
                changed += 1
            active[node] = part.running
            requested[node] = part.total
            if part.failed:
                failed[node] = part.failed
            for k, feature_pods in part.features:
                features[k][node] = feature_pods
        self.source, self.changed_nodes = pods_by_node, changed
        if (changed or reordered) and self.selected:  # answers whose bucket changed would never be used again
            lists = self._lists
            self.selected = {k: v for k, v in self.selected.items() if lists.get(("l", v[0])) is v[1]}
        return {"active": active, "requested": requested, "failed": failed, **dict(zip(FEATURES, features,
                                                                                        strict=True))}

    def _apply(self, node: str, part: NodePart) -> None:
        lists = self._lists
        for index, tag, buckets in ((self._owners, "o", part.owners), (self._labels, "l", part.labels)):
            for key, pods in buckets.items():
                per_node = index.get(key)
                if per_node is None:
                    index[key] = {node: pods}
                else:
                    per_node[node] = pods
                    lists.pop((tag, key), None)
        counts = self._label_counts
        for key, pods in part.labels.items():
            counts[key] = counts.get(key, 0) + len(pods)
        if part.multi:
            self._multi[node] = part.multi
            lists.pop(("m", None), None)
        for first in part.crowded:
            self._crowded[first] = self._crowded.get(first, 0) + 1

    def _unapply(self, node: str, part: NodePart) -> None:
        lists = self._lists
        for index, tag, buckets in ((self._owners, "o", part.owners), (self._labels, "l", part.labels)):
            for key in buckets:
                per_node = index[key]
                del per_node[node]
                if not per_node:
                    del index[key]
                lists.pop((tag, key), None)
        counts = self._label_counts
        for key, pods in part.labels.items():
            left = counts[key] - len(pods)
            if left:
                counts[key] = left
            else:
                del counts[key]
        if part.multi:
            del self._multi[node]
            lists.pop(("m", None), None)
        for first in part.crowded:
            left = self._crowded[first] - 1
            if left:
                self._crowded[first] = left
            else:
                del self._crowded[first]

    def _list(self, tag: str, key: Any, per_node: Mapping[str, list[Obj]] | None) -> list[Obj]:
        """The pods of every node's bucket, in node order (kept until a node touching the key changes)."""
        cached = self._lists.get((tag, key))
        if cached is not None:
            return cached
        if not per_node:
            return []
        if len(per_node) == 1:
            out = list(next(iter(per_node.values())))
        else:
            pos = self._pos
            out = [p for node in sorted(per_node, key=pos.__getitem__) for p in per_node[node]]
        self._lists[(tag, key)] = out
        return out

    def low_to_high(self, node: str) -> list[Obj]:
        part = self.parts.get(node)
        return part.low_to_high() if part is not None else []

    # -- what the snapshot reads (callers must not change the lists they get) -------------------------------------
    def owner_pods(self, first: str) -> list[Obj]:
        """Running pods whose first ownerReference has this uid (else name), in node order."""
        return self._list("o", first, self._owners.get(first))

    def owner_keys(self) -> list[str]:
        return list(self._owners)

    def label_pods(self, namespace: str, item: tuple[str, str] | None) -> list[Obj]:
        """Running pods of ``namespace`` carrying the label ``item`` (None: all of them), in node order."""
        key = (namespace, item)
        return self._list("l", key, self._labels.get(key))

    def label_keys(self) -> list[LabelKey]:
        return list(self._labels)

    def label_count(self, namespace: str, item: tuple[str, str] | None) -> int:
        return self._label_counts.get((namespace, item), 0)

    def multi_owned(self) -> list[Obj]:
        """Running pods with more than one ownerReference, in node order."""
        return self._list("m", None, self._multi)

    def crowded_owners(self) -> Mapping[str, int]:
        """First owners with two or more running pods on some node (-> how many such nodes)."""
        return self._crowded
