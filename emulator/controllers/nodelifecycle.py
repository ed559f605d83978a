"""The node lifecycle controller: silent kubelets → Unknown conditions → taints, with per-zone rate limits.

A re-implementation of upstream ``pkg/controller/nodelifecycle/node_lifecycle_controller.go``
(``monitorNodeHealth``, ``tryUpdateNodeHealth``, ``doNoScheduleTaintingPass``,
``doNoExecuteTaintingPass``, ``ComputeZoneState``, ``handleDisruption``) on
kemu's controller runtime. Pod eviction itself is the taint manager's job
(:mod:`emulator.controllers.tainteviction`), as upstream since 1.27.

**Health** (every ``node_monitor_period`` = 5 s of cluster time, one key
``monitor``): a node's *probe time* is the cluster time at which this
controller last saw its ``kube-node-lease`` Lease ``renewTime`` (or its Ready
condition's ``lastHeartbeatTime``) change; a node first seen starts from its
creation. When ``now - probe > node_monitor_grace_period`` (40 s) the kubelet's
conditions (Ready, MemoryPressure, DiskPressure, PIDPressure) become
``Unknown`` with reason ``NodeStatusUnknown`` and message "Kubelet stopped
posting node status." (``NodeStatusNeverUpdated`` / "Kubelet never posted node
status." for a condition the kubelet never wrote), and the node's pods get
``Ready=False`` (``MarkPodsNotReady``).

**NoSchedule condition taints** follow conditions at once (no rate limit):
Ready False → ``not-ready``, Ready Unknown → ``unreachable``,
``memory-pressure``, ``disk-pressure``, ``pid-pressure``,
``network-unavailable`` (upstream's ``nodeConditionToTaintKeyStatusMap``), and
``unschedulable`` from ``spec.unschedulable``. This controller is their only
writer: the kubelet sets the conditions and nothing else, as upstream.

**NoExecute taints** ``node.kubernetes.io/unreachable`` (Ready Unknown) or
``not-ready`` (Ready False) go through a per-zone queue drained by a token
bucket on the cluster clock (burst 1): ``--node-eviction-rate`` 0.1/s in a
Normal zone; in a PartialDisruption zone (more than 2 not-ready nodes and at
least ``--unhealthy-zone-threshold`` 0.55 of them) ``--secondary-node-eviction-rate``
0.01/s, or 0 when the zone has at most ``--large-cluster-size-threshold`` 50
nodes; a FullDisruption zone (no Ready node) evicts at the normal rate unless
*every* zone is fully disrupted — then nothing is tainted and the NoExecute
taints are removed (upstream's "master disruption mode": the control plane,
not the nodes, is the likely culprit). A node that becomes Ready again loses
its NoExecute taint at once and leaves the queue. Zones are
``topology.kubernetes.io/region`` + ``zone`` labels (``GetZoneKey``).

Taints carry ``timeAdded``; the taint manager measures tolerationSeconds from it.
Simplifications: see ``docs/architecture.md``.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass

from emulator.api import errors
from emulator.api.kinds import LEASE, NODE, POD
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339, rfc3339
from emulator.controllers.runtime import Controller, ControllerContext
from emulator.informers import NODE_NAME_INDEX, ResourceEventHandlerFuncs

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
TAINT_PREFIX = "node.kubernetes.io/"
UNREACHABLE = TAINT_PREFIX + "unreachable"
NOT_READY = TAINT_PREFIX + "not-ready"
NODE_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
# doNoScheduleTaintingPass: (condition, status) → taint key.
CONDITION_TAINTS: dict[tuple[str, str], str] = {
    ("Ready", "False"): NOT_READY, ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): TAINT_PREFIX + "memory-pressure",
    ("DiskPressure", "True"): TAINT_PREFIX + "disk-pressure",
    ("PIDPressure", "True"): TAINT_PREFIX + "pid-pressure",
    ("NetworkUnavailable", "True"): TAINT_PREFIX + "network-unavailable",
}
UNSCHEDULABLE = TAINT_PREFIX + "unschedulable"
MANAGED_NOSCHEDULE = frozenset(CONDITION_TAINTS.values()) | {UNSCHEDULABLE}
MONITOR_KEY, EVICT_KEY = "monitor", "evict"

NORMAL, PARTIAL, FULL = "Normal", "PartialDisruption", "FullDisruption"


@dataclass
class Options:
    """kube-controller-manager's node lifecycle flags (cluster seconds, per second)."""

    node_monitor_period: float = 5.0
    node_monitor_grace_period: float = 40.0
    node_eviction_rate: float = 0.1
    secondary_node_eviction_rate: float = 0.01
    unhealthy_zone_threshold: float = 0.55
    large_cluster_size_threshold: int = 50
    eviction_queue_period: float = 1.0


class TokenBucket:
    """``flowcontrol.NewTokenBucketRateLimiter(qps, 1)`` on the cluster clock: ``try_accept`` takes a token."""

    def __init__(self, qps: float, now: float, burst: int = 1) -> None:
        self.qps, self.burst, self.tokens, self.last = qps, burst, float(burst), now

    def set_qps(self, qps: float, now: float) -> None:
        if qps != self.qps:
            self.qps, self.tokens, self.last = qps, min(self.tokens, float(self.burst)), now

    def try_accept(self, now: float) -> bool:
        if self.qps <= 0:
            return False
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


def zone_of(node: Obj) -> str:
    """``GetZoneKey``: region and zone labels (empty for a node with neither)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    region = labels.get("topology.kubernetes.io/region") or labels.get("failure-domain.beta.kubernetes.io/region", "")
    zone = labels.get("topology.kubernetes.io/zone") or labels.get("failure-domain.beta.kubernetes.io/zone", "")
    return f"{region}:\x00:{zone}" if region or zone else ""


def ready_status(node: Obj) -> str:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("status") or "Unknown")
    return "Unknown"


def compute_zone_state(statuses: list[str], threshold: float) -> str:
    """``ComputeZoneState``: Full with no Ready node; Partial with >2 not-ready at ``threshold`` or more."""
    not_ready = sum(1 for s in statuses if s != "True")
    if not_ready and not_ready == len(statuses):
        return FULL
    if not_ready > 2 and not_ready / max(1, len(statuses)) >= threshold:
        return PARTIAL
    return NORMAL


class NodeLifecycleController(Controller):
    """Monitors node health and keeps the condition taints; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, options: Options | None = None) -> None:
        super().__init__("nodelifecycle", ctx, workers=1)
        self.options = options or Options(**{k: ctx.option(k, v) for k, v in Options().__dict__.items()})
        self.node_informer = self.watch(ctx.informers.informer_for(NODE))
        self.lease_informer = self.watch(ctx.informers.informer_for(LEASE, namespace=LEASE_NAMESPACE))
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        self._lock = threading.Lock()
        # node → (last lease renewTime / Ready heartbeat seen, cluster time it was seen)
        self._probe: dict[str, tuple[str, float]] = {}
        self._queues: dict[str, OrderedDict[str, Obj]] = {}  # zone → node name → newest node seen
        self._buckets: dict[str, TokenBucket] = {}
        self.zone_states: dict[str, str] = {}
        self.node_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda _o, _i: self.enqueue_key(MONITOR_KEY), update=lambda _o, _n: self.enqueue_key(MONITOR_KEY)))
        # A renewal is observed when its event arrives (cheap: no pass over the nodes), so the
        # grace period is measured from the moment the controller saw the heartbeat.
        self.lease_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self._lease_seen(obj), update=lambda _old, new: self._lease_seen(new)))
        self.queue.add(MONITOR_KEY)
        self.queue.add(EVICT_KEY)

    def _lease_seen(self, lease: Obj) -> None:
        name = lease["metadata"]["name"]
        node = self.node_informer.indexer.get_by_key(name)
        if node is not None:
            beat = self._heartbeat(node)
            with self._lock:
                if self._probe.get(name, ("", 0.0))[0] != beat:
                    self._probe[name] = (beat, self.clock.now())

    def reconcile(self, key: str) -> float | None:
        if key == EVICT_KEY:
            self.process_eviction_queues()
            return self.options.eviction_queue_period
        self.monitor_node_health()
        return self.options.node_monitor_period

    # ------------------------------------------------------------ health
    def _heartbeat(self, node: Obj) -> str:
        name = node["metadata"]["name"]
        lease = self.lease_informer.indexer.get_by_key(f"{LEASE_NAMESPACE}/{name}")
        renew = str(((lease or {}).get("spec") or {}).get("renewTime") or "")
        ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})
        return f"{renew}|{ready.get('lastHeartbeatTime') or ''}"

    def monitor_node_health(self) -> None:
        """``monitorNodeHealth``: conditions, NoSchedule taints, zone states, the NoExecute queue."""
        now = self.clock.now()
        nodes = self.node_informer.indexer.list()
        zones: dict[str, list[str]] = {}
        for cached in nodes:
            node, name = cached, cached["metadata"]["name"]
            beat = self._heartbeat(node)
            seen = self._probe.get(name)
            if seen is None:
                created = node["metadata"].get("creationTimestamp")
                self._probe[name] = (beat, parse_rfc3339(created) if created and not beat.strip("|") else now)
            elif seen[0] != beat:
                self._probe[name] = (beat, now)
            if now - self._probe[name][1] > self.options.node_monitor_grace_period and ready_status(node) != "Unknown":
                node = self._mark_unknown(cached, now)
            node = self._sync_noschedule_taints(node, now)
            zones.setdefault(zone_of(node), []).append(ready_status(node))
            self._track_noexecute(node)
        for gone in set(self._probe) - {n["metadata"]["name"] for n in nodes}:
            del self._probe[gone]
        self._handle_disruption(zones, now)
        # Drain at once too: a node queued by this pass need not wait for the next queue tick.
        self.process_eviction_queues()

    def _mark_unknown(self, node: Obj, now: float) -> Obj:
        status = dict(node.get("status") or {})
        conditions = [dict(c) for c in status.get("conditions") or []]
        by_type = {c.get("type"): c for c in conditions}
        for ctype in NODE_CONDITIONS:
            cond = by_type.get(ctype)
            if cond is None:
                conditions.append({"type": ctype, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                                   "message": "Kubelet never posted node status.", "lastHeartbeatTime": None,
                                   "lastTransitionTime": rfc3339(now)})
            elif cond.get("status") != "Unknown":
                cond.update(status="Unknown", reason="NodeStatusUnknown",
                            message="Kubelet stopped posting node status.", lastTransitionTime=rfc3339(now))
        try:
            node = self.core.update_status(NODE, {**node, "status": {**status, "conditions": conditions}})
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise
            return node
        self.event(node, "Normal", "NodeNotReady", f"Node {node['metadata']['name']} status is now: NodeNotReady")
        self._mark_pods_not_ready(node["metadata"]["name"], now)
        return node

    def _mark_pods_not_ready(self, node_name: str, now: float) -> None:
        """``MarkPodsNotReady``: the pods of an unreachable node stop counting as Ready."""
        for pod in self.pod_informer.indexer.by_index(NODE_NAME_INDEX, node_name):
            conditions = [dict(c) for c in (pod.get("status") or {}).get("conditions") or []]
            changed = False
            for cond in conditions:
                if cond.get("type") == "Ready" and cond.get("status") != "False":
                    cond.update(status="False", lastTransitionTime=rfc3339(now))
                    changed = True
            if changed:
                try:
                    self.core.update_status(POD, {**pod, "status": {**pod["status"], "conditions": conditions}})
                except errors.StatusError as e:
                    if e.code not in (404, 409):
                        raise

    def _write_taints(self, node: Obj, taints: list[Obj]) -> Obj:
        try:
            return self.core.update(NODE, {**node, "spec": {**(node.get("spec") or {}), "taints": taints}})
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise
            return node

    def _sync_noschedule_taints(self, node: Obj, now: float) -> Obj:
        """``doNoScheduleTaintingPass``: the managed NoSchedule taints are exactly what the conditions say."""
        wanted: set[str] = set()
        for cond in (node.get("status") or {}).get("conditions") or []:
            key = CONDITION_TAINTS.get((str(cond.get("type")), str(cond.get("status"))))
            if key:
                wanted.add(key)
        if (node.get("spec") or {}).get("unschedulable"):
            wanted.add(UNSCHEDULABLE)
        taints = list((node.get("spec") or {}).get("taints") or [])
        have = {t.get("key") for t in taints if t.get("effect") == "NoSchedule" and t.get("key") in MANAGED_NOSCHEDULE}
        if have == wanted:
            return node
        kept = [t for t in taints if not (t.get("effect") == "NoSchedule" and t.get("key") in MANAGED_NOSCHEDULE
                                          and t.get("key") not in wanted)]
        kept += [{"key": k, "effect": "NoSchedule", "timeAdded": rfc3339(now)} for k in sorted(wanted - have)]
        return self._write_taints(node, kept)

    # ------------------------------------------------------------ NoExecute, rate limited
    def _track_noexecute(self, node: Obj) -> None:
        """Queue a not-ready/unreachable node for tainting; untaint and dequeue a Ready one at once."""
        name, zone, ready = node["metadata"]["name"], zone_of(node), ready_status(node)
        taints = (node.get("spec") or {}).get("taints") or []
        with self._lock:
            queue = self._queues.setdefault(zone, OrderedDict())
            if ready == "True":
                queue.pop(name, None)
                if any(t.get("effect") == "NoExecute" and t.get("key") in (UNREACHABLE, NOT_READY) for t in taints):
                    self._write_taints(node, [t for t in taints if not (
                        t.get("effect") == "NoExecute" and t.get("key") in (UNREACHABLE, NOT_READY))])
                return
            wanted = UNREACHABLE if ready == "Unknown" else NOT_READY
            if not any(t.get("effect") == "NoExecute" and t.get("key") == wanted for t in taints):
                queue[name] = node  # keeps its place in line; the newest state is what gets tainted
            else:
                queue.pop(name, None)

    def _handle_disruption(self, zones: dict[str, list[str]], now: float) -> None:
        """``handleDisruption`` + ``setLimiterInZone``: per-zone rates; all zones down stops evictions."""
        states = {z: compute_zone_state(s, self.options.unhealthy_zone_threshold) for z, s in zones.items()}
        all_full = bool(states) and all(s == FULL for s in states.values())
        with self._lock:
            self.zone_states = states
            for zone, state in states.items():
                if all_full:
                    qps = 0.0
                elif state == PARTIAL:
                    qps = 0.0 if len(zones[zone]) <= self.options.large_cluster_size_threshold \
                        else self.options.secondary_node_eviction_rate
                else:
                    qps = self.options.node_eviction_rate
                bucket = self._buckets.get(zone)
                if bucket is None:
                    self._buckets[zone] = TokenBucket(qps, now)
                else:
                    bucket.set_qps(qps, now)
        if all_full:
            # Master disruption mode: take the NoExecute taints away so nothing is evicted.
            for node in self.node_informer.indexer.list():
                taints = (node.get("spec") or {}).get("taints") or []
                kept = [t for t in taints if not (t.get("effect") == "NoExecute"
                                                  and t.get("key") in (UNREACHABLE, NOT_READY))]
                if len(kept) != len(taints):
                    self._write_taints(node, kept)

    def process_eviction_queues(self) -> int:
        """``doNoExecuteTaintingPass``: taint queued nodes while their zone's bucket has tokens."""
        now = self.clock.now()
        tainted = 0
        with self._lock:
            work: list[Obj] = []
            for zone, queue in self._queues.items():
                bucket = self._buckets.get(zone)
                while queue and bucket is not None and bucket.try_accept(now):
                    work.append(queue.popitem(last=False)[1])
        for queued in work:
            # The queued copy may be older than the cache; the newer of the two decides.
            cached = self.node_informer.indexer.get_by_key(queued["metadata"]["name"])
            if cached is None:
                continue
            node = queued if int(queued["metadata"]["resourceVersion"]) > int(cached["metadata"]["resourceVersion"]) \
                else cached
            ready = ready_status(node)
            if ready == "True":
                continue
            add = UNREACHABLE if ready == "Unknown" else NOT_READY
            drop = NOT_READY if add == UNREACHABLE else UNREACHABLE
            if any(t.get("effect") == "NoExecute" and t.get("key") == add
                   for t in (node.get("spec") or {}).get("taints") or []):
                # Already tainted (queued again by a pass whose cache was behind our own write): keep its
                # timeAdded, which the taint manager counts tolerationSeconds from. Upstream's timed queue
                # keeps a processed node in its set, so a node is never tainted twice.
                with self._lock:
                    self._buckets[zone_of(node)].tokens += 1.0
                continue
            taints = [t for t in (node.get("spec") or {}).get("taints") or []
                      if not (t.get("effect") == "NoExecute" and t.get("key") in (add, drop))]
            taints.append({"key": add, "effect": "NoExecute", "timeAdded": rfc3339(now)})
            if self._write_taints(node, taints) is node:
                # The write lost a race (our copy was stale): give the token back and retry at once.
                with self._lock:
                    zone = zone_of(node)
                    self._buckets[zone].tokens += 1.0
                    self._queues[zone][node["metadata"]["name"]] = node
                    self._queues[zone].move_to_end(node["metadata"]["name"], last=False)
                self.enqueue_key(MONITOR_KEY)
                continue
            tainted += 1
        return tainted


def new_controller(ctx: ControllerContext) -> NodeLifecycleController:
    """The controller manager's constructor for this controller."""
    return NodeLifecycleController(ctx)
