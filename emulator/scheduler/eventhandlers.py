"""Informer event handlers: what the scheduler does when pods and nodes change, and the plugins' listers.

Upstream ``pkg/scheduler/eventhandlers.go`` (``addAllEventHandlers``: bound
pods and nodes go to the cache, unbound pods this scheduler is responsible
for go to the queue, and each change may move unschedulable pods) and the
informer-backed listers plugins read through their framework handle; our
own Python. The scheduler package imports no informers: anything with
``informer_for(kind)`` will do (a ``SharedInformerFactory``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from emulator.api.errors import StatusError
from emulator.api.kinds import Kind, by_resource
from emulator.api.types import ObjView
from emulator.scheduler.cache import Cache
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.queue import ASSIGNED_POD_DELETE, NODE_ADD, SchedulingQueue, node_change_events, pod_key

__all__ = ["LISTER_RESOURCES", "EventHandlers", "Handler", "InformerLister", "InformerSource"]


class InformerSource(Protocol):
    """Where informers come from (``SharedInformerFactory``)."""

    def informer_for(self, kind: Kind) -> Any: ...


# What plugins read besides nodes and pods (emulator.scheduler.plugins.listers' resource names).
LISTER_RESOURCES = ("services", "replicationcontrollers", "replicasets.apps", "statefulsets.apps", "namespaces",
                    "poddisruptionbudgets.policy", "persistentvolumes", "persistentvolumeclaims",
                    "storageclasses.storage.k8s.io")


class InformerLister:
    """The plugins' ``ObjectLister`` over informer caches: one informer per resource kemu serves.

    Empty until :meth:`bind` (the scheduler binds it in :meth:`Scheduler.attach`); resources kemu has no kind
    for list nothing, as upstream plugins see a cluster without such objects.
    """

    def __init__(self) -> None:
        self._informers: dict[str, Any] = {}

    def bind(self, informers: InformerSource, resources: Sequence[str] = LISTER_RESOURCES) -> None:
        for resource in resources:
            try:
                kind = by_resource(resource)
            except StatusError:
                continue
            self._informers[resource] = informers.informer_for(kind)

    def list(self, resource: str, namespace: str | None = None) -> Sequence[ObjView]:
        informer = self._informers.get(resource)
        if informer is None:
            return ()
        items = informer.indexer.by_index("namespace", namespace) if namespace else informer.indexer.list()
        return sorted(items, key=pod_key)

    def get(self, resource: str, name: str, namespace: str | None = None) -> ObjView | None:
        informer = self._informers.get(resource)
        if informer is None:
            return None
        return informer.indexer.get_by_key(f"{namespace}/{name}" if namespace else name)

    def has_synced(self) -> bool:
        return all(informer.has_synced() for informer in self._informers.values())


class Handler:
    """An informer handler (``on_add(obj, is_in_initial_list)``, ``on_update``, ``on_delete``) over three functions."""

    def __init__(self, add: Callable[[ObjView], None], update: Callable[[ObjView, ObjView], None],
                 delete: Callable[[ObjView], None]) -> None:
        self._add, self._update, self._delete = add, update, delete

    def on_add(self, obj: ObjView, is_in_initial_list: bool = False) -> None:
        self._add(obj)

    def on_update(self, old: ObjView, new: ObjView) -> None:
        self._update(old, new)

    def on_delete(self, obj: Any) -> None:
        # A tombstone (DeletedFinalStateUnknown) carries the last known object in ``obj``.
        inner = obj if isinstance(obj, Mapping) else getattr(obj, "obj", None)
        if inner is not None:
            self._delete(inner)


class EventHandlers:
    """The scheduler's informer handlers (a part of :class:`~emulator.scheduler.scheduler.Scheduler`)."""

    cache: Cache
    queue: SchedulingQueue
    responsible: Callable[[ObjView], bool]
    profile_for: Callable[[ObjView], Any]

    @staticmethod
    def _assigned(pod: ObjView) -> bool:
        return bool((pod.get("spec") or {}).get("nodeName"))

    @staticmethod
    def _terminal(pod: ObjView) -> bool:
        return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    def on_pod_add(self, pod: ObjView) -> None:
        if self._assigned(pod):
            if not self._terminal(pod):
                self.cache.on_pod_add(pod)
                self.queue.assigned_pod_added(pod)
        elif self.responsible(pod) and not self._terminal(pod):
            self.queue.add(pod)
        else:
            self._foreign_nomination(pod)

    def _foreign_nomination(self, pod: ObjView) -> None:
        """A pending pod another replica of our profiles owns: keep its nomination (``status.nominatedNodeName``)
        in our nominator, so that our Filter holds its room as that replica's does (upstream has one queue)."""
        node = (pod.get("status") or {}).get("nominatedNodeName")
        if node and self.profile_for(pod) is not None and not self._terminal(pod):
            self.queue.add_nominated_pod(PodInfo(pod), node, foreign=True)
        else:
            self.queue.delete_nominated_pod(pod_key(pod))

    def on_pod_update(self, old: ObjView, new: ObjView) -> None:
        if self._assigned(new):
            if self._terminal(new):
                self.cache.on_pod_delete(new)
                self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
                return
            self.cache.on_pod_update(old, new)
            if not self._assigned(old):
                self.queue.delete(new)  # it got bound: no longer pending (in flight: marked)
                self.queue.assigned_pod_added(new)
            elif (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
                self.queue.assigned_pod_updated(old, new)
            return
        if self.responsible(new) and not self._terminal(new):
            self.queue.update(old, new)
        else:
            self.queue.delete(new)
            self._foreign_nomination(new)

    def on_pod_delete(self, pod: ObjView) -> None:
        if self._assigned(pod):
            self.cache.on_pod_delete(pod)
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
        else:
            self.queue.delete(pod)

    def on_node_add(self, node: ObjView) -> None:
        self.cache.on_node_add(node)
        self.queue.move_all_to_active_or_backoff(NODE_ADD)

    def on_node_update(self, old: ObjView, new: ObjView) -> None:
        self.cache.on_node_update(old, new)
        for event in node_change_events(old, new):
            self.queue.move_all_to_active_or_backoff(event)

    def on_node_delete(self, node: ObjView) -> None:
        self.cache.on_node_delete(node)
