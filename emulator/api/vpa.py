"""VerticalPodAutoscaler semantics shared by its admission plugin, recommender and updater.

Upstream (kubernetes/autoscaler ``vertical-pod-autoscaler``) keeps these in
``pkg/utils/vpa/api.go`` (update mode, container policies, matching a pod to
its VPA), ``pkg/utils/vpa/capping.go`` (minAllowed/maxAllowed, controlled
resources) and ``pkg/admission-controller/resource/pod/recommendation/
recommendation_provider.go`` (requests from the recommendation, limits kept in
proportion). Everything here is a pure function over objects in their JSON
shape; callers do the reading and writing. Amounts are integers: CPU in
millicores, memory in bytes, as the recommender's ``ResourceAmount``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from emulator.api.quantity import cpu_millis, format_bytes, format_millis, to_int
from emulator.api.types import Obj

GROUP = "autoscaling.k8s.io"
UPDATE_MODES = ("Off", "Initial", "Recreate", "Auto", "InPlaceOrRecreate")
EVICTING_MODES = frozenset({"Recreate", "Auto", "InPlaceOrRecreate"})  # kemu has no in-place resize: all evict
CONTAINER_MODES = ("Auto", "Off")
CONTROLLED_VALUES = ("RequestsAndLimits", "RequestsOnly")
RESOURCES = ("cpu", "memory")
# Upstream annotations on admitted pods (pkg/utils/annotations).
UPDATES_ANNOTATION = "vpaUpdates"
OBSERVED_CONTAINERS_ANNOTATION = "vpaObservedContainers"
# The recommender's ResourceAmount ceiling (recommender/model/types.go MaxResourceAmount).
MAX_AMOUNT = 10**14


def update_mode(vpa: Mapping[str, Any]) -> str:
    """``GetUpdateMode``: ``spec.updatePolicy.updateMode``, ``Auto`` when unset."""
    return ((vpa.get("spec") or {}).get("updatePolicy") or {}).get("updateMode") or "Auto"


def container_policy(vpa: Mapping[str, Any], container: str) -> Obj | None:
    """``GetContainerResourcePolicy``: the policy naming ``container``, else the ``*`` default, else None."""
    policies = (((vpa.get("spec") or {}).get("resourcePolicy") or {}).get("containerPolicies")) or []
    default = None
    for p in policies:
        if p.get("containerName") == container:
            return p
        if p.get("containerName") == "*":
            default = p
    return default


def controlled_resources(policy: Mapping[str, Any] | None) -> tuple[str, ...]:
    wanted = (policy or {}).get("controlledResources")
    return tuple(r for r in RESOURCES if r in wanted) if wanted else RESOURCES


def controls_limits(policy: Mapping[str, Any] | None) -> bool:
    return ((policy or {}).get("controlledValues") or "RequestsAndLimits") == "RequestsAndLimits"


def is_off(policy: Mapping[str, Any] | None) -> bool:
    return (policy or {}).get("mode") == "Off"


def amount(resource: str, quantity: Any) -> int:
    """A quantity as the recommender's amount: millicores for CPU, bytes (rounded up) for memory."""
    return cpu_millis(quantity) if resource == "cpu" else to_int(quantity)


def quantity(resource: str, value: int) -> str:
    """``ResourcesAsResourceList``: CPU as a milli quantity (``25m``), memory as BinarySI bytes (``250Mi``)."""
    return format_millis(value) if resource == "cpu" else format_bytes(value)


def cap_to_policy(resources: Mapping[str, int], policy: Mapping[str, Any] | None) -> dict[str, int]:
    """Keep the controlled resources, each within the policy's ``minAllowed`` / ``maxAllowed`` (capping.go)."""
    out: dict[str, int] = {}
    lo, hi = (policy or {}).get("minAllowed") or {}, (policy or {}).get("maxAllowed") or {}
    for resource in controlled_resources(policy):
        if resource not in resources:
            continue
        value = resources[resource]
        if resource in lo:
            value = max(value, amount(resource, lo[resource]))
        if resource in hi:
            value = min(value, amount(resource, hi[resource]))
        out[resource] = value
    return out


def recommendation_for(vpa: Mapping[str, Any], container: str) -> Obj | None:
    """The ``status.recommendation`` entry for ``container`` (None: none yet, or its policy is Off)."""
    if is_off(container_policy(vpa, container)):
        return None
    recs = (((vpa.get("status") or {}).get("recommendation") or {}).get("containerRecommendations")) or []
    for rec in recs:
        if rec.get("containerName") == container:
            return rec
    return None


def _proportional_limit(resource: str, limit: Any, request: Any, recommended: int) -> int | None:
    """``getProportionalResourceLimit``: the new limit, or None to leave no limit."""
    if limit is None or amount(resource, limit) == 0 or recommended == 0:
        return None
    if request is None or amount(resource, request) == 0:
        return recommended
    original_request, original_limit = amount(resource, request), amount(resource, limit)
    if original_request == original_limit:
        return recommended
    # scaleQuantityProportionally: recommended * limit / request, in integer arithmetic.
    return recommended * original_limit // original_request


def apply_to_pod(vpa: Mapping[str, Any], pod: Obj) -> list[str]:
    """Set each container's requests (and proportional limits) from ``vpa``'s recommendation, in place.

    Returns upstream's update notes (``container 0: cpu request, memory limit``) and
    annotates the pod with ``vpaUpdates`` / ``vpaObservedContainers`` as the
    admission controller does. Containers without a recommendation are left alone.
    """
    spec = pod.setdefault("spec", {})
    notes: list[str] = []
    for index, ctr in enumerate(spec.get("containers") or []):
        rec = recommendation_for(vpa, ctr.get("name", ""))
        if rec is None:
            continue
        policy = container_policy(vpa, ctr.get("name", ""))
        resources = ctr.setdefault("resources", {})
        requests = dict(resources.get("requests") or {})
        limits = dict(resources.get("limits") or {})
        set_requests: list[str] = []
        set_limits: list[str] = []
        target = rec.get("target") or {}
        for resource in controlled_resources(policy):
            if resource not in target:
                continue
            wanted = amount(resource, target[resource])
            if controls_limits(policy):
                new_limit = _proportional_limit(resource, limits.get(resource), requests.get(resource), wanted)
                if new_limit is not None:
                    limits[resource] = quantity(resource, new_limit)
                    set_limits.append(f"{resource} limit")
            requests[resource] = quantity(resource, wanted)
            set_requests.append(f"{resource} request")
        changed = set_requests + set_limits
        if changed:
            resources["requests"] = requests
            if limits:
                resources["limits"] = limits
            notes.append(f"container {index}: " + ", ".join(changed))
    meta = pod.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    annotations[OBSERVED_CONTAINERS_ANNOTATION] = ", ".join(c.get("name", "") for c in spec.get("containers") or [])
    if notes:
        name = (vpa.get("metadata") or {}).get("name", "")
        annotations[UPDATES_ANNOTATION] = f"Pod resources updated by {name}: " + "; ".join(notes)
    meta["annotations"] = annotations
    return notes


def target_ref(vpa: Mapping[str, Any]) -> tuple[str, str, str]:
    """(apiVersion, kind, name) of ``spec.targetRef``."""
    ref = (vpa.get("spec") or {}).get("targetRef") or {}
    return ref.get("apiVersion") or "", ref.get("kind") or "", ref.get("name") or ""


def _controller_ref(obj: Mapping[str, Any]) -> Obj | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def controlled_by_target(vpa: Mapping[str, Any], pod: Mapping[str, Any],
                         get_owner: Any) -> bool:
    """Whether ``pod``'s chain of controllers reaches ``vpa``'s target (``FindTopMostWellKnownOrScalable``).

    ``get_owner(kind, namespace, name)`` returns the owner object or None; a pod of a
    Deployment is reached through its ReplicaSet.
    """
    _, kind, name = target_ref(vpa)
    namespace = (pod.get("metadata") or {}).get("namespace") or ""
    ref = _controller_ref(pod)
    for _ in range(4):
        if ref is None:
            return False
        if ref.get("kind") == kind and ref.get("name") == name:
            return True
        owner = get_owner(ref.get("kind") or "", namespace, ref.get("name") or "")
        if owner is None:
            return False
        ref = _controller_ref(owner)
    return False
