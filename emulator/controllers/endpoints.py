"""The Endpoints controller: the core/v1 Endpoints object of every Service with a selector.

A re-implementation of upstream ``pkg/controller/endpoint/endpoints_controller.go``
(``syncService``) on kemu's controller runtime. One Endpoints per Service, named as
the Service: pods that should be in endpoints (an IP, not terminal, not being deleted)
are ``addresses`` when Ready (or the Service publishes not-ready addresses) and
``notReadyAddresses`` otherwise, grouped into one subset per resolved port list
(``RepackSubsets``: addresses sorted by IP). Above 1000 addresses the object is
truncated (ready addresses first) and annotated
``endpoints.kubernetes.io/over-capacity: truncated``, as upstream. The Endpoints
carries the Service's labels (plus ``service.kubernetes.io/headless`` for a headless
Service) and is written only when it differs. A Service without a selector is left
alone (its Endpoints are the user's), as is the API server's own ``kubernetes``.
"""

from __future__ import annotations

from typing import Any

from emulator.api import errors
from emulator.api.endpoints import (
    HEADLESS_LABEL,
    endpoint_ports,
    pod_hostname,
    selected_pods,
    selects,
    should_be_in_endpoints,
)
from emulator.api.kinds import ENDPOINTS, POD, SERVICE
from emulator.api.pdb import is_pod_ready
from emulator.api.types import Obj
from emulator.controllers.runtime import Controller, ControllerContext, ensure_indexers, meta_key, object_of
from emulator.informers import ResourceEventHandlerFuncs
from emulator.informers.indexer import LABEL_INDEX, NAMESPACE_INDEX, label_index_func

MAX_CAPACITY = 1000  # endpoints_controller.go maxCapacity
OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
DEFAULT_WORKERS = 5  # --concurrent-endpoint-syncs
_WRITE_ATTEMPTS = 3


def _ip_key(address: Obj) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in address["ip"].split("."))
    except ValueError:
        return (1 << 16,)


class EndpointsController(Controller):
    """Keeps each selected Service's Endpoints equal to its pods; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("endpoints", ctx,
                         workers=workers or int(ctx.option("concurrent_endpoint_syncs", DEFAULT_WORKERS)))
        self.services = self.watch_kind(SERVICE, delete=self._service_deleted)
        self.pods = self.watch(ctx.informers.informer_for(POD))
        self.endpoints = self.watch(ctx.informers.informer_for(ENDPOINTS))
        ensure_indexers(self.pods, {LABEL_INDEX: label_index_func})
        self.pods.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda pod, _initial: self._queue_services(pod), update=self._pod_updated,
            delete=lambda obj: self._queue_services(object_of(obj))))
        self.endpoints.add_event_handler(ResourceEventHandlerFuncs(
            delete=lambda obj: self._endpoints_deleted(object_of(obj))))

    def _service_deleted(self, obj: Any) -> None:
        svc = object_of(obj)
        if svc is not None:
            self.enqueue(svc)

    def _queue_services(self, pod: Obj | None) -> None:
        if pod is None:
            return
        meta = pod.get("metadata") or {}
        for svc in self.services.indexer.by_index(NAMESPACE_INDEX, meta.get("namespace") or ""):
            if selects((svc.get("spec") or {}).get("selector"), meta.get("labels")):
                self.enqueue(svc)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        if old["metadata"].get("labels") != new["metadata"].get("labels"):
            self._queue_services(old)
        self._queue_services(new)

    def _endpoints_deleted(self, ep: Obj | None) -> None:
        if ep is not None and self.services.indexer.get_by_key(meta_key(ep)) is not None:
            self.enqueue_key(meta_key(ep))

    def desired_subsets(self, svc: Obj) -> tuple[list[Obj], bool]:
        """The Service's subsets and whether they were truncated at :data:`MAX_CAPACITY` addresses."""
        spec, namespace = svc.get("spec") or {}, svc["metadata"].get("namespace") or ""
        publish = bool(spec.get("publishNotReadyAddresses"))
        groups: dict[tuple[Any, ...], tuple[list[Obj], list[Obj]]] = {}
        for pod in selected_pods(self.pods.indexer, namespace, spec.get("selector") or {}):
            meta = pod["metadata"]
            if not should_be_in_endpoints(pod, False):
                continue
            address: Obj = {"ip": pod["status"]["podIP"]}
            hostname = pod_hostname(svc, pod)
            if hostname:
                address["hostname"] = hostname
            if (pod.get("spec") or {}).get("nodeName"):
                address["nodeName"] = pod["spec"]["nodeName"]
            address["targetRef"] = {"kind": "Pod", "namespace": namespace, "name": meta["name"], "uid": meta["uid"]}
            ready, not_ready = groups.setdefault(endpoint_ports(svc, pod), ([], []))
            (ready if publish or is_pod_ready(pod) else not_ready).append(address)
        subsets, total, truncated = [], 0, False
        for ports, (all_ready, all_not_ready) in sorted(groups.items(), key=lambda g: g[0]):
            room = MAX_CAPACITY - total
            ready = sorted(all_ready, key=_ip_key)[:room]
            not_ready = sorted(all_not_ready, key=_ip_key)[:room - len(ready)]
            truncated = truncated or len(ready) + len(not_ready) < len(all_ready) + len(all_not_ready)
            total += len(ready) + len(not_ready)
            subset: Obj = {}
            if ready:
                subset["addresses"] = ready
            if not_ready:
                subset["notReadyAddresses"] = not_ready
            if not subset:
                continue
            subset["ports"] = [{"name": n, "port": p, "protocol": proto, **({"appProtocol": a} if a else {})}
                               for n, proto, p, a in ports]
            subsets.append(subset)
        return subsets, truncated

    def reconcile(self, key: str) -> float | None:
        svc = self.services.indexer.get_by_key(key)
        if svc is None:
            # Endpoints have no owner reference upstream either: syncService deletes them by name.
            namespace, _, name = key.partition("/")
            if self.endpoints.indexer.get_by_key(key) is not None:
                try:
                    self.core.delete(ENDPOINTS, namespace, name)
                except errors.StatusError as e:
                    if e.code != 404:
                        raise
            return None
        spec = svc.get("spec") or {}
        if not spec.get("selector") or svc["metadata"].get("deletionTimestamp"):
            return None
        subsets, truncated = self.desired_subsets(svc)
        meta = svc["metadata"]
        labels = dict(meta.get("labels") or {})
        if spec.get("clusterIP") == "None":
            labels[HEADLESS_LABEL] = ""
        current = self.endpoints.indexer.get_by_key(key)
        body: Obj = {"apiVersion": "v1", "kind": "Endpoints",
                     "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": labels}}
        annotations = dict(((current or {}).get("metadata") or {}).get("annotations") or {})
        annotations.pop(OVER_CAPACITY, None)
        if truncated:
            annotations[OVER_CAPACITY] = "truncated"
        if annotations:
            body["metadata"]["annotations"] = annotations
        if subsets:
            body["subsets"] = subsets
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                self._write(body, current, subsets, labels, annotations)
                return None
            except errors.StatusError as e:
                # Our cache was behind our own last write: read the object itself and try again at once.
                if e.reason not in ("AlreadyExists", "Conflict") or attempt == _WRITE_ATTEMPTS - 1:
                    raise
                current = self.core.get(ENDPOINTS, meta["namespace"], meta["name"])
        return None

    def _write(self, body: Obj, current: Obj | None, subsets: list[Obj], labels: dict[str, str],
               annotations: dict[str, str]) -> None:
        if current is None:
            self.core.create(ENDPOINTS, body)
            return
        cmeta = current["metadata"]
        if (current.get("subsets") or []) == subsets and (cmeta.get("labels") or {}) == labels \
                and (cmeta.get("annotations") or {}) == annotations:
            return
        body = {**body, "metadata": {**cmeta, "labels": labels, "annotations": annotations}}
        if not annotations:
            body["metadata"].pop("annotations")
        self.core.update(ENDPOINTS, body)


def new_controller(ctx: ControllerContext) -> EndpointsController:
    """The controller manager's constructor for this controller."""
    return EndpointsController(ctx)
