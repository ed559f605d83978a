"""The EndpointSlice controller: discovery.k8s.io/v1 EndpointSlices for every Service with a selector.

A re-implementation of upstream ``pkg/controller/endpointslice`` and its reconciler
(``staging/src/k8s.io/endpointslice/reconciler.go``) on kemu's controller runtime.

* **Triggers.** A Service event queues the Service; a pod event queues every Service
  of its namespace whose selector selects the pod (before or after a label change),
  when something an endpoint shows changed (IP, readiness, deletion, node, hostname,
  phase, labels); an EndpointSlice event queues its Service only when the slice is not
  the one this controller last wrote (the ``endpointSliceTracker``: generation
  compared), so the controller's own writes do not wake it again.
* **Desired endpoints.** Pods that should be in endpoints (an IP, not terminal;
  terminating pods stay, with ``terminating: true``), one endpoint each: address,
  conditions (``ready`` = Ready and not terminating, or ``publishNotReadyAddresses``;
  ``serving``; ``terminating``), ``nodeName``, ``zone`` (the node's
  ``topology.kubernetes.io/zone`` label), ``hostname`` when the pod's subdomain
  is the Service, ``targetRef``. Endpoints are grouped by their resolved ports (a
  named ``targetPort`` can resolve differently per pod): one group, one set of slices.
* **Reconcile by port mapping** as upstream, to keep churn low: an existing slice keeps
  the endpoints still desired (updated in place when they changed), a slice left empty
  is deleted, new endpoints first fill slices already being updated, then one unchanged
  slice with room for all of them, then new slices of at most
  ``max_endpoints_per_slice`` (100, kube-controller-manager ``--max-endpoints-per-slice``).
  A slice to be deleted is recycled for a slice to be created (one update instead of a
  delete and a create). A Service with no endpoints keeps one empty placeholder slice.
* **Stale cache.** Before acting on a Service, every slice write this controller made
  for it must be visible in the informer cache (created/updated at least at the written
  generation, deleted gone); otherwise the reconcile waits for that slice event.

Slices are named ``<service>-<5 random characters>`` (as generateName would; chosen here so the
tracker knows a new slice before its event arrives), labelled ``kubernetes.io/service-name`` and
``endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`` (plus the
Service's own labels), owned by the Service (the garbage collector removes them with it).
Only IPv4 slices are written (kemu's pod IPs are IPv4); topology hints are not. A node's zone
is read when its pods' endpoints are computed (a node relabelled later updates them at the next
change of the Service's pods).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterable
from typing import Any

from emulator.api import errors
from emulator.api.endpoints import (
    HEADLESS_LABEL,
    MANAGED_BY_LABEL,
    SERVICE_NAME_LABEL,
    endpoint_ports,
    pod_conditions,
    pod_hostname,
    selected_pods,
    selects,
    should_be_in_endpoints,
)
from emulator.api.kinds import ENDPOINTSLICE, NODE, POD, SERVICE
from emulator.api.types import Obj
from emulator.controllers.runtime import (
    Controller,
    ControllerContext,
    ensure_indexers,
    meta_key,
    new_controller_ref,
    object_of,
)
from emulator.informers import ResourceEventHandlerFuncs
from emulator.informers.indexer import LABEL_INDEX, NAMESPACE_INDEX, label_index_func

CONTROLLER_NAME = "endpointslice-controller.k8s.io"
DEFAULT_MAX_ENDPOINTS_PER_SLICE = 100
DEFAULT_WORKERS = 5  # --concurrent-service-endpoint-syncs
SERVICE_INDEX = "endpointslice-service"
ZONE_LABEL = "topology.kubernetes.io/zone"
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet
_NAME_ATTEMPTS = 8
_UNTRACKED = object()

Ports = tuple[tuple[str, str, int, Any], ...]


def slice_service_key(obj: Obj) -> list[str]:
    """Index: ``namespace/service`` of a slice this controller manages."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(MANAGED_BY_LABEL) != CONTROLLER_NAME or not labels.get(SERVICE_NAME_LABEL):
        return []
    return [f"{meta.get('namespace') or ''}/{labels[SERVICE_NAME_LABEL]}"]


def _slice_ports(ports: Ports) -> list[Obj]:
    out = []
    for name, protocol, port, app_protocol in ports:
        entry: Obj = {"name": name, "protocol": protocol, "port": port}
        if app_protocol:
            entry["appProtocol"] = app_protocol
        out.append(entry)
    return out


def _ports_of(slice_: Obj) -> Ports:
    return tuple((p.get("name") or "", p.get("protocol", "TCP"), p.get("port"), p.get("appProtocol"))
                 for p in slice_.get("ports") or [])


def _endpoint_key(ep: Obj) -> str:
    ref = ep.get("targetRef") or {}
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else ",".join(ep.get("addresses") or [])


def _pod_view(pod: Obj) -> tuple[Any, ...]:
    """What an endpoint shows of a pod (upstream ``podEndpointsChanged``)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    return (status.get("podIP"), ready, bool(meta.get("deletionTimestamp")), spec.get("nodeName"),
            spec.get("hostname"), spec.get("subdomain"), status.get("phase"))


class EndpointSliceController(Controller):
    """Keeps each selected Service's EndpointSlices equal to its pods; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("endpointslice", ctx,
                         workers=workers or int(ctx.option("concurrent_service_endpoint_syncs", DEFAULT_WORKERS)))
        self.max_per_slice = int(ctx.option("max_endpoints_per_slice", DEFAULT_MAX_ENDPOINTS_PER_SLICE))
        self.services = self.watch_kind(SERVICE, delete=self._service_deleted)
        self.pods = self.watch(ctx.informers.informer_for(POD))
        self.slices = self.watch(ctx.informers.informer_for(ENDPOINTSLICE))
        self.nodes = self.watch(ctx.informers.informer_for(NODE))
        ensure_indexers(self.slices, {SERVICE_INDEX: slice_service_key})
        ensure_indexers(self.pods, {LABEL_INDEX: label_index_func})
        # service key → slice name → the generation this controller wrote (None: it deleted the slice).
        self._written: dict[str, dict[str, int | None]] = {}
        self._waiting: set[str] = set()
        self._lock = threading.Lock()
        self.slice_writes = 0  # creates + updates + deletes (the benchmark's numerator)
        self.pods.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda pod, _initial: self._queue_services(pod), update=self._pod_updated,
            delete=lambda obj: self._queue_services(object_of(obj))))
        self.slices.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self._slice_event(obj), update=lambda _old, new: self._slice_event(new),
            delete=lambda obj: self._slice_event(object_of(obj), deleted=True)))

    # ------------------------------------------------------------ handlers
    def _services_of(self, pod: Obj) -> Iterable[str]:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        for svc in self.services.indexer.by_index(NAMESPACE_INDEX, meta.get("namespace") or ""):
            if selects((svc.get("spec") or {}).get("selector"), labels):
                yield meta_key(svc)

    def _queue_services(self, pod: Obj | None) -> None:
        if pod is not None:
            for key in self._services_of(pod):
                self.enqueue_key(key)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        if not self.services.indexer.index_keys(NAMESPACE_INDEX, new["metadata"].get("namespace") or ""):
            return  # no Service in its namespace selects it, whatever changed (most pods' status writes)
        if old["metadata"].get("labels") != new["metadata"].get("labels"):
            for key in set(self._services_of(old)) | set(self._services_of(new)):
                self.enqueue_key(key)
        elif _pod_view(old) != _pod_view(new):
            self._queue_services(new)

    def _service_deleted(self, obj: Any) -> None:
        svc = object_of(obj)
        if svc is not None:
            with self._lock:
                self._written.pop(meta_key(svc), None)

    def _slice_event(self, slice_: Obj | None, deleted: bool = False) -> None:
        if slice_ is None:
            return
        keys = slice_service_key(slice_)
        if not keys:
            return
        key, name = keys[0], slice_["metadata"]["name"]
        with self._lock:
            written = self._written.get(key, {})
            expected = written.get(name, -1)
            ours = (expected is None) if deleted else (expected == slice_["metadata"].get("generation"))
            wake = key in self._waiting or not ours
            self._waiting.discard(key)
        if wake:
            self.enqueue_key(key)

    # ------------------------------------------------------------ reconcile
    def _stale(self, key: str) -> bool:
        """Whether a slice write of ours is not in the cache yet (then the slice's event re-queues ``key``)."""
        with self._lock:
            self._waiting.add(key)
            written = self._written.get(key, {})
            for name, generation in list(written.items()):
                cached = self.slices.indexer.get_by_key(f"{key.split('/', 1)[0]}/{name}")
                if generation is None:
                    if cached is not None:
                        return True
                    del written[name]
                elif cached is None or int(cached["metadata"].get("generation") or 0) < generation:
                    return True
            self._waiting.discard(key)
            return False

    def reconcile(self, key: str) -> float | None:
        svc = self.services.indexer.get_by_key(key)
        if svc is None:
            return None  # its slices are owned by it: the garbage collector deletes them
        spec = svc.get("spec") or {}
        selector = spec.get("selector")
        if not selector or spec.get("type") == "ExternalName" or svc["metadata"].get("deletionTimestamp"):
            return None
        if self._stale(key):
            return None
        namespace = svc["metadata"].get("namespace") or ""
        desired: dict[Ports, dict[str, Obj]] = {}
        for pod in selected_pods(self.pods.indexer, namespace, selector):
            meta = pod["metadata"]
            if not should_be_in_endpoints(pod, True):
                continue
            endpoint: Obj = {"addresses": [pod["status"]["podIP"]], "conditions": pod_conditions(svc, pod)}
            hostname = pod_hostname(svc, pod)
            if hostname:
                endpoint["hostname"] = hostname
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name:
                endpoint["nodeName"] = node_name
                node = self.nodes.indexer.get_by_key(node_name)
                zone = ((node or {}).get("metadata") or {}).get("labels", {}).get(ZONE_LABEL)
                if zone:
                    endpoint["zone"] = zone
            endpoint["targetRef"] = {"kind": "Pod", "namespace": namespace, "name": meta["name"], "uid": meta["uid"]}
            desired.setdefault(endpoint_ports(svc, pod), {})[_endpoint_key(endpoint)] = endpoint
        existing = [s for s in self.slices.indexer.by_index(SERVICE_INDEX, key)
                    if not s["metadata"].get("deletionTimestamp")]
        self._apply(svc, key, self._plan(desired, existing))
        return None

    def _plan(self, desired: dict[Ports, dict[str, Obj]],
              existing: list[Obj]) -> tuple[list[tuple[Ports, list[Obj]]], list[tuple[Obj, Ports, list[Obj]]],
                                            list[Obj]]:
        """(slices to create, slices to update with their new content, slices to delete)."""
        by_ports: dict[Ports, list[Obj]] = {}
        for s in sorted(existing, key=lambda s: s["metadata"]["name"]):
            by_ports.setdefault(_ports_of(s), []).append(s)
        if not desired:
            desired = {(): {}}  # the placeholder: one empty slice for a Service without endpoints
        creates: list[tuple[Ports, list[Obj]]] = []
        updates: list[tuple[Obj, Ports, list[Obj]]] = []
        deletes: list[Obj] = []
        for ports, slices in by_ports.items():
            if ports not in desired:
                deletes.extend(slices)
        for ports, wanted in desired.items():
            remaining = dict(wanted)
            unchanged: list[Obj] = []
            group_updates: list[tuple[Obj, Ports, list[Obj]]] = []
            for s in by_ports.get(ports, []):
                kept, changed = [], False
                for ep in s.get("endpoints") or []:
                    want = remaining.pop(_endpoint_key(ep), None)
                    if want is None:
                        changed = True
                        continue
                    changed = changed or want != ep
                    kept.append(want)
                if not kept and (wanted or unchanged or group_updates):
                    deletes.append(s)  # (a placeholder is kept: the first empty slice of an empty group)
                elif changed:
                    group_updates.append((s, ports, kept))
                else:
                    unchanged.append(s)
            rest = [remaining[k] for k in sorted(remaining)]
            for _, _, kept in group_updates:
                room = self.max_per_slice - len(kept)
                if room > 0 and rest:
                    kept.extend(rest[:room])
                    rest = rest[room:]
            if rest and unchanged:
                best = max(unchanged, key=lambda s: self.max_per_slice - len(s.get("endpoints") or []))
                if len(rest) <= self.max_per_slice - len(best.get("endpoints") or []):
                    group_updates.append((best, ports, list(best.get("endpoints") or []) + rest))
                    rest = []
            updates.extend(group_updates)
            while rest:
                creates.append((ports, rest[:self.max_per_slice]))
                rest = rest[self.max_per_slice:]
            if not wanted and not by_ports.get(ports):
                creates.append((ports, []))
        # Recycle slices being deleted for slices being created (upstream reconciler finalize()).
        while creates and deletes:
            ports, endpoints = creates.pop()
            updates.append((deletes.pop(), ports, endpoints))
        return creates, updates, deletes

    def _labels(self, svc: Obj) -> dict[str, str]:
        labels = {k: v for k, v in ((svc.get("metadata") or {}).get("labels") or {}).items()
                  if k not in (SERVICE_NAME_LABEL, MANAGED_BY_LABEL)}
        labels[SERVICE_NAME_LABEL] = svc["metadata"]["name"]
        labels[MANAGED_BY_LABEL] = CONTROLLER_NAME
        if (svc.get("spec") or {}).get("clusterIP") == "None":
            labels[HEADLESS_LABEL] = ""
        return labels

    def _apply(self, svc: Obj, key: str,
               plan: tuple[list[tuple[Ports, list[Obj]]], list[tuple[Obj, Ports, list[Obj]]], list[Obj]]) -> None:
        creates, updates, deletes = plan
        labels = self._labels(svc)
        meta = svc["metadata"]
        for s in list(self.slices.indexer.by_index(SERVICE_INDEX, key)):
            if s["metadata"].get("labels") != labels and all(s is not u[0] for u in updates) \
                    and all(s is not d for d in deletes):
                updates.append((s, _ports_of(s), list(s.get("endpoints") or [])))
        for ports, endpoints in creates:
            for attempt in range(_NAME_ATTEMPTS):
                # Named here rather than by generateName, so the tracker knows the slice before its event can.
                name = f"{meta['name']}-" + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
                body = {"metadata": {"name": name, "namespace": meta["namespace"], "labels": labels,
                                     "ownerReferences": [new_controller_ref(svc, SERVICE)]},
                        "addressType": "IPv4", "endpoints": endpoints, "ports": _slice_ports(ports)}
                try:
                    self._tracked_write(key, name, 1, lambda b=body: self.core.create(ENDPOINTSLICE, b))
                    break
                except errors.StatusError as e:
                    if e.reason != "AlreadyExists" or attempt == _NAME_ATTEMPTS - 1:
                        raise
        for s, ports, endpoints in updates:
            body = {**s, "metadata": {**s["metadata"], "labels": labels}, "endpoints": endpoints,
                    "ports": _slice_ports(ports)}
            generation = int(s["metadata"].get("generation") or 1)
            if body.get("endpoints") != s.get("endpoints") or body.get("ports") != s.get("ports"):
                generation += 1  # the server bumps generation when anything but metadata changes
            self._tracked_write(key, s["metadata"]["name"], generation,
                                lambda b=body: self.core.update(ENDPOINTSLICE, b))
        for s in deletes:
            smeta = s["metadata"]
            try:
                self.core.delete(ENDPOINTSLICE, smeta["namespace"], smeta["name"], preconditions={"uid": smeta["uid"]})
            except errors.StatusError as e:
                if e.code != 404:
                    raise
            with self._lock:
                self._written.setdefault(key, {})[smeta["name"]] = None
                self.slice_writes += 1

    def _tracked_write(self, key: str, name: str, generation: int, write: Callable[[], Obj]) -> None:
        """Write a slice, telling the tracker the generation to expect before the write (its event may come first)."""
        with self._lock:
            written = self._written.setdefault(key, {})
            before = written.get(name, _UNTRACKED)
            written[name] = generation
        try:
            stored = write()
        except errors.StatusError:
            with self._lock:
                if before is _UNTRACKED:
                    written.pop(name, None)
                else:
                    written[name] = before  # type: ignore[assignment]
            raise
        with self._lock:
            written[name] = int(stored["metadata"].get("generation") or 1)
            self.slice_writes += 1


def new_controller(ctx: ControllerContext) -> EndpointSliceController:
    """The controller manager's constructor for this controller."""
    return EndpointSliceController(ctx)
