"""Pod and node helpers every descheduler plugin shares (upstream ``pkg/descheduler/pod``, ``node``, ``pkg/utils``).

* pod facts: owner references, priority, QoS, mirror/static/terminating,
  local storage, PVCs, restarts;
* :func:`sort_pods_low_to_high` — upstream ``SortPodsBasedOnPriorityLowToHigh``:
  pods without a priority first, then by priority, equal priorities by QoS
  (BestEffort, Burstable, Guaranteed) — the order evictions take within a node;
* node facts: Ready, unschedulable, allocatable;
* the pieces of upstream's ``NodeFit`` (taints, required node affinity,
  requests; :meth:`emulator.descheduler.framework.ClusterSnapshot.pod_fits_node`
  puts them together with per-pass caches). Taints, affinity and requests come
  from :mod:`emulator.api`, the same code the scheduler decides with.

Requests are cached by (uid, resourceVersion): a pod's spec does not change
under one resourceVersion, and a pass over 100,000 pods must not recompute them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from emulator.api.nodeaffinity import RequiredNodeAffinity
from emulator.api.pods import BEST_EFFORT, BURSTABLE, pod_requests, qos_class
from emulator.api.quantity import cpu_millis, to_int
from emulator.api.taints import Taint, tolerations_tolerate
from emulator.api.types import Obj

# pkg/apis/scheduling SystemCriticalPriority (2 * HighestUserDefinablePriority).
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SOURCE_ANNOTATION = "kubernetes.io/config.source"
NO_SCHEDULE_EFFECTS = frozenset({"NoSchedule"})

_QOS_RANK = {BEST_EFFORT: 0, BURSTABLE: 1}  # Guaranteed: 2
_requests_cache: dict[str, tuple[Any, dict[str, int]]] = {}  # uid -> (resourceVersion, requests)
_qos_cache: dict[str, tuple[Any, int]] = {}  # uid -> (resourceVersion, rank)
_allocatable_cache: dict[str, tuple[Any, dict[str, int]]] = {}  # node uid -> (resourceVersion, allocatable)
_REQUESTS_CACHE_MAX = 500_000
_T = TypeVar("_T")


class PodMemo(Generic[_T]):
    """A value computed from a pod alone, kept by uid while the pod's resourceVersion stays the same.

    A pod cannot change under one resourceVersion, and the informer hands the descheduler the same pods
    pass after pass, so most passes compute nothing. At most ``limit`` pods are kept (then it starts over);
    a pod without a uid or resourceVersion is computed every time. ``cache`` maps uid -> (rv, value).
    """

    __slots__ = ("cache", "compute", "limit")

    def __init__(self, compute: Callable[[Obj], _T], limit: int) -> None:
        self.compute = compute
        self.limit = limit
        self.cache: dict[str, tuple[Any, _T]] = {}

    def __call__(self, pod: Obj) -> _T:
        meta = pod["metadata"]
        uid, rv = meta.get("uid"), meta.get("resourceVersion")
        if uid and rv:
            hit = self.cache.get(uid)
            if hit is not None and hit[0] == rv:
                return hit[1]
        value = self.compute(pod)
        if uid and rv:
            if len(self.cache) >= self.limit:
                self.cache.clear()
            self.cache[uid] = (rv, value)
        return value


# ----------------------------------------------------------------------------- pods
def owner_refs(pod: Obj) -> list[Obj]:
    return pod["metadata"].get("ownerReferences") or []


def priority(pod: Obj) -> int | None:
    value = pod["spec"].get("priority")
    return None if value is None else int(value)


def is_critical(pod: Obj) -> bool:
    """``IsCriticalPriorityPod``: priority at or above system-cluster-critical's."""
    p = priority(pod)
    return p is not None and p >= SYSTEM_CRITICAL_PRIORITY


def is_mirror(pod: Obj) -> bool:
    return MIRROR_ANNOTATION in (pod["metadata"].get("annotations") or {})


def is_static(pod: Obj) -> bool:
    source = (pod["metadata"].get("annotations") or {}).get(SOURCE_ANNOTATION)
    return source is not None and source != "api"


def is_terminating(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def is_daemonset_pod(pod: Obj) -> bool:
    return any(r.get("kind") == "DaemonSet" for r in owner_refs(pod))


def has_local_storage(pod: Obj) -> bool:
    """``IsPodWithLocalStorage``: a hostPath or emptyDir volume."""
    return any("hostPath" in v or "emptyDir" in v for v in pod["spec"].get("volumes") or ())


def has_pvc(pod: Obj) -> bool:
    return any("persistentVolumeClaim" in v for v in pod["spec"].get("volumes") or ())


def phase(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase") or ""


def is_terminal(pod: Obj) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


def restarts(pod: Obj, *, including_init: bool = False) -> int:
    status = pod.get("status") or {}
    total = sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or ())
    if including_init:
        total += sum(int(c.get("restartCount") or 0) for c in status.get("initContainerStatuses") or ())
    return total


def in_states(pod: Obj, states: Sequence[str], *, including_init: bool = False) -> bool:
    """The pod's phase, or some container's waiting reason, is one of ``states``."""
    if phase(pod) in states:
        return True
    status = pod.get("status") or {}
    lists = [status.get("containerStatuses") or []]
    if including_init:
        lists.append(status.get("initContainerStatuses") or [])
    return any(((c.get("state") or {}).get("waiting") or {}).get("reason") in states for cs in lists for c in cs)


def qos_rank(pod: Obj) -> int:
    """0 BestEffort, 1 Burstable, 2 Guaranteed (cached by uid and resourceVersion, as requests are)."""
    meta = pod["metadata"]
    uid, rv = meta.get("uid"), meta.get("resourceVersion")
    if not uid or not rv:
        return _QOS_RANK.get(qos_class(pod), 2)
    cached = _qos_cache.get(uid)
    if cached is not None and cached[0] == rv:
        return cached[1]
    if len(_qos_cache) >= _REQUESTS_CACHE_MAX:
        _qos_cache.clear()
    rank = _QOS_RANK.get(qos_class(pod), 2)
    _qos_cache[uid] = (rv, rank)
    return rank


def sort_pods_low_to_high(pods: list[Obj], tiebreak: Callable[[Obj], Any] | None = None) -> list[Obj]:
    """``SortPodsBasedOnPriorityLowToHigh`` (stable): no priority, then ascending priority, then QoS rank.

    ``tiebreak`` orders pods equal on both (load-aware descheduling passes "highest usage first").
    """
    def key(pod: Obj) -> tuple[Any, ...]:
        p = priority(pod)
        base = (0, 0) if p is None else (1, p)
        return (*base, qos_rank(pod), tiebreak(pod) if tiebreak is not None else 0)

    pods.sort(key=key)
    return pods


def requests_of(pod: Obj) -> dict[str, int]:
    """``pod_requests`` (millicores for cpu, base units otherwise), cached by uid and resourceVersion."""
    meta = pod["metadata"]
    uid, rv = meta.get("uid"), meta.get("resourceVersion")
    if not uid or not rv:
        return pod_requests(pod)  # not from the store: nothing identifies this version of the pod
    cached = _requests_cache.get(uid)
    if cached is not None and cached[0] == rv:
        return cached[1]
    if len(_requests_cache) >= _REQUESTS_CACHE_MAX:
        _requests_cache.clear()
    requests = pod_requests(pod)
    _requests_cache[uid] = (rv, requests)
    return requests


# ----------------------------------------------------------------------------- nodes
def is_ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


def is_unschedulable(node: Obj) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def allocatable(node: Obj) -> dict[str, int]:
    """Allocatable (capacity if none is set) in millicores for cpu, base units otherwise (cached as requests are)."""
    meta = node["metadata"]
    uid, rv = meta.get("uid"), meta.get("resourceVersion")
    cached = _allocatable_cache.get(uid) if uid and rv else None
    if cached is not None and cached[0] == rv:
        return cached[1]
    status = node.get("status") or {}
    raw = status.get("allocatable") or status.get("capacity") or {}
    parsed = {name: cpu_millis(v) if name == "cpu" else to_int(v) for name, v in raw.items()}
    if uid and rv:
        if len(_allocatable_cache) >= _REQUESTS_CACHE_MAX:
            _allocatable_cache.clear()
        _allocatable_cache[uid] = (rv, parsed)
    return parsed


def ready_nodes(nodes: Iterable[Obj], selector: Any = None) -> list[Obj]:
    """``ReadyNodes``: nodes whose Ready condition is True (kemu nodes without conditions count as ready),
    matching the policy's ``nodeSelector``."""
    out = []
    for node in nodes:
        conds = (node.get("status") or {}).get("conditions")
        if conds and not is_ready(node):
            continue
        if selector is not None and not selector.matches(node["metadata"].get("labels")):
            continue
        out.append(node)
    return out


def tolerates_taints(pod: Obj, taints: Sequence[Taint], effects: frozenset[str] = NO_SCHEDULE_EFFECTS) -> bool:
    """``TolerationsTolerateTaintsWithFilter``: every taint with an effect in ``effects`` is tolerated."""
    tolerations = pod["spec"].get("tolerations") or ()
    return all(tolerations_tolerate(tolerations, t) for t in taints if t[2] in effects)


def required_affinity(pod: Obj) -> RequiredNodeAffinity:
    spec = pod["spec"]
    return RequiredNodeAffinity.of(spec.get("nodeSelector") or {}, spec.get("affinity"))


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace')}/{meta['name']}"
