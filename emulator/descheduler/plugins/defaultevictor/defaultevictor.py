"""DefaultEvictor: the *filter* and *preEvictionFilter* every profile runs (upstream ``defaultevictor.go``,
``constraints.go``).

``filter(pod)`` — may this pod be evicted at all:

* a pod annotated ``descheduler.alpha.kubernetes.io/evict`` always may;
* never mirror pods, static pods, or pods already terminating;
* then every constraint the args switch on (each with upstream's reason, logged):
  bare pods (no ownerReferences) only when ``evictFailedBarePods`` and the pod
  Failed; no system-critical pods (priority >= 2,000,000,000) unless
  ``evictSystemCriticalPods``, and none at or above ``priorityThreshold``; no
  pods with local storage (hostPath / emptyDir) unless ``evictLocalStoragePods``;
  no DaemonSet pods unless ``evictDaemonSetPods``; no PVC pods with
  ``ignorePvcPods``; with ``ignorePodsWithoutPDB`` only pods a PDB covers;
  ``labelSelector`` must match; an owner with fewer than ``minReplicas`` pods
  keeps them; a pod younger than ``minPodAge`` (since ``status.startTime``, on
  the cluster clock) stays.

``pre_eviction_filter(pod)`` — with ``nodeFit``, the pod must fit some other
ready node (taints, node affinity, schedulable, resources: ``PodFitsAnyOtherNode``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from emulator.api import pdb as pdbs
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339
from emulator.descheduler import utils
from emulator.descheduler.framework import Handle
from emulator.descheduler.plugins.defaultevictor.args import DefaultEvictorArgs, parse_args

__all__ = ["EXTENSION_POINTS", "NAME", "DefaultEvictor", "new", "parse_args"]

log = logging.getLogger(__name__)
NAME = "DefaultEvictor"

# filter() verdicts kept across passes, per args object (the policy's, alive as long as the descheduler):
# pod uid -> (resourceVersion, verdict). Only for args whose constraints read nothing but the pod (no PDBs,
# replica counts, pod age or priority-class lookup): a pod's verdict then cannot change under one
# resourceVersion, and the informer hands the controller the same pods pass after pass (as framework._facts).
_VERDICTS: dict[int, tuple[DefaultEvictorArgs, dict[str, tuple[Any, bool]]]] = {}
_VERDICTS_MAX = 500_000


def _pod_only(args: DefaultEvictorArgs) -> bool:
    threshold = args.priority_threshold
    return (not args.ignore_pods_without_pdb and args.min_replicas <= 1 and args.min_pod_age is None
            and (args.evict_system_critical_pods or threshold is None or threshold.value is not None
                 or not threshold.name))


def _verdict_cache(args: DefaultEvictorArgs) -> dict[str, tuple[Any, bool]]:
    entry = _VERDICTS.get(id(args))
    if entry is None or entry[0] is not args:
        if len(_VERDICTS) > 64:  # policies reloaded many times: drop the old ones
            _VERDICTS.clear()
        entry = _VERDICTS[id(args)] = (args, {})
    return entry[1]
EXTENSION_POINTS = ("filter", "preEvictionFilter")
EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"

Constraint = Callable[[Obj], str | None]  # the reason a pod may not be evicted, or None


class DefaultEvictor:
    name = NAME

    def __init__(self, args: DefaultEvictorArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.constraints: list[Constraint] = self._constraints()
        self._owner_counts: dict[str, int] | None = None
        self._pdbs: list[Obj] | None = None
        self._verdicts = _verdict_cache(args) if _pod_only(args) else None

    # ------------------------------------------------------------------ constraints
    def _constraints(self) -> list[Constraint]:
        a = self.args
        out: list[Constraint] = []
        if a.evict_failed_bare_pods:
            out.append(lambda p: "pod does not have any ownerRefs and is not in failed phase"
                       if not utils.owner_refs(p) and utils.phase(p) != "Failed" else None)
        else:
            out.append(lambda p: "pod does not have any ownerRefs" if not utils.owner_refs(p) else None)
        if not a.evict_system_critical_pods:
            out.append(lambda p: "pod has system critical priority" if utils.is_critical(p) else None)
            threshold = self._threshold_priority()
            if threshold is not None:
                out.append(lambda p: "pod has higher priority than specified priority class threshold"
                           if (utils.priority(p) is not None and utils.priority(p) >= threshold) else None)
        if not a.evict_local_storage_pods:
            out.append(lambda p: "pod has local storage and descheduler is not configured with evictLocalStoragePods"
                       if utils.has_local_storage(p) else None)
        if not a.evict_daemonset_pods:
            out.append(lambda p: "pod is related to daemonset and descheduler is not configured with "
                       "evictDaemonSetPods" if utils.is_daemonset_pod(p) else None)
        if a.ignore_pvc_pods:
            out.append(lambda p: "pod has a PVC and descheduler is configured to ignore PVC pods"
                       if utils.has_pvc(p) else None)
        if a.ignore_pods_without_pdb:
            out.append(lambda p: None if self._covered_by_pdb(p) else "no PodDisruptionBudget found for pod")
        if a.label_selector is not None and not a.label_selector.empty:
            selector = a.label_selector
            out.append(lambda p: None if selector.matches(p["metadata"].get("labels"))
                       else "pod labels do not match the labelSelector filter in the policy parameter")
        if a.min_replicas > 1:
            out.append(self._min_replicas)
        if a.min_pod_age is not None:
            out.append(self._min_pod_age)
        return out

    def _threshold_priority(self) -> int | None:
        t = self.args.priority_threshold
        if t is None:
            return None
        if t.value is not None:
            return t.value
        if t.name:
            value = self.handle.snapshot.priority_classes.get(t.name)
            if value is None:
                raise ValueError(f"failed to get priority threshold: priority class {t.name!r} not found")
            return value
        return None

    def _min_replicas(self, pod: Obj) -> str | None:
        refs = utils.owner_refs(pod)
        if len(refs) != 1:
            return None  # none: nothing to count; several: unsupported upstream too
        if self._owner_counts is None:
            counts: dict[str, int] = {}
            for p in self.handle.snapshot.all_pods():
                for ref in utils.owner_refs(p):
                    counts[ref.get("uid", "")] = counts.get(ref.get("uid", ""), 0) + 1
            self._owner_counts = counts
        have = self._owner_counts.get(refs[0].get("uid", ""), 0)
        if have < self.args.min_replicas:
            return f"owner has {have} replicas which is less than minReplicas of {self.args.min_replicas}"
        return None

    def _min_pod_age(self, pod: Obj) -> str | None:
        started = (pod.get("status") or {}).get("startTime")
        assert self.args.min_pod_age is not None
        if not started or self.handle.clock.now() - parse_rfc3339(started) < self.args.min_pod_age:
            return f"pod age is not older than MinPodAge: {self.args.min_pod_age:g} seconds"
        return None

    def _covered_by_pdb(self, pod: Obj) -> bool:
        if self._pdbs is None:
            self._pdbs = list(self.handle.snapshot.pdbs)
        return any(pdbs.budget_matches(b, pod) for b in self._pdbs)

    # ------------------------------------------------------------------ extension points
    def reasons(self, pod: Obj) -> list[str]:
        """Every reason ``pod`` may not be evicted (empty: it may)."""
        meta = pod["metadata"]
        if EVICT_ANNOTATION in (meta.get("annotations") or {}):
            return []
        out = []
        if utils.is_mirror(pod):
            out.append("pod is a mirror pod")
        if utils.is_static(pod):
            out.append("pod is a static pod")
        if utils.is_terminating(pod):
            out.append("pod is terminating")
        for constraint in self.constraints:
            reason = constraint(pod)
            if reason:
                out.append(reason)
        return out

    def filter(self, pod: Obj) -> bool:
        """:meth:`reasons` is empty — answered at the first reason found (this runs for every pod of a pass)."""
        cache = self._verdicts
        if cache is None:
            return self._filter(pod)
        meta = pod["metadata"]
        uid, rv = meta.get("uid"), meta.get("resourceVersion")
        if not uid or not rv:
            return self._filter(pod)  # not from the store: nothing identifies this version of the pod
        hit = cache.get(uid)
        if hit is not None and hit[0] == rv:
            return hit[1]
        verdict = self._filter(pod)
        if len(cache) >= _VERDICTS_MAX:
            cache.clear()
        cache[uid] = (rv, verdict)
        return verdict

    def _filter(self, pod: Obj) -> bool:
        meta = pod["metadata"]
        annotations = meta.get("annotations")
        if annotations:
            if EVICT_ANNOTATION in annotations:
                return True
            if utils.MIRROR_ANNOTATION in annotations or utils.is_static(pod):
                return self._refuse(pod)
        if meta.get("deletionTimestamp"):
            return self._refuse(pod)
        for constraint in self.constraints:
            if constraint(pod):
                return self._refuse(pod)
        return True

    def _refuse(self, pod: Obj) -> bool:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("descheduler: pod %s fails the following checks: %s", utils.pod_key(pod),
                      "; ".join(self.reasons(pod)))
        return False

    def pre_eviction_filter(self, pod: Obj) -> bool:
        if not self.args.node_fit:
            return True
        nodes = self.handle.all_nodes
        if self.args.node_selector:
            from emulator.api.labels import parse_label_selector

            selector = parse_label_selector(self.args.node_selector)
            nodes = [n for n in nodes if selector.matches(n["metadata"].get("labels"))]
        if not self.handle.snapshot.pod_fits_any_other_node(pod, nodes):
            log.info("descheduler: pod %s does not fit on any other node because of nodeSelector(s), Taint(s), or "
                     "nodes marked as unschedulable", utils.pod_key(pod))
            return False
        return True


def new(args: Any, handle: Handle) -> DefaultEvictor:
    return DefaultEvictor(args, handle)
