"""RemovePodsViolatingInterPodAntiAffinity: evict pods whose required anti-affinity is violated where they run.

Upstream ``pod_antiaffinity.go`` and ``utils.CheckPodsWithAntiAffinityExist``:
the evictable pods (evictor filter, ``namespaces``, ``labelSelector``) are
grouped by namespace; node by node, lowest priority first (then QoS), a pod
is evicted when one of its *required* anti-affinity terms selects another of
those pods — in the term's ``namespaces`` (default: the pod's own) — on a
node with the same value of the term's ``topologyKey`` (the same node always
counts). An evicted pod stops counting for the pods after it, so of two pods
repelling each other only the first goes.
"""

from __future__ import annotations

from collections.abc import Sequence
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
from emulator.descheduler.framework import Handle, Status, pod_filter
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


def violates(pod: Obj, by_namespace: dict[str, dict[str, Obj]], node_map: dict[str, Obj]) -> bool:
    """``CheckPodsWithAntiAffinityExist``."""
    node = node_map.get(pod["spec"].get("nodeName") or "")
    for term in required_anti_affinity_terms(pod):
        namespaces = term.get("namespaces") or [pod["metadata"].get("namespace") or ""]
        try:
            selector = LabelSelector.from_dict(term.get("labelSelector"))
        except Exception:
            continue
        key = term.get("topologyKey") or ""
        for ns in namespaces:
            for other in by_namespace.get(ns, {}).values():
                if other["metadata"]["name"] == pod["metadata"]["name"] and ns == pod["metadata"].get("namespace"):
                    continue
                if selector.matches(other["metadata"].get("labels")) and \
                        same_topology(node, node_map.get(other["spec"].get("nodeName") or ""), key):
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
        on_node: dict[str, list[Obj]] = {}
        by_namespace: dict[str, dict[str, Obj]] = {}
        for name in node_map:
            pods = [p for p in snapshot.active_pods_on(name) if self.accept(p)]
            on_node[name] = pods
            for p in pods:
                by_namespace.setdefault(p["metadata"].get("namespace") or "", {})[p["metadata"]["name"]] = p
        if not any(required_anti_affinity_terms(p) for pods in on_node.values() for p in pods):
            return None
        for pods in on_node.values():
            for pod in utils.sort_pods_low_to_high(list(pods)):
                if not required_anti_affinity_terms(pod) or not violates(pod, by_namespace, node_map):
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
                by_namespace.get(pod["metadata"].get("namespace") or "", {}).pop(pod["metadata"]["name"], None)
        return None


def new(args: Any, handle: Handle) -> RemovePodsViolatingInterPodAntiAffinity:
    return RemovePodsViolatingInterPodAntiAffinity(args, handle)
