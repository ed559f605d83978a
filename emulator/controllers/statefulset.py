"""The StatefulSet controller: pods with stable names and storage, created, scaled and updated in order.

A re-implementation of upstream ``pkg/controller/statefulset`` (``stateful_set_control.go``
``updateStatefulSet`` / ``updateStatefulSetAfterInvariantEstablished``,
``stateful_set_utils.go``) on kemu's controller runtime. One reconcile of a StatefulSet:

1. **Revisions.** The pod template is stored in a ControllerRevision named
   ``<set>-<hash>`` (``data``: the patch ``{"spec": {"template": {..., "$patch": "replace"}}}``
   that ``kubectl rollout undo`` applies; ``revision`` one above the highest); the
   set's ``updateRevision`` is the one matching its template, ``currentRevision`` the
   one its pods were at before the update began. Revisions beyond
   ``revisionHistoryLimit`` that no pod uses are deleted.
2. **Identity.** Pod ``<set>-<ordinal>`` for ordinals ``start .. start+replicas-1``
   (``spec.ordinals.start``), with hostname = its name, subdomain = ``serviceName``,
   labels ``statefulset.kubernetes.io/pod-name``, ``apps.kubernetes.io/pod-index`` and
   ``controller-revision-hash``, and one PVC ``<template>-<set>-<ordinal>`` per
   ``volumeClaimTemplates`` entry (created before the pod, never recreated while it
   exists; owned by the set when ``persistentVolumeClaimRetentionPolicy.whenDeleted`` is
   Delete; given the condemned pod as owner on a scale down when ``whenScaled`` is
   Delete, so the garbage collector removes them with it). A missing pod below the
   rolling update's partition is recreated at the
   current revision, any other at the update revision (``newVersionedStatefulSetPod``).
3. **Scaling.** With ``podManagementPolicy: OrderedReady`` (monotonic) the pass stops at
   the first pod it had to create, that is terminating, or that is not Running and Ready:
   pod N+1 is created only once pod N is Running and Ready. Failed or Succeeded pods are
   deleted to be recreated. Surplus pods go highest ordinal first, one at a time, and only
   when every other pod is healthy. ``Parallel`` does all of it at once.
4. **Updates.** ``RollingUpdate``: among ordinals at or above ``partition``, while fewer
   than ``maxUnavailable`` (default 1) of them are unavailable, delete the highest-ordinal
   pod not at the update revision (it comes back at the update revision in a later pass).
   ``OnDelete``: nothing is deleted; a pod the user deletes comes back at the update
   revision.
5. **Status**: ``replicas``, ``readyReplicas``, ``availableReplicas``,
   ``currentReplicas``, ``updatedReplicas``, ``currentRevision``, ``updateRevision``,
   ``observedGeneration``; once every pod is updated and ready, ``currentRevision``
   becomes ``updateRevision`` (``completeRollingUpdate``).

Ready means the pod's Ready condition; availability adds ``minReadySeconds`` since the
condition's last transition, on the cluster clock.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import orjson

from emulator.api import errors
from emulator.api.kinds import CONTROLLERREVISION, PERSISTENTVOLUMECLAIM, POD, STATEFULSET
from emulator.api.pdb import is_pod_ready
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339
from emulator.controllers.runtime import (
    CONTROLLER_INDEX,
    ControllerContext,
    ControllerRefManager,
    PodOwnerController,
    ensure_indexers,
    meta_key,
    new_controller_ref,
    recheck_deletion_timestamp,
)
from emulator.informers.indexer import OWNER_UID_INDEX, owner_uid_index_func

log = logging.getLogger(__name__)


DEFAULT_WORKERS = 5  # --concurrent-statefulset-syncs
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # rand.SafeEncodeString's alphabet


def template_hash(template: Obj) -> str:
    """A stable short hash of a pod template (upstream: fnv32a of the revision's patch, safe-encoded)."""
    digest = hashlib.sha256(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:10])


def ordinal_of(pod: Obj, set_name: str) -> int | None:
    """``getOrdinal``: the integer after ``<set>-`` in the pod's name, None for a foreign name."""
    name = pod["metadata"]["name"]
    prefix, _, suffix = name.rpartition("-")
    return int(suffix) if prefix == set_name and suffix.isdigit() else None


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _terminating(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def _running_ready(pod: Obj) -> bool:
    return _phase(pod) == "Running" and is_pod_ready(pod)


def _revision_of(pod: Obj) -> str:
    return ((pod.get("metadata") or {}).get("labels") or {}).get(REVISION_LABEL, "")


def _scaled(value: Any, total: int) -> int:
    """``GetScaledValueFromIntOrPercent`` rounding up, at least 1 (the StatefulSet maxUnavailable rule)."""
    if isinstance(value, str) and value.endswith("%"):
        return max(1, -(-int(value[:-1]) * total // 100))
    return max(1, int(value))


class StatefulSetController(PodOwnerController):
    """Reconciles StatefulSets; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("statefulset", ctx,
                         workers=workers or int(ctx.option("concurrent_statefulset_syncs", DEFAULT_WORKERS)))
        self.set_informer, self.pod_informer = self.watch_owners_and_pods(STATEFULSET)
        self.revision_informer = self.watch(ctx.informers.informer_for(CONTROLLERREVISION))
        self.claim_informer = self.watch(ctx.informers.informer_for(PERSISTENTVOLUMECLAIM))
        ensure_indexers(self.revision_informer, {OWNER_UID_INDEX: owner_uid_index_func})

    # ------------------------------------------------------------ revisions
    def _revisions(self, sts: Obj) -> tuple[Obj, Obj]:
        """(current, update) ControllerRevisions, creating the update revision when the template is new."""
        meta = sts["metadata"]
        owned = [r for r in self.revision_informer.indexer.by_index(OWNER_UID_INDEX, meta["uid"])
                 if not r["metadata"].get("deletionTimestamp")]
        template = (sts.get("spec") or {}).get("template") or {}
        name = f"{meta['name']}-{template_hash(template)}"
        update = next((r for r in owned if r["metadata"]["name"] == name), None)
        if update is None:
            body = {"metadata": {"name": name, "namespace": meta["namespace"],
                                 "labels": dict(((template.get("metadata") or {}).get("labels") or {}),
                                                **{REVISION_LABEL: name.rpartition("-")[2]}),
                                 "ownerReferences": [new_controller_ref(sts, STATEFULSET)]},
                    # Upstream's revision data is the patch `kubectl rollout undo` applies (getPatch).
                    "data": {"spec": {"template": {**template, "$patch": "replace"}}},
                    "revision": max((int(r.get("revision") or 0) for r in owned), default=0) + 1}
            try:
                update = self.core.create(CONTROLLERREVISION, body)
            except errors.StatusError as e:
                if e.reason != "AlreadyExists":
                    raise
                update = self.core.get(CONTROLLERREVISION, meta["namespace"], name)
            owned.append(update)
        wanted_current = (sts.get("status") or {}).get("currentRevision")
        current = next((r for r in owned if r["metadata"]["name"] == wanted_current), update)
        return current, update

    def _truncate_history(self, sts: Obj, pods: list[Obj], keep: tuple[str, str]) -> None:
        limit = int((sts.get("spec") or {}).get("revisionHistoryLimit", 10))
        in_use = {_revision_of(p) for p in pods} | set(keep)
        history = sorted((r for r in self.revision_informer.indexer.by_index(OWNER_UID_INDEX, sts["metadata"]["uid"])
                          if r["metadata"]["name"] not in in_use), key=lambda r: int(r.get("revision") or 0))
        for r in history[:max(0, len(history) - limit)]:
            try:
                self.core.delete(CONTROLLERREVISION, r["metadata"]["namespace"], r["metadata"]["name"])
            except errors.StatusError as e:
                if e.code != 404:
                    raise

    # ------------------------------------------------------------ identity
    def _claims(self, sts: Obj, ordinal: int) -> list[Obj]:
        meta, spec = sts["metadata"], sts.get("spec") or {}
        selector_labels = (spec.get("selector") or {}).get("matchLabels") or {}
        retention = spec.get("persistentVolumeClaimRetentionPolicy") or {}
        out = []
        for template in spec.get("volumeClaimTemplates") or []:
            tmeta = template.get("metadata") or {}
            claim_meta: Obj = {"name": f"{tmeta.get('name')}-{meta['name']}-{ordinal}", "namespace": meta["namespace"],
                               "labels": {**(tmeta.get("labels") or {}), **selector_labels}}
            if tmeta.get("annotations"):
                claim_meta["annotations"] = dict(tmeta["annotations"])
            if retention.get("whenDeleted") == "Delete":
                ref = new_controller_ref(sts, STATEFULSET)
                claim_meta["ownerReferences"] = [{**ref, "controller": False}]
            out.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": claim_meta,
                        "spec": dict(template.get("spec") or {})})
        return out

    def _pod_body(self, sts: Obj, revision: Obj, ordinal: int) -> Obj:
        meta, spec = sts["metadata"], sts.get("spec") or {}
        template = ((revision.get("data") or {}).get("spec") or {}).get("template") or spec.get("template") or {}
        template = {k: v for k, v in template.items() if k != "$patch"}
        tmeta = template.get("metadata") or {}
        name = f"{meta['name']}-{ordinal}"
        labels = {**(tmeta.get("labels") or {}), POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal),
                  REVISION_LABEL: revision["metadata"]["name"]}
        pod_meta: Obj = {"name": name, "namespace": meta["namespace"], "labels": labels,
                         "ownerReferences": [new_controller_ref(sts, STATEFULSET)]}
        if tmeta.get("annotations"):
            pod_meta["annotations"] = dict(tmeta["annotations"])
        pod_spec = orjson.loads(orjson.dumps(template.get("spec") or {}))
        pod_spec["hostname"] = name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        volumes = [v for v in pod_spec.get("volumes") or []]
        for claim_template, claim in zip(spec.get("volumeClaimTemplates") or [], self._claims(sts, ordinal),
                                         strict=True):
            vname = (claim_template.get("metadata") or {}).get("name")
            volumes = [v for v in volumes if v.get("name") != vname]
            volumes.append({"name": vname, "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}})
        if volumes:
            pod_spec["volumes"] = volumes
        return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}

    def _create_pod(self, sts: Obj, revision: Obj, ordinal: int) -> None:
        for claim in self._claims(sts, ordinal):
            cmeta = claim["metadata"]
            if self.claim_informer.indexer.get_by_key(f"{cmeta['namespace']}/{cmeta['name']}") is not None:
                continue
            try:
                self.core.create(PERSISTENTVOLUMECLAIM, claim)
                self.event(sts, "Normal", "SuccessfulCreate",
                           f"create Claim {cmeta['name']} Pod {sts['metadata']['name']}-{ordinal} in StatefulSet "
                           f"{sts['metadata']['name']} success")
            except errors.StatusError as e:
                if e.reason != "AlreadyExists":
                    raise
        key = meta_key(sts)
        self.expectations.expect_creations(key, 1)
        body = self._pod_body(sts, revision, ordinal)
        try:
            self.core.create(POD, body)
        except errors.StatusError as e:
            self.expectations.lower_expectations(key, 1, 0)
            if e.reason == "AlreadyExists":
                return
            self.event(sts, "Warning", "FailedCreate", f"create Pod {body['metadata']['name']} in StatefulSet "
                                                       f"{sts['metadata']['name']} failed error: {e.message}")
            raise
        self.event(sts, "Normal", "SuccessfulCreate", f"create Pod {body['metadata']['name']} in StatefulSet "
                                                      f"{sts['metadata']['name']} successful")

    def _delete_pod_of(self, sts: Obj, pod: Obj) -> None:
        meta = pod["metadata"]
        key = meta_key(sts)
        self.expectations.expect_deletions(key, 1)
        try:
            self.core.delete(POD, meta["namespace"], meta["name"], preconditions={"uid": meta["uid"]})
        except errors.StatusError as e:
            self.expectations.deletion_observed(key)
            if e.code not in (404, 409):
                raise
            return
        self.event(sts, "Normal", "SuccessfulDelete", f"delete Pod {meta['name']} in StatefulSet "
                                                      f"{sts['metadata']['name']} successful")

    def _release_claims_on_scale_down(self, sts: Obj, pod: Obj) -> None:
        """``whenScaled: Delete``: the condemned pod's claims get the pod as owner, so they go with it (GC)."""
        spec = sts.get("spec") or {}
        if (spec.get("persistentVolumeClaimRetentionPolicy") or {}).get("whenScaled") != "Delete":
            return
        ordinal = ordinal_of(pod, sts["metadata"]["name"])
        pmeta = pod["metadata"]
        ref = {"apiVersion": "v1", "kind": "Pod", "name": pmeta["name"], "uid": pmeta["uid"],
               "blockOwnerDeletion": True}
        for claim in self._claims(sts, ordinal or 0):
            cmeta = claim["metadata"]

            def add_owner(meta: Obj) -> Obj | None:
                refs = meta.get("ownerReferences") or []
                if any(r.get("uid") == ref["uid"] for r in refs):
                    return None
                meta["ownerReferences"] = [*refs, ref]
                return meta
            try:
                self.core.update_metadata(PERSISTENTVOLUMECLAIM, cmeta["namespace"], cmeta["name"], add_owner)
            except errors.StatusError as e:
                if e.code != 404:
                    raise

    # ------------------------------------------------------------ reconcile
    def _available(self, pod: Obj, min_ready: int, now: float) -> bool:
        if not _running_ready(pod):
            return False
        if min_ready <= 0:
            return True
        cond = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})
        since = cond.get("lastTransitionTime")
        return bool(since) and now - parse_rfc3339(since) >= min_ready

    def reconcile(self, key: str) -> float | None:
        sts = self.set_informer.indexer.get_by_key(key)
        if sts is None:
            self.expectations.delete_expectations(key)
            return None
        if sts["metadata"].get("deletionTimestamp") or not self.expectations.satisfied_expectations(key):
            return None
        spec = sts.get("spec") or {}
        selector = LabelSelector.from_dict(spec.get("selector"), "spec.selector")
        meta = sts["metadata"]
        index = self.pod_informer.indexer
        candidates = index.by_index(CONTROLLER_INDEX, meta["uid"]) + \
            index.by_index(CONTROLLER_INDEX, f"orphan/{meta.get('namespace') or ''}")
        manager = ControllerRefManager(self.core, sts, STATEFULSET, selector,
                                       recheck_deletion_timestamp(self.core, STATEFULSET, sts))
        pods = manager.claim(POD, candidates, lambda p: ordinal_of(p, meta["name"]) is not None)
        if manager.errors:
            raise manager.errors[0]
        current, update = self._revisions(sts)
        self._sync(sts, pods, current, update)
        pods = manager.claim(POD, self.pod_informer.indexer.by_index(CONTROLLER_INDEX, meta["uid"]))
        self._write_status(sts, pods, current, update)
        self._truncate_history(sts, pods, (current["metadata"]["name"], update["metadata"]["name"]))
        min_ready = int(spec.get("minReadySeconds") or 0)
        if min_ready and any(_running_ready(p) and not self._available(p, min_ready, self.clock.now()) for p in pods):
            return float(min_ready)
        return None

    def _sync(self, sts: Obj, pods: list[Obj], current: Obj, update: Obj) -> None:
        """One pass of ``updateStatefulSet``: scale up/replace, scale down, then roll."""
        spec, name = sts.get("spec") or {}, sts["metadata"]["name"]
        replicas = int(spec.get("replicas", 1))
        start = int((spec.get("ordinals") or {}).get("start") or 0)
        monotonic = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        strategy = spec.get("updateStrategy") or {}
        rolling = strategy.get("type", "RollingUpdate") == "RollingUpdate"
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0) if rolling else replicas
        slots: list[Obj | None] = [None] * replicas
        condemned: list[Obj] = []
        for pod in pods:
            ordinal = ordinal_of(pod, name)
            if ordinal is None:
                continue
            if start <= ordinal < start + replicas:
                slots[ordinal - start] = pod
            else:
                condemned.append(pod)
        condemned.sort(key=lambda p: ordinal_of(p, name) or 0)
        unhealthy = [p for p in [*slots, *condemned] if p is not None and (not _running_ready(p) or _terminating(p))]
        first_unhealthy = unhealthy[0] if unhealthy else None

        for i, pod in enumerate(slots):
            ordinal = start + i
            if pod is not None and _phase(pod) in ("Failed", "Succeeded") and not _terminating(pod):
                self._delete_pod_of(sts, pod)  # recreated on a later pass, at the same ordinal
                if monotonic:
                    return
                continue
            if pod is None:
                # Below the partition a missing pod comes back at the current revision (OnDelete: the update's).
                at_current = current is not update and rolling and i < partition
                self._create_pod(sts, current if at_current else update, ordinal)
                if monotonic:
                    return
                continue
            if monotonic and (_terminating(pod) or not _running_ready(pod)):
                return
        for pod in reversed(condemned):
            if _terminating(pod):
                if monotonic:
                    return
                continue
            if monotonic and not _running_ready(pod) and pod is not first_unhealthy:
                return
            self._release_claims_on_scale_down(sts, pod)
            self._delete_pod_of(sts, pod)
            if monotonic:
                return
        if not rolling or any(p is None for p in slots):
            return
        update_name = update["metadata"]["name"]
        max_unavailable = _scaled((strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1), replicas)
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self.clock.now()
        window = [p for p in slots[partition:] if p is not None]
        unavailable = sum(1 for p in window if _terminating(p) or not self._available(p, min_ready, now))
        for pod in reversed(window):
            if unavailable >= max_unavailable:
                return
            if _revision_of(pod) != update_name and not _terminating(pod):
                self._delete_pod_of(sts, pod)
                unavailable += 1

    def _write_status(self, sts: Obj, pods: list[Obj], current: Obj, update: Obj) -> None:
        spec = sts.get("spec") or {}
        name = sts["metadata"]["name"]
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self.clock.now()
        live = [p for p in pods if ordinal_of(p, name) is not None]
        current_name, update_name = current["metadata"]["name"], update["metadata"]["name"]
        status: Obj = {**(sts.get("status") or {})}
        status.update(
            observedGeneration=int(sts["metadata"].get("generation") or 1),
            replicas=len(live),
            readyReplicas=sum(1 for p in live if _running_ready(p)),
            availableReplicas=sum(1 for p in live if self._available(p, min_ready, now)),
            currentReplicas=sum(1 for p in live if _revision_of(p) == current_name),
            updatedReplicas=sum(1 for p in live if _revision_of(p) == update_name),
            currentRevision=current_name, updateRevision=update_name, collisionCount=0)
        rolling = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"
        if rolling and status["updatedReplicas"] == status["replicas"] == int(spec.get("replicas", 1)) \
                and status["readyReplicas"] == status["replicas"]:
            status["currentRevision"], status["currentReplicas"] = update_name, status["updatedReplicas"]
        if status == (sts.get("status") or {}):
            return
        try:
            self.core.update_status(STATEFULSET, {**sts, "status": status})
        except errors.StatusError as e:
            if e.reason != "Conflict":
                raise
            # Upstream's updateStatefulSetStatus retries on conflict against a fresh read: the status is ours.
            fresh = self.core.get(STATEFULSET, sts["metadata"]["namespace"], sts["metadata"]["name"])
            if fresh["metadata"].get("generation") == sts["metadata"].get("generation"):
                self.core.update_status(STATEFULSET, {**fresh, "status": status})


def new_controller(ctx: ControllerContext) -> StatefulSetController:
    """The controller manager's constructor for this controller."""
    return StatefulSetController(ctx)
