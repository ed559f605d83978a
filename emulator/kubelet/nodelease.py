"""Node leases: the heartbeat of every node of the shard, a Lease in ``kube-node-lease`` renewed on its own loop.

Upstream counterpart: ``k8s.io/component-helpers/apimachinery/lease`` (the kubelet's
``nodelease`` controller): a Lease per node (holderIdentity = node, leaseDurationSeconds 40,
owned by its Node so the garbage collector removes it with the node), renewed every quarter of
the duration (10 s of cluster time), renewals spread over the interval by name. Renewals are
batched (one pipelined round trip per beat) and may run on a thread of their own
(:meth:`NodeLeases.heartbeat`), so a tick busy with thousands of pods never delays them: everything
lease-related is touched under one lock.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable

from emulator.api import errors
from emulator.api.gotime import micro_time
from emulator.api.kinds import LEASE
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339
from emulator.kubelet import kubelet_metrics as km
from emulator.kubelet.state import NodeRecord, ShardState, phase_of
from emulator.kubelet.status_reconcile import STORE_ERRORS

LEASE_NAMESPACE = "kube-node-lease"


class NodeLeases:
    """Creates and renews the Lease of every node the shard hosts."""

    def __init__(self, state: ShardState) -> None:
        self.state = state
        # Leases are renewed by heartbeat(), which the shell may also call from its own thread (so a
        # long tick never delays them): everything lease-related is touched under this lock.
        self._lock = threading.RLock()
        self._heap: list[tuple[float, str]] = []
        self._found: dict[str, Obj] = {}  # leases found at start, by node name
        self._pending: list[str] = []  # nodes whose lease must be created

    def load(self, owns: Callable[[str], bool]) -> None:
        """Pick up the leases an earlier incarnation of this shard wrote (recovery)."""
        for lease in self.state.core.list(LEASE, LEASE_NAMESPACE).items:
            name = lease["metadata"]["name"]
            if owns(name):
                self._found[name] = lease

    def node_added(self, node: NodeRecord, now: float) -> None:
        """Start renewing the node's lease: the one found at start, else a new one soon."""
        interval = self.state.config.renew_interval
        name = node.name
        with self._lock:
            lease = self._found.pop(name, None)
            if lease is not None:
                node.lease = lease
                renew = (lease.get("spec") or {}).get("renewTime")
                last = parse_rfc3339(renew) if renew else now - interval
                node.last_renew = last
                node.lease_due = min(last + interval, now + interval * phase_of(name))
            else:
                self._pending.append(name)
                node.lease_due = now + interval * (0.5 + 0.5 * phase_of(name))
            heapq.heappush(self._heap, (node.lease_due, name))

    def heartbeat(self, now: float) -> int:
        """Create missing leases and renew the ones due; returns renewals written. Thread-safe."""
        with self._lock:
            return self._flush(now)

    def _body(self, node: NodeRecord, now: float) -> Obj:
        uid = (node.obj.get("metadata") or {}).get("uid")
        meta: Obj = {"name": node.name, "namespace": LEASE_NAMESPACE}
        if uid:
            # nodelease setNodeOwnerFunc: the Node owns its Lease, so the garbage collector removes it with the node.
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": uid}]
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": node.name, "leaseDurationSeconds": self.state.config.lease_duration_seconds,
                         "renewTime": micro_time(now)}}

    def _flush(self, now: float) -> int:
        state = self.state
        interval = state.config.renew_interval
        st = state.stats
        creates: list[NodeRecord] = []
        for name in self._pending:
            node = state.nodes.get(name)
            if node is not None and node.lease is None:
                creates.append(node)
        self._pending = []
        renewals: list[NodeRecord] = []
        heap = self._heap
        held: list[tuple[float, str]] = []
        while heap and heap[0][0] <= now:
            t, name = heapq.heappop(heap)
            node = state.nodes.get(name)
            if node is None or node.lease_due != t:
                continue
            if name in state.chaos.stopped:
                held.append((t, name))  # chaos stop-kubelet: stays due, renewed by the first beat after restore
                continue
            if node.lease is None:
                if node not in creates:
                    creates.append(node)
            else:
                renewals.append(node)
            if node.last_renew is not None:
                gap = now - node.last_renew
                st.max_renew_gap = max(st.max_renew_gap, gap)
                if now - t > 2 * state.config.tick_interval:
                    st.late_renewals += 1
                    km.LEASE_LATE.labels(state.label).inc()
                if gap > state.config.lease_duration_seconds:
                    st.expired_leases += 1
            node.last_renew = now
            node.lease_due = now + interval
            heapq.heappush(heap, (node.lease_due, name))
        for entry in held:
            heapq.heappush(heap, entry)
        try:
            self._write(creates, renewals, now)
        except STORE_ERRORS:
            # The store is unreachable: what was not written is due again at the next beat (upstream the
            # lease controller retries with back-off, then at the renew interval).
            self._pending.extend(n.name for n in creates if n.lease is None)
            for node in renewals:
                if node.lease_due > now:
                    node.lease_due = now
                    heapq.heappush(heap, (now, node.name))
            raise
        if renewals:
            km.LEASE_RENEWALS.labels(state.label).inc(len(renewals))
        return len(renewals)

    def _write(self, creates: list[NodeRecord], renewals: list[NodeRecord], now: float) -> None:
        state = self.state
        st = state.stats
        batch = state.config.write_batch
        for start in range(0, len(creates), batch):
            chunk = creates[start:start + batch]
            for node, result in zip(chunk, state.core.create_many(LEASE, [self._body(n, now) for n in chunk]),
                                    strict=True):
                if isinstance(result, errors.StatusError):
                    if result.reason == "AlreadyExists":
                        try:
                            node.lease = state.core.get(LEASE, LEASE_NAMESPACE, node.name)
                        except errors.StatusError:
                            node.lease = None
                    continue
                node.lease = result
                node.last_renew = now
        for start in range(0, len(renewals), batch):
            chunk = renewals[start:start + batch]
            objs = []
            for node in chunk:
                lease = node.lease or {}
                renewed = {**lease, "spec": {**(lease.get("spec") or {}), "holderIdentity": node.name,
                                             "leaseDurationSeconds": state.config.lease_duration_seconds,
                                             "renewTime": micro_time(now)}}
                owners = self._body(node, now)["metadata"].get("ownerReferences")
                if owners and (lease.get("metadata") or {}).get("ownerReferences") != owners:
                    # The node was deleted and created again: the lease now belongs to the new one.
                    renewed["metadata"] = {**(lease.get("metadata") or {}), "ownerReferences": owners}
                objs.append(renewed)
            for node, result in zip(chunk, state.core.update_many(LEASE, objs), strict=True):
                if isinstance(result, errors.StatusError):
                    node.lease = None  # gone (404) or broken: create it again
                    self._pending.append(node.name)
                    continue
                node.lease = result
                st.lease_renewals += 1
