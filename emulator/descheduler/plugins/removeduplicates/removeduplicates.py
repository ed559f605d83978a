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
from collections.abc import Mapping, Sequence
from typing import Any

from emulator.api.types import Obj
from emulator.descheduler import utils
from emulator.descheduler.framework import ClusterSnapshot, Handle, Status, evict_each, pod_filter
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


def target_nodes(variants: Mapping[tuple[str, ...], Obj], nodes: Sequence[Obj], snapshot: ClusterSnapshot,
                 cache: dict[tuple[str, ...], list[str]] | None = None) -> list[str]:
    """``getTargetNodes``: nodes some distinct placement variant fits (taints, selector) — if it fits two or more.

    ``variants`` maps a placement key (:func:`_placement`) to a pod with it; ``cache`` remembers each key's
    matching nodes across owners (most owners' pods share a placement).
    """
    out: dict[str, None] = {}
    cache = {} if cache is None else cache
    tainted: list[Any] | None = None
    for placement, pod in variants.items():
        matching = cache.get(placement)
        if matching is None:
            if tainted is None:  # most nodes have no taint: only the others need the tolerations checked
                tainted = [bool(snapshot.node_taints(n)) for n in nodes]
            spec = pod["spec"]
            anywhere = not spec.get("nodeSelector") and not (spec.get("affinity") or {}).get("nodeAffinity")
            matching = cache[placement] = [
                n["metadata"]["name"] for n, has_taints in zip(nodes, tainted, strict=True)
                if (not has_taints or utils.tolerates_taints(pod, snapshot.node_taints(n), _TARGET_EFFECTS))
                and (anywhere or snapshot.matches_node_selector(pod, n))]
        if len(matching) > 1:
            out.update(dict.fromkeys(matching))
    return list(out)


def _owner_group(pod: Obj) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """(namespace, its owners as sorted (kind, name) pairs); None for a bare pod. Pods can only be duplicates
    of pods with the same group."""
    refs = pod["metadata"].get("ownerReferences")
    if not refs:
        return None
    ns = pod["metadata"].get("namespace") or ""
    if len(refs) == 1:
        r = refs[0]
        return ns, ((r.get("kind") or "", r.get("name") or ""),)
    return ns, tuple(sorted((r.get("kind") or "", r.get("name") or "") for r in refs))


class RemoveDuplicates:
    name = NAME

    def __init__(self, args: RemoveDuplicatesArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.accept = pod_filter(handle, namespaces=args.namespaces)

    def balance(self, nodes: Sequence[Obj]) -> Status | None:
        snapshot = self.handle.snapshot
        exclude = set(self.args.exclude_owner_kinds)
        # A cheap first look: only pods whose first owner has two or more pods on one node can be duplicates,
        # so only those owners' pods are grouped exactly and asked about the evictor's filter (upstream
        # filters every pod first; the outcome is the same).
        node_names = {n["metadata"]["name"] for n in nodes}
        # Owners that pods with several owners also name: their pods are always grouped, so that every
        # owner's occurrences are counted whichever of its pods are crowded.
        shared = {r.get("uid") or r.get("name") or "" for p in snapshot.multi_owned() for r in utils.owner_refs(p)}
        per_node_group: dict[tuple[Any, str], int] = {}
        by_group: dict[Any, list[Obj]] = {}
        crowded_firsts = snapshot.crowded_owners()
        for first in snapshot.owner_keys():
            if first not in crowded_firsts and first not in shared:
                continue  # never two on one node
            for pod in snapshot.owner_pods(first):
                node_name = pod["spec"]["nodeName"]
                if node_name not in node_names:
                    continue
                group = _owner_group(pod)
                key = (group, node_name)
                per_node_group[key] = per_node_group.get(key, 0) + 1
                by_group.setdefault(group, []).append(pod)
        crowded = {group for (group, _), n in per_node_group.items() if n >= 2}
        if not crowded:
            return None

        def eligible(pod: Obj) -> bool:
            refs = utils.owner_refs(pod)
            return bool(refs) and not any(r.get("kind") in exclude for r in refs) and self.accept(pod)

        def images_of(pod: Obj) -> list[str]:
            return sorted(c.get("image") or "" for c in pod["spec"].get("containers") or ())

        duplicates: dict[OwnerKey, dict[str, list[Obj]]] = {}
        for group in crowded:  # pods in node order (the first walk went node by node)
            ns = group[0]
            seen: set[tuple[str, tuple[str, ...]]] = set()
            for pod in by_group[group]:
                if not eligible(pod):
                    continue
                node_name = pod["spec"]["nodeName"]
                refs = utils.owner_refs(pod)
                images = images_of(pod)
                keys = tuple(sorted(f"{ns}/{r.get('kind')}/{r.get('name')}/{image}" for r in refs for image in images))
                if (node_name, keys) in seen:
                    for r in refs:
                        owner = (ns, r.get("kind") or "", r.get("name") or "", "#".join(images))
                        duplicates.setdefault(owner, {}).setdefault(node_name, []).append(pod)
                else:
                    seen.add((node_name, keys))
        placements: dict[tuple[str, ...], list[str]] = {}
        groups_of: dict[tuple[str, str, str], list[Any]] = {}  # one owner -> the owner groups naming it
        for group in by_group:
            ns, refs = group
            for kind, name in refs:
                groups_of.setdefault((ns, kind, name), []).append(group)
        for owner, per_node in duplicates.items():
            ns, kind, name, images_hash = owner
            occurrences = sum(1 for group in groups_of.get((ns, kind, name), ()) for p in by_group[group]
                              if "#".join(images_of(p)) == images_hash and eligible(p))
            variants: dict[tuple[str, ...], Obj] = {}
            for pods in per_node.values():
                for pod in pods:
                    variants.setdefault(_placement(pod), pod)
            targets = target_nodes(variants, nodes, snapshot, placements)
            if len(targets) < 2:
                continue  # fewer than two feasible nodes for the duplicates to land
            upper_avg = math.ceil(occurrences / len(targets))
            for pods in per_node.values():
                if len(pods) + 1 > upper_avg and not evict_each(self.handle, pods[upper_avg - 1:], NAME):
                    return None
        return None


def new(args: Any, handle: Handle) -> RemoveDuplicates:
    return RemoveDuplicates(args, handle)
