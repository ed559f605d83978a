"""Node registration and node status: what each kubelet of the shard says about its node.

Upstream counterpart: ``pkg/kubelet/kubelet_node_status.go`` (``registerWithAPIServer``,
``initialNode``, ``setNodeStatus``) and ``pkg/kubelet/nodestatus/setters.go`` (conditions,
images, allocatable as small setters). Pool nodes from configuration are registered by the shard
that owns their name; Node objects created through the API are **adopted**, keeping what their
manifest gives and filling in what is missing (:mod:`emulator.kubelet.nodes`). Allocatable =
capacity - kube-reserved - system-reserved - the hard eviction threshold.

Conditions MemoryPressure / DiskPressure / PIDPressure come from the eviction manager, Ready is
True while the shard runs. The kubelet sets conditions only: the condition taints
(``node.kubernetes.io/not-ready``, ``unreachable``, ``<memory|disk|pid>-pressure``...) are the node
lifecycle controller's (:mod:`emulator.controllers.nodelifecycle`, upstream
``doNoScheduleTaintingPass``), as upstream, where the kubelet registers a node with no condition
taint (``initialNode``: only ``--register-with-taints`` and ``unschedulable``; the
``node.kubernetes.io/not-ready:NoSchedule`` a new Node carries upstream comes from the API
server's ``TaintNodesAtCreation`` admission plugin). When the status is written is the status
manager's business (:mod:`~emulator.kubelet.status_manager`).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from emulator.api import errors
from emulator.api.kinds import NODE
from emulator.api.quantity import QuantityError
from emulator.api.types import Obj
from emulator.clock import rfc3339
from emulator.kubelet import eviction as ev
from emulator.kubelet import nodes as nd
from emulator.kubelet.events import node_ref
from emulator.kubelet.images import ImageManager
from emulator.kubelet.profiles import ProfileError
from emulator.kubelet.state import NodeRecord, ShardState
from emulator.kubelet.status_reconcile import STORE_ERRORS

log = logging.getLogger(__name__)


class NodeStatus:
    """Registers and adopts the shard's nodes and renders their status."""

    def __init__(self, state: ShardState, images: ImageManager) -> None:
        self.state = state
        self.images = images
        self._eviction_hard = ev.parse_thresholds(state.config.model.eviction_hard, hard=True)
        self._pending_nodes: list[Obj] = []  # pool nodes to register
        self._adoptions: list[Obj] = []  # adopted nodes whose manifest needs filling in

    # ---------------------------------------------------------------------------------- registration

    def allocatable(self, capacity: Mapping[str, Any]) -> dict[str, str]:
        cfg = self.state.config
        return nd.allocatable(capacity, kube_reserved=cfg.kube_reserved, system_reserved=cfg.system_reserved,
                              eviction_hard=self._eviction_hard)

    @staticmethod
    def alloc_of(obj: Mapping[str, Any]) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, value in ((obj.get("status") or {}).get("allocatable") or {}).items():
            try:
                out[name] = nd.resource_amount(name, value)
            except QuantityError:
                continue
        return out

    def queue_registration(self, bodies: Iterable[Obj]) -> None:
        """Node objects to create at the next :meth:`register` (pool nodes not in the store yet)."""
        self._pending_nodes.extend(bodies)

    def register(self) -> list[Obj]:
        """Create the queued Node objects in batches; returns the ones created (the shard hosts them)."""
        if not self._pending_nodes:
            return []
        state = self.state
        pending, self._pending_nodes = self._pending_nodes, []
        created: list[Obj] = []
        batch = state.config.write_batch
        for start in range(0, len(pending), batch):
            chunk = pending[start:start + batch]
            try:
                results = state.core.create_many(NODE, chunk)
            except STORE_ERRORS as e:
                # registerWithAPIServer retries until it succeeds: the rest waits for the next tick
                # (a node whose create landed anyway answers AlreadyExists then, and the informer brings it).
                log.warning("kubelet shard %d: registering %d nodes failed, the store is unreachable (%s); "
                            "retried at the next tick", state.index, len(pending) - start, e)
                self._pending_nodes[:0] = pending[start:]
                break
            for body, result in zip(chunk, results, strict=True):
                if isinstance(result, errors.StatusError):
                    if result.reason != "AlreadyExists":
                        log.warning("kubelet shard %d: registering node %s failed: %s", state.index,
                                    body["metadata"]["name"], result.message)
                    continue  # it exists: the informer brings it
                state.stats.registered += 1
                created.append(result)
        return created

    def initial_node(self, obj: Obj, now: float, *, adopted: bool) -> NodeRecord | None:
        """The record of a node this shard starts running (``initialNode``), or None if it cannot run it."""
        state = self.state
        name = obj["metadata"]["name"]
        if adopted:
            completed = nd.complete_node(obj, default_capacity=dict(nd.INSTANCE_TYPES[nd.DEFAULT_INSTANCE_TYPE]),
                                         allocatable_of=self.allocatable)
            if completed is not None:
                self._adoptions.append(completed)
                obj = completed
            state.stats.adopted += 1
        try:
            idx = state.model.add_node(obj)
        except (ValueError, QuantityError, ProfileError) as e:
            log.warning("kubelet shard %d: cannot run node %s: %s", state.index, name, e)
            return None
        while len(state.idx_names) <= idx:
            state.idx_names.append("")
        state.idx_names[idx] = name
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        ip = next((a.get("address", "") for a in status.get("addresses") or () if a.get("type") == "InternalIP"),
                  nd.internal_ip(name, None))
        net = None
        if spec.get("podCIDR"):
            try:
                net = ipaddress.ip_network(spec["podCIDR"], strict=False)
            except ValueError:
                net = None
        node = NodeRecord(name, obj, idx, self.alloc_of(obj), ip, net)
        for entry in status.get("images") or ():
            self.images.remember(node, entry)
        # A node run before (a restarted shard) keeps its transition times where nothing changed.
        stamp = rfc3339(now)
        previous = {c.get("type"): c for c in status.get("conditions") or ()}

        def since(ctype: str, wanted: str) -> str:
            cond = previous.get(ctype) or {}
            return cond.get("lastTransitionTime") or stamp if cond.get("status") == wanted else stamp

        node.conditions = {c: (False, since(c, "False")) for c in ev.CONDITIONS}
        node.conditions["Ready"] = (True, since("Ready", "True"))
        ref = node_ref(name)
        if not adopted or not any(c.get("type") == "Ready" for c in status.get("conditions") or ()):
            state.events.record(ref, "Normal", "Starting", "Starting kubelet.", when=now, host=name)
            state.events.record(ref, "Normal", "NodeReady", f"Node {name} status is now: NodeReady", when=now,
                                host=name)
        return node

    def refresh(self, node: NodeRecord, obj: Obj) -> None:
        """The Node object changed in the store: take its allocatable."""
        node.obj = obj
        alloc = self.alloc_of(obj)
        if alloc != node.alloc:
            node.alloc = alloc
            node.dirty = True

    # ------------------------------------------------------------------------------------- setters

    def apply_conditions(self, changed: Iterable[str], now: float) -> None:
        """Pressure conditions from the eviction manager (the model's tick) for the nodes that changed."""
        state = self.state
        for name in changed:
            node = state.nodes.get(name)
            if node is None:
                continue
            stamp = rfc3339(now)
            changed_any = False
            for ctype, value in state.model.node_conditions(name).items():
                if node.conditions.get(ctype, (False, ""))[0] != value:
                    node.conditions[ctype] = (value, stamp)
                    changed_any = True
            if changed_any:
                node.dirty = True

    def drifted(self, node: NodeRecord) -> bool:
        """``nodeStatusHasChanged`` for the conditions: the stored node no longer says what the kubelet says.

        Compared with the informer's copy of the Node (upstream reads the node from the API
        server's cache): a Ready=Unknown the node lifecycle controller wrote while the kubelet's
        writes were not getting through, or a status someone overwrote, is written again at the
        node's next status check instead of waiting for ``nodeStatusReportFrequency``.
        """
        stored = {c.get("type"): c.get("status") for c in (node.obj.get("status") or {}).get("conditions") or ()}
        for ctype in (*ev.CONDITIONS, "Ready"):
            value = node.conditions.get(ctype, (ctype == "Ready", ""))[0]
            if stored.get(ctype) != ("True" if value else "False"):
                return True
        return False

    def status_of(self, node: NodeRecord, now: float) -> Obj:
        """The node's status now: its conditions (heartbeat ``now``) and images."""
        stamp = rfc3339(now)
        status = dict(node.obj.get("status") or {})
        conditions = []
        for ctype in (*ev.CONDITIONS, "Ready"):
            value, since = node.conditions.get(ctype, (ctype == "Ready", stamp))
            if ctype == "Ready":
                reason, message = ("KubeletReady", "kubelet is posting ready status") if value else (
                    "KubeletNotReady", "kubelet is not ready")
            else:
                reason, message = ev.CONDITION_MESSAGES[ctype][value]
            conditions.append({"type": ctype, "status": "True" if value else "False", "lastHeartbeatTime": stamp,
                               "lastTransitionTime": since, "reason": reason, "message": message})
        status["conditions"] = conditions
        status["images"] = self.images.node_images(node)
        return status

    # ------------------------------------------------------------------------------- node objects

    def flush_node_objects(self) -> None:
        """Write what adopted nodes lacked (labels, podCIDR, status); kept for the next tick if the store is down."""
        adoptions, self._adoptions = self._adoptions, []
        for i, obj in enumerate(adoptions):
            try:
                self._write_adoption(obj)
            except STORE_ERRORS:
                self._adoptions[:0] = adoptions[i:]
                raise

    def _write_adoption(self, completed: Obj) -> None:
        """Write what an adopted Node lacked: labels and podCIDR (spec/metadata), then its status."""
        name = completed["metadata"]["name"]
        node = self.state.nodes.get(name)
        try:
            current = self.state.core.get(NODE, None, name)
            body = {**current, "metadata": {**current["metadata"], "labels": completed["metadata"]["labels"]},
                    "spec": {**(current.get("spec") or {}), **{k: v for k, v in completed["spec"].items()
                                                                if k in ("podCIDR", "podCIDRs")}}}
            if body != current:
                current = self.state.core.update(NODE, body)
            status = {**(completed.get("status") or {}), **{k: v for k, v in (current.get("status") or {}).items()
                                                           if v}}
            status.update({k: completed["status"][k] for k in ("capacity", "allocatable")
                           if not (current.get("status") or {}).get(k)})
            result = self.state.core.update_status(NODE, {**current, "status": status})
        except errors.StatusError as e:
            log.warning("kubelet shard %d: adopting node %s failed: %s", self.state.index, name, e.message)
            return
        if node is not None:
            node.obj = result
            node.alloc = self.alloc_of(result)
