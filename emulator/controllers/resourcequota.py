"""The resource quota controller: keeps each ResourceQuota's ``status`` equal to what its namespace uses.

A re-implementation of upstream ``pkg/controller/resourcequota/resource_quota_controller.go``
(``syncResourceQuota``) and its replenishment triggers. Admission
(:class:`~emulator.server.admission.ResourceQuotaAdmission`) charges creates to
``status.used`` as they happen; this controller is the other half: it recomputes usage from
the objects themselves, which is what gives back the room of deleted and finished pods and
corrects charges of creates that failed after admission.

One reconcile of a quota key re-reads the quota from the store and, for the kinds its
``spec.hard`` names, lists the namespace's objects **from the store** (fresher than an informer
cache, so a recompute misses fewer just-admitted creates), sums their usage with the same
evaluator admission uses (pods: non-terminal, not past their deletion grace, matching the
quota's scopes and scopeSelector; other kinds: ``count/<resource>``), and writes ``status.hard``
(= ``spec.hard``) and ``status.used`` with a compare-and-set on the quota's resourceVersion. A
lost CAS (admission charged meanwhile) re-reads and recomputes, a few times in the same
reconcile.

Triggers, as upstream (which deliberately does *not* resync on creates — admission
accounts for those):

* a quota is added, or its spec changes (status-only updates — including admission's
  charges — are ignored, as upstream's ``UpdateFunc`` does);
* a pod becomes terminal or is deleted (upstream's replenishment controllers) → every quota
  of its namespace;
* a periodic resync on the **cluster clock**: each quota is requeued
  ``resource_quota_sync_period`` (default 300 s, ``--resource-quota-sync-period``) after its
  last sync, which also catches deletions of kinds other than pods.

The window (shared with upstream): a recompute that lists objects between an admission
charge and the store's write of that object undercounts it until the next recompute.

Simplifications: see ``docs/architecture.md``.
"""

from __future__ import annotations

import logging
from typing import Any

from emulator.api import errors
from emulator.api.kinds import POD, RESOURCEQUOTA, Kind, all_kinds
from emulator.api.quantity import Quantity, parse_quantity
from emulator.api.types import Obj
from emulator.controllers.runtime import Controller, ControllerContext, meta_key, object_of, split_key
from emulator.informers import ResourceEventHandlerFuncs
from emulator.server.admission import matching_resources, object_usage, quota_matches

log = logging.getLogger(__name__)

# kube-controller-manager --concurrent-resource-quota-syncs and --resource-quota-sync-period defaults.
DEFAULT_WORKERS = 5
DEFAULT_SYNC_PERIOD = 300.0
_CAS_ATTEMPTS = 8
_TERMINAL = ("Succeeded", "Failed")


def compute_usage(quota: Obj, objects: dict[Kind, list[Obj]], now: float) -> dict[str, str]:
    """``CalculateUsage``: for each ``spec.hard`` name, the sum over matching objects (``0`` when none)."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    used: dict[str, Quantity] = {name: parse_quantity(0) for name in hard}
    for kind, items in objects.items():
        for obj in items:
            if not quota_matches(quota, kind, obj, hard):
                continue
            for name, amount in object_usage(kind, obj, now).items():
                if name in used:
                    used[name] = used[name] + amount
    return {name: str(q) for name, q in used.items()}


class ResourceQuotaController(Controller):
    """Recomputes ResourceQuota status; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("resourcequota", ctx, workers=workers or int(
            ctx.option("concurrent_resource_quota_syncs", DEFAULT_WORKERS)))
        self.sync_period = float(ctx.option("resource_quota_sync_period", DEFAULT_SYNC_PERIOD))
        self.quota_informer = self.watch(ctx.informers.informer_for(RESOURCEQUOTA))
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        self.quota_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self.enqueue(obj), update=self._quota_updated))
        self.pod_informer.add_event_handler(ResourceEventHandlerFuncs(
            update=self._pod_updated, delete=self._pod_deleted))
        self.syncs = 0

    # ------------------------------------------------------------------ handlers
    def _quota_updated(self, old: Obj, new: Obj) -> None:
        spec_changed = (old.get("spec") or {}) != (new.get("spec") or {})
        unsynced = ((new.get("status") or {}).get("hard") or {}) != ((new.get("spec") or {}).get("hard") or {})
        if spec_changed or unsynced:
            self.enqueue(new)

    def _enqueue_namespace(self, namespace: str) -> None:
        for key in self.quota_informer.indexer.list_keys():
            if split_key(key)[0] == namespace:
                self.enqueue_key(key)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        was = (old.get("status") or {}).get("phase") in _TERMINAL
        now = (new.get("status") or {}).get("phase") in _TERMINAL
        if now and not was:
            self._enqueue_namespace(new["metadata"].get("namespace") or "")

    def _pod_deleted(self, obj: Any) -> None:
        pod = object_of(obj)
        if pod is not None:
            self._enqueue_namespace(pod["metadata"].get("namespace") or "")

    # ------------------------------------------------------------------ reconcile
    def reconcile(self, key: str) -> float | None:
        namespace, name = split_key(key)
        for _ in range(_CAS_ATTEMPTS):
            quota = errors.get_or_none(self.core, RESOURCEQUOTA, namespace, name)
            if quota is None:
                return None
            try:
                self._sync(quota)
            except errors.StaleResourceVersion:
                continue  # admission charged it meanwhile: recompute against the new version
            self.syncs += 1
            return self.sync_period
        raise errors.conflict(RESOURCEQUOTA.plural, name, f"changed {_CAS_ATTEMPTS} times during one sync")

    def _sync(self, quota: Obj) -> None:
        meta = quota["metadata"]
        namespace = meta.get("namespace") or ""
        hard = dict((quota.get("spec") or {}).get("hard") or {})
        kinds = [k for k in all_kinds() if k.namespaced and matching_resources(k, hard)]
        lists = self.core.store.list_many([(k, namespace) for k in kinds]) if kinds else []
        used = compute_usage(quota, dict(zip(kinds, lists, strict=True)), self.clock.now())
        status = quota.get("status") or {}
        if status.get("hard") == hard and status.get("used") == used:
            return
        # The object as read, resourceVersion included: a conditional status write (409 when stale).
        self.core.update_status(RESOURCEQUOTA, {**quota, "status": {**status, "hard": hard, "used": used}})
        log.debug("resourcequota: %s used %s", meta_key(quota), used)


def new_controller(ctx: ControllerContext) -> ResourceQuotaController:
    """The controller manager's constructor for this controller."""
    return ResourceQuotaController(ctx)
