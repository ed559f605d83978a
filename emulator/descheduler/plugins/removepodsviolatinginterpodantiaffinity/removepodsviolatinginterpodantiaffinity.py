"""RemovePodsViolatingInterPodAntiAffinity: evict pods whose required anti-affinity is violated where they run.

Upstream ``pod_antiaffinity.go`` and ``utils.CheckPodsWithAntiAffinityExist``:
among the evictable pods (evictor filter, ``namespaces``, ``labelSelector``),
found through the snapshot's per-namespace label index; node by node, lowest priority first (then QoS), a pod
is evicted when one of its *required* anti-affinity terms selects another of
those pods — in the term's ``namespaces`` (default: the pod's own) — on a
node with the same value of the term's ``topologyKey`` (the same node always
counts). An evicted pod stops counting for the pods after it, so of two pods
repelling each other only the first goes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from emulator.api.labels import LabelSelector
from emulator.api.types import Obj
from emulator.descheduler import utils
from emulator.descheduler.evictions import (
    EvictionError,
    EvictionLimitError,
    EvictionNodeLimitError,
    EvictionTotalLimitError,
)
from emulator.descheduler.framework import ClusterSnapshot, Handle, Status, pod_filter
from emulator.descheduler.plugins.removepodsviolatinginterpodantiaffinity.args import (
    RemovePodsViolatingInterPodAntiAffinityArgs,
    parse_args,
)

__all__ = ["EXTENSION_POINTS", "NAME", "RemovePodsViolatingInterPodAntiAffinity", "new", "parse_args"]

NAME = "RemovePodsViolatingInterPodAntiAffinity"
EXTENSION_POINTS = ("deschedule",)


def required_anti_affinity_terms(pod: Obj) -> list[Obj]:
    anti = (pod["spec"].get("affinity") or {}).get("podAntiAffinity") or {}
    return list(anti.get("requiredDuringSchedulingIgnoredDuringExecution") or ())


def same_topology(a: Obj | None, b: Obj | None, key: str) -> bool:
    """``hasSameLabelValue``: the same node, or both carry ``key`` with equal values."""
    if a is None or b is None:
        return False
    if a["metadata"]["name"] == b["metadata"]["name"]:
        return True
    la, lb = a["metadata"].get("labels") or {}, b["metadata"].get("labels") or {}
    return key in la and key in lb and la[key] == lb[key]


def violates(pod: Obj, snapshot: ClusterSnapshot, alive: Callable[[Obj], bool], node_map: dict[str, Obj]) -> bool:
    """``CheckPodsWithAntiAffinityExist`` over the pods ``alive`` accepts (evictable, not yet evicted)."""
    node = node_map.get(pod["spec"].get("nodeName") or "")
    for term in required_anti_affinity_terms(pod):
        namespaces = term.get("namespaces") or [pod["metadata"].get("namespace") or ""]
        try:
            selector = LabelSelector.from_dict(term.get("labelSelector"))
        except Exception:
            continue
        key = term.get("topologyKey") or ""
        for ns in namespaces:
            for other in snapshot.select(ns, selector):
                if other is pod or not alive(other):
                    continue
                if same_topology(node, node_map.get(other["spec"].get("nodeName") or ""), key):
                    return True
    return False


class RemovePodsViolatingInterPodAntiAffinity:
    name = NAME

    def __init__(self, args: RemovePodsViolatingInterPodAntiAffinityArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.accept = pod_filter(handle, namespaces=args.namespaces, label_selector=args.label_selector,
                                 pre_eviction=False)

    def deschedule(self, nodes: Sequence[Obj]) -> Status | None:
        snapshot = self.handle.snapshot
        node_map = {n["metadata"]["name"]: n for n in nodes}
        with_terms = snapshot.having("podAntiAffinity")
        if not any(name in with_terms for name in node_map):
            return None
        evicted: set[int] = set()

        def alive(p: Obj) -> bool:  # upstream lists only the filtered pods; asked lazily, for the pods terms select
            return id(p) not in evicted and (p["spec"].get("nodeName") or "") in node_map and self.accept(p)

        for name in node_map:
            # Only pods with required anti-affinity terms can violate them; sorting just those keeps
            # upstream's order among them (all the node's pods, lowest priority first).
            pods = with_terms.get(name)
            if not pods:
                continue
            for pod in utils.sort_pods_low_to_high([p for p in pods if alive(p)]):
                if not required_anti_affinity_terms(pod) or not violates(pod, snapshot, alive, node_map):
                    continue
                if not self.handle.evictor.pre_eviction_filter(pod):
                    continue
                try:
                    self.handle.evictor.evict(pod, NAME)
                except EvictionTotalLimitError:
                    return None
                except EvictionNodeLimitError:
                    break
                except (EvictionLimitError, EvictionError):
                    continue
                evicted.add(id(pod))
        return None


def new(args: Any, handle: Handle) -> RemovePodsViolatingInterPodAntiAffinity:
    return RemovePodsViolatingInterPodAntiAffinity(args, handle)
