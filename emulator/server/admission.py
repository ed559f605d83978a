"""Admission: the plugins kube-apiserver runs between decoding and storing.

Each plugin is a small object with ``handles(attrs)`` and ``admit(attrs,
lookup)``; ``admit`` may mutate ``attrs.obj`` (mutating admission) and raises a
:class:`~emulator.api.errors.StatusError` to reject. Plugins read other
objects (PriorityClasses, LimitRanges, RuntimeClasses) only through a
:class:`Lookup`, which memoises reads for the life of one request or one batch
of creates, so a batch of 1,000 pods in a namespace reads its LimitRanges once.

Upstream references (behaviour re-implemented, not copied):
``plugin/pkg/admission/priority``, ``plugin/pkg/admission/limitranger``,
``plugin/pkg/admission/runtimeclass``, ``plugin/pkg/admission/defaulttolerationseconds``.
NamespaceLifecycle (namespace must exist and not be terminating) is enforced
inside the store's commit script, atomically with the create.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from emulator.api import errors
from emulator.api.kinds import LIMITRANGE, POD, PRIORITYCLASS, RUNTIMECLASS, Kind
from emulator.api.quantity import parse_quantity

Obj = dict[str, Any]

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


@dataclass
class Lookup:
    """Memoised reads of the objects admission plugins depend on."""

    reader: Reader
    _cache: dict[tuple[str, str], Any] = field(default_factory=dict)

    def _memo(self, key: tuple[str, str], load: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = load()
        return self._cache[key]

    def prefetch(self, namespace: str) -> None:
        """Read what a pod create in ``namespace`` needs in one round trip (PriorityClasses, LimitRanges)."""
        wanted = [k for k in (("pc", ""), ("lr", namespace)) if k not in self._cache]
        if not wanted:
            return
        kinds = {"pc": (PRIORITYCLASS, None), "lr": (LIMITRANGE, namespace)}
        for key, items in zip(wanted, self.reader.list_many([kinds[k[0]] for k in wanted]), strict=True):
            self._cache[key] = items

    def priority_classes(self) -> list[Obj]:
        return self._memo(("pc", ""), lambda: self.reader.list(PRIORITYCLASS).items)

    def limit_ranges(self, namespace: str) -> list[Obj]:
        return self._memo(("lr", namespace), lambda: self.reader.list(LIMITRANGE, namespace).items)

    def runtime_class(self, name: str) -> Obj | None:
        def load() -> Obj | None:
            try:
                return self.reader.get(RUNTIMECLASS, None, name)
            except errors.StatusError as e:
                if e.code == 404:
                    return None
                raise
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


# Upstream's order (pkg/kubeapiserver/options/plugins.go AllOrderedPlugins), restricted to what kemu runs.
DEFAULT_PLUGINS: tuple[Plugin, ...] = (LimitRanger(), Priority(), DefaultTolerationSeconds(), RuntimeClassAdmission())


def admit(attrs: Attributes, lookup: Lookup, plugins: tuple[Plugin, ...] = DEFAULT_PLUGINS) -> None:
    for plugin in plugins:
        if plugin.handles(attrs):
            plugin.admit(attrs, lookup)
