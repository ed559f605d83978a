"""The disruption controller: keeps every PodDisruptionBudget's status current.

A re-implementation of upstream ``pkg/controller/disruption/disruption.go``
(``trySync`` and the helpers it calls). For each PDB:

* **pods**: the PDB's namespace's pods its selector matches (policy/v1: a
  missing selector matches nothing, ``{}`` matches all);
* **expectedPods / desiredHealthy** (``getExpectedPodCount``): an integer
  ``minAvailable`` gives ``desiredHealthy = minAvailable`` and
  ``expectedPods = len(pods)``. A percentage ``minAvailable`` or any
  ``maxUnavailable`` needs the pods' controllers' scale (``getExpectedScale``):
  each pod's controllerRef is resolved with upstream's finders in order — a
  ReplicaSet owned by a Deployment counts the Deployment's ``spec.replicas``, a
  ReplicaSet on its own its ``spec.replicas``, and any other served kind with a
  ``scale`` subresource its ``spec.replicas`` — and the scales of the distinct
  controllers are summed. Percentages round *up*
  (``intstr.GetScaledValueFromIntOrPercent(..., true)``):
  ``desiredHealthy = ceil(minAvailable% * expected)`` or
  ``expected - ceil(maxUnavailable% * expected)`` (not below 0). Pods without
  a controllerRef are "unmanaged" and simply not counted, as upstream (which
  also emits a warning event). A pod whose controller cannot give a scale fails
  the sync: a kind without a ``scale`` subresource (a DaemonSet: upstream says
  "daemonsets.apps does not implement the scale subresource"), a kind kemu does
  not serve, or a controller object that is gone ("found no controllers for pod").
  A failed sync writes the fail-safe status (``failSafe``): ``disruptionsAllowed
  = 0`` and condition ``DisruptionAllowed=False`` with reason ``SyncFailed``.
* **disruptedPods** (``buildDisruptedPodMap``): entries the eviction subresource
  added are kept while their pod exists, is not yet being deleted, and the entry
  is younger than two minutes of cluster time;
* **currentHealthy** (``countHealthyPods``): pods that are Ready, not being
  deleted, and not in ``disruptedPods``;
* **disruptionsAllowed** = ``currentHealthy - desiredHealthy``, 0 when negative
  or when ``expectedPods`` is 0; ``observedGeneration`` = the PDB's generation;
  condition ``DisruptionAllowed`` (``SufficientPods`` / ``InsufficientPods``).

The status is written only when it changed, compare-and-set on the PDB's
resourceVersion (the eviction handler writes the same status); a conflict is
left for the next pass, as upstream requeues it without the fail-safe.

Driving: :meth:`DisruptionController.sync_once` syncs every PDB (pods are listed
once per namespace per pass); :meth:`DisruptionController.sync` one PDB. The
cluster clock is injected; it times the ``disruptedPods`` expiry. The controller
manager runs :class:`DisruptionQueueController` instead: the same sync, driven
by informer events through a work queue and reading pods, ReplicaSets and
Deployments from the informer caches rather than listing per pass.

Simplifications: see ``docs/architecture.md``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from emulator.api import errors, pdb
from emulator.api.kinds import DEPLOYMENT, PDB, POD, REPLICASET, Kind, all_kinds
from emulator.api.types import Obj
from emulator.clock import Clock, parse_rfc3339, rfc3339
from emulator.controllers.runtime import Controller, ControllerContext, object_of
from emulator.informers import ResourceEventHandlerFuncs
from emulator.server.core import ServerCore

log = logging.getLogger(__name__)


class SyncError(Exception):
    """A PDB whose status cannot be computed; its message becomes the SyncFailed condition's."""


@dataclass
class DisruptionStats:
    synced: int = 0
    written: int = 0
    failed: int = 0
    conflicts: int = 0


def _controller_ref(obj: Obj) -> Obj | None:
    """``metav1.GetControllerOf``: the ownerReference with ``controller: true``."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return ref
    return None


def _group_of(ref: Obj) -> str:
    return str(ref.get("apiVersion") or "").rpartition("/")[0]


def _is(ref: Obj | None, kind: str, groups: tuple[str, ...]) -> bool:
    """``verifyGroupKind``."""
    return ref is not None and ref.get("kind") == kind and _group_of(ref) in groups


class _Lookup:
    """Objects read during one pass, so each controller is read once however many pods it owns."""

    def __init__(self, core: ServerCore) -> None:
        self.core = core
        self._cache: dict[tuple[str, str | None, str], Obj | None] = {}

    def get(self, kind: Kind, namespace: str | None, name: str) -> Obj | None:
        key = (kind.resource, namespace if kind.namespaced else None, name)
        if key not in self._cache:
            try:
                self._cache[key] = self.core.get(kind, key[1], name)
            except errors.StatusError as e:
                if e.code != 404:
                    raise
                self._cache[key] = None
        return self._cache[key]


def _replicas(obj: Obj) -> int:
    return int((obj.get("spec") or {}).get("replicas", 1))


class DisruptionController:
    """Drive with :meth:`sync_once` (tests) or run it in a :class:`~emulator.controllers.loop.ControllerLoop`."""

    def __init__(self, core: ServerCore, clock: Clock | None = None) -> None:
        self.core = core
        self.clock = clock or core.clock
        self.stats = DisruptionStats()

    # ----------------------------------------------------------------- driving
    def sync_once(self) -> int:
        """Sync every PDB; returns how many statuses were written."""
        budgets = self.core.list(PDB).items
        by_namespace: dict[str, list[Obj]] = defaultdict(list)
        for budget in budgets:
            by_namespace[budget["metadata"]["namespace"]].append(budget)
        written = 0
        lookup = _Lookup(self.core)
        for namespace, group in by_namespace.items():
            pods = self.core.list(POD, namespace).items
            for budget in group:
                written += self._sync(budget, pods, lookup)
        return written

    def sync(self, namespace: str, name: str) -> Obj | None:
        """Sync one PDB; returns its status as stored afterwards (None if the PDB does not exist)."""
        budget = errors.get_or_none(self.core, PDB, namespace, name)
        if budget is None:
            return None
        self.sync_budget(budget)
        return self.core.get(PDB, namespace, name).get("status")

    def sync_budget(self, budget: Obj) -> int:
        """Sync from this read of the PDB (its resourceVersion is the write's precondition); 1 if it wrote.

        A read that is stale by the time of the write (an eviction spent the budget in between)
        conflicts and writes nothing; the next pass starts from the new state.
        """
        return self._sync(budget, self.core.list(POD, budget["metadata"]["namespace"]).items, _Lookup(self.core))

    def _sync(self, budget: Obj, namespace_pods: list[Obj], lookup: _Lookup) -> int:
        self.stats.synced += 1
        try:
            return self._try_sync(budget, namespace_pods, lookup)
        except errors.StatusError as e:
            if e.reason == "Conflict":
                self.stats.conflicts += 1  # someone (an eviction) wrote the status first: next pass
                return 0
            if e.code == 404:
                return 0
            error: Exception = e
        except (SyncError, ValueError) as e:
            error = e
        self.stats.failed += 1
        log.info("disruption controller: PDB %s/%s: %s", budget["metadata"]["namespace"],
                 budget["metadata"]["name"], error)
        try:
            return self._fail_safe(budget, str(error.message if isinstance(error, errors.StatusError) else error))
        except errors.StatusError as e:
            if e.reason == "Conflict" or e.code == 404:
                return 0
            raise

    # -------------------------------------------------------------- the sync
    def _try_sync(self, budget: Obj, namespace_pods: list[Obj], lookup: _Lookup) -> int:
        spec = budget.get("spec") or {}
        if spec.get("selector") is None:
            pods: list[Obj] = []  # policy/v1: a missing selector selects nothing
        else:
            selector = pdb.budget_selector(budget)  # a bad selector fails the sync (upstream getPodsForPdb)
            pods = [p for p in namespace_pods if selector.matches((p.get("metadata") or {}).get("labels"))]
        expected, desired = self._expected_pod_count(budget, pods, lookup)
        now = self.clock.now()
        disrupted = self._disrupted_pod_map(budget, pods, now)
        healthy = _count_healthy(pods, disrupted, now)
        return self._update_status(budget, healthy, desired, expected, disrupted)

    def _expected_pod_count(self, budget: Obj, pods: list[Obj], lookup: _Lookup) -> tuple[int, int]:
        """``getExpectedPodCount``: (expectedPods, desiredHealthy)."""
        spec = budget.get("spec") or {}
        max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
        if max_unavailable is not None:
            expected = self._expected_scale(pods, lookup)
            desired = max(expected - pdb.scaled_value(max_unavailable, expected, True), 0)
            return expected, desired
        if min_available is not None:
            if isinstance(min_available, int) and not isinstance(min_available, bool):
                return len(pods), min_available
            expected = self._expected_scale(pods, lookup)
            return expected, pdb.scaled_value(min_available, expected, True)
        return 0, 0

    def _expected_scale(self, pods: list[Obj], lookup: _Lookup) -> int:
        """``getExpectedScale``: the sum of the scales of the pods' distinct controllers."""
        scales: dict[str, int] = {}
        for pod in pods:
            ref = _controller_ref(pod)
            if ref is None:
                continue  # unmanaged: not counted (upstream warns with an event)
            if ref.get("uid") in scales:
                continue
            namespace = pod["metadata"]["namespace"]
            found = (self._deployment_of_replica_set(ref, namespace, lookup)
                     or self._replica_set(ref, namespace, lookup)
                     or self._scale_controller(ref, namespace, lookup))
            if found is None:
                raise SyncError(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            scales[found[0]] = found[1]
        return sum(scales.values())

    @staticmethod
    def _deployment_of_replica_set(ref: Obj, namespace: str, lookup: _Lookup) -> tuple[str, int] | None:
        """``getPodDeployment``: a ReplicaSet controlled by a Deployment counts the Deployment."""
        rs = DisruptionController._referenced_replica_set(ref, namespace, lookup)
        if rs is None:
            return None
        owner = _controller_ref(rs)
        if not _is(owner, "Deployment", ("apps", "extensions")):
            return None
        assert owner is not None
        deployment = lookup.get(DEPLOYMENT, namespace, owner.get("name") or "")
        if deployment is None or deployment["metadata"].get("uid") != owner.get("uid"):
            return None
        return deployment["metadata"]["uid"], _replicas(deployment)

    @staticmethod
    def _replica_set(ref: Obj, namespace: str, lookup: _Lookup) -> tuple[str, int] | None:
        """``getPodReplicaSet``: a ReplicaSet not controlled by a Deployment counts itself."""
        rs = DisruptionController._referenced_replica_set(ref, namespace, lookup)
        if rs is None:
            return None
        owner = _controller_ref(rs)
        if owner is not None and owner.get("kind") == "Deployment":
            return None
        return rs["metadata"]["uid"], _replicas(rs)

    @staticmethod
    def _referenced_replica_set(ref: Obj, namespace: str, lookup: _Lookup) -> Obj | None:
        """The ReplicaSet ``ref`` names, if it is one and still the same object (uid); else None."""
        if not _is(ref, "ReplicaSet", ("apps", "extensions")):
            return None
        rs = lookup.get(REPLICASET, namespace, ref.get("name") or "")
        if rs is None or rs["metadata"].get("uid") != ref.get("uid"):
            return None
        return rs

    @staticmethod
    def _scale_controller(ref: Obj, namespace: str, lookup: _Lookup) -> tuple[str, int] | None:
        """``getScaleController``: any served kind with a ``scale`` subresource, by its ``spec.replicas``."""
        group = _group_of(ref)
        kind = next((k for k in all_kinds() if k.group == group and k.kind == ref.get("kind")), None)
        if kind is None:
            raise SyncError(f'no matches for kind "{ref.get("kind")}" in version "{ref.get("apiVersion")}"')
        if "scale" not in kind.subresources:
            raise SyncError(f"{kind.resource} does not implement the scale subresource")
        obj = lookup.get(kind, namespace, ref.get("name") or "")
        if obj is None or obj["metadata"].get("uid") != ref.get("uid"):
            return None
        return obj["metadata"]["uid"], _replicas(obj)

    @staticmethod
    def _disrupted_pod_map(budget: Obj, pods: list[Obj], now: float) -> dict[str, str]:
        """``buildDisruptedPodMap``: entries for pods that still exist, are not being deleted, and are not stale."""
        recorded = (budget.get("status") or {}).get("disruptedPods") or {}
        if not recorded:
            return {}
        kept: dict[str, str] = {}
        for pod in pods:
            meta = pod["metadata"]
            if meta.get("deletionTimestamp") or meta["name"] not in recorded:
                continue
            when = recorded[meta["name"]]
            if parse_rfc3339(when) + pdb.DELETION_TIMEOUT_SECONDS < now:
                log.info("disruption controller: pod %s/%s was expected to be deleted but it wasn't",
                         meta.get("namespace"), meta["name"])
                continue
            kept[meta["name"]] = when
        return kept

    def _update_status(self, budget: Obj, healthy: int, desired: int, expected: int,
                       disrupted: dict[str, str]) -> int:
        """``updatePdbStatus``: write the new status if anything differs; returns 1 if it wrote."""
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            # A PDB matching no pods must stay safe when its first pods appear before the next sync.
            allowed = 0
        old = budget.get("status") or {}
        generation = int(budget["metadata"].get("generation") or 0)
        if (int(old.get("currentHealthy") or 0) == healthy and int(old.get("desiredHealthy") or 0) == desired
                and int(old.get("expectedPods") or 0) == expected
                and int(old.get("disruptionsAllowed") or 0) == allowed
                and (old.get("disruptedPods") or {}) == disrupted
                and int(old.get("observedGeneration") or 0) == generation
                and pdb.conditions_up_to_date(budget)):
            return 0
        status: Obj = {"observedGeneration": generation, "disruptionsAllowed": allowed, "currentHealthy": healthy,
                       "desiredHealthy": desired, "expectedPods": expected,
                       "conditions": [dict(c) for c in old.get("conditions") or []]}
        if disrupted:
            status["disruptedPods"] = disrupted
        pdb.update_disruption_allowed_condition(status, rfc3339(self.clock.now()))
        self.core.update_status(PDB, {**budget, "status": status})  # conditional on the budget's resourceVersion
        self.stats.written += 1
        return 1

    def _fail_safe(self, budget: Obj, message: str) -> int:
        """``failSafe``: at least make sure no eviction is approved while the status cannot be computed."""
        status = dict(budget.get("status") or {})
        status["disruptionsAllowed"] = 0
        for key in ("currentHealthy", "desiredHealthy", "expectedPods"):
            status.setdefault(key, 0)
        conditions = [dict(c) for c in status.get("conditions") or []]
        pdb.set_status_condition(conditions, {
            "type": pdb.DISRUPTION_ALLOWED_CONDITION, "status": "False", "reason": pdb.SYNC_FAILED_REASON,
            "message": message, "observedGeneration": int(status.get("observedGeneration") or 0),
        }, rfc3339(self.clock.now()))
        status["conditions"] = conditions
        if status == (budget.get("status") or {}):
            return 0
        self.core.update_status(PDB, {**budget, "status": status})
        self.stats.written += 1
        return 1


def _count_healthy(pods: list[Obj], disrupted: dict[str, str], now: float) -> int:
    """``countHealthyPods``: Ready, not being deleted, not about to be evicted."""
    healthy = 0
    for pod in pods:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        when = disrupted.get(meta["name"])
        if when is not None and parse_rfc3339(when) + pdb.DELETION_TIMEOUT_SECONDS > now:
            continue
        if pdb.is_pod_ready(pod):
            healthy += 1
    return healthy


# ----------------------------------------------------------------------------- informer-driven mode


class _CacheLookup(_Lookup):
    """Controller lookups from informer caches (ReplicaSets, Deployments), the store for any other kind."""

    def __init__(self, core: ServerCore, caches: dict[str, Any]) -> None:
        super().__init__(core)
        self._caches = caches

    def get(self, kind: Kind, namespace: str | None, name: str) -> Obj | None:
        cache = self._caches.get(kind.resource)
        if cache is None:
            return super().get(kind, namespace, name)
        return cache.indexer.get_by_key(f"{namespace}/{name}" if kind.namespaced else name)


class DisruptionQueueController(Controller):
    """The disruption controller on informers and a work queue (what the controller manager runs).

    Upstream's event wiring (``disruption.go`` ``addPod``/``updatePod``/``deletePod``, PDB
    handlers): a PDB event queues that PDB; a pod event queues the PDBs of the pod's
    namespace whose selector matches it; a change of a ReplicaSet's or Deployment's
    ``spec.replicas`` queues the PDBs of its namespace (their expected scale moved). A
    reconcile is :meth:`DisruptionController._sync` over the cached PDB and the namespace's
    cached pods — no list per pass. Entries of ``disruptedPods`` expire after two minutes of
    cluster time: the PDB is requeued for that moment (upstream's recheck queue).
    """

    def __init__(self, ctx: ControllerContext, *, workers: int = 1) -> None:
        super().__init__("disruption", ctx, workers=workers)
        self.sync = DisruptionController(ctx.core, ctx.clock)
        self.pdb_informer = self.watch_kind(PDB, delete=self.enqueue_deleted)
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        self.rs_informer = self.watch(ctx.informers.informer_for(REPLICASET))
        self.deploy_informer = self.watch(ctx.informers.informer_for(DEPLOYMENT))
        self.pod_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda pod, _initial: self._pod_changed(pod), update=self._update_pod,
            delete=lambda pod: self._pod_changed(object_of(pod))))
        scale_handler = ResourceEventHandlerFuncs(update=self._scale_changed)
        self.rs_informer.add_event_handler(scale_handler)
        self.deploy_informer.add_event_handler(scale_handler)

    def _budgets_in(self, namespace: str) -> list[Obj]:
        return self.pdb_informer.indexer.by_index("namespace", namespace)

    def _pod_changed(self, pod: Obj | None) -> None:
        if pod is None:
            return
        for budget in self._budgets_in((pod.get("metadata") or {}).get("namespace") or ""):
            if pdb.budget_matches(budget, pod):
                self.enqueue(budget)

    def _update_pod(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        self._pod_changed(new)
        if (old["metadata"].get("labels") or {}) != (new["metadata"].get("labels") or {}):
            self._pod_changed(old)  # budgets that stopped covering it

    def _scale_changed(self, old: Obj, new: Obj) -> None:
        if (old.get("spec") or {}).get("replicas") == (new.get("spec") or {}).get("replicas"):
            return
        for budget in self._budgets_in(new["metadata"].get("namespace") or ""):
            self.enqueue(budget)

    def reconcile(self, key: str) -> float | None:
        budget = self.pdb_informer.indexer.get_by_key(key)
        if budget is None:
            return None
        namespace = budget["metadata"]["namespace"]
        pods = self.pod_informer.indexer.by_index("namespace", namespace)
        lookup = _CacheLookup(self.core, {REPLICASET.resource: self.rs_informer,
                                          DEPLOYMENT.resource: self.deploy_informer})
        self.sync._sync(budget, pods, lookup)
        # Requeue when the oldest disruptedPods entry expires (upstream's recheck queue).
        recorded = (budget.get("status") or {}).get("disruptedPods") or {}
        if recorded:
            expiry = min(parse_rfc3339(t) for t in recorded.values()) + pdb.DELETION_TIMEOUT_SECONDS
            return max(0.0, expiry - self.clock.now()) + 1.0
        return None


def new_controller(ctx: ControllerContext) -> DisruptionQueueController:
    """The controller manager's constructor for this controller."""
    return DisruptionQueueController(ctx)
