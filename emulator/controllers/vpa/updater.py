"""The VPA updater: evicts pods whose requests are far from their VPA's recommendation.

Upstream: kubernetes/autoscaler ``vertical-pod-autoscaler/pkg/updater``
(``logic/updater.go`` RunOnce every minute; ``priority/priority_processor.go``
and ``update_priority_calculator.go`` choose and order the pods;
``restriction/pods_eviction_restriction.go`` limits evictions per controller).
For each VPA in mode ``Recreate`` / ``Auto`` with a recommendation, a live pod
is a candidate when any container's request is outside [lowerBound,
upperBound] (or has none), or — after it has run 12 h — when the summed
relative difference between requests and targets is at least 10 %; a pod
that OOM-killed within 10 minutes of starting is a candidate as soon as its
resources would change. Candidates go highest priority first (scale-ups
first, then larger differences). Evictions per controller are limited: none
while it has fewer than ``minReplicas`` (default 2) configured replicas, and
at most ``ceil``-complement of ``evictionTolerance`` (50 %) at once, or one
when every replica is running and the tolerance rounds to zero. The eviction
goes through the Eviction API, so PodDisruptionBudgets hold: a refused
eviction (429) leaves the pod for the next pass. The admission plugin then
gives the replacement pod the recommended requests.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter

from emulator.api import errors, vpa
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339
from emulator.controllers.runtime import ControllerContext
from emulator.controllers.vpa.loop import PeriodicVPAController
from emulator.informers import NAMESPACE_INDEX
from emulator.server import eviction

log = logging.getLogger(__name__)

MIN_REPLICAS = 2  # --min-replicas
EVICTION_TOLERANCE = 0.5  # --eviction-tolerance
MIN_CHANGE_PRIORITY = 0.1  # UpdateConfig.MinChangePriority
POD_LIFETIME_UPDATE_THRESHOLD = 12 * 3600.0  # --in-recommendation-bounds-eviction-lifetime-threshold
EVICT_AFTER_OOM_THRESHOLD = 600.0  # --evict-after-oom-threshold

EVICTED = Counter("vpa_updater_evicted_pods_total", "Number of Pods evicted by Updater to apply a new recommendation.",
                  ["vpa_size_log2"])


@dataclass(frozen=True, slots=True)
class Priority:
    """``PodPriority``: outside the recommended range, wants to grow, relative resource difference."""

    outside_range: bool
    scale_up: bool
    resource_diff: float

    def sort_key(self) -> tuple[bool, float]:
        return (self.scale_up, self.resource_diff)  # PodPriority.Less: scale-ups first, then the larger diff


def update_priority(obj: Mapping[str, Any], pod: Mapping[str, Any]) -> Priority:
    """``GetUpdatePriority`` over the pod's containers and init containers."""
    outside = scale_up = False
    requested: dict[str, int] = {}
    recommended: dict[str, int] = {}
    spec = pod.get("spec") or {}
    for ctr in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        rec = vpa.recommendation_for(obj, ctr.get("name", ""))
        if rec is None:
            continue
        requests = (ctr.get("resources") or {}).get("requests") or {}
        for resource, value in (rec.get("target") or {}).items():
            want = vpa.amount(resource, value) * (1 if resource == "cpu" else 1000)  # MilliValue
            recommended[resource] = recommended.get(resource, 0) + want
            if resource not in requests:
                scale_up = outside = True
                continue
            have = vpa.amount(resource, requests[resource]) * (1 if resource == "cpu" else 1000)
            requested[resource] = requested.get(resource, 0) + have
            if want > have:
                scale_up = True
            lower, upper = (rec.get("lowerBound") or {}).get(resource), (rec.get("upperBound") or {}).get(resource)
            if (lower is not None and have < vpa.amount(resource, lower) * (1 if resource == "cpu" else 1000)) or \
                    (upper is not None and have > vpa.amount(resource, upper) * (1 if resource == "cpu" else 1000)):
                outside = True
    diff = 0.0
    for resource, total in recommended.items():
        base = max(float(requested.get(resource, 0)), 1.0)
        diff += abs(base - total) / base
    return Priority(outside, scale_up, diff)


def _quick_oom(pod: Mapping[str, Any]) -> bool:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("lastState") or {}).get("terminated") or {}
        if term.get("reason") == "OOMKilled" and term.get("startedAt") and term.get("finishedAt") and \
                parse_rfc3339(term["finishedAt"]) - parse_rfc3339(term["startedAt"]) < EVICT_AFTER_OOM_THRESHOLD:
            return True
    return False


def wants_update(obj: Mapping[str, Any], pod: Mapping[str, Any], now: float) -> Priority | None:
    """``UpdatePriorityCalculator.AddPod``: the pod's priority when it should be updated, else None."""
    prio = update_priority(obj, pod)
    quick_oom = _quick_oom(pod)
    if not prio.outside_range and not quick_oom:
        started = (pod.get("status") or {}).get("startTime")
        if not started or now < parse_rfc3339(started) + POD_LIFETIME_UPDATE_THRESHOLD:
            return None
        if prio.resource_diff < MIN_CHANGE_PRIORITY:
            return None
    if quick_oom and prio.resource_diff == 0:
        return None
    return prio


def eviction_budget(configured: int, running: int, min_replicas: int = MIN_REPLICAS,
                    tolerance: float = EVICTION_TOLERANCE) -> int:
    """How many of a controller's pods may be evicted now (``pods_eviction_restriction.go``)."""
    if configured < min_replicas:
        return 0
    required = math.ceil(configured * (1 - tolerance))
    allowed = configured - required
    if allowed == 0 and running == configured:
        return 1  # every replica is running and the tolerance is tiny: one at a time
    return max(0, running - (configured - allowed))


class VPAUpdater(PeriodicVPAController):
    """See the module docstring."""

    def __init__(self, ctx: ControllerContext, *, interval: float | None = None) -> None:
        super().__init__("vpa-updater", ctx, interval_option="updater_interval", interval=interval)
        self.evicted = 0

    def _controller(self, pod: Mapping[str, Any]) -> tuple[str, Obj | None]:
        """(controller key, the controller object) of a pod; replicas are counted per controller."""
        for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("controller"):
                ns = (pod.get("metadata") or {}).get("namespace") or ""
                key = f"{ref.get('kind')}/{ns}/{ref.get('name')}"
                if ref.get("kind") == "ReplicaSet":
                    return key, self.replicasets.indexer.get_by_key(f"{ns}/{ref.get('name')}")
                return key, None
        return "", None

    def run_once(self) -> int:
        """One updater pass; returns the number of pods evicted."""
        now = self.clock.now()
        evicted = 0
        for obj in self.vpas.indexer.list():
            if vpa.update_mode(obj) not in vpa.EVICTING_MODES:
                continue
            if not ((obj.get("status") or {}).get("recommendation") or {}).get("containerRecommendations"):
                continue
            evicted += self._update_vpa(obj, now)
        self.evicted += evicted
        return evicted

    def _update_vpa(self, obj: Obj, now: float) -> int:
        namespace = obj["metadata"].get("namespace") or ""
        min_replicas = int(((obj.get("spec") or {}).get("updatePolicy") or {}).get("minReplicas") or MIN_REPLICAS)
        pods = [p for p in self.pods.indexer.by_index(NAMESPACE_INDEX, namespace)
                if not p["metadata"].get("deletionTimestamp") and vpa.controlled_by_target(obj, p, self.owner)]
        groups: dict[str, list[Obj]] = {}
        configured: dict[str, int] = {}
        for pod in pods:
            key, controller = self._controller(pod)
            groups.setdefault(key, []).append(pod)
            configured[key] = int(((controller or {}).get("spec") or {}).get("replicas") or 0) \
                if controller is not None else 0
        budget = {key: eviction_budget(configured[key] or len(members),
                                       sum((p.get("status") or {}).get("phase") == "Running" for p in members),
                                       min_replicas)
                  for key, members in groups.items()}
        candidates = []
        for pod in pods:
            if (pod.get("status") or {}).get("phase") != "Running":
                continue
            prio = wants_update(obj, pod, now)
            if prio is not None:
                candidates.append((prio, pod))
        candidates.sort(key=lambda c: c[0].sort_key(), reverse=True)
        evicted = 0
        for _prio, pod in candidates:
            key, _ = self._controller(pod)
            if budget.get(key, 0) <= 0:
                continue
            meta = pod["metadata"]
            try:
                eviction.evict(self.core, namespace, meta["name"], {"apiVersion": "policy/v1", "kind": "Eviction",
                                                                    "metadata": {"name": meta["name"],
                                                                                 "namespace": namespace}})
            except errors.StatusError as e:
                if e.code in (404, 409, 429):  # gone, changed, or a PDB says not now: next pass
                    log.debug("vpa-updater: %s/%s not evicted: %s", namespace, meta["name"], e)
                    continue
                raise
            budget[key] -= 1
            evicted += 1
            EVICTED.labels(str(max(0, len(pods)).bit_length() - 1 if pods else 0)).inc()
            self.event(pod, "Normal", "EvictedByVPA",
                       "Pod was evicted by VPA Updater to apply resource recommendation.")
            self.event(obj, "Normal", "EvictedPod",
                       f"VPA Updater evicted Pod {meta['name']} to apply resource recommendation.")
        return evicted


def new_controller(ctx: ControllerContext) -> VPAUpdater:
    """The controller manager's constructor for this controller."""
    return VPAUpdater(ctx)
