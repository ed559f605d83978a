"""Scaling, the new ReplicaSet, revisions, clean-up and status: upstream ``pkg/controller/deployment/sync.go``.

:class:`SyncMixin` is the base the other halves of the Deployment controller
build on: ``getAllReplicaSetsAndSyncRevision`` / ``getNewReplicaSet`` (find or
create the ReplicaSet of the current template, named by its hash, with the
revision annotations), ``sync`` and ``scale`` (proportional scaling during a
rollout, paused Deployments), ``isScalingEvent``, ``scaleReplicaSet``,
``cleanupDeployment`` (``revisionHistoryLimit``), ``checkPausedConditions`` and
``syncDeploymentStatus``. Writes refresh the cached copies in one pass so a
pass does not conflict with itself.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from emulator.api import errors
from emulator.api.kinds import DEPLOYMENT, REPLICASET
from emulator.api.types import Obj
from emulator.controllers.deployment.util import (
    DESIRED_REPLICAS,
    FAILED_RS_CREATE,
    FOUND_NEW_RS,
    MAX_REPLICAS,
    NEW_RS_CREATED,
    PAUSED,
    POD_TEMPLATE_HASH,
    RESUMED,
    REVISION,
    TIMED_OUT,
    annotation_int,
    calculate_status,
    compute_hash,
    copy_json,
    creation_key,
    equal_ignore_hash,
    find_active_or_latest,
    find_new_replica_set,
    find_old_replica_sets,
    get_condition,
    has_progress_deadline,
    has_revision_history_limit,
    is_rolling_update,
    is_saturated,
    max_revision,
    max_surge,
    new_condition,
    new_rs_new_replicas,
    proportion,
    replica_count,
    replicas_of,
    revision,
    rollback_to,
    set_condition,
    set_deployment_revision,
    set_new_replica_set_annotations,
    status_equal,
    status_int,
    with_availability,
)
from emulator.controllers.runtime import (
    EVENT_NORMAL,
    EVENT_WARNING,
    Controller,
    get_controller_of,
    new_controller_ref,
)


class SyncMixin(Controller):
    """``sync.go``'s methods of the Deployment controller.

    Mixed into ``DeploymentController``, whose constructor sets the informers and the per-thread state.
    """

    rs_informer: Any
    _local: threading.local

    # Workers reconcile different Deployments at once: the "requeue after" a pass asks for is per thread.
    @property
    def _requeue_after(self) -> float | None:
        return getattr(self._local, "requeue_after", None)

    @_requeue_after.setter
    def _requeue_after(self, value: float | None) -> None:
        self._local.requeue_after = value

    # ------------------------------------------------------------ writes
    def _write_status(self, d: Obj, annotations_changed: bool = False) -> None:
        """Write annotations (if changed) then status, keeping ``d``'s resourceVersion current."""
        meta = d["metadata"]
        if annotations_changed:
            annotations = dict(meta.get("annotations") or {})

            def set_annotations(m: Obj) -> Obj | None:
                if (m.get("annotations") or {}) == annotations:
                    return None
                m["annotations"] = annotations
                return m

            written = self.core.update_metadata(DEPLOYMENT, meta.get("namespace"), meta["name"], set_annotations,
                                                uid=meta.get("uid", ""))
            meta["resourceVersion"] = written["metadata"]["resourceVersion"]
        written = self.core.update_status(DEPLOYMENT, d)
        meta["resourceVersion"] = written["metadata"]["resourceVersion"]

    @staticmethod
    def _replace(rs_list: list[Obj], updated: Obj) -> None:
        for i, rs in enumerate(rs_list):
            if rs["metadata"]["uid"] == updated["metadata"]["uid"]:
                rs_list[i] = updated
                return

    def scale_replica_set(self, rs: Obj, new_scale: int, d: Obj, operation: str,
                          rs_list: list[Obj] | None = None) -> tuple[bool, Obj]:
        """``scaleReplicaSet``: write the size and the desired/max-replicas annotations if either changed."""
        size_changed = replicas_of(rs) != new_scale
        desired, max_total = replicas_of(d), replicas_of(d) + max_surge(d)
        annotations = dict(rs["metadata"].get("annotations") or {})
        annotations_changed = (annotations.get(DESIRED_REPLICAS) != str(desired)
                               or annotations.get(MAX_REPLICAS) != str(max_total))
        if not size_changed and not annotations_changed:
            return False, rs
        old_scale = replicas_of(rs)
        annotations[DESIRED_REPLICAS] = str(desired)
        annotations[MAX_REPLICAS] = str(max_total)
        body = {**rs, "metadata": {**rs["metadata"], "annotations": annotations},
                "spec": {**rs["spec"], "replicas": new_scale}}
        updated = self.core.update(REPLICASET, body)
        if rs_list is not None:
            self._replace(rs_list, updated)
        if size_changed:
            self.event(d, EVENT_NORMAL, "ScalingReplicaSet",
                       f"Scaled {operation} replica set {rs['metadata']['name']} from {old_scale} to {new_scale}")
        return size_changed, updated

    def scale_and_record(self, rs: Obj, new_scale: int, d: Obj, rs_list: list[Obj] | None = None
                         ) -> tuple[bool, Obj]:
        """``scaleReplicaSetAndRecordEvent``."""
        if replicas_of(rs) == new_scale:
            return False, rs
        return self.scale_replica_set(rs, new_scale, d, "up" if replicas_of(rs) < new_scale else "down", rs_list)

    # ------------------------------------------------------------ new ReplicaSet and revisions
    def get_all_replica_sets_and_sync_revision(self, d: Obj, rs_list: list[Obj], create: bool
                                               ) -> tuple[Obj | None, list[Obj]]:
        _, all_old = find_old_replica_sets(d, rs_list)
        new_rs = self.get_new_replica_set(d, rs_list, all_old, create)
        return new_rs, all_old

    def get_new_replica_set(self, d: Obj, rs_list: list[Obj], old_rss: list[Obj], create: bool) -> Obj | None:
        """``getNewReplicaSet``: find (and sync the annotations of) or create the ReplicaSet of the current template."""
        existing = find_new_replica_set(d, rs_list)
        new_revision = str(max_revision(old_rss) + 1)
        now = self.clock.now()
        if existing is not None:
            rs_copy = copy_json(existing)
            annotations_updated = set_new_replica_set_annotations(d, rs_copy, new_revision, True)
            min_ready = int((d.get("spec") or {}).get("minReadySeconds") or 0)
            if annotations_updated or int(rs_copy["spec"].get("minReadySeconds") or 0) != min_ready:
                rs_copy["spec"]["minReadySeconds"] = min_ready
                updated = self.core.update(REPLICASET, rs_copy)
                self._replace(rs_list, updated)
                return updated
            status = d.setdefault("status", {})
            progressing = None
            if has_progress_deadline(d) and get_condition(status, "Progressing") is None:
                progressing = new_condition("Progressing", "True", FOUND_NEW_RS,
                                            f'Found new replica set "{rs_copy["metadata"]["name"]}"', now)
            self._record_revision(d, (rs_copy["metadata"].get("annotations") or {}).get(REVISION, ""), progressing)
            return rs_copy
        if not create:
            return None
        # A new ReplicaSet for the current template.
        template = copy_json((d.get("spec") or {}).get("template") or {})
        status = d.setdefault("status", {})
        pod_hash = compute_hash(template, status.get("collisionCount"))
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), POD_TEMPLATE_HASH: pod_hash}
        selector = copy_json((d.get("spec") or {}).get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH: pod_hash}
        name = f"{d['metadata']['name']}-{pod_hash}"
        new_rs: Obj = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                       "metadata": {"name": name, "namespace": d["metadata"]["namespace"],
                                    "ownerReferences": [new_controller_ref(d, DEPLOYMENT)],
                                    "labels": dict(tmeta["labels"])},
                       "spec": {"replicas": 0, "selector": selector, "template": template,
                                "minReadySeconds": int((d.get("spec") or {}).get("minReadySeconds") or 0)}}
        new_rs["spec"]["replicas"] = new_rs_new_replicas(d, [*old_rss, new_rs], new_rs)
        set_new_replica_set_annotations(d, new_rs, new_revision, False)
        already_exists = False
        try:
            created = self.core.create(REPLICASET, new_rs)
        except errors.StatusError as e:
            if e.reason == "AlreadyExists":
                found = self.rs_informer.indexer.get_by_key(f"{d['metadata']['namespace']}/{name}")
                if found is None:
                    try:
                        found = self.core.get(REPLICASET, d["metadata"]["namespace"], name)
                    except errors.StatusError:
                        raise e from None
                ref = get_controller_of(found)
                if ref is not None and ref.get("uid") == d["metadata"]["uid"] and equal_ignore_hash(
                        (d.get("spec") or {}).get("template"), (found.get("spec") or {}).get("template")):
                    created, already_exists = copy_json(found), True
                else:
                    # A hash collision: bump collisionCount and let the retry create under another name.
                    status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
                    self._write_status(d)
                    raise
            elif any(c.reason == "NamespaceTerminating" for c in e.causes or []):
                raise
            else:
                msg = f'Failed to create new replica set "{name}": {e.message}'
                if has_progress_deadline(d):
                    set_condition(status, new_condition("Progressing", "False", FAILED_RS_CREATE, msg, now))
                    with contextlib.suppress(errors.StatusError):  # the bigger problem is reported below
                        self._write_status(d)
                self.event(d, EVENT_WARNING, FAILED_RS_CREATE, msg)
                raise
        rs_list.append(created)
        replicas = replicas_of(created)
        if not already_exists and replicas > 0:
            self.event(d, EVENT_NORMAL, "ScalingReplicaSet",
                       f"Scaled up replica set {created['metadata']['name']} from 0 to {replicas}")
        progressing = None
        if not already_exists and has_progress_deadline(d):
            progressing = new_condition("Progressing", "True", NEW_RS_CREATED,
                                        f'Created new replica set "{created["metadata"]["name"]}"', now)
        self._record_revision(d, new_revision, progressing)
        return created

    def _record_revision(self, d: Obj, revision: str, progressing: Obj | None) -> None:
        """Set the Deployment's revision annotation and (if given) its Progressing condition; write what changed."""
        annotations_changed = set_deployment_revision(d, revision)
        if progressing is not None:
            set_condition(d.setdefault("status", {}), progressing)
        if annotations_changed or progressing is not None:
            self._write_status(d, annotations_changed)

    # ------------------------------------------------------------ sync (scaling, paused)
    def sync(self, d: Obj, rs_list: list[Obj]) -> None:
        """``sync``: scale (proportionally during a rollout), clean up when paused, write the status."""
        new_rs, old_rss = self.get_all_replica_sets_and_sync_revision(d, rs_list, False)
        self.scale(d, new_rs, old_rss, rs_list)
        if (d.get("spec") or {}).get("paused") and rollback_to(d) is None:
            self.cleanup_deployment(self._current(old_rss, rs_list), d)
        new_rs = self._current_one(new_rs, rs_list)
        self.sync_deployment_status([*self._current(old_rss, rs_list), new_rs], new_rs, d)

    @staticmethod
    def _current(rss: list[Obj], rs_list: list[Obj]) -> list[Obj]:
        by_uid = {rs["metadata"]["uid"]: rs for rs in rs_list}
        return [by_uid.get(rs["metadata"]["uid"], rs) for rs in rss]

    @staticmethod
    def _current_one(rs: Obj | None, rs_list: list[Obj]) -> Obj | None:
        if rs is None:
            return None
        return next((r for r in rs_list if r["metadata"]["uid"] == rs["metadata"]["uid"]), rs)

    def is_scaling_event(self, d: Obj, rs_list: list[Obj]) -> bool:
        """``isScalingEvent``: an active ReplicaSet's desired-replicas annotation differs from ``spec.replicas``."""
        new_rs, old_rss = self.get_all_replica_sets_and_sync_revision(d, rs_list, False)
        for rs in [*self._current(old_rss, rs_list), self._current_one(new_rs, rs_list)]:
            if rs is None or replicas_of(rs) <= 0:
                continue
            desired = annotation_int(rs, DESIRED_REPLICAS)
            if desired is not None and desired != replicas_of(d):
                return True
        return False

    def scale(self, d: Obj, new_rs: Obj | None, old_rss: list[Obj], rs_list: list[Obj]) -> None:
        """``scale``: one active ReplicaSet takes the full count; otherwise spread the change proportionally."""
        old_rss = self._current(old_rss, rs_list)
        new_rs = self._current_one(new_rs, rs_list)
        target = find_active_or_latest(new_rs, old_rss)
        if target is not None:
            if replicas_of(target) != replicas_of(d):
                self.scale_and_record(target, replicas_of(d), d, rs_list)
            return
        if is_saturated(d, new_rs):
            for old in old_rss:
                if replicas_of(old) > 0:
                    self.scale_and_record(old, 0, d, rs_list)
            return
        if not is_rolling_update(d):
            return
        active = [rs for rs in [*old_rss, new_rs] if rs is not None and replicas_of(rs) > 0]
        current = replica_count(active)
        allowed = replicas_of(d) + max_surge(d) if replicas_of(d) > 0 else 0
        to_add = allowed - current
        if to_add > 0:
            # ReplicaSetsBySizeNewer: larger first, newer first among equals (two stable sorts).
            active.sort(key=creation_key, reverse=True)
            active.sort(key=lambda rs: -replicas_of(rs))
            operation = "up"
        elif to_add < 0:
            active.sort(key=lambda rs: (-replicas_of(rs), creation_key(rs)))  # ReplicaSetsBySizeOlder
            operation = "down"
        else:
            operation = ""
        added = 0
        sizes: dict[str, int] = {}
        for rs in active:
            if to_add != 0:
                p = proportion(rs, d, to_add, added)
                sizes[rs["metadata"]["name"]] = replicas_of(rs) + p
                added += p
            else:
                sizes[rs["metadata"]["name"]] = replicas_of(rs)
        for i, rs in enumerate(active):
            name = rs["metadata"]["name"]
            if i == 0 and to_add != 0:
                sizes[name] = max(0, sizes[name] + to_add - added)
            self.scale_replica_set(rs, sizes[name], d, operation, rs_list)

    def _all(self, old_rss: list[Obj], new_rs: Obj | None, rs_list: list[Obj]) -> list[Obj | None]:
        return [*self._current(old_rss, rs_list), self._current_one(new_rs, rs_list)]

    # ------------------------------------------------------------ status and clean-up
    def check_paused_conditions(self, d: Obj) -> None:
        """``checkPausedConditions``: Progressing=Unknown DeploymentPaused / DeploymentResumed."""
        if not has_progress_deadline(d):
            return
        status = d.setdefault("status", {})
        cond = get_condition(status, "Progressing")
        if cond is not None and cond.get("reason") == TIMED_OUT:
            return
        paused_cond = cond is not None and cond.get("reason") == PAUSED
        now = self.clock.now()
        paused = bool((d.get("spec") or {}).get("paused"))
        if paused and not paused_cond:
            set_condition(status, new_condition("Progressing", "Unknown", PAUSED, "Deployment is paused", now))
        elif not paused and paused_cond:
            set_condition(status, new_condition("Progressing", "Unknown", RESUMED, "Deployment is resumed", now))
        else:
            return
        self._write_status(d)

    def sync_status_only(self, d: Obj, rs_list: list[Obj]) -> None:
        new_rs, old_rss = self.get_all_replica_sets_and_sync_revision(d, rs_list, False)
        self.sync_deployment_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)

    def sync_deployment_status(self, all_rss: list[Obj | None], new_rs: Obj | None, d: Obj) -> None:
        now = self.clock.now()
        status = with_availability(calculate_status(all_rss, new_rs, d, now), d, now)
        if status_equal(d.get("status") or {}, status):
            return
        d["status"] = status
        self._write_status(d)

    def cleanup_deployment(self, old_rss: list[Obj], d: Obj) -> None:
        """``cleanupDeployment``: delete scaled-down ReplicaSets beyond ``revisionHistoryLimit``, oldest first."""
        if not has_revision_history_limit(d):
            return
        alive = [rs for rs in old_rss if rs is not None and not rs["metadata"].get("deletionTimestamp")]
        diff = len(alive) - int(d["spec"]["revisionHistoryLimit"])
        if diff <= 0:
            return
        alive.sort(key=lambda rs: (revision(rs) or 0, creation_key(rs)))
        for rs in alive[:diff]:
            meta = rs["metadata"]
            if (status_int(rs, "replicas") != 0 or replicas_of(rs) != 0
                    or int(meta.get("generation") or 0) > status_int(rs, "observedGeneration")):
                continue
            try:
                self.core.delete(REPLICASET, meta.get("namespace"), meta["name"])
            except errors.StatusError as e:
                if e.code != 404:
                    raise
