"""The status manager: batched writes of the pod and node statuses the shard's kubelets intend.

Upstream counterpart: ``pkg/kubelet/status/status_manager.go`` for pods - the *intended* status
is kept locally (``PodRecord.intended``: rendered by :func:`~emulator.kubelet.pod_status.render`,
or ``PodRecord.final`` for a terminal one); ``syncBatch(false)`` (:meth:`StatusManager.flush_pods`,
every tick) writes the pods that changed, and ``syncBatch(true)`` (:meth:`StatusManager.reconcile`,
every ``status_sync_period`` = 10 s of cluster time and at the first tick after a failed write)
compares what the store holds with the intended status and re-writes what is missing or stale
(:mod:`~emulator.kubelet.status_reconcile`). A failed write - refused, or the store unreachable,
or its outcome unknown - leaves the pod dirty (a terminal status stays in ``final``), so the next
flush retries it and nothing is lost; once a terminated pod's last status is written, it is
deleted with grace 0 (uid precondition), and a deletion that did not get through is retried too.

Nodes follow ``kubelet_node_status.go`` ``updateNodeStatus``: checked every
``nodeStatusUpdateFrequency`` (10 s, spread by name) and written when something changed, when
the stored status no longer says what the kubelet says (``nodeStatusHasChanged`` against the
informer's copy: the node lifecycle controller marked it Unknown, someone overwrote it), or when
``nodeStatusReportFrequency`` (5 min) has passed since the last write; a failed write is retried
at the next tick.

Writes are batched: one pipelined round trip for all of a tick's pod status updates
(:meth:`ServerCore.update_status_many`), one for node status, ``write_batch`` objects each.
"""

from __future__ import annotations

import heapq
import logging
import math

from emulator.api import errors
from emulator.api.kinds import NODE, POD
from emulator.api.meta import resource_version
from emulator.api.types import Obj
from emulator.kubelet import kubelet_metrics as km
from emulator.kubelet.nodestatus import NodeStatus
from emulator.kubelet.pod_status import render
from emulator.kubelet.pod_workers import PodWorkers
from emulator.kubelet.state import DONE, TERMINAL, NodeRecord, PodRecord, ShardState, phase_of
from emulator.kubelet.status_reconcile import STORE_ERRORS, StatusReconciler, merge_status, store_unreachable

log = logging.getLogger(__name__)


class StatusManager:
    """Syncs dirty pod statuses every tick and node statuses on their cadence, in batches."""

    def __init__(self, state: ShardState, workers: PodWorkers, node_status: NodeStatus) -> None:
        self.state = state
        self.workers = workers
        self.node_status = node_status
        self._status_heap: list[tuple[float, str]] = []
        self.reconciler = StatusReconciler(state)
        self.outage = False  # a write failed with the store unreachable, and none has got through since

    def node_added(self, node: NodeRecord, now: float) -> None:
        """First status write right away (conditions, heartbeat), then on the update cadence."""
        node.status_due = now
        node.dirty = True
        heapq.heappush(self._status_heap, (node.status_due, node.name))

    def reconcile(self, now: float) -> int:
        """``syncBatch(true)`` when due (every ``status_sync_period``, after a failed write): marks stale pods dirty.

        Returns how many pods it found stale (0 when not due). The store being unreachable leaves
        the pass due, so the first tick after the store is back runs it.
        """
        if not self.reconciler.due(now):
            return 0  # (pods of a chaos-stopped node found stale are held by flush_pods like any other)
        try:
            return self.reconciler.reconcile(now)
        except Exception as e:
            if not store_unreachable(e):
                raise
            self.reconciler.write_failed()
            return 0

    def flush_pods(self, now: float) -> None:
        """``syncBatch(false)``: write the dirty pods' statuses; a failed write leaves its pod dirty."""
        state = self.state
        if not state.dirty_pods:
            return
        dirty, state.dirty_pods = state.dirty_pods, set()
        if state.chaos.stopped:
            # chaos stop-kubelet: nothing is reported for the node's pods (a pod deleted there stays
            # Terminating); they stay dirty and are written once the kubelet is back.
            stopped = state.chaos.stopped
            held = {uid for uid in dirty if (rec := state.pods.get(uid)) is not None and rec.node in stopped}
            state.dirty_pods |= held
            dirty -= held
        writes: list[tuple[PodRecord, Obj]] = []
        deletes: list[PodRecord] = []
        for uid in dirty:
            rec = state.pods.get(uid)
            if rec is None:
                continue
            if rec.stage == DONE:
                status = rec.final  # kept until the store has it: a failed write sends it again
            else:
                status = render(rec, state.nodes.get(rec.node), state.model, now)
                if rec.in_model and status["phase"] in TERMINAL:
                    self.workers.finish(rec)  # ran to completion or was evicted: its last status is this one
                elif not rec.reported_ready and status["phase"] == "Running" and any(
                        c.get("type") == "Ready" and c.get("status") == "True" for c in status["conditions"]):
                    rec.reported_ready = True
                    km.POD_START_SLI.observe(max(0.0, now - rec.created_at - rec.pull_seconds - rec.init_seconds))
                    km.POD_START.observe(max(0.0, now - rec.seen_at))
            if status is not None:
                rec.intended = status
                stored = rec.obj.get("status") or {}
                merged = merge_status(stored, status)
                if merged != stored:
                    writes.append((rec, merged))
                    continue
                self.reconciler.acknowledged(rec, int(resource_version(rec.obj) or 0))  # the store has it already
                rec.final = None
            if rec.delete_after_write:
                deletes.append(rec)
        failed = self._write_pods(writes, deletes)
        if writes:
            km.POD_STATUS_UPDATES.labels(state.label).inc(len(writes))
        if failed:
            # The store is unreachable: the deletions wait with their pods (still dirty) for the next flush.
            state.dirty_pods.update(rec.uid for rec in deletes)
            return
        if deletes:
            self._delete_pods(deletes)

    def _delete_pods(self, deletes: list[PodRecord]) -> None:
        """The final grace-0 deletes (uid precondition, as upstream's status manager), one round trip per batch.

        Each pod is deleted as the kubelet last read or wrote it (``rec.obj``): conditional on that
        resourceVersion too, and planned again against the stored pod if it changed in between
        (:meth:`ServerCore.delete_many`), so a batch costs what one delete did.
        """
        state = self.state
        batch = state.config.write_batch
        for start in range(0, len(deletes), batch):
            chunk = deletes[start:start + batch]
            try:
                results = state.core.delete_many(POD, [rec.obj for rec in chunk])
            except STORE_ERRORS as e:
                self._failed(f"deleting {len(deletes) - start} pods", e)
                for rec in deletes[start:]:
                    state.dirty_pods.add(rec.uid)  # delete_after_write stays: the next flush deletes it
                return
            for rec, result in zip(chunk, results, strict=True):
                rec.delete_after_write = False
                if not isinstance(result, errors.StatusError):
                    state.remember(result)
                    state.stats.deletions += 1
                elif result.code not in (404, 409):
                    log.warning("kubelet shard %d: deleting pod %s/%s failed: %s", state.index, rec.ns, rec.name,
                                result.message)

    def _write_pods(self, writes: list[tuple[PodRecord, Obj]], deletes: list[PodRecord]) -> bool:
        """Write the statuses in batches; True when the store was unreachable (the rest stays dirty)."""
        state = self.state
        batch = state.config.write_batch
        for start in range(0, len(writes), batch):
            chunk = writes[start:start + batch]
            try:
                results = state.core.update_status_many(POD, [{**rec.obj, "status": status} for rec, status in chunk])
            except Exception as e:
                if not store_unreachable(e):
                    raise
                # Unknown outcome for this chunk (some writes may have landed): every pod not yet
                # acknowledged stays dirty, and the next flush writes it against what the store holds.
                self._failed(f"status of {len(writes) - start} pods", e)
                left = writes[start:]
                state.stats.status_write_errors += len(left)
                for rec, _status in left:
                    self.reconciler.unacknowledged(rec)
                    state.dirty_pods.add(rec.uid)
                return True
            for (rec, _status), result in zip(chunk, results, strict=True):
                if isinstance(result, errors.StatusError):
                    if result.code == 404:
                        self.workers.forget_pod(rec)
                        continue
                    log.warning("kubelet shard %d: status of pod %s/%s not written: %s", state.index, rec.ns,
                                rec.name, result.message)
                    state.stats.status_write_errors += 1
                    self.reconciler.unacknowledged(rec)
                    state.dirty_pods.add(rec.uid)  # refused (not unreachable): retried by the next flush
                    continue
                self.outage = False
                rec.obj = result
                state.remember(result)
                self.reconciler.acknowledged(rec, int(resource_version(result) or 0))
                rec.final = None
                state.stats.pod_status_writes += 1
                if rec.delete_after_write:
                    deletes.append(rec)
        return False

    def _failed(self, what: str, e: Exception) -> None:
        """A write did not reach the store: say so once per outage, and reconcile once it is back."""
        if not self.outage:
            log.warning("kubelet shard %d: %s not written, the store is unreachable (%s); kept to retry",
                        self.state.index, what, e)
        self.outage = True
        self.reconciler.write_failed()

    def flush_nodes(self, now: float) -> None:
        state = self.state
        heap = self._status_heap
        due: list[NodeRecord] = []
        update_every = state.config.node_status_update_frequency
        while heap and heap[0][0] <= now:
            t, name = heapq.heappop(heap)
            node = state.nodes.get(name)
            if node is None or node.status_due != t:
                continue
            if name in state.chaos.stopped:
                node.dirty = True  # chaos stop-kubelet: no status now; once restored, posted at the next check
            elif (node.dirty or now - node.last_report >= state.config.node_status_report_frequency
                  or self.node_status.drifted(node)):
                due.append(node)
            # Spread over the period by name, so all nodes do not write in the same tick.
            node.status_due = t + update_every if node.last_report > -math.inf else (
                now + update_every * (0.5 + 0.5 * phase_of(name)))
            heapq.heappush(heap, (node.status_due, name))
        batch = state.config.write_batch
        for start in range(0, len(due), batch):
            chunk = due[start:start + batch]
            objs = [{**n.obj, "status": self.node_status.status_of(n, now)} for n in chunk]
            try:
                results = state.core.update_status_many(NODE, objs)
            except Exception as e:
                if not store_unreachable(e):
                    raise
                # updateNodeStatus failed: try again at the next tick rather than a whole period later.
                self._failed(f"status of {len(due) - start} nodes", e)
                state.stats.status_write_errors += len(due) - start
                for node in due[start:]:
                    node.dirty = True
                    node.status_due = now
                    heapq.heappush(heap, (now, node.name))
                break
            for node, result in zip(chunk, results, strict=True):
                if isinstance(result, errors.StatusError):
                    log.warning("kubelet shard %d: status of node %s not written: %s", state.index, node.name,
                                result.message)
                    state.stats.status_write_errors += 1
                    continue
                self.outage = False
                node.obj = result
                state.remember(result)
                node.dirty = False
                node.last_report = now
                state.stats.node_status_writes += 1
        if due:
            km.NODE_STATUS_UPDATES.labels(state.label).inc(len(due))
