"""Deployment arithmetic as pure functions: upstream ``pkg/controller/deployment/util/deployment_util.go``.

Template hashing (``ComputeHash``, ``EqualIgnoreHash``), revisions
(``Revision``, ``MaxRevision``, ``LastRevision``,
``SetNewReplicaSetAnnotations``), surge and unavailability
(``ResolveFenceposts``, ``MaxSurge``, ``MaxUnavailable``, ``NewRSNewReplicas``),
proportional scaling (``GetProportion``), finding the new and old ReplicaSets,
and the Deployment conditions and status (``calculateStatus``,
``DeploymentComplete``, ``DeploymentProgressing``, ``DeploymentTimedOut``).
Nothing here reads a cache or writes to the API.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from emulator.api.gomath import go_round
from emulator.api.pdb import scaled_value
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339, rfc3339

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


def without_hash(template: Obj | None) -> Obj:
    template = template or {}
    meta = dict(template.get("metadata") or {})
    labels = dict(meta.get("labels") or {})
    labels.pop(POD_TEMPLATE_HASH, None)
    meta["labels"] = labels
    return {**template, "metadata": meta}


def equal_ignore_hash(a: Obj | None, b: Obj | None) -> bool:
    """``EqualIgnoreHash``: templates equal once the ``pod-template-hash`` label is ignored."""
    return _prune(without_hash(a)) == _prune(without_hash(b))


def copy_json(obj: Obj) -> Obj:
    return orjson.loads(orjson.dumps(obj))


# ----------------------------------------------------------------------------- ReplicaSet arithmetic


def replicas_of(obj: Obj | None) -> int:
    if obj is None:
        return 0
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def status_int(obj: Obj | None, field: str) -> int:
    return 0 if obj is None else int((obj.get("status") or {}).get(field) or 0)


def replica_count(rss: Sequence[Obj | None]) -> int:
    """``GetReplicaCountForReplicaSets``: the sum of ``spec.replicas``."""
    return sum(replicas_of(rs) for rs in rss if rs is not None)


def actual_replica_count(rss: Sequence[Obj | None]) -> int:
    return sum(status_int(rs, "replicas") for rs in rss)


def ready_replica_count(rss: Sequence[Obj | None]) -> int:
    return sum(status_int(rs, "readyReplicas") for rs in rss)


def available_replica_count(rss: Sequence[Obj | None]) -> int:
    return sum(status_int(rs, "availableReplicas") for rs in rss)


def creation_key(rs: Obj) -> tuple[float, str]:
    ts = rs["metadata"].get("creationTimestamp")
    return (parse_rfc3339(ts) if ts else 0.0, rs["metadata"].get("name", ""))


def by_creation(rss: Sequence[Obj]) -> list[Obj]:
    """``ReplicaSetsByCreationTimestamp``: oldest first, name as the tie-breaker."""
    return sorted(rss, key=creation_key)


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


def annotation_int(rs: Obj, name: str) -> int | None:
    value = (rs["metadata"].get("annotations") or {}).get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def is_saturated(d: Obj, rs: Obj | None) -> bool:
    """``IsSaturated``: the ReplicaSet has, wants and makes available the Deployment's full count."""
    if rs is None:
        return False
    desired = annotation_int(rs, DESIRED_REPLICAS)
    if desired is None:
        return False
    n = replicas_of(d)
    return replicas_of(rs) == n and desired == n and status_int(rs, "availableReplicas") == n


def replica_set_fraction(rs: Obj, d: Obj) -> int:
    """``getReplicaSetFraction``: this ReplicaSet's share of a resize, from its max-replicas annotation."""
    if replicas_of(d) == 0:
        return -replicas_of(rs)
    deployment_max = replicas_of(d) + max_surge(d)
    before = annotation_int(rs, MAX_REPLICAS)
    if not before:
        before = status_int(d, "replicas")
    if not before:
        return 0
    return go_round(replicas_of(rs) * deployment_max / before) - replicas_of(rs)


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


def with_availability(status: Obj, d: Obj, now: float) -> Obj:
    if int(status.get("availableReplicas") or 0) >= replicas_of(d) - max_unavailable(d):
        set_condition(status, new_condition("Available", "True", MINIMUM_REPLICAS_AVAILABLE,
                                            "Deployment has minimum availability.", now))
    else:
        set_condition(status, new_condition("Available", "False", MINIMUM_REPLICAS_UNAVAILABLE,
                                            "Deployment does not have minimum availability.", now))
    return status


def status_equal(a: Obj, b: Obj) -> bool:
    return _prune(a) == _prune(b)

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


def rollback_to(d: Obj) -> int | None:
    """``getRollbackTo``: the revision the ``deprecated.deployment.rollback.to`` annotation asks for, if any."""
    value = (d["metadata"].get("annotations") or {}).get(ROLLBACK_TO)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None
