"""RemoveDuplicates: spread the pods of one owner that are piled on the same node.

Upstream ``removeduplicates.go`` (a *balance* plugin):

1. On each node, among the evictable pods (evictor filter and
   preEvictionFilter, ``namespaces``), a pod is a *duplicate* when an earlier
   pod on the same node has the same owners and the same container images
   (the sorted ``namespace/kind/name/image`` keys are equal). Pods of an owner
   kind in ``excludeOwnerKinds`` and bare pods are skipped.
2. Per owner (namespace, kind, name, images), the *target nodes* are the nodes
   where some distinct variant of its pods could land: it tolerates their
   NoSchedule/NoExecute taints and matches their node selector and required
   affinity (at least two such nodes, or nothing is done).
3. ``upperAvg = ceil(pods of the owner / target nodes)``; a node holding more
   than ``upperAvg`` of them loses its duplicates beyond the first
   ``upperAvg - 1`` (the first pod is not in the duplicate list). The scheduler
   then places the replacements the owner's controller creates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from emulator.api.taints import node_taints
from emulator.api.types import Obj
from emulator.descheduler import utils
from emulator.descheduler.framework import Handle, Status, evict_each, pod_filter
from emulator.descheduler.plugins.removeduplicates.args import RemoveDuplicatesArgs, parse_args

__all__ = ["EXTENSION_POINTS", "NAME", "RemoveDuplicates", "new", "parse_args"]

NAME = "RemoveDuplicates"
EXTENSION_POINTS = ("balance",)
_TARGET_EFFECTS = frozenset({"NoSchedule", "NoExecute"})

OwnerKey = tuple[str, str, str, str]  # namespace, kind, name, images


def _placement(pod: Obj) -> tuple[str, ...]:
    """What decides where a pod may land (tolerations, node selector, required affinity) as a hashable key."""
    spec = pod["spec"]
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    return (json.dumps(spec.get("tolerations") or [], sort_keys=True),
            json.dumps(spec.get("nodeSelector") or {}, sort_keys=True), json.dumps(required, sort_keys=True))


def target_nodes(variants: Sequence[Obj], nodes: Sequence[Obj]) -> list[str]:
    """``getTargetNodes``: nodes some distinct placement variant fits (taints, selector) — if it fits two or more."""
    out: dict[str, None] = {}
    for pod in variants:
        matching = [n["metadata"]["name"] for n in nodes
                    if utils.tolerates_taints(pod, node_taints(n), _TARGET_EFFECTS)
                    and utils.matches_node_selector(pod, n)]
        if len(matching) > 1:
            out.update(dict.fromkeys(matching))
    return list(out)


class RemoveDuplicates:
    name = NAME

    def __init__(self, args: RemoveDuplicatesArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.accept = pod_filter(handle, namespaces=args.namespaces)

    def balance(self, nodes: Sequence[Obj]) -> Status | None:
        exclude = set(self.args.exclude_owner_kinds)
        duplicates: dict[OwnerKey, dict[str, list[Obj]]] = {}
        occurrences: dict[OwnerKey, int] = {}
        for node in nodes:
            node_name = node["metadata"]["name"]
            seen: set[tuple[str, ...]] = set()
            for pod in self.handle.snapshot.active_pods_on(node_name):
                refs = utils.owner_refs(pod)
                if not refs or any(r.get("kind") in exclude for r in refs):
                    continue
                if not self.accept(pod):
                    continue
                ns = pod["metadata"].get("namespace") or ""
                images = sorted(c.get("image") or "" for c in pod["spec"].get("containers") or ())
                images_hash = "#".join(images)
                owners = [(ns, r.get("kind") or "", r.get("name") or "", images_hash) for r in refs]
                for owner in owners:
                    occurrences[owner] = occurrences.get(owner, 0) + 1
                keys = tuple(sorted(f"{ns}/{r.get('kind')}/{r.get('name')}/{image}" for r in refs for image in images))
                if keys in seen:
                    for owner in owners:
                        duplicates.setdefault(owner, {}).setdefault(node_name, []).append(pod)
                else:
                    seen.add(keys)
        for owner, per_node in duplicates.items():
            variants: dict[tuple[str, ...], Obj] = {}
            for pods in per_node.values():
                for pod in pods:
                    variants.setdefault(_placement(pod), pod)
            targets = target_nodes(list(variants.values()), nodes)
            if len(targets) < 2:
                continue  # fewer than two feasible nodes for the duplicates to land
            upper_avg = math.ceil(occurrences[owner] / len(targets))
            for pods in per_node.values():
                if len(pods) + 1 > upper_avg and not evict_each(self.handle, pods[upper_avg - 1:], NAME):
                    return None
        return None


def new(args: Any, handle: Handle) -> RemoveDuplicates:
    return RemoveDuplicates(args, handle)
