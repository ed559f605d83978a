"""The Deployment controller: rolls a Deployment's pod template out through ReplicaSets.

A re-implementation of upstream ``pkg/controller/deployment/``
(``deployment_controller.go``, ``sync.go``, ``rolling.go``, ``recreate.go``,
``rollback.go``, ``progress.go`` and ``util/deployment_util.go``) on kemu's
controller runtime. The pieces, as upstream:

* **ReplicaSets per template.** The *new* ReplicaSet is the one whose template
  equals the Deployment's, ignoring the ``pod-template-hash`` label
  (``EqualIgnoreHash``; the oldest wins if several do). It is created on demand
  as ``<deployment>-<hash>`` where the hash is ``ComputeHash``: FNV-32a over the
  template plus ``status.collisionCount``, printed in decimal and mapped through
  ``rand.SafeEncodeString``'s alphabet — so names look like ``web-7c5ddbdf54``.
  (Upstream hashes Go's ``spew`` dump of the struct; kemu hashes the template's
  canonical JSON, so the characters differ from a real cluster's, the shape and
  the collision handling do not.) The hash is added as a ``pod-template-hash``
  label to the ReplicaSet, its selector and its template. A name taken by a
  ReplicaSet with another template bumps ``collisionCount`` and retries.
* **Revisions.** Each new ReplicaSet gets ``deployment.kubernetes.io/revision``
  = max(old revisions) + 1, copied to the Deployment; a ReplicaSet brought back
  by a rollback keeps its old numbers in ``deployment.kubernetes.io/revision-history``.
  The Deployment's other annotations (``kubernetes.io/change-cause`` ...) are
  copied to its new ReplicaSet, which is what ``kubectl rollout history`` and
  ``kubectl rollout undo`` read; ``desired-replicas`` / ``max-replicas``
  annotations drive proportional scaling. ReplicaSets beyond
  ``revisionHistoryLimit`` that are scaled to zero are deleted, oldest revision
  first (``cleanupDeployment``).
* **RollingUpdate** (``rolloutRolling``): scale the new ReplicaSet up to at most
  ``replicas + maxSurge`` pods in all, then scale old ones down while at least
  ``replicas - maxUnavailable`` pods stay available — unhealthy old pods first
  (``cleanupUnhealthyReplicas``). Percentages resolve against ``replicas``:
  surge rounds up, unavailable down, and if both come to 0, unavailable is 1
  (``ResolveFenceposts``).
* **Recreate**: scale every old ReplicaSet to zero, wait until none of their
  pods is left running, then create/scale the new one.
* **Scaling** (``sync``/``scale``) while a rollout is under way spreads the
  change over the active ReplicaSets in proportion to their size; ``paused``
  Deployments only scale.
* **Status and conditions** (``calculateStatus``, ``syncRolloutStatus``):
  replicas, updatedReplicas, readyReplicas, availableReplicas,
  unavailableReplicas, observedGeneration, collisionCount; ``Available``
  (``MinimumReplicasAvailable`` / ``MinimumReplicasUnavailable``) and
  ``Progressing`` (``NewReplicaSetCreated``, ``FoundNewReplicaSet``,
  ``ReplicaSetUpdated``, ``NewReplicaSetAvailable``, ``ProgressDeadlineExceeded``,
  ``DeploymentPaused`` / ``DeploymentResumed``, ``ReplicaSetCreateError``), with
  ``progressDeadlineSeconds`` measured on the cluster clock: a Deployment with no
  progress is re-checked when its deadline is due (``requeueStuckDeployment``).
* **Rollback.** ``kubectl rollout undo`` is client-side for apps/v1 (it copies
  an old ReplicaSet's template and annotations into the Deployment), so it needs
  only the revision annotations and ``pod-template-hash`` labels above. The old
  ``deprecated.deployment.rollback.to`` annotation is honoured too (``rollback.go``).

Writes: a Deployment's annotations (the revision) and status are written as two
calls — kemu's status subresource does not carry metadata, upstream's does —
and the cached copies in one pass are refreshed with each write's result, so one
pass does not conflict with itself. Failed passes are retried with the default
controller rate limiter and dropped after 15 retries, as upstream.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Sequence
from typing import Any

import orjson

from emulator.api import errors
from emulator.api.kinds import DEPLOYMENT, POD, REPLICASET
from emulator.api.pdb import scaled_value
from emulator.api.selectors import LabelSelector
from emulator.clock import parse_rfc3339, rfc3339
from emulator.controllers.runtime import (
    CONTROLLER_INDEX,
    EVENT_NORMAL,
    EVENT_WARNING,
    Controller,
    ControllerContext,
    ControllerRefManager,
    SelectorCache,
    controller_index_func,
    ensure_indexers,
    get_controller_of,
    meta_key,
    new_controller_ref,
    object_of,
    recheck_deletion_timestamp,
    resolve_controller_ref,
)
from emulator.informers import ResourceEventHandlerFuncs

log = logging.getLogger(__name__)

Obj = dict[str, Any]

# k8s.io/api/apps/v1 and pkg/controller/deployment/util constants.
POD_TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
ROLLBACK_TO = "deprecated.deployment.rollback.to"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
ANNOTATIONS_TO_SKIP = frozenset({LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED_REPLICAS, MAX_REPLICAS,
                                 ROLLBACK_TO})
MAX_REV_HISTORY_LENGTH_IN_CHARS = 2000

REPLICA_SET_UPDATED = "ReplicaSetUpdated"
FAILED_RS_CREATE = "ReplicaSetCreateError"
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
MINIMUM_REPLICAS_AVAILABLE = "MinimumReplicasAvailable"
MINIMUM_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"
ROLLBACK_REVISION_NOT_FOUND = "DeploymentRollbackRevisionNotFound"
ROLLBACK_TEMPLATE_UNCHANGED = "DeploymentRollbackTemplateUnchanged"
ROLLBACK_DONE = "DeploymentRollback"

# deployment_controller.go maxRetries; kube-controller-manager --concurrent-deployment-syncs default.
MAX_RETRIES = 15
DEFAULT_WORKERS = 5
_MAX_INT32 = 2 ** 31 - 1

# k8s.io/apimachinery/pkg/util/rand alphanums: no vowels, no confusable characters.
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


# ----------------------------------------------------------------------------- hashing and templates


def safe_encode_string(s: str) -> str:
    """``rand.SafeEncodeString``: each character mapped into an alphabet that cannot spell words."""
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in s)


def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def compute_hash(template: Obj, collision_count: int | None) -> str:
    """``controller.ComputeHash``: FNV-32a of the template (+ the collision count), safe-encoded."""
    data = orjson.dumps(template or {}, option=orjson.OPT_SORT_KEYS)
    if collision_count is not None:
        # Upstream writes the count little-endian into an 8-byte buffer and hashes all 8 bytes.
        data += int(collision_count & 0xFFFFFFFF).to_bytes(4, "little") + b"\x00" * 4
    return safe_encode_string(str(fnv32a(data)))


def _prune(value: Any) -> Any:
    """Drop empty maps/lists and nulls recursively: upstream's semantic equality treats nil and empty alike."""
    if isinstance(value, dict):
        out = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v not in ({}, [])}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def _without_hash(template: Obj | None) -> Obj:
    template = template or {}
    meta = dict(template.get("metadata") or {})
    labels = dict(meta.get("labels") or {})
    labels.pop(POD_TEMPLATE_HASH, None)
    meta["labels"] = labels
    return {**template, "metadata": meta}


def equal_ignore_hash(a: Obj | None, b: Obj | None) -> bool:
    """``EqualIgnoreHash``: templates equal once the ``pod-template-hash`` label is ignored."""
    return _prune(_without_hash(a)) == _prune(_without_hash(b))


def _copy(obj: Obj) -> Obj:
    return orjson.loads(orjson.dumps(obj))


# ----------------------------------------------------------------------------- ReplicaSet arithmetic


def replicas_of(obj: Obj | None) -> int:
    if obj is None:
        return 0
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _status_int(obj: Obj | None, field: str) -> int:
    return 0 if obj is None else int((obj.get("status") or {}).get(field) or 0)


def replica_count(rss: Sequence[Obj | None]) -> int:
    """``GetReplicaCountForReplicaSets``: the sum of ``spec.replicas``."""
    return sum(replicas_of(rs) for rs in rss if rs is not None)


def actual_replica_count(rss: Sequence[Obj | None]) -> int:
    return sum(_status_int(rs, "replicas") for rs in rss)


def ready_replica_count(rss: Sequence[Obj | None]) -> int:
    return sum(_status_int(rs, "readyReplicas") for rs in rss)


def available_replica_count(rss: Sequence[Obj | None]) -> int:
    return sum(_status_int(rs, "availableReplicas") for rs in rss)


def _created(rs: Obj) -> tuple[float, str]:
    ts = rs["metadata"].get("creationTimestamp")
    return (parse_rfc3339(ts) if ts else 0.0, rs["metadata"].get("name", ""))


def by_creation(rss: Sequence[Obj]) -> list[Obj]:
    """``ReplicaSetsByCreationTimestamp``: oldest first, name as the tie-breaker."""
    return sorted(rss, key=_created)


def revision(rs: Obj | None) -> int | None:
    """``deploymentutil.Revision``: the revision annotation as an int (None if absent or not a number)."""
    if rs is None:
        return None
    value = (rs["metadata"].get("annotations") or {}).get(REVISION)
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return None


def max_revision(rss: Sequence[Obj | None]) -> int:
    return max((r for r in (revision(rs) for rs in rss) if r is not None), default=0)


def last_revision(rss: Sequence[Obj | None]) -> int:
    """``LastRevision``: the second-highest revision."""
    top = second = 0
    for rs in rss:
        v = revision(rs)
        if v is None:
            continue
        if v >= top:
            second, top = top, v
        elif v > second:
            second = v
    return second


def is_rolling_update(d: Obj) -> bool:
    return ((d.get("spec") or {}).get("strategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"


def resolve_fenceposts(max_surge: Any, max_unavailable: Any, desired: int) -> tuple[int, int]:
    """``ResolveFenceposts``: surge rounds up, unavailable down; both 0 → unavailable 1."""
    surge = scaled_value(0 if max_surge is None else max_surge, desired, True)
    unavailable = scaled_value(0 if max_unavailable is None else max_unavailable, desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def _rolling(d: Obj) -> Obj:
    return ((d.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}


def max_unavailable(d: Obj) -> int:
    """``MaxUnavailable``: 0 for Recreate or zero replicas; never more than ``replicas``."""
    desired = replicas_of(d)
    if not is_rolling_update(d) or desired == 0:
        return 0
    ru = _rolling(d)
    _, unavailable = resolve_fenceposts(ru.get("maxSurge"), ru.get("maxUnavailable"), desired)
    return min(unavailable, desired)


def max_surge(d: Obj) -> int:
    if not is_rolling_update(d):
        return 0
    ru = _rolling(d)
    surge, _ = resolve_fenceposts(ru.get("maxSurge"), ru.get("maxUnavailable"), replicas_of(d))
    return surge


def new_rs_new_replicas(d: Obj, all_rss: Sequence[Obj | None], new_rs: Obj) -> int:
    """``NewRSNewReplicas``: how far the new ReplicaSet may grow now."""
    desired = replicas_of(d)
    if is_rolling_update(d):
        surge = scaled_value(_rolling(d).get("maxSurge", 0), desired, True)
        current = replica_count(all_rss)
        max_total = desired + surge
        if current >= max_total:
            return replicas_of(new_rs)
        scale_up = min(max_total - current, desired - replicas_of(new_rs))
        return replicas_of(new_rs) + scale_up
    return desired


def _annotation_int(rs: Obj, name: str) -> int | None:
    value = (rs["metadata"].get("annotations") or {}).get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def is_saturated(d: Obj, rs: Obj | None) -> bool:
    """``IsSaturated``: the ReplicaSet has, wants and makes available the Deployment's full count."""
    if rs is None:
        return False
    desired = _annotation_int(rs, DESIRED_REPLICAS)
    if desired is None:
        return False
    n = replicas_of(d)
    return replicas_of(rs) == n and desired == n and _status_int(rs, "availableReplicas") == n


def _round_half_away(x: float) -> int:
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def replica_set_fraction(rs: Obj, d: Obj) -> int:
    """``getReplicaSetFraction``: this ReplicaSet's share of a resize, from its max-replicas annotation."""
    if replicas_of(d) == 0:
        return -replicas_of(rs)
    deployment_max = replicas_of(d) + max_surge(d)
    before = _annotation_int(rs, MAX_REPLICAS)
    if not before:
        before = _status_int(d, "replicas")
    if not before:
        return 0
    return _round_half_away(replicas_of(rs) * deployment_max / before) - replicas_of(rs)


def proportion(rs: Obj | None, d: Obj, to_add: int, added: int) -> int:
    """``GetProportion``: bounded so the sum never overshoots what is to be added or removed."""
    if rs is None or replicas_of(rs) == 0 or to_add in (0, added):
        return 0
    fraction = replica_set_fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def find_new_replica_set(d: Obj, rss: Sequence[Obj]) -> Obj | None:
    """``FindNewReplicaSet``: the oldest ReplicaSet whose template equals the Deployment's."""
    template = (d.get("spec") or {}).get("template")
    for rs in by_creation(rss):
        if equal_ignore_hash((rs.get("spec") or {}).get("template"), template):
            return rs
    return None


def find_old_replica_sets(d: Obj, rss: Sequence[Obj]) -> tuple[list[Obj], list[Obj]]:
    """``FindOldReplicaSets``: (old ones with replicas, all old ones)."""
    new = find_new_replica_set(d, rss)
    all_old = [rs for rs in rss if new is None or rs["metadata"]["uid"] != new["metadata"]["uid"]]
    return [rs for rs in all_old if replicas_of(rs) != 0], all_old


def find_active_or_latest(new_rs: Obj | None, old_rss: list[Obj]) -> Obj | None:
    """``FindActiveOrLatest``: the only active ReplicaSet, or the newest if none is active, else None."""
    if new_rs is None and not old_rss:
        return None
    olds = list(reversed(by_creation(old_rss)))
    active = [rs for rs in [*olds, new_rs] if rs is not None and replicas_of(rs) > 0]
    if not active:
        return new_rs if new_rs is not None else olds[0]
    if len(active) == 1:
        return active[0]
    return None


def has_progress_deadline(d: Obj) -> bool:
    value = (d.get("spec") or {}).get("progressDeadlineSeconds")
    return value is not None and int(value) != _MAX_INT32


def has_revision_history_limit(d: Obj) -> bool:
    value = (d.get("spec") or {}).get("revisionHistoryLimit")
    return value is not None and int(value) != _MAX_INT32


def get_condition(status: Obj, cond_type: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == cond_type), None)


def new_condition(cond_type: str, status: str, reason: str, message: str, now: float) -> Obj:
    ts = rfc3339(now)
    return {"type": cond_type, "status": status, "lastUpdateTime": ts, "lastTransitionTime": ts,
            "reason": reason, "message": message}


def set_condition(status: Obj, cond: Obj) -> None:
    """``SetDeploymentCondition``: same status and reason → no change; same status → keep the transition time."""
    current = get_condition(status, cond["type"])
    if current is not None and current.get("status") == cond["status"] and current.get("reason") == cond["reason"]:
        return
    if current is not None and current.get("status") == cond["status"]:
        cond = {**cond, "lastTransitionTime": current.get("lastTransitionTime")}
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != cond["type"]] + [cond]


def remove_condition(status: Obj, cond_type: str) -> None:
    kept = [c for c in status.get("conditions") or [] if c.get("type") != cond_type]
    if kept:
        status["conditions"] = kept
    else:
        status.pop("conditions", None)


def deployment_complete(d: Obj, status: Obj) -> bool:
    n = replicas_of(d)
    return (int(status.get("updatedReplicas") or 0) == n and int(status.get("replicas") or 0) == n
            and int(status.get("availableReplicas") or 0) == n
            and int(status.get("observedGeneration") or 0) >= int(d["metadata"].get("generation") or 0))


def deployment_progressing(d: Obj, new: Obj) -> bool:
    """``DeploymentProgressing``: more updated, fewer old, more ready or more available replicas than before."""
    old = d.get("status") or {}

    def g(s: Obj, f: str) -> int:
        return int(s.get(f) or 0)

    return (g(new, "updatedReplicas") > g(old, "updatedReplicas")
            or g(new, "replicas") - g(new, "updatedReplicas") < g(old, "replicas") - g(old, "updatedReplicas")
            or g(new, "readyReplicas") > g(old, "readyReplicas")
            or g(new, "availableReplicas") > g(old, "availableReplicas"))


def deployment_timed_out(d: Obj, new: Obj, now: float) -> bool:
    if not has_progress_deadline(d):
        return False
    cond = get_condition(new, "Progressing")
    if cond is None or cond.get("reason") == NEW_RS_AVAILABLE:
        return False
    if cond.get("reason") == TIMED_OUT:
        return True
    last = cond.get("lastUpdateTime")
    if not last:
        return False
    return parse_rfc3339(last) + int(d["spec"]["progressDeadlineSeconds"]) < now


def calculate_status(all_rss: Sequence[Obj | None], new_rs: Obj | None, d: Obj, now: float) -> Obj:
    """``calculateStatus``: counts from the ReplicaSets' statuses, and the Available condition."""
    del now  # conditions carry the time of their own creation below
    available = available_replica_count(all_rss)
    total = replica_count(all_rss)
    status: Obj = {
        "observedGeneration": int(d["metadata"].get("generation") or 0),
        "replicas": actual_replica_count(all_rss),
        "updatedReplicas": actual_replica_count([new_rs]),
        "readyReplicas": ready_replica_count(all_rss),
        "availableReplicas": available,
        "unavailableReplicas": max(total - available, 0),
    }
    old = d.get("status") or {}
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    conditions = [dict(c) for c in old.get("conditions") or []]
    if conditions:
        status["conditions"] = conditions
    return status


def _with_availability(status: Obj, d: Obj, now: float) -> Obj:
    if int(status.get("availableReplicas") or 0) >= replicas_of(d) - max_unavailable(d):
        set_condition(status, new_condition("Available", "True", MINIMUM_REPLICAS_AVAILABLE,
                                            "Deployment has minimum availability.", now))
    else:
        set_condition(status, new_condition("Available", "False", MINIMUM_REPLICAS_UNAVAILABLE,
                                            "Deployment does not have minimum availability.", now))
    return status


def _status_equal(a: Obj, b: Obj) -> bool:
    return _prune(a) == _prune(b)


# ----------------------------------------------------------------------------- the controller


class DeploymentController(Controller):
    """Reconciles Deployments; see the module docstring."""

    max_retries = MAX_RETRIES

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("deployment", ctx,
                         workers=workers or int(ctx.option("concurrent_deployment_syncs", DEFAULT_WORKERS)))
        self._selectors = SelectorCache()
        self._local = threading.local()
        self.d_informer = self.watch(ctx.informers.informer_for(DEPLOYMENT))
        self.rs_informer = self.watch(ctx.informers.informer_for(REPLICASET))
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        ensure_indexers(self.rs_informer, {CONTROLLER_INDEX: controller_index_func})
        ensure_indexers(self.pod_informer, {CONTROLLER_INDEX: controller_index_func})
        self.d_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self.enqueue(obj), update=lambda _old, new: self.enqueue(new),
            delete=self._delete_deployment))
        self.rs_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=self._add_rs, update=self._update_rs, delete=self._delete_rs))
        self.pod_informer.add_event_handler(ResourceEventHandlerFuncs(delete=self._delete_pod))

    # Workers reconcile different Deployments at once: the "requeue after" a pass asks for is per thread.
    @property
    def _requeue_after(self) -> float | None:
        return getattr(self._local, "requeue_after", None)

    @_requeue_after.setter
    def _requeue_after(self, value: float | None) -> None:
        self._local.requeue_after = value

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
    def _delete_deployment(self, obj: Any) -> None:
        d = object_of(obj)
        key = getattr(obj, "key", None) or (meta_key(d) if d is not None else None)
        if key:
            self.enqueue_key(key)

    def _add_rs(self, rs: Obj, _initial: bool) -> None:
        meta = rs["metadata"]
        if meta.get("deletionTimestamp"):
            self._delete_rs(rs)
            return
        ref = get_controller_of(rs)
        if ref is not None:
            d = self._resolve(meta.get("namespace") or "", ref)
            if d is not None:
                self.enqueue(d)
            return
        for d in self._deployments_for_rs(rs):
            self.enqueue(d)

    def _update_rs(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        new_ref, old_ref = get_controller_of(new), get_controller_of(old)
        ref_changed = (new_ref or {}).get("uid") != (old_ref or {}).get("uid")
        if ref_changed and old_ref is not None:
            d = self._resolve(old["metadata"].get("namespace") or "", old_ref)
            if d is not None:
                self.enqueue(d)
        if new_ref is not None:
            d = self._resolve(new["metadata"].get("namespace") or "", new_ref)
            if d is not None:
                self.enqueue(d)
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
        d = self._resolve(rs["metadata"].get("namespace") or "", ref)
        if d is not None:
            self.enqueue(d)

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
        d = _copy(cached)
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
        if self._rollback_to(d) is not None:
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
        return [_copy(rs) for rs in claimed]

    def get_pod_map(self, d: Obj, rs_list: list[Obj]) -> dict[str, list[Obj]]:
        """``getPodMapForDeployment``: the pods the Deployment selects, by the uid of their controlling ReplicaSet."""
        selector = self.selector_of(d)
        out: dict[str, list[Obj]] = {}
        for rs in rs_list:
            uid = rs["metadata"]["uid"]
            out[uid] = [p for p in self.pod_informer.indexer.by_index(CONTROLLER_INDEX, uid)
                        if selector.matches(p["metadata"].get("labels"))]
        return out

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
            rs_copy = _copy(existing)
            annotations_updated = set_new_replica_set_annotations(d, rs_copy, new_revision, True)
            min_ready = int((d.get("spec") or {}).get("minReadySeconds") or 0)
            if annotations_updated or int(rs_copy["spec"].get("minReadySeconds") or 0) != min_ready:
                rs_copy["spec"]["minReadySeconds"] = min_ready
                updated = self.core.update(REPLICASET, rs_copy)
                self._replace(rs_list, updated)
                return updated
            needs_update = set_deployment_revision(d, (rs_copy["metadata"].get("annotations") or {}).get(REVISION, ""))
            annotations_changed = needs_update
            status = d.setdefault("status", {})
            if has_progress_deadline(d) and get_condition(status, "Progressing") is None:
                set_condition(status, new_condition("Progressing", "True", FOUND_NEW_RS,
                                                    f'Found new replica set "{rs_copy["metadata"]["name"]}"', now))
                needs_update = True
            if needs_update:
                self._write_status(d, annotations_changed)
            return rs_copy
        if not create:
            return None
        # A new ReplicaSet for the current template.
        template = _copy((d.get("spec") or {}).get("template") or {})
        status = d.setdefault("status", {})
        pod_hash = compute_hash(template, status.get("collisionCount"))
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), POD_TEMPLATE_HASH: pod_hash}
        selector = _copy((d.get("spec") or {}).get("selector") or {})
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
                    created, already_exists = _copy(found), True
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
        needs_update = set_deployment_revision(d, new_revision)
        annotations_changed = needs_update
        if not already_exists and has_progress_deadline(d):
            set_condition(status, new_condition("Progressing", "True", NEW_RS_CREATED,
                                                f'Created new replica set "{created["metadata"]["name"]}"', now))
            needs_update = True
        if needs_update:
            self._write_status(d, annotations_changed)
        return created

    # ------------------------------------------------------------ sync (scaling, paused)
    def sync(self, d: Obj, rs_list: list[Obj]) -> None:
        """``sync``: scale (proportionally during a rollout), clean up when paused, write the status."""
        new_rs, old_rss = self.get_all_replica_sets_and_sync_revision(d, rs_list, False)
        self.scale(d, new_rs, old_rss, rs_list)
        if (d.get("spec") or {}).get("paused") and self._rollback_to(d) is None:
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
            desired = _annotation_int(rs, DESIRED_REPLICAS)
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
            active.sort(key=_created, reverse=True)
            active.sort(key=lambda rs: -replicas_of(rs))
            operation = "up"
        elif to_add < 0:
            active.sort(key=lambda rs: (-replicas_of(rs), _created(rs)))  # ReplicaSetsBySizeOlder
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

    # ------------------------------------------------------------ rolling update
    def rollout_rolling(self, d: Obj, rs_list: list[Obj]) -> None:
        new_rs, old_rss = self.get_all_replica_sets_and_sync_revision(d, rs_list, True)
        assert new_rs is not None
        if self.reconcile_new_replica_set(self._all(old_rss, new_rs, rs_list), new_rs, d, rs_list):
            self.sync_rollout_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)
            return
        active_old = [rs for rs in self._current(old_rss, rs_list) if replicas_of(rs) > 0]
        if self.reconcile_old_replica_sets(self._all(old_rss, new_rs, rs_list), active_old,
                                           self._current_one(new_rs, rs_list), d, rs_list):
            self.sync_rollout_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)
            return
        if deployment_complete(d, d.get("status") or {}):
            self.cleanup_deployment(self._current(old_rss, rs_list), d)
        self.sync_rollout_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)

    def _all(self, old_rss: list[Obj], new_rs: Obj | None, rs_list: list[Obj]) -> list[Obj | None]:
        return [*self._current(old_rss, rs_list), self._current_one(new_rs, rs_list)]

    def reconcile_new_replica_set(self, all_rss: list[Obj | None], new_rs: Obj, d: Obj, rs_list: list[Obj]) -> bool:
        new_rs = self._current_one(new_rs, rs_list) or new_rs
        if replicas_of(new_rs) == replicas_of(d):
            return False
        if replicas_of(new_rs) > replicas_of(d):
            scaled, _ = self.scale_and_record(new_rs, replicas_of(d), d, rs_list)
            return scaled
        scaled, _ = self.scale_and_record(new_rs, new_rs_new_replicas(d, all_rss, new_rs), d, rs_list)
        return scaled

    def reconcile_old_replica_sets(self, all_rss: list[Obj | None], old_rss: list[Obj], new_rs: Obj | None,
                                   d: Obj, rs_list: list[Obj]) -> bool:
        """``reconcileOldReplicaSets``: scale old ReplicaSets down as far as availability allows."""
        if replica_count(old_rss) == 0:
            return False
        all_pods = replica_count(all_rss)
        min_available = replicas_of(d) - max_unavailable(d)
        new_unavailable = replicas_of(new_rs) - _status_int(new_rs, "availableReplicas")
        max_scaled_down = all_pods - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False
        try:
            old_rss, cleaned = self.cleanup_unhealthy_replicas(old_rss, d, max_scaled_down, rs_list)
        except (errors.StatusError, ValueError) as e:
            log.info("deployment %s: cleaning up unhealthy replicas: %s", meta_key(d), e)
            return False  # upstream logs and reports no scaling; the next pass retries
        try:
            scaled = self.scale_down_old_replica_sets_for_rolling_update(
                [*old_rss, self._current_one(new_rs, rs_list)], old_rss, d, rs_list)
        except (errors.StatusError, ValueError) as e:
            log.info("deployment %s: scaling down old replica sets: %s", meta_key(d), e)
            return False
        return cleaned + scaled > 0

    def cleanup_unhealthy_replicas(self, old_rss: list[Obj], d: Obj, max_cleanup: int, rs_list: list[Obj]
                                   ) -> tuple[list[Obj], int]:
        """``cleanupUnhealthyReplicas``: old ReplicaSets lose their unavailable pods first (oldest first)."""
        old_rss = by_creation(old_rss)
        total = 0
        for i, rs in enumerate(old_rss):
            if total >= max_cleanup:
                break
            if replicas_of(rs) == 0 or replicas_of(rs) == _status_int(rs, "availableReplicas"):
                continue
            count = min(max_cleanup - total, replicas_of(rs) - _status_int(rs, "availableReplicas"))
            if count < 0:
                # The status is older than the spec (it still counts pods of a larger size): "scaling
                # down" by a negative count would scale up. Upstream refuses the same way.
                raise ValueError(f"when cleaning up unhealthy replicas, got invalid request to scale down "
                                 f"{rs['metadata']['name']} {replicas_of(rs)} -> {replicas_of(rs) - count}")
            _, updated = self.scale_and_record(rs, replicas_of(rs) - count, d, rs_list)
            total += count
            old_rss[i] = updated
        return old_rss, total

    def scale_down_old_replica_sets_for_rolling_update(self, all_rss: list[Obj | None], old_rss: list[Obj], d: Obj,
                                                       rs_list: list[Obj]) -> int:
        """``scaleDownOldReplicaSetsForRollingUpdate``: only what keeps ``replicas - maxUnavailable`` available."""
        min_available = replicas_of(d) - max_unavailable(d)
        available = available_replica_count(all_rss)
        if available <= min_available:
            return 0
        total, target = 0, available - min_available
        for rs in by_creation(old_rss):
            if total >= target:
                break
            if replicas_of(rs) == 0:
                continue
            count = min(replicas_of(rs), target - total)
            if count < 0:
                raise ValueError(f"when scaling down old RS, got invalid request to scale down "
                                 f"{rs['metadata']['name']} {replicas_of(rs)} -> {replicas_of(rs) - count}")
            self.scale_and_record(rs, replicas_of(rs) - count, d, rs_list)
            total += count
        return total

    # ------------------------------------------------------------ recreate
    def rollout_recreate(self, d: Obj, rs_list: list[Obj], pod_map: dict[str, list[Obj]]) -> None:
        new_rs, old_rss = self.get_all_replica_sets_and_sync_revision(d, rs_list, False)
        scaled = False
        for rs in self._current(old_rss, rs_list):
            if replicas_of(rs) > 0:
                changed, _ = self.scale_and_record(rs, 0, d, rs_list)
                scaled = scaled or changed
        if scaled:
            self.sync_rollout_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)
            return
        if old_pods_running(new_rs, self._current(old_rss, rs_list), pod_map):
            self.sync_rollout_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)
            return
        if new_rs is None:
            new_rs, old_rss = self.get_all_replica_sets_and_sync_revision(d, rs_list, True)
        assert new_rs is not None
        self.scale_and_record(self._current_one(new_rs, rs_list) or new_rs, replicas_of(d), d, rs_list)
        if deployment_complete(d, d.get("status") or {}):
            self.cleanup_deployment(self._current(old_rss, rs_list), d)
        self.sync_rollout_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)

    # ------------------------------------------------------------ rollback (annotation)
    @staticmethod
    def _rollback_to(d: Obj) -> int | None:
        value = (d["metadata"].get("annotations") or {}).get(ROLLBACK_TO)
        if value is None:
            return None
        try:
            return int(value)
        except ValueError:
            return None

    def rollback(self, d: Obj, rs_list: list[Obj]) -> None:
        """``rollback``: copy the template of the ReplicaSet of the wanted revision (0: the previous one)."""
        new_rs, old_rss = self.get_all_replica_sets_and_sync_revision(d, rs_list, True)
        all_rss = [rs for rs in self._all(old_rss, new_rs, rs_list) if rs is not None]
        to = self._rollback_to(d) or 0
        if to == 0:
            to = last_revision(all_rss)
            if to == 0:
                self.event(d, EVENT_WARNING, ROLLBACK_REVISION_NOT_FOUND, "Unable to find last revision.")
                self._clear_rollback_to(d)
                return
        for rs in all_rss:
            if revision(rs) == to:
                performed = False
                template = (rs.get("spec") or {}).get("template")
                if not equal_ignore_hash((d.get("spec") or {}).get("template"), template):
                    d["spec"]["template"] = _without_hash(_copy(template or {}))
                    annotations = {k: v for k, v in (d["metadata"].get("annotations") or {}).items()
                                   if k in ANNOTATIONS_TO_SKIP}
                    annotations.update({k: v for k, v in (rs["metadata"].get("annotations") or {}).items()
                                        if k not in ANNOTATIONS_TO_SKIP})
                    d["metadata"]["annotations"] = annotations
                    performed = True
                else:
                    self.event(d, EVENT_WARNING, ROLLBACK_TEMPLATE_UNCHANGED, "The rollback revision contains the "
                               f'same template as current deployment "{d["metadata"]["name"]}"')
                self._clear_rollback_to(d)
                if performed:
                    self.event(d, EVENT_NORMAL, ROLLBACK_DONE,
                               f'Rolled back deployment "{d["metadata"]["name"]}" to revision {to}')
                return
        self.event(d, EVENT_WARNING, ROLLBACK_REVISION_NOT_FOUND, "Unable to find the revision to rollback to.")
        self._clear_rollback_to(d)

    def _clear_rollback_to(self, d: Obj) -> None:
        annotations = dict(d["metadata"].get("annotations") or {})
        annotations.pop(ROLLBACK_TO, None)
        d["metadata"]["annotations"] = annotations
        self.core.update(DEPLOYMENT, d)

    # ------------------------------------------------------------ status and progress
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
        status = _with_availability(calculate_status(all_rss, new_rs, d, now), d, now)
        if _status_equal(d.get("status") or {}, status):
            return
        d["status"] = status
        self._write_status(d)

    def sync_rollout_status(self, all_rss: list[Obj | None], new_rs: Obj | None, d: Obj) -> None:
        """``syncRolloutStatus``: the status plus the Progressing condition and ReplicaFailure."""
        now = self.clock.now()
        status = _with_availability(calculate_status(all_rss, new_rs, d, now), d, now)
        if not has_progress_deadline(d):
            remove_condition(status, "Progressing")
        current = get_condition(d.get("status") or {}, "Progressing")
        complete_already = (int(status.get("replicas") or 0) == int(status.get("updatedReplicas") or 0)
                            and current is not None and current.get("reason") == NEW_RS_AVAILABLE)
        if has_progress_deadline(d) and not complete_already:
            name = new_rs["metadata"]["name"] if new_rs is not None else None
            if deployment_complete(d, status):
                msg = (f'ReplicaSet "{name}" has successfully progressed.' if name
                       else f'Deployment "{d["metadata"]["name"]}" has successfully progressed.')
                set_condition(status, new_condition("Progressing", "True", NEW_RS_AVAILABLE, msg, now))
            elif deployment_progressing(d, status):
                msg = (f'ReplicaSet "{name}" is progressing.' if name
                       else f'Deployment "{d["metadata"]["name"]}" is progressing.')
                cond = new_condition("Progressing", "True", REPLICA_SET_UPDATED, msg, now)
                if current is not None:
                    if current.get("status") == "True":
                        cond["lastTransitionTime"] = current.get("lastTransitionTime")
                    remove_condition(status, "Progressing")
                # Appended directly: unlike SetDeploymentCondition, a progress update with the same
                # reason must still move lastUpdateTime (upstream handles this case the same way).
                status["conditions"] = [*(status.get("conditions") or []), cond]
            elif deployment_timed_out(d, status, now):
                msg = (f'ReplicaSet "{name}" has timed out progressing.' if name
                       else f'Deployment "{d["metadata"]["name"]}" has timed out progressing.')
                set_condition(status, new_condition("Progressing", "False", TIMED_OUT, msg, now))
        failure = self._replica_failure(all_rss, new_rs)
        if failure is not None:
            set_condition(status, failure)
        else:
            remove_condition(status, "ReplicaFailure")
        if _status_equal(d.get("status") or {}, status):
            self._requeue_stuck(d, status, now)
            return
        d["status"] = status
        self._write_status(d)

    @staticmethod
    def _replica_failure(all_rss: list[Obj | None], new_rs: Obj | None) -> Obj | None:
        """``getReplicaFailures``: the new ReplicaSet's ReplicaFailure condition first, else any old one's."""
        for group in ([new_rs], all_rss):
            for rs in group:
                if rs is None:
                    continue
                for c in (rs.get("status") or {}).get("conditions") or []:
                    if c.get("type") == "ReplicaFailure":
                        ts = c.get("lastTransitionTime")
                        return {"type": "ReplicaFailure", "status": c.get("status"), "lastUpdateTime": ts,
                                "lastTransitionTime": ts, "reason": c.get("reason", ""),
                                "message": c.get("message", "")}
        return None

    def _requeue_stuck(self, d: Obj, status: Obj, now: float) -> None:
        """``requeueStuckDeployment``: come back when the progress deadline of a stalled rollout is due."""
        current = get_condition(d.get("status") or {}, "Progressing")
        if not has_progress_deadline(d) or current is None:
            return
        if deployment_complete(d, status) or current.get("reason") == TIMED_OUT:
            return
        last = current.get("lastUpdateTime")
        if not last:
            return
        after = parse_rfc3339(last) + int(d["spec"]["progressDeadlineSeconds"]) - now
        if after < 1.0:
            self.queue.add_rate_limited(meta_key(d))
        else:
            # One more second, as upstream, so the check lands after the deadline rather than on it.
            self._requeue_after = after + 1.0

    def cleanup_deployment(self, old_rss: list[Obj], d: Obj) -> None:
        """``cleanupDeployment``: delete scaled-down ReplicaSets beyond ``revisionHistoryLimit``, oldest first."""
        if not has_revision_history_limit(d):
            return
        alive = [rs for rs in old_rss if rs is not None and not rs["metadata"].get("deletionTimestamp")]
        diff = len(alive) - int(d["spec"]["revisionHistoryLimit"])
        if diff <= 0:
            return
        alive.sort(key=lambda rs: (revision(rs) or 0, _created(rs)))
        for rs in alive[:diff]:
            meta = rs["metadata"]
            if (_status_int(rs, "replicas") != 0 or replicas_of(rs) != 0
                    or int(meta.get("generation") or 0) > _status_int(rs, "observedGeneration")):
                continue
            try:
                self.core.delete(REPLICASET, meta.get("namespace"), meta["name"])
            except errors.StatusError as e:
                if e.code != 404:
                    raise


def old_pods_running(new_rs: Obj | None, old_rss: Sequence[Obj], pod_map: dict[str, list[Obj]]) -> bool:
    """``oldPodsRunning``: old ReplicaSets still report pods, or a pod of theirs is not terminal."""
    if actual_replica_count(old_rss) > 0:
        return True
    new_uid = new_rs["metadata"]["uid"] if new_rs is not None else None
    for uid, pods in pod_map.items():
        if uid == new_uid:
            continue
        for pod in pods:
            if (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded"):
                return True
    return False


def set_deployment_revision(d: Obj, rev: str) -> bool:
    annotations = d["metadata"].setdefault("annotations", {})
    if annotations.get(REVISION) != rev:
        annotations[REVISION] = rev
        return True
    return False


def set_new_replica_set_annotations(d: Obj, rs: Obj, new_revision: str, exists: bool) -> bool:
    """``SetNewReplicaSetAnnotations``: copy the Deployment's annotations, raise the revision, keep history."""
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = False
    for k, v in (d["metadata"].get("annotations") or {}).items():
        if k in ANNOTATIONS_TO_SKIP or annotations.get(k) == v:
            continue
        annotations[k] = v
        changed = True
    old = annotations.get(REVISION)
    try:
        old_int = int(old) if old else 0
    except ValueError:
        return False
    new_int = int(new_revision)
    if old_int < new_int:
        annotations[REVISION] = new_revision
        changed = True
        if old is not None:
            # A ReplicaSet coming back (a rollback): keep its old revision numbers.
            history = annotations.get(REVISION_HISTORY, "")
            olds = history.split(",") if history else []
            if not olds:
                annotations[REVISION_HISTORY] = old
            else:
                total = len(history) + len(old) + 1
                start = 0
                while total > MAX_REV_HISTORY_LENGTH_IN_CHARS and start < len(olds):
                    total -= len(olds[start]) + 1
                    start += 1
                if total <= MAX_REV_HISTORY_LENGTH_IN_CHARS:
                    annotations[REVISION_HISTORY] = ",".join([*olds[start:], old])
    if not exists:
        desired, max_total = replicas_of(d), replicas_of(d) + max_surge(d)
        if annotations.get(DESIRED_REPLICAS) != str(desired) or annotations.get(MAX_REPLICAS) != str(max_total):
            annotations[DESIRED_REPLICAS] = str(desired)
            annotations[MAX_REPLICAS] = str(max_total)
            changed = True
    return changed


def new_controller(ctx: ControllerContext) -> DeploymentController:
    """The controller manager's constructor for this controller."""
    return DeploymentController(ctx)
