"""Cluster objects plugins read besides nodes and pods, behind one small read-only interface.

Upstream plugins get informer listers from the framework handle: Services,
ReplicationControllers, ReplicaSets and StatefulSets (PodTopologySpread's
system default constraints), Namespaces (InterPodAffinity's
``namespaceSelector``), PodDisruptionBudgets (DefaultPreemption),
PersistentVolumes, PersistentVolumeClaims and StorageClasses (VolumeBinding,
VolumeZone). kemu plugins stay pure functions of their inputs, so they read
those objects through an :class:`ObjectLister` -- a view the scheduler fills
from its informers, a test fills from literals, and a Cluster Autoscaler
simulation may extend with hypothetical objects. Nothing here touches a store.

A plugin finds its lister in this order: the ``listers`` argument of its
``new()`` (tests, simulations), the framework handle's ``listers`` attribute
(the scheduler wires its informers there), else :data:`NO_OBJECTS`, which
lists nothing -- the plugins then behave as upstream does in a cluster
without such objects.

Resources are named like ``Kind.resource``: ``plural`` for the core group,
``plural.group`` otherwise (the constants below).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

__all__ = [
    "NAMESPACES",
    "NO_OBJECTS",
    "PDBS",
    "PVCS",
    "PVS",
    "REPLICASETS",
    "REPLICATIONCONTROLLERS",
    "SERVICES",
    "STATEFULSETS",
    "STORAGECLASSES",
    "ObjectLister",
    "StaticLister",
    "lister_for",
]

SERVICES = "services"
REPLICATIONCONTROLLERS = "replicationcontrollers"
REPLICASETS = "replicasets.apps"
STATEFULSETS = "statefulsets.apps"
NAMESPACES = "namespaces"
PDBS = "poddisruptionbudgets.policy"
PVS = "persistentvolumes"
PVCS = "persistentvolumeclaims"
STORAGECLASSES = "storageclasses.storage.k8s.io"

# apiVersion/kind -> resource, for StaticLister.from_objects (only the kinds plugins read).
_RESOURCE_OF_KIND = {
    ("v1", "Service"): SERVICES,
    ("v1", "ReplicationController"): REPLICATIONCONTROLLERS,
    ("apps/v1", "ReplicaSet"): REPLICASETS,
    ("apps/v1", "StatefulSet"): STATEFULSETS,
    ("v1", "Namespace"): NAMESPACES,
    ("policy/v1", "PodDisruptionBudget"): PDBS,
    ("v1", "PersistentVolume"): PVS,
    ("v1", "PersistentVolumeClaim"): PVCS,
    ("storage.k8s.io/v1", "StorageClass"): STORAGECLASSES,
}


class ObjectLister(Protocol):
    """Read-only access to cluster objects by resource (upstream's informer listers, merged)."""

    def list(self, resource: str, namespace: str | None = None) -> Sequence[Mapping[str, Any]]:
        """Every object of ``resource`` (in ``namespace`` when given), in a stable order."""
        ...

    def get(self, resource: str, name: str, namespace: str | None = None) -> Mapping[str, Any] | None:
        """One object by name (and namespace for namespaced resources), or None."""
        ...


class StaticLister:
    """An :class:`ObjectLister` over a fixed set of object dicts (tests, simulations, snapshots of informers)."""

    __slots__ = ("_by_key", "_by_resource")

    def __init__(self, objects: Mapping[str, Iterable[Mapping[str, Any]]] | None = None) -> None:
        self._by_resource: dict[str, list[Mapping[str, Any]]] = {}
        self._by_key: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        for resource, items in (objects or {}).items():
            for obj in items:
                self.add(resource, obj)

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]]) -> StaticLister:
        """Objects with ``apiVersion``/``kind`` of the kinds plugins read, sorted into resources."""
        lister = cls()
        for obj in objects:
            key = (obj.get("apiVersion") or "", obj.get("kind") or "")
            resource = _RESOURCE_OF_KIND.get(key)
            if resource is None:
                raise ValueError(f"no scheduler plugin reads {key[1]} ({key[0]}) objects")
            lister.add(resource, obj)
        return lister

    def add(self, resource: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (resource, meta.get("namespace") or "", meta.get("name") or "")
        if key in self._by_key:
            items = self._by_resource[resource]
            items[items.index(self._by_key[key])] = obj
        else:
            self._by_resource.setdefault(resource, []).append(obj)
        self._by_key[key] = obj

    def list(self, resource: str, namespace: str | None = None) -> Sequence[Mapping[str, Any]]:
        items = self._by_resource.get(resource, ())
        if namespace is None:
            return tuple(items)
        return tuple(o for o in items if ((o.get("metadata") or {}).get("namespace") or "") == namespace)

    def get(self, resource: str, name: str, namespace: str | None = None) -> Mapping[str, Any] | None:
        return self._by_key.get((resource, namespace or "", name))


NO_OBJECTS: ObjectLister = StaticLister()
"""A lister with no objects at all."""


def lister_for(explicit: ObjectLister | None, handle: object) -> ObjectLister:
    """The lister a plugin should use: ``explicit``, else ``handle.listers``, else :data:`NO_OBJECTS`."""
    if explicit is not None:
        return explicit
    from_handle = getattr(handle, "listers", None)
    return from_handle if from_handle is not None else NO_OBJECTS
