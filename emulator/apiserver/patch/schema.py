"""Per-field merge metadata: upstream's ``patchStrategy``/``patchMergeKey`` tags and ``+listType`` markers as data.

Upstream reads ``patchStrategy``/``patchMergeKey`` struct tags (strategic
merge) and ``+listType``/``+listMapKey`` markers (server-side apply, via the
OpenAPI schema) from the Go types. kemu has no Go types, so the same facts
are DATA: :data:`MERGE_KEYS` maps a resource (``Kind.resource``) to
``{path pattern: FieldMeta}``, with patterns such as
``spec.template.spec.containers[].ports``. The two views differ upstream
and are both recorded: container ports merge by ``containerPort`` in a
strategic patch but are keyed by ``(containerPort, protocol)`` for apply;
``status.hostIPs`` merges by ``ip`` but is atomic for apply. Anything not in
the table behaves as upstream's default: maps merge, lists are replaced
whole (``tolerations``, Node ``spec.taints``, ``status.containerStatuses``
and ``status.images`` really have no strategy upstream; ``kubectl taint``
relies on that by sending the complete new list). Entries were read from
``staging/src/k8s.io/api/core/v1/types.go``, ``apps/v1/types.go``,
``batch/v1/types.go``, ``policy/v1/types.go`` and ``apimachinery``'s
``meta/v1/types.go``. Lookup is one dict access per visited field, so a
patch costs time proportional to its own size plus the lists it touches.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from emulator.api.kinds import Kind

# ----------------------------------------------------------------------------- merge metadata (data)


@dataclass(frozen=True, slots=True)
class FieldMeta:
    """How one field merges, in the two vocabularies upstream uses.

    ``strategy``/``merge_key`` are the strategic-merge struct tags (``patchStrategy``,
    ``patchMergeKey``): ``"merge"`` with a key merges a list of objects by that key,
    ``"merge"`` without a key merges a list of primitives as a set, ``"replace"`` on a
    map replaces it whole, ``""`` is the default (maps merge, lists are replaced).

    ``ssa``/``keys`` are the server-side-apply markers: ``"map"`` is an associative list
    keyed by ``keys`` (``key_defaults`` fill optional key fields, as the schema default of
    a port's ``protocol`` does), ``"set"`` a list of unique primitives, ``"atomic"`` a list,
    map or struct owned as one value; ``""`` is the default (lists atomic, maps granular).

    ``retain_keys`` records ``patchStrategy:"retainKeys"``. Servers never act on it (only
    on an explicit ``$retainKeys`` directive, which clients derive from it); it is kept so
    the table is a faithful copy of the tags.
    """

    strategy: str = ""
    merge_key: str = ""
    ssa: str = ""
    keys: tuple[str, ...] = ()
    key_defaults: tuple[tuple[str, Any], ...] = ()
    retain_keys: bool = False
    # (JSON-quoted key name, name, default or None) in key-name order: how apply serialises an
    # item's ``k:{...}`` element. Precomputed because it is needed for every list item walked.
    key_plan: tuple[tuple[str, str, Any], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        defaults = dict(self.key_defaults)
        plan = tuple((json.dumps(name), name, defaults.get(name)) for name in sorted(self.keys))
        object.__setattr__(self, "key_plan", plan)


def _keyed(merge_key: str, *ssa_keys: str, retain_keys: bool = False, **defaults: Any) -> FieldMeta:
    """A list merged by ``merge_key`` (strategic) and keyed by ``ssa_keys`` (apply; default: the same key)."""
    return FieldMeta("merge", merge_key, "map", ssa_keys or (merge_key,), tuple(defaults.items()), retain_keys)


_SET = FieldMeta("merge", "", "set")
_ATOMIC = FieldMeta(ssa="atomic")
# Explicitly strategy-less lists: replaced by a strategic patch, atomic for apply. Listed (although
# it is the default) where getting it wrong would be tempting: tolerations, taints, statuses.
_REPLACED = FieldMeta(ssa="atomic")


def _at(prefix: str, fragment: Mapping[str, FieldMeta]) -> dict[str, FieldMeta]:
    return {f"{prefix}.{path}": meta for path, meta in fragment.items()}


# meta/v1 ObjectMeta: finalizers are a set; ownerReferences merge by uid, each one atomic.
_OBJECT_META: dict[str, FieldMeta] = {
    "finalizers": _SET,
    "ownerReferences": _keyed("uid"),
    "ownerReferences[]": _ATOMIC,
}

# core/v1 Container (and EphemeralContainerCommon).
_CONTAINER: dict[str, FieldMeta] = {
    "ports": _keyed("containerPort", "containerPort", "protocol", protocol="TCP"),
    "env": _keyed("name"),
    "env[].valueFrom.configMapKeyRef": _ATOMIC,
    "env[].valueFrom.secretKeyRef": _ATOMIC,
    "env[].valueFrom.fieldRef": _ATOMIC,
    "env[].valueFrom.resourceFieldRef": _ATOMIC,
    "env[].valueFrom.fileKeyRef": _ATOMIC,
    "volumeMounts": _keyed("mountPath"),
    "volumeDevices": _keyed("devicePath"),
    "resources.claims": FieldMeta(ssa="map", keys=("name",)),
}

# core/v1 PodSpec.
_POD_SPEC: dict[str, FieldMeta] = {
    "volumes": _keyed("name", retain_keys=True),
    "initContainers": _keyed("name"),
    "containers": _keyed("name"),
    "ephemeralContainers": _keyed("name"),
    **{f"{c}[].{path}": meta for c in ("initContainers", "containers", "ephemeralContainers")
       for path, meta in _CONTAINER.items()},
    "imagePullSecrets": _keyed("name"),
    "hostAliases": _keyed("ip"),
    "topologySpreadConstraints": _keyed("topologyKey", "topologyKey", "whenUnsatisfiable"),
    "topologySpreadConstraints[].labelSelector": _ATOMIC,
    "schedulingGates": _keyed("name"),
    "resourceClaims": _keyed("name", retain_keys=True),
    "tolerations": _REPLACED,
    "readinessGates": _REPLACED,
    "nodeSelector": _ATOMIC,  # +mapType=atomic
    "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution": _ATOMIC,  # NodeSelector is atomic
}

# core/v1 PodStatus.
_POD_STATUS: dict[str, FieldMeta] = {
    "conditions": _keyed("type"),
    "podIPs": _keyed("ip"),
    "hostIPs": FieldMeta("merge", "ip", "atomic"),
    "resourceClaimStatuses": _keyed("name", retain_keys=True),
    "initContainerStatuses": _REPLACED,
    "containerStatuses": _REPLACED,
    "ephemeralContainerStatuses": _REPLACED,
}

_META = _at("metadata", _OBJECT_META)
_CONDITIONS_BY_TYPE = {"status.conditions": _keyed("type")}


def _pod_template(prefix: str) -> dict[str, FieldMeta]:
    return {**_at(f"{prefix}.metadata", _OBJECT_META), **_at(f"{prefix}.spec", _POD_SPEC)}


_WORKLOAD = {**_META, "spec.selector": _ATOMIC, **_pod_template("spec.template"), **_CONDITIONS_BY_TYPE}

MERGE_KEYS: dict[str, dict[str, FieldMeta]] = {
    "pods": {**_META, **_at("spec", _POD_SPEC), **_at("status", _POD_STATUS)},
    "nodes": {
        **_META,
        "spec.podCIDRs": _SET,
        "spec.taints": _REPLACED,
        "status.conditions": _keyed("type"),
        "status.addresses": _keyed("type"),
        "status.images": _REPLACED,
        "status.volumesInUse": _REPLACED,
        "status.volumesAttached": _REPLACED,
    },
    "namespaces": {**_META, "spec.finalizers": _REPLACED, **_CONDITIONS_BY_TYPE},
    "services": {
        **_META,
        "spec.ports": _keyed("port", "port", "protocol", protocol="TCP"),
        "spec.selector": _ATOMIC,
        **_CONDITIONS_BY_TYPE,
    },
    "serviceaccounts": {**_META, "secrets": _keyed("name"), "imagePullSecrets": _ATOMIC},
    "endpoints": {**_META, "subsets": _REPLACED},
    "endpointslices.discovery.k8s.io": {**_META, "endpoints": _REPLACED, "ports": _REPLACED},
    "events": {**_META, "involvedObject": _ATOMIC, "related": _ATOMIC},
    "deployments.apps": {**_WORKLOAD, "spec.strategy": FieldMeta(retain_keys=True)},
    "replicasets.apps": _WORKLOAD,
    "daemonsets.apps": _WORKLOAD,
    "statefulsets.apps": {**_WORKLOAD, "spec.volumeClaimTemplates": _REPLACED},
    "jobs.batch": {
        **_META,
        "spec.selector": _ATOMIC,
        **_pod_template("spec.template"),
        "status.conditions": FieldMeta("merge", "type", "atomic"),
    },
    "cronjobs.batch": {
        **_META,
        "spec.jobTemplate.spec.selector": _ATOMIC,
        **_pod_template("spec.jobTemplate.spec.template"),
        "status.active": _REPLACED,
    },
    "poddisruptionbudgets.policy": {
        **_META,
        "spec.selector": FieldMeta("replace", ssa="atomic"),
        **_CONDITIONS_BY_TYPE,
    },
}


def schema_for(kind: Kind | None) -> Mapping[str, FieldMeta]:
    """The merge table of ``kind``; kinds without one get the ObjectMeta rules only."""
    if kind is None:
        return _META
    return MERGE_KEYS.get(kind.resource, _META)


def join_path(pattern: str, key: str) -> str:
    return f"{pattern}.{key}" if pattern else key
