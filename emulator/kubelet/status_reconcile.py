"""Status reconciliation: the pod status a kubelet intends, checked against what the store holds.

Upstream counterpart: ``pkg/kubelet/status/status_manager.go``. The status manager keeps each
pod's intended status (``podStatuses``) and the version last acknowledged by the API server
(``apiStatusVersions``); ``syncBatch(false)`` sends what changed, and every ``syncPeriod`` (10 s)
``syncBatch(true)`` also re-sends every pod whose status in the API server differs from the
intended one (``needsReconcile``, by ``isPodStatusByKubeletEqual``). A failed write is never
retried on the spot: the pod simply stays out of step and the next pass sends it again, so a
lost write is repaired without a restart. ``syncPod`` merges the intended status into the stored
one (``mergePodStatus``: conditions the kubelet does not own stay as they are).

In a kemu shard the intended status is ``PodRecord.intended`` and the acknowledgement is
``PodRecord.acked_rv``, the resourceVersion of the stored pod right after the kubelet's write
landed. The periodic pass (:meth:`StatusReconciler.reconcile`) is cheap at tens of thousands of
pods: one pipelined ``HMGET`` of the pods' resourceVersions (the store's per-kind version hash:
no object is read or decoded) and an integer comparison per pod. A pod whose stored version is
still the acknowledged one holds exactly what the kubelet wrote. Only the others (written by
someone else since, or whose write failed or has an unknown outcome) are read whole, with one
more pipelined ``HMGET``, and compared; the ones whose kubelet-owned status differs are marked
dirty and the status manager's next flush writes them (compare-and-set, merged).

The pass runs every ``status_sync_period`` of cluster time and at the first tick after a failed
write (:meth:`StatusReconciler.write_failed`). What a failed write looks like is
:func:`store_unreachable`: the store client's connection errors, or a 5xx answer.
"""

from __future__ import annotations

import itertools
import logging
import math
import time

import redis

from emulator.api import errors
from emulator.api.kinds import POD
from emulator.api.meta import resource_version
from emulator.api.types import Obj
from emulator.kubelet.state import DONE, PodRecord, ShardState
from emulator.store import codec

log = logging.getLogger(__name__)

# What a broken store connection looks like through redis-py (a stopped server, a reset socket).
STORE_ERRORS: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError, OSError)

# pkg/kubelet/types/pod_status.go: PodConditionsByKubelet (+ PodReadyToStartContainers, on by
# default) are the kubelet's own; DisruptionTarget is shared (PodConditionSharedByKubelet).
KUBELET_CONDITIONS = frozenset({"PodScheduled", "Ready", "Initialized", "ContainersReady",
                                "PodReadyToStartContainers", "PodResizePending", "PodResizeInProgress"})
SHARED_CONDITIONS = frozenset({"DisruptionTarget"})

_READ_CHUNK = 5000  # fields per HMGET: one pipeline, no single command holding Redis for long


def store_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the write did not get through (or its outcome is unknown): retry it later."""
    if isinstance(exc, STORE_ERRORS):
        return True
    return isinstance(exc, errors.StatusError) and exc.code >= 500


def kubelet_equal(stored: Obj, intended: Obj) -> bool:
    """``isPodStatusByKubeletEqual``: conditions the kubelet sets match on status/reason/message, the rest exactly."""
    old = {c.get("type"): c for c in stored.get("conditions") or ()}
    for cond in intended.get("conditions") or ():
        ctype = cond.get("type")
        if ctype in KUBELET_CONDITIONS or ctype in SHARED_CONDITIONS:
            was = old.get(ctype)
            if was is None or any(was.get(k) != cond.get(k) for k in ("status", "reason", "message")):
                return False
    if stored.keys() - {"conditions"} != intended.keys() - {"conditions"}:
        return False
    return all(stored[k] == v for k, v in intended.items() if k != "conditions")


def merge_status(stored: Obj, intended: Obj) -> Obj:
    """``mergePodStatus``: the intended status, keeping the stored conditions the kubelet does not own."""
    foreign = [c for c in stored.get("conditions") or () if c.get("type") not in KUBELET_CONDITIONS]
    if not foreign:
        return intended
    owned = [c for c in intended.get("conditions") or () if c.get("type") in KUBELET_CONDITIONS]
    return {**intended, "conditions": foreign + owned}


class StatusReconciler:
    """``syncBatch(true)`` for one shard: finds pods whose stored status is not what the kubelet intends."""

    def __init__(self, state: ShardState) -> None:
        self.state = state
        self.next_at = math.inf  # set by the first tick: a full pass one period after the shard starts
        self.after_error = False

    def write_failed(self) -> None:
        """A status write failed or its outcome is unknown: reconcile at the next tick."""
        self.after_error = True

    def due(self, now: float) -> bool:
        if self.next_at == math.inf:
            self.next_at = now + self.state.config.status_sync_period
        return self.after_error or now >= self.next_at

    def reconcile(self, now: float) -> int:
        """Mark dirty every pod whose stored status differs from the intended one; returns how many.

        Raises what the store client raises when the store is unreachable (the caller keeps the
        pass due); a pass that completes schedules the next one a period later.
        """
        state = self.state
        wall = time.perf_counter()
        dirty = state.dirty_pods
        recs = [r for r in state.pods.values() if r.intended is not None and r.uid not in dirty]
        stale = self._unacknowledged(recs)
        repaired = 0
        for rec, pod in zip(stale, self._read(stale), strict=True):
            if pod is None or (pod.get("metadata") or {}).get("uid") != rec.uid:
                continue  # deleted (or deleted and created again): the informer's events take it from here
            stored_rv = int(resource_version(pod) or 0)
            intended = rec.intended
            if intended is None or rec.uid in dirty:
                continue
            if kubelet_equal(pod.get("status") or {}, intended):
                rec.acked_rv = stored_rv  # someone else wrote (labels, foreign conditions): nothing of ours lost
                if stored_rv > int(resource_version(rec.obj) or 0):
                    rec.obj = pod
                continue
            # Lost or overwritten: write the intended status again, against what the store holds now.
            log.info("kubelet shard %d: status of pod %s/%s in the store is stale (phase %s, intended %s): "
                     "re-writing it", state.index, rec.ns, rec.name, (pod.get("status") or {}).get("phase"),
                     intended.get("phase"))
            rec.obj = pod
            rec.acked_rv = 0
            if rec.stage == DONE and rec.final is None:
                rec.final = intended
            dirty.add(rec.uid)
            repaired += 1
        self.after_error = False
        self.next_at = now + state.config.status_sync_period
        st = state.stats
        st.reconcile_passes += 1
        st.reconciled += repaired
        st.last_reconcile_seconds = time.perf_counter() - wall
        return repaired

    def _unacknowledged(self, recs: list[PodRecord]) -> list[PodRecord]:
        """The pods whose stored resourceVersion is not the one their last acknowledged write produced."""
        if not recs:
            return []
        store = self.state.core.store
        # The store's "key -> resourceVersion" hash of pods (see emulator.store.store's layout).
        versions = f"{store.config.prefix}v:{POD.resource}"
        keys = [f"{r.ns}/{r.name}" for r in recs]
        pipe = store.redis.pipeline(transaction=False)
        for start in range(0, len(keys), _READ_CHUNK):
            pipe.hmget(versions, keys[start:start + _READ_CHUNK])
        stored = itertools.chain.from_iterable(pipe.execute())
        return [r for r, raw in zip(recs, stored, strict=True) if raw is not None and int(raw) != r.acked_rv]

    def _read(self, recs: list[PodRecord]) -> list[Obj | None]:
        """The stored pods (None where gone), one pipelined round trip."""
        if not recs:
            return []
        store = self.state.core.store
        objects = store.objects_key(POD)
        keys = [f"{r.ns}/{r.name}" for r in recs]
        pipe = store.redis.pipeline(transaction=False)
        for start in range(0, len(keys), _READ_CHUNK):
            pipe.hmget(objects, keys[start:start + _READ_CHUNK])
        return [None if raw is None else codec.decode(raw) for raw in itertools.chain.from_iterable(pipe.execute())]
