"""Admission: the plugins kube-apiserver runs between decoding and storing.

Each plugin is a small object with ``handles(attrs)`` and ``admit(attrs,
lookup)``; ``admit`` may mutate ``attrs.obj`` (mutating admission) and raises a
:class:`~emulator.api.errors.StatusError` to reject. Plugins read other
objects (PriorityClasses, LimitRanges, RuntimeClasses) only through a
:class:`Lookup`, which memoises reads for the life of one request or one batch
of creates, so a batch of 1,000 pods in a namespace reads its LimitRanges once.

Upstream references (behaviour re-implemented, not copied):
``plugin/pkg/admission/priority``, ``plugin/pkg/admission/limitranger``,
``plugin/pkg/admission/runtimeclass``, ``plugin/pkg/admission/defaulttolerationseconds``,
``plugin/pkg/admission/resourcequota`` (with ``pkg/quota/v1/evaluator/core/pods.go``).
NamespaceLifecycle (namespace must exist and not be terminating) is enforced
inside the store's commit script, atomically with the create.

**ResourceQuota** is the one plugin that writes. As upstream, it charges a create to every
quota it matches *before* the object is stored: it adds the object's usage to the quota's
``status.used`` with a compare-and-set on the quota's resourceVersion (``Store.update`` with
``expected_rv``), so quotas serialise concurrent creates — of two creates racing for the last
unit, one CAS wins and the other re-reads the quota, sees it full and is refused. The window,
the same as upstream's: a create that is charged and then fails in the store (AlreadyExists, a
terminating namespace) leaves its charge in ``status.used`` until the resource quota
controller (:mod:`emulator.controllers.resourcequota`) recomputes usage from the objects (on a
deletion it sees, or on its periodic resync). Quotas are read from ``status.hard`` /
``status.used``: a quota the controller has not synced yet constrains nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from emulator.api import errors, pods, vpa
from emulator.api.kinds import (
    LIMITRANGE,
    POD,
    PRIORITYCLASS,
    RESOURCEQUOTA,
    RUNTIMECLASS,
    VERTICALPODAUTOSCALER,
    Kind,
    by_api_version_kind,
)
from emulator.api.quantity import Quantity, parse_quantity
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.clock import Clock, parse_rfc3339

SYSTEM_PRIORITY_CLASSES: dict[str, int] = {
    # pkg/apis/scheduling/types.go: SystemClusterCritical / SystemNodeCritical.
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}
DEFAULT_TOLERATION_SECONDS = 300


@dataclass
class Attributes:
    kind: Kind
    operation: str  # CREATE | UPDATE | DELETE
    obj: Obj
    old: Obj | None = None
    subresource: str = ""
    dry_run: bool = False

    @property
    def name(self) -> str:
        return (self.obj.get("metadata") or {}).get("name", "")

    @property
    def namespace(self) -> str:
        return (self.obj.get("metadata") or {}).get("namespace", "")


class Reader(Protocol):
    """What a Lookup needs from the store (``emulator.store.Store`` satisfies it)."""

    def get(self, kind: Kind, namespace: str | None, name: str) -> Obj: ...

    def list(self, kind: Kind, namespace: str | None = None) -> Any: ...

    def list_many(self, requests: list[tuple[Kind, str | None]]) -> list[list[Obj]]: ...

    def update(self, kind: Kind, obj: Obj, expected_rv: str | None = None) -> Obj: ...


@dataclass
class Lookup:
    """Memoised reads of the objects admission plugins depend on (and the quota writes of ResourceQuota)."""

    reader: Reader
    _cache: dict[tuple[str, str], Any] = field(default_factory=dict)
    clock: Clock | None = None

    def _memo(self, key: tuple[str, str], load: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = load()
        return self._cache[key]

    def prefetch(self, namespace: str) -> None:
        """Read what a pod create in ``namespace`` needs in one round trip (PriorityClasses, LimitRanges)."""
        wanted = [k for k in (("pc", ""), ("lr", namespace), ("rq", namespace), ("vpa", namespace))
                  if k not in self._cache]
        if not wanted:
            return
        kinds = {"pc": (PRIORITYCLASS, None), "lr": (LIMITRANGE, namespace), "rq": (RESOURCEQUOTA, namespace),
                 "vpa": (VERTICALPODAUTOSCALER, namespace)}
        for key, items in zip(wanted, self.reader.list_many([kinds[k[0]] for k in wanted]), strict=True):
            self._cache[key] = items

    def priority_classes(self) -> list[Obj]:
        return self._memo(("pc", ""), lambda: self.reader.list(PRIORITYCLASS).items)

    def limit_ranges(self, namespace: str) -> list[Obj]:
        return self._memo(("lr", namespace), lambda: self.reader.list(LIMITRANGE, namespace).items)

    def resource_quotas(self, namespace: str) -> list[Obj]:
        return self._memo(("rq", namespace), lambda: list(self.reader.list(RESOURCEQUOTA, namespace).items))

    def vpas(self, namespace: str) -> list[Obj]:
        return self._memo(("vpa", namespace), lambda: list(self.reader.list(VERTICALPODAUTOSCALER, namespace).items))

    def object(self, kind: Kind, namespace: str | None, name: str) -> Obj | None:
        """One object by kind and name, memoised; None when it does not exist."""
        def load() -> Obj | None:
            return errors.get_or_none(self.reader, kind, namespace, name)
        return self._memo((kind.resource, f"{namespace}/{name}"), load)

    def fresh_quota(self, namespace: str, name: str) -> Obj | None:
        """Re-read one quota from the store (after a lost CAS) and remember it; None if it is gone."""
        quota = errors.get_or_none(self.reader, RESOURCEQUOTA, namespace, name)
        self._replace_quota(namespace, name, quota)
        return quota

    def charge_quota(self, quota: Obj, used: dict[str, str]) -> Obj:
        """CAS ``status.used`` of ``quota`` (as read); the stored quota, or StaleResourceVersion when it changed."""
        meta = quota["metadata"]
        new = {**quota, "status": {**(quota.get("status") or {}), "used": used}}
        stored = self.reader.update(RESOURCEQUOTA, new, meta["resourceVersion"])
        # Later creates of the same batch must see this charge (and CAS against the new version).
        self._replace_quota(meta.get("namespace") or "", meta["name"], stored)
        return stored

    def _replace_quota(self, namespace: str, name: str, quota: Obj | None) -> None:
        key = ("rq", namespace)
        if key not in self._cache:
            return
        others = [q for q in self._cache[key] if q["metadata"]["name"] != name]
        self._cache[key] = others + ([quota] if quota is not None else [])

    def now(self) -> float:
        return self.clock.now() if self.clock is not None else 0.0

    def runtime_class(self, name: str) -> Obj | None:
        def load() -> Obj | None:
            return errors.get_or_none(self.reader, RUNTIMECLASS, None, name)
        return self._memo(("rc", name), load)


class Plugin(Protocol):
    name: str

    def handles(self, attrs: Attributes) -> bool: ...

    def admit(self, attrs: Attributes, lookup: Lookup) -> None: ...


def _forbidden(attrs: Attributes, why: str, path: str = "") -> errors.StatusError:
    err = errors.forbidden(attrs.kind.plural, attrs.name, why, attrs.kind.group)
    if path:
        err.causes.append(errors.Cause(path, why, "FieldValueForbidden"))
    return err


def _pod_create(attrs: Attributes) -> bool:
    return attrs.kind is POD and attrs.operation == "CREATE" and not attrs.subresource


def _all_containers(spec: Obj) -> list[tuple[str, Obj]]:
    return ([(f"spec.initContainers[{i}]", c) for i, c in enumerate(spec.get("initContainers") or [])]
            + [(f"spec.containers[{i}]", c) for i, c in enumerate(spec.get("containers") or [])])


class Priority:
    """Resolves ``priorityClassName`` into ``spec.priority`` / ``spec.preemptionPolicy``; guards globalDefault."""

    name = "Priority"

    def handles(self, attrs: Attributes) -> bool:
        return _pod_create(attrs) or (attrs.kind is PRIORITYCLASS and attrs.operation in ("CREATE", "UPDATE"))

    def admit(self, attrs: Attributes, lookup: Lookup) -> None:
        if attrs.kind is PRIORITYCLASS:
            self._one_global_default(attrs, lookup)
            return
        spec = attrs.obj["spec"]
        class_name = spec.get("priorityClassName") or ""
        policy = "PreemptLowerPriority"
        if class_name in SYSTEM_PRIORITY_CLASSES and not any(
                pc["metadata"]["name"] == class_name for pc in lookup.priority_classes()):
            value = SYSTEM_PRIORITY_CLASSES[class_name]
        elif class_name:
            pc = next((p for p in lookup.priority_classes() if p["metadata"]["name"] == class_name), None)
            if pc is None:
                raise _forbidden(attrs, f"no PriorityClass with name {class_name} was found",
                                 "spec.priorityClassName")
            value, policy = int(pc.get("value", 0)), pc.get("preemptionPolicy") or policy
        else:
            # The lowest-valued globalDefault class wins if several claim it (upstream getDefaultPriorityClass).
            defaults = [p for p in lookup.priority_classes() if p.get("globalDefault")]
            pc = min(defaults, key=lambda p: int(p.get("value", 0)), default=None)
            value = int(pc.get("value", 0)) if pc else 0
            if pc:
                spec["priorityClassName"] = pc["metadata"]["name"]
                policy = pc.get("preemptionPolicy") or policy
        given = spec.get("priority")
        if given is not None and given != value:
            raise _forbidden(attrs, f"the integer value of priority ({given}) must not be provided in pod spec; "
                                    f"priority admission controller computed {value} from the given "
                                    "PriorityClass name", "spec.priority")
        spec["priority"] = value
        spec.setdefault("preemptionPolicy", policy)

    @staticmethod
    def _one_global_default(attrs: Attributes, lookup: Lookup) -> None:
        if not attrs.obj.get("globalDefault"):
            return
        for pc in lookup.priority_classes():
            other = pc["metadata"]["name"]
            if pc.get("globalDefault") and other != attrs.name:
                raise _forbidden(attrs, f"PriorityClass {other} is already marked as default. "
                                        "Only one default can exist", "globalDefault")


class LimitRanger:
    """Applies LimitRange container defaults and enforces min/max (Container and Pod types)."""

    name = "LimitRanger"

    def handles(self, attrs: Attributes) -> bool:
        return _pod_create(attrs)

    def admit(self, attrs: Attributes, lookup: Lookup) -> None:
        ranges = lookup.limit_ranges(attrs.namespace)
        if not ranges:
            return
        spec = attrs.obj["spec"]
        containers = _all_containers(spec)
        for lr in ranges:
            for item in (lr.get("spec") or {}).get("limits") or []:
                if item.get("type") != "Container":
                    continue
                for _, c in containers:
                    res = c.setdefault("resources", {})
                    for src, dst in (("default", "limits"), ("defaultRequest", "requests")):
                        for rname, value in (item.get(src) or {}).items():
                            if rname not in (res.get(dst) or {}):
                                res.setdefault(dst, {})[rname] = value
        for lr in ranges:
            for item in (lr.get("spec") or {}).get("limits") or []:
                if item.get("type") == "Container":
                    for path, c in containers:
                        self._bounds(attrs, item, c.get("resources") or {}, "Container", path)

    @staticmethod
    def _bounds(attrs: Attributes, item: Obj, res: Obj, scope: str, path: str) -> None:
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        for rname, lo in (item.get("min") or {}).items():
            req = requests.get(rname)
            if req is None or parse_quantity(req) < parse_quantity(lo):
                got = f"request is {req}" if req is not None else "no request is specified"
                raise _forbidden(attrs, f"minimum {rname} usage per {scope} is {lo}, but {got}",
                                 f"{path}.resources.requests.{rname}")
        for rname, hi in (item.get("max") or {}).items():
            lim = limits.get(rname)
            if lim is None or parse_quantity(lim) > parse_quantity(hi):
                got = f"limit is {lim}" if lim is not None else "no limit is specified"
                raise _forbidden(attrs, f"maximum {rname} usage per {scope} is {hi}, but {got}",
                                 f"{path}.resources.limits.{rname}")


class RuntimeClassAdmission:
    """Copies the RuntimeClass's ``overhead.podFixed`` and scheduling constraints into the pod."""

    name = "RuntimeClass"

    def handles(self, attrs: Attributes) -> bool:
        return _pod_create(attrs) and bool(attrs.obj["spec"].get("runtimeClassName"))

    def admit(self, attrs: Attributes, lookup: Lookup) -> None:
        spec = attrs.obj["spec"]
        rc_name = spec["runtimeClassName"]
        rc = lookup.runtime_class(rc_name)
        if rc is None:
            raise _forbidden(attrs, f'pod rejected: RuntimeClass "{rc_name}" not found', "spec.runtimeClassName")
        fixed = (rc.get("overhead") or {}).get("podFixed")
        if fixed:
            given = spec.get("overhead")
            if given and {k: parse_quantity(v) for k, v in given.items()} != {
                    k: parse_quantity(v) for k, v in fixed.items()}:
                raise _forbidden(attrs, "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined "
                                        "Overhead", "spec.overhead")
            spec["overhead"] = dict(fixed)
        scheduling = rc.get("scheduling") or {}
        selector = spec.setdefault("nodeSelector", {})
        for key, value in (scheduling.get("nodeSelector") or {}).items():
            if selector.get(key, value) != value:
                raise _forbidden(attrs, "pod rejected: conflict between pod's nodeSelector and RuntimeClass "
                                        f'"{rc_name}" nodeSelector on key {key}', "spec.nodeSelector")
            selector[key] = value
        if not selector:
            spec.pop("nodeSelector")
        tolerations = spec.setdefault("tolerations", [])
        for t in scheduling.get("tolerations") or []:
            if t not in tolerations:
                tolerations.append(t)
        if not tolerations:
            spec.pop("tolerations")


class DefaultTolerationSeconds:
    """Pods tolerate not-ready / unreachable nodes for 300 s unless they say otherwise."""

    name = "DefaultTolerationSeconds"
    _TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")

    def handles(self, attrs: Attributes) -> bool:
        return _pod_create(attrs)

    def admit(self, attrs: Attributes, lookup: Lookup) -> None:
        tolerations = attrs.obj["spec"].setdefault("tolerations", [])
        for key in self._TAINTS:
            tolerated = any(
                (t.get("key") == key or (not t.get("key") and t.get("operator") == "Exists"))
                and t.get("effect") in (None, "", "NoExecute")
                for t in tolerations
            )
            if not tolerated:
                tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})


# ----------------------------------------------------------------------------- ResourceQuota
#
# The usage model (upstream pkg/quota/v1/evaluator/core/pods.go and the generic object count
# evaluator), shared with the resource quota controller, which imports these functions.

QUOTA_SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
                "CrossNamespacePodAffinity")
# Core kinds whose count has an unprefixed quota name besides count/<plural> (pkg/quota/v1/evaluator/core).
_LEGACY_COUNT_NAMES = frozenset({"configmaps", "persistentvolumeclaims", "resourcequotas", "secrets", "services",
                                 "replicationcontrollers"})
# What pods.go's Constraints insists every container names when a quota limits it ("this was a mistake", upstream).
_CONTAINER_REQUIRED = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
_POD_COUNTS = frozenset({"pods", "count/pods"})
_COMPUTE = ("cpu", "memory", "ephemeral-storage")
_QUOTA_CAS_ATTEMPTS = 16


def _quantities(values: Any) -> dict[str, Quantity]:
    return {str(k): parse_quantity(v) for k, v in (values or {}).items()}


def _pod_compute(spec: Obj) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """The pod's (requests, limits): app containers summed, raised to any init container's, plus overhead.

    Upstream ``resourcehelper.PodRequests`` / ``PodLimits``, kept as quantities so the numbers a 403
    prints read as the user wrote them (``1Gi``, ``500m``).
    """
    out: list[dict[str, Quantity]] = []
    for field_name in ("requests", "limits"):
        total: dict[str, Quantity] = {}
        for c in spec.get("containers") or []:
            for r, q in _quantities((c.get("resources") or {}).get(field_name)).items():
                total[r] = total[r] + q if r in total else q
        for c in spec.get("initContainers") or []:
            for r, q in _quantities((c.get("resources") or {}).get(field_name)).items():
                if r not in total or q > total[r]:
                    total[r] = q
        for r, q in _quantities(spec.get("overhead")).items():
            # Overhead adds to every request, but only to limits that are set (upstream PodLimits).
            if field_name == "requests" or r in total:
                total[r] = total[r] + q if r in total else q
        out.append(total)
    return out[0], out[1]


def pod_counts_for_quota(pod: Obj, now: float) -> bool:
    """``QuotaV1Pod``: a pod counts unless terminal, or being deleted and past its grace period."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    meta = pod.get("metadata") or {}
    stamp, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    return not (stamp and grace is not None and now > parse_rfc3339(stamp) + float(grace))


def pod_usage(pod: Obj) -> dict[str, Quantity]:
    """``PodUsageFunc`` for a pod that counts: pods, count/pods, and its compute requests and limits."""
    one = parse_quantity(1)
    usage = {"pods": one, "count/pods": one}
    requests, limits = _pod_compute(pod.get("spec") or {})
    for r in _COMPUTE:
        if r in requests:
            usage[r] = usage[f"requests.{r}"] = requests[r]
        if r in limits:
            usage[f"limits.{r}"] = limits[r]
    for r, q in requests.items():
        if r.startswith("hugepages-"):
            usage[r] = usage[f"requests.{r}"] = q
        elif r not in _COMPUTE and pods.is_extended_resource(r):
            usage[f"requests.{r}"] = q  # extended resources are quota'd as requests.<name> only
    return usage


def object_usage(kind: Kind, obj: Obj, now: float = 0.0) -> dict[str, Quantity]:
    """What one object of ``kind`` adds to a quota (empty for a pod that does not count)."""
    if kind is POD:
        return pod_usage(obj) if pod_counts_for_quota(obj, now) else {}
    usage = {f"count/{kind.resource}": parse_quantity(1)}
    if not kind.group and kind.plural in _LEGACY_COUNT_NAMES:
        usage[kind.plural] = parse_quantity(1)
    return usage


def matching_resources(kind: Kind, names: Any) -> list[str]:
    """The quota resource names (of ``names``) that objects of ``kind`` are charged to (``MatchingResources``)."""
    if kind is POD:
        return sorted(n for n in names if n in _POD_COUNTS or n in _COMPUTE or n.startswith(
            ("requests.", "limits.", "hugepages-")))
    own = {f"count/{kind.resource}"} | ({kind.plural} if not kind.group and kind.plural in _LEGACY_COUNT_NAMES
                                        else set())
    return sorted(n for n in names if n in own)


def scope_selectors(quota: Obj) -> list[tuple[str, str, list[str]]]:
    """``GetScopeSelectorsFromQuota``: ``spec.scopes`` as Exists, plus ``spec.scopeSelector`` requirements."""
    spec = quota.get("spec") or {}
    out = [(str(s), "Exists", []) for s in spec.get("scopes") or []]
    for req in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        out.append((str(req.get("scopeName") or ""), str(req.get("operator") or ""), list(req.get("values") or [])))
    return out


def _cross_namespace_affinity(spec: Obj) -> bool:
    affinity = spec.get("affinity") or {}
    for which in ("podAffinity", "podAntiAffinity"):
        a = affinity.get(which) or {}
        terms = list(a.get("requiredDuringSchedulingIgnoredDuringExecution") or []) + [
            w.get("podAffinityTerm") or {} for w in a.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms):
            return True
    return False


def pod_matches_scope(pod: Obj, scope: str, operator: str, values: list[str]) -> bool:
    """``podMatchesScopeFunc``: one scope (or scope selector requirement) against a pod."""
    spec = pod.get("spec") or {}
    deadline = spec.get("activeDeadlineSeconds")
    if scope == "Terminating":
        return deadline is not None and int(deadline) >= 0
    if scope == "NotTerminating":
        return deadline is None
    if scope in ("BestEffort", "NotBestEffort"):
        best_effort = pods.qos_class(pod) == "BestEffort"
        return best_effort if scope == "BestEffort" else not best_effort
    if scope == "PriorityClass":
        name = str(spec.get("priorityClassName") or "")
        return {"Exists": bool(name), "DoesNotExist": not name, "In": name in values,
                "NotIn": name not in values}.get(operator, False)
    if scope == "CrossNamespacePodAffinity":
        cross = _cross_namespace_affinity(spec)
        return not cross if operator == "DoesNotExist" else cross
    return False


def quota_matches(quota: Obj, kind: Kind, obj: Obj, hard: Any) -> bool:
    """Upstream ``quota.Matches``: the quota limits something ``obj`` uses and all its scopes select it.

    Scopes only ever select pods (the generic count evaluator matches no scope).
    """
    if not matching_resources(kind, hard):
        return False
    selectors = scope_selectors(quota)
    if not selectors:
        return True
    return kind is POD and all(pod_matches_scope(obj, *s) for s in selectors)


def _pretty(values: dict[str, Quantity], names: list[str]) -> str:
    """``prettyPrint``: sorted ``name=quantity`` pairs joined by commas."""
    return ",".join(f"{n}={values.get(n, parse_quantity(0))}" for n in sorted(names))


def _missing_container_resources(spec: Obj, required: set[str]) -> dict[str, set[str]]:
    """``enforcePodContainerConstraints``: which required names each container fails to set (resource -> names)."""
    missing: dict[str, set[str]] = {}
    for c in list(spec.get("initContainers") or []) + list(spec.get("containers") or []):
        res = c.get("resources") or {}
        has: set[str] = set()
        for r in ("cpu", "memory"):
            if r in (res.get("requests") or {}):
                has |= {r, f"requests.{r}"}
            if r in (res.get("limits") or {}):
                has.add(f"limits.{r}")
        for r in required - has:
            missing.setdefault(r, set()).add(str(c.get("name") or ""))
    return missing


class ResourceQuotaAdmission:
    """Refuses creates that would exceed a matching ResourceQuota and charges the rest to it (CAS on the quota)."""

    name = "ResourceQuota"

    def handles(self, attrs: Attributes) -> bool:
        return attrs.operation == "CREATE" and attrs.kind.namespaced and not attrs.subresource

    def admit(self, attrs: Attributes, lookup: Lookup) -> None:
        quotas = lookup.resource_quotas(attrs.namespace)
        if not quotas:
            return
        delta = object_usage(attrs.kind, attrs.obj, lookup.now())
        if not delta or all(q.is_zero() for q in delta.values()):
            return
        # Check every quota first: a refusal by any of them must charge none (upstream checkQuotas).
        charges = [(q, requested) for q in quotas
                   if (requested := self._check(attrs, q, delta)) is not None]
        if attrs.dry_run:
            return
        for quota, requested in charges:
            self._charge(attrs, lookup, quota, requested, delta)

    def _check(self, attrs: Attributes, quota: Obj, delta: dict[str, Quantity]) -> dict[str, Quantity] | None:
        """The usage to add to ``quota`` (None: it does not concern this object), or the upstream 403."""
        status = quota.get("status") or {}
        hard = _quantities(status.get("hard"))
        if not quota_matches(quota, attrs.kind, attrs.obj, hard):
            return None
        qname = quota["metadata"]["name"]
        interesting = matching_resources(attrs.kind, hard)
        if attrs.kind is POD:
            required = set(interesting) & _CONTAINER_REQUIRED
            missing = _missing_container_resources(attrs.obj.get("spec") or {}, required)
            if missing:
                parts = "; ".join(f"{r} for: {','.join(sorted(missing[r]))}" for r in sorted(missing))
                raise _forbidden(attrs, f"failed quota: {qname}: must specify {parts}")
        used = _quantities(status.get("used"))
        unknown = [r for r in interesting if r not in used]
        if unknown:
            raise _forbidden(attrs, f"status unknown for quota: {qname}, resources: {','.join(unknown)}")
        requested = {r: q for r, q in delta.items() if r in hard}
        if not requested:
            return None
        exceeded = [r for r, q in requested.items() if used.get(r, parse_quantity(0)) + q > hard[r]]
        if exceeded:
            raise _forbidden(attrs, f"exceeded quota: {qname}, requested: {_pretty(requested, exceeded)}, "
                                    f"used: {_pretty(used, exceeded)}, limited: {_pretty(hard, exceeded)}")
        return requested

    def _charge(self, attrs: Attributes, lookup: Lookup, quota: Obj, requested: dict[str, Quantity],
                delta: dict[str, Quantity]) -> None:
        """Add ``requested`` to the quota's ``status.used`` by CAS; on a lost race re-read, re-check, retry."""
        for _ in range(_QUOTA_CAS_ATTEMPTS):
            used = dict((quota.get("status") or {}).get("used") or {})
            for r, q in requested.items():
                used[r] = str(parse_quantity(used.get(r, 0)) + q)
            try:
                lookup.charge_quota(quota, used)
                return
            except errors.StaleResourceVersion:
                fresh = lookup.fresh_quota(attrs.namespace, quota["metadata"]["name"])
                if fresh is None:
                    return  # the quota was deleted meanwhile: nothing to charge
                quota = fresh
                new_requested = self._check(attrs, quota, delta)  # raises when the winner took the room
                if new_requested is None:
                    return
                requested = new_requested
        raise errors.conflict(RESOURCEQUOTA.plural, quota["metadata"]["name"],
                              f"the quota was changed {_QUOTA_CAS_ATTEMPTS} times while charging it; try again")


class VerticalPodAutoscalerAdmission:
    """The VPA admission controller (a mutating webhook upstream): new pods get the recommended requests.

    kubernetes/autoscaler ``vertical-pod-autoscaler/pkg/admission-controller``: a pod
    whose chain of controllers reaches a VPA's target (and whose labels its selector
    matches), with the VPA's mode not ``Off``, gets each container's requests set to
    the recommendation's target and its limits scaled in proportion
    (:func:`emulator.api.vpa.apply_to_pod`). No VPA or no recommendation: unchanged.
    """

    name = "VerticalPodAutoscaler"

    def handles(self, attrs: Attributes) -> bool:
        return _pod_create(attrs)

    def admit(self, attrs: Attributes, lookup: Lookup) -> None:
        vpas = lookup.vpas(attrs.namespace)
        if not vpas:
            return
        pod = attrs.obj
        labels = (pod.get("metadata") or {}).get("labels") or {}

        def owner(kind: str, namespace: str, name: str) -> Obj | None:
            if kind not in ("ReplicaSet", "Deployment", "DaemonSet", "StatefulSet"):
                return None
            try:
                return lookup.object(by_api_version_kind("apps/v1", kind), namespace, name)
            except errors.StatusError:
                return None

        for obj in vpas:
            if vpa.update_mode(obj) == "Off":
                continue
            api_version, kind_name, name = vpa.target_ref(obj)
            try:
                target = lookup.object(by_api_version_kind(api_version, kind_name), attrs.namespace, name)
            except errors.StatusError:
                continue
            selector = ((target or {}).get("spec") or {}).get("selector")
            if not selector or not LabelSelector.from_dict(selector).matches(labels):
                continue
            if vpa.controlled_by_target(obj, pod, owner):
                vpa.apply_to_pod(obj, pod)
                return


def _keda_webhook() -> Plugin:
    from emulator.server.keda_webhook import KedaWebhook  # it imports this module's Attributes and Lookup

    return KedaWebhook()


# Upstream's order (pkg/kubeapiserver/options/plugins.go AllOrderedPlugins), restricted to what kemu runs.
# ResourceQuota comes last, as upstream: it charges what the mutating plugins made the object ask for.
# The VPA's webhook runs after the in-tree mutating plugins, before ResourceQuota charges the result.
# KEDA's validating webhook (emulator.server.keda_webhook) runs with the other webhooks, before ResourceQuota.
DEFAULT_PLUGINS: tuple[Plugin, ...] = (LimitRanger(), Priority(), DefaultTolerationSeconds(), RuntimeClassAdmission(),
                                       VerticalPodAutoscalerAdmission(), _keda_webhook(), ResourceQuotaAdmission())


def admit(attrs: Attributes, lookup: Lookup, plugins: tuple[Plugin, ...] = DEFAULT_PLUGINS) -> None:
    for plugin in plugins:
        if plugin.handles(attrs):
            plugin.admit(attrs, lookup)
