"""Which pods must move off a node before it can go, and which pods forbid it.

Upstream ``simulator/drain.go`` ``GetPodsToMove`` with the drainability rules
of ``simulator/drainability/rules`` (our own Python, one rule per branch below,
in upstream's order):

* mirror (static) pods and pods terminating for longer than their grace period
  are skipped (they go with the node);
* DaemonSet pods are skipped: their controller runs them on every node anyway;
* a terminal pod (Succeeded/Failed) is skipped;
* ``cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`` makes a pod movable
  whatever else holds (the PDB still counts);
* ``safe-to-evict: "false"`` blocks - ``NotSafeToEvictAnnotation``;
* a pod without a controller blocks - ``NotReplicated``;
* a ``kube-system`` pod without a PodDisruptionBudget blocks -
  ``UnmovableKubeSystemPod`` (``--skip-nodes-with-system-pods``);
* a pod with local storage (an ``emptyDir`` not backed by memory, or a
  ``hostPath``) blocks - ``LocalStorageRequested``
  (``--skip-nodes-with-local-storage``);
* a pod whose PDB allows no more disruptions blocks - ``NotEnoughPdb``; PDB
  allowances are spent as pods are chosen to move across one scan
  (``RemainingPdbTracker``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from emulator.api import pdb as pdbs
from emulator.clusterautoscaler.config import AutoscalingOptions

__all__ = ["SAFE_TO_EVICT", "BlockingPod", "PdbTracker", "is_daemonset_pod", "is_mirror_pod", "pods_to_move"]

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

# Upstream drain.BlockingPodReason names.
NOT_SAFE_TO_EVICT = "NotSafeToEvictAnnotation"
NOT_REPLICATED = "NotReplicated"
UNMOVABLE_KUBE_SYSTEM = "UnmovableKubeSystemPod"
LOCAL_STORAGE = "LocalStorageRequested"
NOT_ENOUGH_PDB = "NotEnoughPdb"


@dataclass(frozen=True)
class BlockingPod:
    """A pod that keeps its node (upstream ``drain.BlockingPod``)."""

    pod: str  # namespace/name
    reason: str


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    return any(r.get("controller") and r.get("kind") == "DaemonSet"
               for r in (pod.get("metadata") or {}).get("ownerReferences") or ())


def is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def _has_local_storage(pod: Mapping[str, Any]) -> bool:
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if "hostPath" in volume:
            return True
        empty = volume.get("emptyDir")
        if empty is not None and (empty or {}).get("medium") != "Memory":
            return True
    return False


class PdbTracker:
    """PDB allowances left in this scan (upstream ``pdb.RemainingPdbTracker``)."""

    def __init__(self, budgets: Iterable[Mapping[str, Any]]) -> None:
        self.budgets = [(b, [int((b.get("status") or {}).get("disruptionsAllowed") or 0)]) for b in budgets]

    def matching(self, pod: Mapping[str, Any]) -> list[list[int]]:
        ns = (pod.get("metadata") or {}).get("namespace")
        return [left for b, left in self.budgets
                if (b.get("metadata") or {}).get("namespace") == ns and pdbs.budget_matches(b, pod)]

    def can_disrupt(self, pods: Sequence[Mapping[str, Any]]) -> tuple[bool, str]:
        """Whether every pod can go within the allowances (counting each budget once per pod); the first
        pod that cannot otherwise."""
        need: dict[int, int] = {}
        for pod in pods:
            for left in self.matching(pod):
                need[id(left)] = need.get(id(left), 0) + 1
                if left[0] - need[id(left)] < 0:
                    meta = pod.get("metadata") or {}
                    return False, f"{meta.get('namespace')}/{meta.get('name')}"
        return True, ""

    def spend(self, pods: Sequence[Mapping[str, Any]]) -> None:
        for pod in pods:
            for left in self.matching(pod):
                left[0] -= 1

    def has_budget(self, pod: Mapping[str, Any]) -> bool:
        return bool(self.matching(pod))


def pods_to_move(pods: Iterable[Mapping[str, Any]], options: AutoscalingOptions, pdb: PdbTracker,
                 now: float) -> tuple[list[Mapping[str, Any]], BlockingPod | None]:
    """The pods of a node that must be rescheduled elsewhere, or the first pod that blocks the node."""
    from emulator.clock import parse_rfc3339

    movable: list[Mapping[str, Any]] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        if is_mirror_pod(pod):
            continue
        deleted = meta.get("deletionTimestamp")
        if deleted:
            grace = int(meta.get("deletionGracePeriodSeconds") or 0)
            if now > parse_rfc3339(deleted) + grace:
                continue  # long terminating: it goes with the node
        if is_daemonset_pod(pod) or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        safe = (meta.get("annotations") or {}).get(SAFE_TO_EVICT)
        if safe == "true":
            movable.append(pod)
            continue
        if safe == "false":
            return [], BlockingPod(key, NOT_SAFE_TO_EVICT)
        if not any(r.get("controller") for r in meta.get("ownerReferences") or ()):
            return [], BlockingPod(key, NOT_REPLICATED)
        if options.skip_nodes_with_system_pods and meta.get("namespace") == "kube-system" and not pdb.has_budget(pod):
            return [], BlockingPod(key, UNMOVABLE_KUBE_SYSTEM)
        if options.skip_nodes_with_local_storage and _has_local_storage(pod):
            return [], BlockingPod(key, LOCAL_STORAGE)
        movable.append(pod)
    ok, blocker = pdb.can_disrupt(movable)
    if not ok:
        return [], BlockingPod(blocker, NOT_ENOUGH_PDB)
    return movable, None
