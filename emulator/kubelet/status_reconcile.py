"""Status reconciliation: the pod status a kubelet intends, checked against what the store holds.

Upstream counterpart: ``pkg/kubelet/status/status_manager.go``. The status manager keeps each
pod's intended status (``podStatuses``) and the version last acknowledged by the API server
(``apiStatusVersions``); ``syncBatch(false)`` sends what changed, and every ``syncPeriod`` (10 s)
``syncBatch(true)`` also re-sends every pod whose status in the API server differs from the
intended one (``needsReconcile``, by ``isPodStatusByKubeletEqual``). A failed write is never
retried on the spot: the pod simply stays out of step and the next pass sends it again, so a
lost write is repaired without a restart. ``syncPod`` merges the intended status into the stored
one (``mergePodStatus``: conditions the kubelet does not own stay as they are).

In a kemu shard the intended status is ``PodRecord.intended`` and the acknowledgement is the
resourceVersion of the stored pod right after the kubelet's write landed
(:meth:`StatusReconciler.acknowledged`). The periodic pass (:meth:`StatusReconciler.reconcile`)
is cheap at tens of thousands of pods: one pipelined ``HMGET`` of the pods' resourceVersions (the
store's per-kind version hash: no object is read or decoded) and one vectorised comparison with
the acknowledged ones. A pod whose stored version is still the acknowledged one holds exactly
what the kubelet wrote. Only the others (written by someone else since, or whose write failed or
has an unknown outcome) are read whole, with one more pipelined ``HMGET``, and compared; the
ones whose kubelet-owned status differs are marked dirty and the status manager's next flush
writes them (compare-and-set, merged).

The pass runs every ``status_sync_period`` of cluster time and at the first tick after a failed
write (:meth:`StatusReconciler.write_failed`). What a failed write looks like is
:func:`store_unreachable`: the store client's connection errors, or a 5xx answer.
"""

from __future__ import annotations

import itertools
import logging
import math
import time

import numpy as np
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
_ABSENT = b"-2"  # what a pod missing from the store reads as
_FREE = -2  # a free slot: its key is "" (absent), so it always compares equal
_UNKNOWN = -1  # a failed write: never equal to a stored resourceVersion


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
    """``syncBatch(true)`` for one shard: finds pods whose stored status is not what the kubelet intends.

    The acknowledged resourceVersions live in one numpy array, a slot per pod that has one, beside
    the slot's pod uid and store key (built once per pod, not per pass): a pass is one pipelined
    read, one vectorised comparison, and Python work only for the pods that differ.
    """

    def __init__(self, state: ShardState) -> None:
        self.state = state
        self.next_at = math.inf  # set by the first tick: a full pass one period after the shard starts
        self.after_error = False
        self._slots: dict[str, int] = {}  # pod uid -> slot
        self._uids: list[str | None] = []  # slot -> pod uid (None: free)
        self._keys: list[str] = []  # slot -> the pod's store key ("" when free: reads as absent)
        self._acked = np.full(64, _FREE, dtype=np.int64)  # slot -> acknowledged resourceVersion
        self._free: list[int] = []

    # ------------------------------------------------------------------ acknowledgements

    def acknowledged(self, rec: PodRecord, rv: int) -> None:
        """The store holds ``rec.intended`` at resourceVersion ``rv`` (written, or found there)."""
        slot = self._slots.get(rec.uid)
        if slot is None:
            slot = self._free.pop() if self._free else len(self._uids)
            if slot == len(self._uids):
                self._uids.append(rec.uid)
                self._keys.append(f"{rec.ns}/{rec.name}")
                if slot >= len(self._acked):
                    grown = np.full(2 * len(self._acked), _FREE, dtype=np.int64)
                    grown[:len(self._acked)] = self._acked
                    self._acked = grown
            else:
                self._uids[slot] = rec.uid
                self._keys[slot] = f"{rec.ns}/{rec.name}"
            self._slots[rec.uid] = slot
        self._acked[slot] = rv

    def unacknowledged(self, rec: PodRecord) -> None:
        """A write of the pod failed or has an unknown outcome: whatever the store holds is not known to be ours."""
        slot = self._slots.get(rec.uid)
        if slot is not None:
            self._acked[slot] = _UNKNOWN

    def acknowledged_rv(self, rec: PodRecord) -> int | None:
        slot = self._slots.get(rec.uid)
        return None if slot is None or self._acked[slot] < 0 else int(self._acked[slot])

    def _release(self, slot: int) -> None:
        uid = self._uids[slot]
        if uid is not None:
            self._slots.pop(uid, None)
        self._uids[slot] = None
        self._keys[slot] = ""
        self._acked[slot] = _FREE
        self._free.append(slot)

    # ------------------------------------------------------------------------- the pass

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
        stale: list[PodRecord] = []
        for slot in self._unacknowledged():
            uid = self._uids[slot]
            rec = state.pods.get(uid) if uid is not None else None
            if rec is None:
                self._release(slot)  # forgotten by the pod workers (deleted, node gone)
            elif rec.uid not in dirty and rec.intended is not None:
                stale.append(rec)
        repaired = 0
        for rec, pod in zip(stale, self._read(stale), strict=True):
            if pod is None or (pod.get("metadata") or {}).get("uid") != rec.uid:
                continue  # deleted (or deleted and created again): the informer's events take it from here
            stored_rv = int(resource_version(pod) or 0)
            intended = rec.intended
            if intended is None:
                continue
            if kubelet_equal(pod.get("status") or {}, intended):
                self.acknowledged(rec, stored_rv)  # someone else wrote (labels, foreign conditions): ours is there
                if stored_rv > int(resource_version(rec.obj) or 0):
                    rec.obj = pod
                continue
            # Lost or overwritten: write the intended status again, against what the store holds now.
            log.info("kubelet shard %d: status of pod %s/%s in the store is stale (phase %s, intended %s): "
                     "re-writing it", state.index, rec.ns, rec.name, (pod.get("status") or {}).get("phase"),
                     intended.get("phase"))
            rec.obj = pod
            self.unacknowledged(rec)
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

    def _unacknowledged(self) -> list[int]:
        """Slots whose stored resourceVersion is not the acknowledged one (free slots never are)."""
        n = len(self._uids)
        if not n:
            return []
        store = self.state.core.store
        # The store's "key -> resourceVersion" hash of pods (see emulator.store.store's layout).
        versions = f"{store.config.prefix}v:{POD.resource}"
        keys = self._keys
        pipe = store.redis.pipeline(transaction=False)
        for start in range(0, n, _READ_CHUNK):
            pipe.hmget(versions, keys[start:start + _READ_CHUNK])
        raw = [v or _ABSENT for v in itertools.chain.from_iterable(pipe.execute())]
        stored = np.array(raw).astype(np.int64)
        # A pod gone from the store reads -2: unequal to its acknowledged rv, so the pass looks at it
        # (and releases its slot once the pod workers have forgotten it); a free slot expects -2.
        return np.flatnonzero(stored != self._acked[:n]).tolist()

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
