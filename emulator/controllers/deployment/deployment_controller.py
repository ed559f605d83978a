"""The Deployment controller's type, informer handlers and reconcile: upstream ``deployment_controller.go``.

:class:`DeploymentController` is assembled from the upstream files' halves, one
mixin each (:mod:`.sync`, :mod:`.progress`, :mod:`.rolling`, :mod:`.recreate`,
:mod:`.rollback`); this module holds what ``deployment_controller.go`` holds:
the constructor and its informer handlers (``addReplicaSet``,
``updateReplicaSet``, ``deleteReplicaSet``, ``deletePod``), ``syncDeployment``
(:meth:`DeploymentController.reconcile`), ``getReplicaSetsForDeployment`` and
``getPodMapForDeployment``.
"""

from __future__ import annotations

import threading
from typing import Any

from emulator.api.kinds import DEPLOYMENT, POD, REPLICASET
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.controllers.deployment.recreate import RecreateMixin
from emulator.controllers.deployment.rollback import RollbackMixin
from emulator.controllers.deployment.rolling import RollingMixin
from emulator.controllers.deployment.util import copy_json, is_rolling_update, rollback_to
from emulator.controllers.runtime import (
    CONTROLLER_INDEX,
    EVENT_WARNING,
    ControllerContext,
    ControllerRefManager,
    SelectorCache,
    controller_index_func,
    ensure_indexers,
    get_controller_of,
    object_of,
    recheck_deletion_timestamp,
    resolve_controller_ref,
)
from emulator.informers import ResourceEventHandlerFuncs

# deployment_controller.go maxRetries; kube-controller-manager --concurrent-deployment-syncs default.
MAX_RETRIES = 15
DEFAULT_WORKERS = 5


class DeploymentController(RollingMixin, RecreateMixin, RollbackMixin):
    """Reconciles Deployments; see :mod:`emulator.controllers.deployment`."""

    max_retries = MAX_RETRIES

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("deployment", ctx,
                         workers=workers or int(ctx.option("concurrent_deployment_syncs", DEFAULT_WORKERS)))
        self._selectors = SelectorCache()
        self._local = threading.local()
        self.d_informer = self.watch_kind(DEPLOYMENT, delete=self.enqueue_deleted)
        self.rs_informer = self.watch(ctx.informers.informer_for(REPLICASET))
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        ensure_indexers(self.rs_informer, {CONTROLLER_INDEX: controller_index_func})
        ensure_indexers(self.pod_informer, {CONTROLLER_INDEX: controller_index_func})
        self.rs_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=self._add_rs, update=self._update_rs, delete=self._delete_rs))
        self.pod_informer.add_event_handler(ResourceEventHandlerFuncs(delete=self._delete_pod))

    # ------------------------------------------------------------ lookups
    def selector_of(self, d: Obj) -> LabelSelector:
        """The parsed ``spec.selector`` (cached per uid and generation: it is immutable in apps/v1)."""
        return self._selectors.selector_of(d)

    def _resolve(self, namespace: str, ref: Obj) -> Obj | None:
        """``resolveControllerRef``: the cached Deployment a controller reference names (same uid), if any."""
        return resolve_controller_ref(self.d_informer.indexer, namespace, ref, DEPLOYMENT.kind, "apps")

    def _deployments_for_rs(self, rs: Obj) -> list[Obj]:
        """``getDeploymentsForReplicaSet``: Deployments whose (non-empty) selector matches an orphan ReplicaSet."""
        meta = rs["metadata"]
        return self._selectors.matching(self.d_informer.indexer.by_index("namespace", meta.get("namespace") or ""),
                                        meta.get("labels") or {})

    # ------------------------------------------------------------ handlers
    def _enqueue_resolved(self, namespace: str, ref: Obj) -> None:
        """Queue the Deployment a ReplicaSet's controller reference names, if it is still that one."""
        d = self._resolve(namespace, ref)
        if d is not None:
            self.enqueue(d)

    def _add_rs(self, rs: Obj, _initial: bool) -> None:
        meta = rs["metadata"]
        if meta.get("deletionTimestamp"):
            self._delete_rs(rs)
            return
        ref = get_controller_of(rs)
        if ref is not None:
            self._enqueue_resolved(meta.get("namespace") or "", ref)
            return
        for d in self._deployments_for_rs(rs):
            self.enqueue(d)

    def _update_rs(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        new_ref, old_ref = get_controller_of(new), get_controller_of(old)
        ref_changed = (new_ref or {}).get("uid") != (old_ref or {}).get("uid")
        if ref_changed and old_ref is not None:
            self._enqueue_resolved(old["metadata"].get("namespace") or "", old_ref)
        if new_ref is not None:
            self._enqueue_resolved(new["metadata"].get("namespace") or "", new_ref)
            return
        if ref_changed or (old["metadata"].get("labels") or {}) != (new["metadata"].get("labels") or {}):
            for d in self._deployments_for_rs(new):
                self.enqueue(d)

    def _delete_rs(self, obj: Any) -> None:
        rs = object_of(obj)
        if rs is None:
            return
        ref = get_controller_of(rs)
        if ref is None:
            return
        self._enqueue_resolved(rs["metadata"].get("namespace") or "", ref)

    def _delete_pod(self, obj: Any) -> None:
        """Recreate waits for old pods to be gone: their deletions wake the Deployment (upstream ``deletePod``)."""
        pod = object_of(obj)
        if pod is None:
            return
        ref = get_controller_of(pod)
        if ref is None or ref.get("kind") != REPLICASET.kind:
            return
        ns = pod["metadata"].get("namespace") or ""
        rs = self.rs_informer.indexer.get_by_key(f"{ns}/{ref.get('name', '')}")
        if rs is None or rs["metadata"].get("uid") != ref.get("uid"):
            return
        d_ref = get_controller_of(rs)
        d = self._resolve(ns, d_ref) if d_ref is not None else None
        if d is not None and not is_rolling_update(d):
            self.enqueue(d)

    # ------------------------------------------------------------ reconcile
    def reconcile(self, key: str) -> float | None:
        cached = self.d_informer.indexer.get_by_key(key)
        if cached is None:
            return None
        d = copy_json(cached)
        self._requeue_after = None
        if (d.get("spec") or {}).get("selector") == {}:
            self.event(d, EVENT_WARNING, "SelectingAll",
                       "This deployment is selecting all pods. A non-empty selector is required.")
            status = d.get("status") or {}
            if int(status.get("observedGeneration") or 0) < int(d["metadata"].get("generation") or 0):
                status["observedGeneration"] = int(d["metadata"].get("generation") or 0)
                d["status"] = status
                self._write_status(d)
            return None
        rs_list = self.get_replica_sets_for_deployment(d)
        if d["metadata"].get("deletionTimestamp"):
            self.sync_status_only(d, rs_list)
            return None
        self.check_paused_conditions(d)
        spec = d.get("spec") or {}
        if spec.get("paused"):
            self.sync(d, rs_list)
            return self._requeue_after
        if rollback_to(d) is not None:
            self.rollback(d, rs_list)
            return None
        if self.is_scaling_event(d, rs_list):
            self.sync(d, rs_list)
            return self._requeue_after
        if is_rolling_update(d):
            self.rollout_rolling(d, rs_list)
        else:
            self.rollout_recreate(d, rs_list, self.get_pod_map(d, rs_list))
        return self._requeue_after

    def get_replica_sets_for_deployment(self, d: Obj) -> list[Obj]:
        """``getReplicaSetsForDeployment``: claim (adopt/release) the namespace's ReplicaSets."""
        meta = d["metadata"]
        selector = self.selector_of(d)
        index = self.rs_informer.indexer
        candidates = index.by_index(CONTROLLER_INDEX, meta["uid"]) + \
            index.by_index(CONTROLLER_INDEX, f"orphan/{meta.get('namespace') or ''}")
        manager = ControllerRefManager(self.core, d, DEPLOYMENT, selector,
                                       recheck_deletion_timestamp(self.core, DEPLOYMENT, d))
        claimed = manager.claim(REPLICASET, candidates)
        if manager.errors:
            raise manager.errors[0]
        return [copy_json(rs) for rs in claimed]

    def get_pod_map(self, d: Obj, rs_list: list[Obj]) -> dict[str, list[Obj]]:
        """``getPodMapForDeployment``: the pods the Deployment selects, by the uid of their controlling ReplicaSet."""
        selector = self.selector_of(d)
        out: dict[str, list[Obj]] = {}
        for rs in rs_list:
            uid = rs["metadata"]["uid"]
            out[uid] = [p for p in self.pod_informer.indexer.by_index(CONTROLLER_INDEX, uid)
                        if selector.matches(p["metadata"].get("labels"))]
        return out


def new_controller(ctx: ControllerContext) -> DeploymentController:
    """The controller manager's constructor for this controller."""
    return DeploymentController(ctx)
