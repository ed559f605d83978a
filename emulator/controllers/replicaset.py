"""The ReplicaSet controller: keeps ``spec.replicas`` pods of a ReplicaSet's template alive.

A re-implementation of upstream ``pkg/controller/replicaset/replica_set.go``
(and the helpers it uses in ``pkg/controller/controller_utils.go``) on kemu's
controller runtime (:mod:`emulator.controllers.runtime`). One reconcile of a
ReplicaSet key (``syncReplicaSet``):

1. **Expectations first.** If creates or deletes issued by an earlier pass have
   not all been observed by the pod informer (and are younger than five
   minutes), the pass only recomputes the status: acting on a cache that does
   not yet show our own writes is how controllers double-create.
2. **Claim pods** (``claimPods``): the active pods (not Succeeded/Failed, not
   being deleted) it controls and still selects, plus orphans it adopts; owned
   pods that no longer match are released (:class:`~emulator.controllers.runtime.ControllerRefManager`).
3. **Manage replicas** (``manageReplicas``): too few → create
   ``min(missing, burst_replicas=500)`` pods in slow-start batches of 1, 2, 4, …
   (``slowStartBatch``: a failure stops the doubling, so a quota or admission
   error costs one doomed call per batch, not hundreds); each batch is one
   ``create_many`` round trip. Too many → delete
   ``min(extra, 500)`` pods chosen by upstream's ranking
   (:func:`pods_to_delete`, ``getPodsToDelete`` / ``ActivePodsWithRanks``).
   Expectations are raised before the writes and lowered for writes that
   failed, as upstream.
4. **Status** (``calculateStatus``): ``replicas``, ``fullyLabeledReplicas``,
   ``readyReplicas``, ``availableReplicas`` (Ready for ``minReadySeconds`` of
   cluster time), ``observedGeneration``, and the ``ReplicaFailure`` condition
   (``FailedCreate`` / ``FailedDelete``) while creating or deleting fails.
   Written only when it changed. If every pod is Ready but some are not yet
   available, the key is requeued after ``minReadySeconds``.

Pods are made from the template (``GetPodFromTemplate``): its labels,
annotations and finalizers, ``generateName: <rs>-``, and a controller
reference (``controller: true, blockOwnerDeletion: true``). Events as upstream:
``SuccessfulCreate`` ("Created pod: …"), ``FailedCreate``, ``SuccessfulDelete``,
``FailedDelete``.

Event handlers (``addPod`` / ``updatePod`` / ``deletePod``, ``addRS`` /
``updateRS`` / ``deleteRS``): a pod event wakes the ReplicaSet its controller
reference names (and counts toward its expectations); an orphan's event wakes
every ReplicaSet whose selector matches it (adoption); a pod that turns Ready
wakes its ReplicaSet again after ``minReadySeconds`` + 1 s.

Simplifications (the same-node ranking's "related pods", the generate-name
retry done here): see ``docs/architecture.md``.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from emulator.api import errors
from emulator.api.kinds import POD, REPLICASET
from emulator.api.pdb import is_pod_ready
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339, rfc3339
from emulator.controllers.runtime import (
    CONTROLLER_INDEX,
    EVENT_NORMAL,
    EVENT_WARNING,
    Controller,
    ControllerContext,
    ControllerRefManager,
    SelectorCache,
    UIDTrackingControllerExpectations,
    controller_index_func,
    deleted_key,
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

# pkg/controller/replicaset/replica_set.go BurstReplicas, controller.SlowStartInitialBatchSize.
BURST_REPLICAS = 500
SLOW_START_INITIAL_BATCH_SIZE = 1
# kube-controller-manager --concurrent-replicaset-syncs default.
DEFAULT_WORKERS = 5
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
REPLICA_FAILURE = "ReplicaFailure"
# Upstream's names.SimpleNameGenerator keeps generated names within 63 characters: 58 + 5 random.
_MAX_GENERATE_NAME_PREFIX = 58


# ----------------------------------------------------------------------------- pod helpers


def is_pod_active(pod: Obj) -> bool:
    """``controller.IsPodActive``: not Succeeded, not Failed, not being deleted."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and \
        not (pod.get("metadata") or {}).get("deletionTimestamp")


def _ready_condition(pod: Obj) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond
    return None


def pod_ready_time(pod: Obj) -> float | None:
    """``podReadyTime``: when a Ready pod became Ready (None: not ready, or the time is unknown)."""
    cond = _ready_condition(pod)
    if cond is None or cond.get("status") != "True" or not cond.get("lastTransitionTime"):
        return None
    return parse_rfc3339(cond["lastTransitionTime"])


def is_pod_available(pod: Obj, min_ready_seconds: int, now: float) -> bool:
    """``podutil.IsPodAvailable``: Ready, and Ready for longer than ``minReadySeconds``."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = pod_ready_time(pod)
    return since is not None and since + min_ready_seconds < now


def max_container_restarts(pod: Obj) -> int:
    return max((int(c.get("restartCount") or 0) for c in (pod.get("status") or {}).get("containerStatuses") or []),
               default=0)


def deletion_cost(pod: Obj) -> int:
    """``GetDeletionCostFromPodAnnotations``: the int32 annotation, 0 when absent or invalid."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(POD_DELETION_COST)
    if value is None:
        return 0
    try:
        cost = int(str(value), 10)
    except ValueError:
        return 0
    return cost if -(2 ** 31) <= cost < 2 ** 31 else 0


_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


def _created(pod: Obj) -> float | None:
    ts = (pod.get("metadata") or {}).get("creationTimestamp")
    return parse_rfc3339(ts) if ts else None


def _after_or_zero(t1: float | None, t2: float | None) -> bool:
    """``afterOrZero``: t1 after t2, a missing time counting as after any real one."""
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def _log_rank(t: float, now: float) -> int:
    # Upstream takes log2 of a Go duration, i.e. of nanoseconds.
    d = (now - t) * 1e9
    return int(math.log2(d)) if d > 0 else -1


def _uid(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def _less(a: Obj, rank_a: int, b: Obj, rank_b: int, now: float | None) -> bool:
    """``ActivePodsWithRanks.Less`` (with LogarithmicScaleDown and PodDeletionCost on, upstream's defaults)."""
    node_a = (a.get("spec") or {}).get("nodeName") or ""
    node_b = (b.get("spec") or {}).get("nodeName") or ""
    # 1. Unassigned < assigned.
    if node_a != node_b and (not node_a or not node_b):
        return not node_a
    # 2. Pending < Unknown < Running.
    phase_a = _PHASE_ORDINAL.get((a.get("status") or {}).get("phase") or "", 0)
    phase_b = _PHASE_ORDINAL.get((b.get("status") or {}).get("phase") or "", 0)
    if phase_a != phase_b:
        return phase_a < phase_b
    # 3. Not ready < ready.
    ready_a, ready_b = is_pod_ready(a), is_pod_ready(b)
    if ready_a != ready_b:
        return not ready_a
    # 4. Lower pod-deletion-cost < higher.
    cost_a, cost_b = deletion_cost(a), deletion_cost(b)
    if cost_a != cost_b:
        return cost_a < cost_b
    # 5. Doubled up (more related pods on the same node) < not doubled up.
    if rank_a != rank_b:
        return rank_a > rank_b
    # 6. Ready for less time < more time (logarithmic buckets, ties by uid).
    if ready_a and ready_b:
        t_a, t_b = pod_ready_time(a), pod_ready_time(b)
        if t_a != t_b:
            return _newer_by_log_bucket(a, b, t_a, t_b, now)
    # 7. More restarts < fewer.
    restarts_a, restarts_b = max_container_restarts(a), max_container_restarts(b)
    if restarts_a != restarts_b:
        return restarts_a > restarts_b
    # 8. Newer < older (logarithmic buckets, ties by uid).
    c_a, c_b = _created(a), _created(b)
    if c_a != c_b:
        return _newer_by_log_bucket(a, b, c_a, c_b, now)
    return False


def _newer_by_log_bucket(a: Obj, b: Obj, t_a: float | None, t_b: float | None, now: float | None) -> bool:
    """Steps 6 and 8 for two different times: the newer first, compared in logarithmic buckets, ties by uid."""
    if now is None or t_a is None or t_b is None:
        return _after_or_zero(t_a, t_b)
    diff = _log_rank(t_a, now) - _log_rank(t_b, now)
    if diff == 0:
        return _uid(a) < _uid(b)
    return diff < 0


def rank_pods_for_deletion(pods: Sequence[Obj], ranks: Sequence[int], now: float | None) -> list[Obj]:
    """Pods in deletion-preference order (``sort.Sort(ActivePodsWithRanks)``): the first should go first."""
    indexed = list(zip(pods, ranks, strict=True))

    def compare(x: tuple[Obj, int], y: tuple[Obj, int]) -> int:
        if _less(x[0], x[1], y[0], y[1], now):
            return -1
        if _less(y[0], y[1], x[0], x[1], now):
            return 1
        return 0

    indexed.sort(key=functools.cmp_to_key(compare))
    return [p for p, _ in indexed]


def ranks_by_related_pods_on_same_node(pods: Sequence[Obj], related: Sequence[Obj]) -> list[int]:
    """``getPodsRankedByRelatedPodsOnSameNode``: each pod's rank = active related pods on its node."""
    on_node: dict[str, int] = {}
    for pod in related:
        if is_pod_active(pod):
            node = (pod.get("spec") or {}).get("nodeName") or ""
            on_node[node] = on_node.get(node, 0) + 1
    return [on_node.get((p.get("spec") or {}).get("nodeName") or "", 0) for p in pods]


def pods_to_delete(pods: Sequence[Obj], related: Sequence[Obj], diff: int, now: float | None) -> list[Obj]:
    """``getPodsToDelete``: the ``diff`` pods to remove (no sort when all of them go)."""
    if diff < len(pods):
        return rank_pods_for_deletion(pods, ranks_by_related_pods_on_same_node(pods, related), now)[:diff]
    return list(pods[:diff])


def slow_start_batch(count: int, initial_batch_size: int, fn: Callable[[int], tuple[int, Exception | None]]
                     ) -> tuple[int, Exception | None]:
    """``slowStartBatch``: call ``fn(batch)`` for batches of 1, 2, 4, … until ``count`` or a failure.

    ``fn`` does ``batch`` creations and returns (successes, first error). Returns the total
    successes and the error that stopped the doubling (None if every batch succeeded).
    """
    remaining, successes = count, 0
    batch = min(remaining, initial_batch_size)
    while batch > 0:
        ok, error = fn(batch)
        successes += ok
        if error is not None:
            return successes, error
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


def pod_from_template(template: Obj, owner: Obj, controller_ref: Obj | None) -> Obj:
    """``GetPodFromTemplate``: labels, annotations, finalizers and spec of the template; ``generateName <owner>-``."""
    tmeta = template.get("metadata") or {}
    prefix = f"{owner['metadata']['name']}-"[:_MAX_GENERATE_NAME_PREFIX]
    meta: Obj = {"generateName": prefix, "namespace": owner["metadata"].get("namespace"),
                 "labels": dict(tmeta.get("labels") or {})}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    if controller_ref is not None:
        meta["ownerReferences"] = [controller_ref]
    # The spec is shared between bodies: the server core copies every body it is given.
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec") or {}}


def _replicas(obj: Obj) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _set_condition(status: Obj, cond: Obj) -> None:
    """``SetCondition`` for ReplicaSet conditions: same status and reason → keep the old one."""
    conditions = list(status.get("conditions") or [])
    current = next((c for c in conditions if c.get("type") == cond["type"]), None)
    if current is not None and current.get("status") == cond["status"] and current.get("reason") == cond["reason"]:
        return
    status["conditions"] = [c for c in conditions if c.get("type") != cond["type"]] + [cond]


def _remove_condition(status: Obj, cond_type: str) -> None:
    kept = [c for c in status.get("conditions") or [] if c.get("type") != cond_type]
    if kept:
        status["conditions"] = kept
    else:
        status.pop("conditions", None)


def calculate_status(rs: Obj, pods: Sequence[Obj], manage_error: Exception | None, now: float) -> Obj:
    """``calculateStatus``: counts over the claimed active pods, and the ReplicaFailure condition."""
    status = dict(rs.get("status") or {})
    spec = rs.get("spec") or {}
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    fully_labeled = ready = available = 0
    wanted = template_labels.items()
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if wanted <= labels.items():
            fully_labeled += 1
        if is_pod_ready(pod):
            ready += 1
            if is_pod_available(pod, min_ready, now):
                available += 1
    failure = next((c for c in status.get("conditions") or [] if c.get("type") == REPLICA_FAILURE), None)
    if manage_error is not None and failure is None:
        diff = len(pods) - _replicas(rs)
        reason = "FailedCreate" if diff < 0 else "FailedDelete" if diff > 0 else ""
        message = manage_error.message if isinstance(manage_error, errors.StatusError) else str(manage_error)
        _set_condition(status, {"type": REPLICA_FAILURE, "status": "True", "lastTransitionTime": rfc3339(now),
                                "reason": reason, "message": message})
    elif manage_error is None and failure is not None:
        _remove_condition(status, REPLICA_FAILURE)
    status["replicas"] = len(pods)
    status["fullyLabeledReplicas"] = fully_labeled
    status["readyReplicas"] = ready
    status["availableReplicas"] = available
    return status


# ----------------------------------------------------------------------------- the controller


class ReplicaSetController(Controller):
    """Reconciles ReplicaSets; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None,
                 burst_replicas: int = BURST_REPLICAS) -> None:
        super().__init__("replicaset", ctx,
                         workers=workers or int(ctx.option("concurrent_replicaset_syncs", DEFAULT_WORKERS)))
        self.burst_replicas = burst_replicas
        self.expectations = UIDTrackingControllerExpectations(ctx.clock)
        self._selectors = SelectorCache()
        self.rs_informer = self.watch(ctx.informers.informer_for(REPLICASET))
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        ensure_indexers(self.rs_informer, {CONTROLLER_INDEX: controller_index_func})
        ensure_indexers(self.pod_informer, {CONTROLLER_INDEX: controller_index_func})
        self.rs_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self.enqueue(obj), update=self._update_rs, delete=self._delete_rs))
        self.pod_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=self._add_pod, update=self._update_pod, delete=self._delete_pod))

    # ------------------------------------------------------------ lookups
    def selector_of(self, rs: Obj) -> LabelSelector:
        """The parsed ``spec.selector`` (cached per uid and generation: it is immutable in apps/v1)."""
        return self._selectors.selector_of(rs)

    def _resolve_controller_ref(self, namespace: str, ref: Obj) -> Obj | None:
        """``resolveControllerRef``: the cached ReplicaSet a controller reference names (same uid), if any."""
        return resolve_controller_ref(self.rs_informer.indexer, namespace, ref, REPLICASET.kind, "apps")

    def _pod_replica_sets(self, pod: Obj) -> list[Obj]:
        """``GetPodReplicaSets``: ReplicaSets of the pod's namespace whose (non-empty) selector matches it."""
        meta = pod.get("metadata") or {}
        return self._selectors.matching(self.rs_informer.indexer.by_index("namespace", meta.get("namespace") or ""),
                                        meta.get("labels") or {})

    # ------------------------------------------------------------ handlers
    def _update_rs(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("uid") != new["metadata"].get("uid"):
            self._delete_rs(old)
        self.enqueue(new)

    def _delete_rs(self, obj: Any) -> None:
        key = deleted_key(obj)
        if key is None:
            return
        self.expectations.delete_expectations(key)
        self.enqueue_key(key)

    def _add_pod(self, pod: Obj, _initial: bool) -> None:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            # A restarted controller can see a pod already pending deletion: do not count it as a creation.
            self._delete_pod(pod)
            return
        ref = get_controller_of(pod)
        if ref is not None:
            rs = self._resolve_controller_ref(meta.get("namespace") or "", ref)
            if rs is None:
                return
            key = meta_key(rs)
            self.expectations.creation_observed(key)
            self.enqueue_key(key)
            return
        for rs in self._pod_replica_sets(pod):
            self.enqueue(rs)

    def _update_pod(self, old: Obj, new: Obj) -> None:
        ometa, nmeta = old["metadata"], new["metadata"]
        if ometa.get("resourceVersion") == nmeta.get("resourceVersion"):
            return  # a resync: nothing changed
        label_changed = (ometa.get("labels") or {}) != (nmeta.get("labels") or {})
        if nmeta.get("deletionTimestamp"):
            # Graceful deletion shows up as an update: treat it as the deletion (once, by key).
            self._delete_pod(new)
            if label_changed:
                self._delete_pod(old)
            return
        new_ref, old_ref = get_controller_of(new), get_controller_of(old)
        ref_changed = (new_ref or {}).get("uid") != (old_ref or {}).get("uid")
        if ref_changed and old_ref is not None:
            rs = self._resolve_controller_ref(ometa.get("namespace") or "", old_ref)
            if rs is not None:
                self.enqueue(rs)
        if new_ref is not None:
            rs = self._resolve_controller_ref(nmeta.get("namespace") or "", new_ref)
            if rs is None:
                return
            self.enqueue(rs)
            min_ready = int((rs.get("spec") or {}).get("minReadySeconds") or 0)
            if min_ready > 0 and not is_pod_ready(old) and is_pod_ready(new):
                # Counted from the pod's Ready transition, not from this handler: a clock moved in between
                # (a test's, from another thread) must not make the key late for the pod's availability.
                ready = pod_ready_time(new)
                self.queue.add_after(meta_key(rs), min_ready + 1.0,
                                     since=ready if ready is not None else self.clock.now())
            return
        if label_changed or ref_changed:
            for rs in self._pod_replica_sets(new):
                self.enqueue(rs)

    def _delete_pod(self, obj: Any) -> None:
        pod = object_of(obj)
        if pod is None:
            return
        ref = get_controller_of(pod)
        if ref is None:
            return
        rs = self._resolve_controller_ref((pod.get("metadata") or {}).get("namespace") or "", ref)
        if rs is None:
            return
        key = meta_key(rs)
        self.expectations.deletion_observed(key, meta_key(pod))
        self.enqueue_key(key)

    # ------------------------------------------------------------ reconcile
    def reconcile(self, key: str) -> float | None:
        rs = self.rs_informer.indexer.get_by_key(key)
        if rs is None:
            self.expectations.delete_expectations(key)
            return None
        needs_sync = self.expectations.satisfied_expectations(key)
        try:
            selector = self.selector_of(rs)
        except errors.StatusError as e:
            log.warning("replicaset %s: invalid selector: %s", key, e.message)
            return None  # upstream: an invalid selector is never retried
        pods = self.claim_pods(rs, selector)
        manage_error: Exception | None = None
        if needs_sync and not rs["metadata"].get("deletionTimestamp"):
            try:
                self.manage_replicas(pods, rs)
            except Exception as e:
                manage_error = e
        now = self.clock.now()
        updated = self.update_status(rs, calculate_status(rs, pods, manage_error, now))
        if manage_error is not None:
            raise manage_error
        min_ready = int((updated.get("spec") or {}).get("minReadySeconds") or 0)
        ustatus = updated.get("status") or {}
        if min_ready > 0 and int(ustatus.get("readyReplicas") or 0) == _replicas(updated) \
                and int(ustatus.get("availableReplicas") or 0) != _replicas(updated):
            return float(min_ready)
        return None

    def claim_pods(self, rs: Obj, selector: LabelSelector) -> list[Obj]:
        """``claimPods`` over the active pods it owns plus the namespace's orphans."""
        meta = rs["metadata"]
        index = self.pod_informer.indexer
        candidates = index.by_index(CONTROLLER_INDEX, meta["uid"]) + \
            index.by_index(CONTROLLER_INDEX, f"orphan/{meta.get('namespace') or ''}")
        active = [p for p in candidates if is_pod_active(p)]
        manager = ControllerRefManager(self.core, rs, REPLICASET, selector,
                                       recheck_deletion_timestamp(self.core, REPLICASET, rs))
        claimed = manager.claim(POD, active)
        if manager.errors:
            raise manager.errors[0]
        return claimed

    def related_pods(self, rs: Obj) -> list[Obj]:
        """Pods of every ReplicaSet with the same controller as ``rs`` (``getIndirectlyRelatedPods``)."""
        owner = get_controller_of(rs)
        if owner is None:
            siblings = [rs]
        else:
            siblings = [r for r in self.rs_informer.indexer.by_index(CONTROLLER_INDEX, str(owner.get("uid")))
                        if r["metadata"].get("namespace") == rs["metadata"].get("namespace")] or [rs]
        seen: set[str] = set()
        out: list[Obj] = []
        for sibling in siblings:
            for pod in self.pod_informer.indexer.by_index(CONTROLLER_INDEX, sibling["metadata"]["uid"]):
                uid = pod["metadata"].get("uid") or ""
                if uid not in seen:
                    seen.add(uid)
                    out.append(pod)
        return out

    def manage_replicas(self, pods: list[Obj], rs: Obj) -> None:
        """``manageReplicas``: create or delete toward ``spec.replicas`` (at most ``burst_replicas`` per pass)."""
        key = meta_key(rs)
        diff = len(pods) - _replicas(rs)
        if diff < 0:
            diff = min(-diff, self.burst_replicas)
            # Expect all creations first: the informer may report some before the batch call returns.
            self.expectations.expect_creations(key, diff)
            template = (rs.get("spec") or {}).get("template") or {}
            ref = new_controller_ref(rs, REPLICASET)
            successes, error = slow_start_batch(
                diff, SLOW_START_INITIAL_BATCH_SIZE, lambda n: self._create_pods(rs, template, ref, n))
            skipped = diff - successes
            if skipped > 0:
                # These creations will never be observed: do not wait for them.
                self.expectations.lower_expectations(key, skipped, 0)
            if error is not None:
                raise error
        elif diff > 0:
            diff = min(diff, self.burst_replicas)
            victims = pods_to_delete(pods, self.related_pods(rs), diff, self.clock.now())
            self.expectations.expect_deletions(key, [meta_key(p) for p in victims])
            first_error: Exception | None = None
            for pod in victims:
                pmeta = pod["metadata"]
                try:
                    self.core.delete(POD, pmeta.get("namespace"), pmeta["name"])
                except errors.StatusError as e:
                    # The informer will never show this deletion: stop waiting for it.
                    self.expectations.deletion_observed(key, meta_key(pod))
                    if e.code != 404:
                        self.event(rs, EVENT_WARNING, "FailedDelete", f"Error deleting: {e.message}")
                        first_error = first_error or e
                    continue
                self.event(rs, EVENT_NORMAL, "SuccessfulDelete", f"Deleted pod: {pmeta['name']}")
            if first_error is not None:
                raise first_error

    def _create_pods(self, rs: Obj, template: Obj, ref: Obj, n: int) -> tuple[int, Exception | None]:
        """One slow-start batch: ``n`` pods in one ``create_many``; a generated-name collision retries once."""
        bodies = [pod_from_template(template, rs, ref) for _ in range(n)]
        results = self.core.create_many(POD, bodies)
        retry = [i for i, r in enumerate(results) if isinstance(r, errors.StatusError) and r.reason == "AlreadyExists"]
        if retry:
            # kube-apiserver retries a generateName collision itself (RetryGenerateName); ours does not.
            again = self.core.create_many(POD, [pod_from_template(template, rs, ref) for _ in retry])
            for i, r in zip(retry, again, strict=True):
                results[i] = r
        ok, first_error = 0, None
        for result in results:
            if isinstance(result, errors.StatusError):
                if any(c.reason == "NamespaceTerminating" for c in result.causes or []):
                    ok += 1  # upstream: nothing can be created there; not an error for this controller
                    continue
                self.event(rs, EVENT_WARNING, "FailedCreate", f"Error creating: {result.message}")
                first_error = first_error or result
                continue
            ok += 1
            self.event(rs, EVENT_NORMAL, "SuccessfulCreate", f"Created pod: {result['metadata']['name']}")
        return ok, first_error

    def update_status(self, rs: Obj, status: Obj) -> Obj:
        """``updateReplicaSetStatus``: write if anything changed (one retry on a fresh read after a conflict)."""
        generation = int(rs["metadata"].get("generation") or 0)
        old = rs.get("status") or {}
        if _status_equal(old, status) and int(old.get("observedGeneration") or 0) >= generation:
            return rs
        current = rs
        for attempt in range(2):
            new_status = {**status, "observedGeneration": int(current["metadata"].get("generation") or 0)}
            try:
                return self.core.update_status(REPLICASET, {**current, "status": new_status})
            except errors.StatusError as e:
                if e.reason != "Conflict" or attempt:
                    raise
                current = self.core.get(REPLICASET, rs["metadata"]["namespace"], rs["metadata"]["name"])
                if current["metadata"].get("uid") != rs["metadata"].get("uid"):
                    raise
        return rs


_STATUS_FIELDS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")


def _status_equal(a: Obj, b: Obj) -> bool:
    if any(int(a.get(f) or 0) != int(b.get(f) or 0) for f in _STATUS_FIELDS):
        return False
    return (a.get("conditions") or []) == (b.get("conditions") or [])


def new_controller(ctx: ControllerContext) -> ReplicaSetController:
    """The controller manager's constructor for this controller."""
    return ReplicaSetController(ctx)
