"""The status manager: batched writes of the pod and node statuses the shard's kubelets intend.

Upstream counterpart: ``pkg/kubelet/status/status_manager.go`` for pods - the *intended* status
is kept locally (on the pod record: rendered from it by :func:`~emulator.kubelet.pod_status.render`,
or ``PodRecord.final`` for a terminal one) and a periodic ``syncBatch`` reconciles it with the API
server; a failed write leaves the pod dirty (a terminal status is kept in ``final``), so the next
sync retries it and nothing is lost; once a terminated pod's last status is written, it is
deleted with grace 0 (uid precondition) - and ``kubelet_node_status.go`` ``updateNodeStatus``
for nodes: checked every ``nodeStatusUpdateFrequency`` (10 s, spread by name) and written when
something changed or ``nodeStatusReportFrequency`` (5 min) has passed since the last write.

Writes are batched: one pipelined round trip for all of a tick's pod status updates
(:meth:`ServerCore.update_status_many`), one for node status, ``write_batch`` objects each.
"""

from __future__ import annotations

import heapq
import logging
import math

from emulator.api import errors
from emulator.api.kinds import NODE, POD
from emulator.api.types import Obj
from emulator.kubelet import kubelet_metrics as km
from emulator.kubelet.nodestatus import NodeStatus
from emulator.kubelet.pod_status import render
from emulator.kubelet.pod_workers import PodWorkers
from emulator.kubelet.state import DONE, TERMINAL, NodeRecord, PodRecord, ShardState, phase_of

log = logging.getLogger(__name__)


class StatusManager:
    """Syncs dirty pod statuses every tick and node statuses on their cadence, in batches."""

    def __init__(self, state: ShardState, workers: PodWorkers, node_status: NodeStatus) -> None:
        self.state = state
        self.workers = workers
        self.node_status = node_status
        self._status_heap: list[tuple[float, str]] = []

    def node_added(self, node: NodeRecord, now: float) -> None:
        """First status write right away (conditions, heartbeat), then on the update cadence."""
        node.status_due = now
        node.dirty = True
        heapq.heappush(self._status_heap, (node.status_due, node.name))

    def flush_pods(self, now: float) -> None:
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
                status = rec.final
                rec.final = None
            else:
                status = render(rec, state.nodes.get(rec.node), state.model, now)
                if rec.in_model and status["phase"] in TERMINAL:
                    self.workers.finish(rec)  # ran to completion or was evicted: its last status is this one
                elif not rec.reported_ready and status["phase"] == "Running" and any(
                        c.get("type") == "Ready" and c.get("status") == "True" for c in status["conditions"]):
                    rec.reported_ready = True
                    km.POD_START_SLI.observe(max(0.0, now - rec.created_at - rec.pull_seconds - rec.init_seconds))
                    km.POD_START.observe(max(0.0, now - rec.seen_at))
            if status is not None and status != (rec.obj.get("status") or {}):
                writes.append((rec, status))
            elif rec.delete_after_write:
                deletes.append(rec)
        batch = state.config.write_batch
        for start in range(0, len(writes), batch):
            chunk = writes[start:start + batch]
            results = state.core.update_status_many(POD, [{**rec.obj, "status": status} for rec, status in chunk])
            for (rec, status), result in zip(chunk, results, strict=True):
                if isinstance(result, errors.StatusError):
                    if result.code == 404:
                        self.workers.forget_pod(rec)
                    else:
                        log.warning("kubelet shard %d: status of pod %s/%s not written: %s", state.index, rec.ns,
                                    rec.name, result.message)
                        if rec.stage == DONE:
                            rec.final = status
                        state.dirty_pods.add(rec.uid)
                    continue
                rec.obj = result
                state.stats.pod_status_writes += 1
                if rec.delete_after_write:
                    deletes.append(rec)
        if writes:
            km.POD_STATUS_UPDATES.labels(state.label).inc(len(writes))
        for rec in deletes:
            rec.delete_after_write = False
            try:
                state.core.delete(POD, rec.ns, rec.name, grace_period_seconds=0, preconditions={"uid": rec.uid})
                state.stats.deletions += 1
            except errors.StatusError as e:
                if e.code not in (404, 409):
                    log.warning("kubelet shard %d: deleting pod %s/%s failed: %s", state.index, rec.ns, rec.name,
                                e.message)

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
            elif node.dirty or now - node.last_report >= state.config.node_status_report_frequency:
                due.append(node)
            # Spread over the period by name, so all nodes do not write in the same tick.
            node.status_due = t + update_every if node.last_report > -math.inf else (
                now + update_every * (0.5 + 0.5 * phase_of(name)))
            heapq.heappush(heap, (node.status_due, name))
        batch = state.config.write_batch
        for start in range(0, len(due), batch):
            chunk = due[start:start + batch]
            objs = [{**n.obj, "status": self.node_status.status_of(n, now)} for n in chunk]
            for node, result in zip(chunk, state.core.update_status_many(NODE, objs), strict=True):
                if isinstance(result, errors.StatusError):
                    log.warning("kubelet shard %d: status of node %s not written: %s", state.index, node.name,
                                result.message)
                    continue
                node.obj = result
                node.dirty = False
                node.last_report = now
                state.stats.node_status_writes += 1
        if due:
            km.NODE_STATUS_UPDATES.labels(state.label).inc(len(due))
