"""The scheduler cache: nodes and bound pods from the informers, plus this scheduler's assumptions.

Upstream ``pkg/scheduler/backend/cache/cache.go`` (``cacheImpl``: ``AssumePod``,
``FinishBinding``, ``ForgetPod``, ``AddPod``/``UpdatePod``/``RemovePod``,
``cleanupAssumedPods``) and ``backend/cache/debugger`` (the comparer and
dumper); our own Python.

**One snapshot, kept up to date in place.** Upstream keeps ``NodeInfo``
structs and copies the changed ones into a fresh snapshot every cycle. kemu's
:class:`~emulator.scheduler.framework.snapshot.Snapshot` is a set of node
arrays; the cache owns one and changes it in place -- ``Snapshot.assume`` /
``Snapshot.forget`` for every pod event -- so a cycle's snapshot costs
nothing. Node *set* changes (a node added or removed, or labels, taints,
allocatable, images changed) rebuild the arrays, once per burst of events
(a thousand nodes registering cost one rebuild, not a thousand); node updates
that change nothing the scheduler reads (heartbeats, conditions) only swap the
stored object.

**Single writer.** Informer handlers and bind workers never touch the
snapshot: they append to a deque (lock-free), and the scheduling thread
applies the backlog at the start of each cycle (:meth:`cycle`). So the
snapshot never changes under a running cycle, no informer thread waits for a
cycle to finish, and events are applied in the order they arrived. Everything
that reads the snapshot from another thread (:meth:`dump`, the comparer)
takes the same lock and applies the backlog first.

**Assume / forget / confirm / expire.** Right after a cycle picks a node the
scheduler *assumes* the pod there (:meth:`assume`: it counts on the node at
once, so the next cycle sees the room taken) and binds asynchronously. A
failed bind *forgets* it (:meth:`forget`). The informer's event for the bound
pod *confirms* it (``on_pod_add``/``on_pod_update`` of an assumed pod: it is
now an ordinary cached pod; if another scheduler bound it elsewhere it moves).
:meth:`finish_binding` starts a ``ttl`` after which :meth:`cleanup_assumed`
*expires* an assumption whose informer event never came (kemu: 30 s; upstream:
never, see Simplifications in ``docs/architecture.md``; ``assumed_ttl=0``
restores "never").

**Staleness.** Each informer event is stamped (``perf_counter``) when it is
handed over; when the scheduling thread applies a batch, the age of the
newest event in it is the cache's staleness, exported as
``scheduler_cache_staleness_seconds``.

Pods bound to a node the cache does not know (the node event is late, or the
node is gone) are kept and counted as soon as the node appears, as upstream's
"ghost" node infos do; terminal pods (Succeeded/Failed) leave the cache.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from emulator.api.gpu import DEVICE_INDEX_ANNOTATION
from emulator.api.pods import pod_requests
from emulator.api.types import ObjView
from emulator.clock import Clock, SystemClock
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import CPU, MEMORY, PODS, PodInfo

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_ASSUMED_POD_TTL", "Cache", "CacheDiff", "PodState", "compare_with_store"]

DEFAULT_ASSUMED_POD_TTL = 30.0
_CLEANUP_PERIOD = 1.0  # upstream cleanAssumedPeriod
_TERMINAL = frozenset({"Succeeded", "Failed"})

# Deque operations.
# A node add and a node update are applied alike, and so are a pod add and update (the cache compares with
# what it holds), so each pair shares one operation.
_NODE_SEEN, _NODE_DELETE, _POD_SEEN, _POD_DELETE, _FORGET, _FINISH = range(6)


def _key(pod: ObjView) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _node_name(obj: ObjView) -> str:
    return (obj.get("metadata") or {}).get("name") or ""


def _node_shape(node: ObjView) -> tuple[Any, ...]:
    """What the snapshot (and the plugins reading node objects) use: changes here rebuild the arrays."""
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    return (meta.get("labels"), meta.get("annotations"), node.get("spec"), status.get("allocatable"),
            status.get("images"))


def _pod_shape(pod: ObjView) -> tuple[Any, ...]:
    """What a cached pod contributes to the snapshot besides its node: requests, ports, images, labels, GPU devices."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    return (spec.get("containers"), spec.get("initContainers"), spec.get("overhead"), meta.get("labels"),
            (meta.get("annotations") or {}).get(DEVICE_INDEX_ANNOTATION))


def _is_terminal(pod: ObjView) -> bool:
    return (pod.get("status") or {}).get("phase") in _TERMINAL


@dataclass
class PodState:
    """One cached pod: its PodInfo, its node, and whether it is only assumed (not yet seen bound)."""

    info: PodInfo
    node: str
    pod: ObjView
    assumed: bool = False
    binding_finished: bool = False
    deadline: float | None = None


@dataclass
class CacheDiff:
    """What the comparer found (upstream ``CacheComparer``): each list empty when cache and store agree.

    ``missed_*``: in the store, not in the cache (pending pods: not in the
    queue either); ``redundant_*``: in the cache (or queue), not in the store;
    ``misplaced_pods``: (pod, node in cache, node in store); ``resource_mismatches``:
    (node, resource, cache's requested, store's bound pods' requests).
    """

    missed_nodes: list[str] = field(default_factory=list)
    redundant_nodes: list[str] = field(default_factory=list)
    missed_pods: list[str] = field(default_factory=list)
    redundant_pods: list[str] = field(default_factory=list)
    misplaced_pods: list[tuple[str, str, str]] = field(default_factory=list)
    resource_mismatches: list[tuple[str, str, int, int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.missed_nodes or self.redundant_nodes or self.missed_pods or self.redundant_pods
                    or self.misplaced_pods or self.resource_mismatches)

    def as_dict(self) -> dict[str, list[Any]]:
        return {"missedNodes": self.missed_nodes, "redundantNodes": self.redundant_nodes,
                "missedPods": self.missed_pods, "redundantPods": self.redundant_pods,
                "misplacedPods": [list(x) for x in self.misplaced_pods],
                "resourceMismatches": [list(x) for x in self.resource_mismatches]}


class Cache:
    """See the module docstring. ``clock`` is the cluster clock (assumed-pod ttl); ``assumed_ttl`` 0 = never expire."""

    def __init__(self, *, clock: Clock | None = None, assumed_ttl: float = DEFAULT_ASSUMED_POD_TTL,
                 on_expired: Callable[[PodState], None] | None = None) -> None:
        self.clock = clock or SystemClock()
        self.assumed_ttl = assumed_ttl
        self._on_expired = on_expired
        self._lock = threading.RLock()
        self._pending: deque[tuple[int, Any, Any, float]] = deque()
        self._nodes: dict[str, ObjView] = {}
        self._pods: dict[str, PodState] = {}
        self._expiring: set[str] = set()  # assumed pods whose binding finished
        self._snapshot = Snapshot.build([])
        self._rebuild = False
        self._last_cleanup = float("-inf")
        self.staleness = 0.0
        self.rebuilds = 0
        self.expired = 0

    # ------------------------------------------------------------------ informer / worker side (any thread)
    def _put(self, op: int, a: Any, b: Any = None) -> None:
        self._pending.append((op, a, b, time.perf_counter()))

    def on_node_add(self, node: ObjView) -> None:
        self._put(_NODE_SEEN, node)

    def on_node_update(self, old: ObjView, new: ObjView) -> None:
        self._put(_NODE_SEEN, new)

    def on_node_delete(self, node: ObjView) -> None:
        self._put(_NODE_DELETE, node)

    def on_pod_add(self, pod: ObjView) -> None:
        """A bound pod appeared (or an assumed one was confirmed)."""
        self._put(_POD_SEEN, pod)

    def on_pod_update(self, old: ObjView, new: ObjView) -> None:
        self._put(_POD_SEEN, new)

    def on_pod_delete(self, pod: ObjView) -> None:
        self._put(_POD_DELETE, pod)

    def forget(self, key: str, node: str) -> None:
        """Drop the assumption that pod ``key`` runs on ``node`` (its bind failed); no-op once confirmed."""
        self._put(_FORGET, key, node)

    def finish_binding(self, key: str) -> None:
        """The bind of assumed pod ``key`` returned: start its expiry ttl (upstream ``FinishBinding``)."""
        self._put(_FINISH, key)

    @property
    def pending_events(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------------ the scheduling thread
    @contextmanager
    def cycle(self) -> Iterator[Snapshot]:
        """The up-to-date snapshot, held still for one scheduling cycle (apply :meth:`assume` inside)."""
        with self._lock:
            self._apply_pending()
            yield self._snapshot

    def apply_pending(self) -> int:
        """Apply every event handed over so far; how many there were."""
        with self._lock:
            return self._apply_pending()

    def snapshot(self) -> Snapshot:
        """The current snapshot (the cache's own: read it from the scheduling thread, or under :meth:`cycle`)."""
        with self._lock:
            self._apply_pending()
            return self._snapshot

    def assume(self, info: PodInfo, node: str) -> None:
        """Count ``info`` on ``node`` now, before it is bound (upstream ``AssumePod``). ``KeyError`` if cached."""
        with self._lock:
            if info.key in self._pods:
                raise KeyError(f"pod {info.key} is in the cache, so can't be assumed")
            self._pods[info.key] = PodState(info, node, info.pod, assumed=True)
            if not self._rebuild and self._snapshot.index_of(node) is not None:
                self._snapshot.assume(info, node)

    def is_assumed(self, key: str) -> bool:
        with self._lock:
            self._apply_pending()
            state = self._pods.get(key)
            return state is not None and state.assumed

    def __contains__(self, key: str) -> bool:
        """Whether pod ``key`` is cached or assumed, as of the last applied event (no new events applied)."""
        return key in self._pods

    def get(self, key: str) -> PodState | None:
        with self._lock:
            self._apply_pending()
            return self._pods.get(key)

    def cleanup_assumed(self, now: float | None = None) -> list[PodState]:
        """Expire assumed pods whose binding finished more than ``ttl`` ago (upstream ``cleanupAssumedPods``)."""
        with self._lock:
            self._apply_pending(cleanup=False)
            return self._cleanup(self.clock.now() if now is None else now)

    # ------------------------------------------------------------------ applying events (lock held)
    def _apply_pending(self, *, cleanup: bool = True) -> int:
        pending = self._pending
        n = 0
        newest = 0.0
        while pending:
            op, a, b, stamp = pending.popleft()
            n += 1
            newest = stamp
            if op == _POD_SEEN:
                self._pod_seen(a)
            elif op == _POD_DELETE:
                self._pod_gone(_key(a))
            elif op == _FINISH:
                self._finish(a)
            elif op == _FORGET:
                self._forget(a, b)
            elif op == _NODE_SEEN:
                self._node_seen(a)
            elif op == _NODE_DELETE and self._nodes.pop(_node_name(a), None) is not None:
                self._rebuild = True
        if n:
            self.staleness = time.perf_counter() - newest
        if self._rebuild:
            self._rebuild_snapshot()
        if cleanup and self.assumed_ttl > 0 and self._expiring:
            now = self.clock.now()
            if now - self._last_cleanup >= _CLEANUP_PERIOD:
                self._cleanup(now)
        return n

    def _node_seen(self, node: ObjView) -> None:
        name = _node_name(node)
        old = self._nodes.get(name)
        self._nodes[name] = node
        if old is None:
            self._rebuild = True
        elif _node_shape(old) != _node_shape(node) and (self._rebuild or not self._snapshot.refresh_node(node)):
            # Labels, spec or allocatable changed: every array may move. (New images or annotations -
            # a kubelet's status, a usage annotation - are swapped in place by refresh_node.)
            self._rebuild = True

    def _place(self, state: PodState) -> None:
        if not self._rebuild and self._snapshot.index_of(state.node) is not None:
            self._snapshot.assume(state.info, state.node)

    def _unplace(self, state: PodState) -> None:
        if not self._rebuild and self._snapshot.index_of(state.node) is not None:
            try:
                self._snapshot.forget(state.info, state.node)
            except KeyError:
                # Cannot happen while the bookkeeping above is right; if it ever does, rebuilding from the
                # cached pods is always correct, so heal instead of stopping the scheduler.
                log.error("scheduler cache: pod %s missing from node %s in the snapshot; rebuilding",
                          state.info.key, state.node)
                self._rebuild = True

    def _pod_seen(self, pod: ObjView) -> None:
        key = _key(pod)
        node = (pod.get("spec") or {}).get("nodeName") or ""
        if not node or _is_terminal(pod):
            self._pod_gone(key)
            return
        state = self._pods.get(key)
        if state is None:
            state = self._pods[key] = PodState(PodInfo(pod), node, pod)
            self._place(state)
            return
        if state.assumed:
            # Confirmed by the informer (upstream AddPod of an assumed pod).
            state.assumed = False
            state.binding_finished = False
            state.deadline = None
            self._expiring.discard(key)
        same_shape = state.node == node and _pod_shape(state.pod) == _pod_shape(pod)
        state.pod = pod
        if same_shape:
            # A status update (or our own assumption confirmed): the snapshot already counts it right, but its
            # PodInfo shows the newest object -- preemption reads deletionTimestamp, the DisruptionTarget condition
            # and status.startTime there (upstream's NodeInfo holds the updated pod). Memos derived from the old
            # object go when its start time changed (the only status field a memo reads).
            info = state.info
            if (info.pod.get("status") or {}).get("startTime") != (pod.get("status") or {}).get("startTime"):
                info.memo_cache.clear()
            info.pod = pod
            return
        self._unplace(state)
        state.info = PodInfo(pod)
        state.node = node
        self._place(state)

    def _pod_gone(self, key: str) -> None:
        state = self._pods.pop(key, None)
        if state is not None:
            self._expiring.discard(key)
            self._unplace(state)

    def _forget(self, key: str, node: str) -> None:
        state = self._pods.get(key)
        if state is None or not state.assumed or state.node != node:
            return  # confirmed (or deleted) meanwhile: the informer's view wins
        del self._pods[key]
        self._expiring.discard(key)
        self._unplace(state)

    def _finish(self, key: str) -> None:
        state = self._pods.get(key)
        if state is None or not state.assumed:
            return
        state.binding_finished = True
        if self.assumed_ttl > 0:
            state.deadline = self.clock.now() + self.assumed_ttl
            self._expiring.add(key)

    def _cleanup(self, now: float) -> list[PodState]:
        self._last_cleanup = now
        expired = []
        for key in list(self._expiring):
            state = self._pods.get(key)
            if state is None or not state.assumed:
                self._expiring.discard(key)
                continue
            if state.deadline is not None and now > state.deadline:
                expired.append(state)
                self._pod_gone(key)
        self.expired += len(expired)
        if expired and self._on_expired is not None:
            for state in expired:
                self._on_expired(state)
        return expired

    def _rebuild_snapshot(self) -> None:
        snapshot = Snapshot.build(self._nodes.values())
        for state in self._pods.values():
            if snapshot.index_of(state.node) is not None:
                snapshot.assume(state.info, state.node)
        self._snapshot = snapshot
        self._rebuild = False
        self.rebuilds += 1

    # ------------------------------------------------------------------ introspection
    def counts(self) -> dict[str, int]:
        """upstream ``scheduler_cache_size``: nodes, pods, assumed pods."""
        with self._lock:
            assumed = sum(1 for s in self._pods.values() if s.assumed)
            return {"nodes": len(self._nodes), "pods": len(self._pods), "assumed_pods": assumed}

    def node_names(self) -> list[str]:
        with self._lock:
            self._apply_pending()
            return list(self._nodes)

    def pods(self) -> dict[str, PodState]:
        with self._lock:
            self._apply_pending()
            return dict(self._pods)

    def dump(self) -> dict[str, Any]:
        """Upstream's cache dumper: every node with its requested/allocatable and pods, and the assumed pods."""
        with self._lock:
            self._apply_pending()
            snap = self._snapshot
            by_node: dict[str, list[str]] = {}
            for key, state in self._pods.items():
                by_node.setdefault(state.node, []).append(key)
            nodes = []
            for i, name in enumerate(snap.node_names):
                info = snap.node_info(i)
                nodes.append({"name": name, "allocatable": dict(info.allocatable), "requested": dict(info.requested),
                              "pods": sorted(by_node.get(name, ()))})
            assumed = sorted(k for k, s in self._pods.items() if s.assumed)
            ghosts = sorted(k for k, s in self._pods.items() if s.node not in self._nodes)
            return {"nodes": nodes, "assumedPods": assumed, "podsOnUnknownNodes": ghosts,
                    "staleness": self.staleness, "generation": snap.generation}


def compare_with_store(cache: Cache, nodes: Iterable[ObjView], pods: Iterable[ObjView],
                       pending: Iterable[ObjView] | None = None, *,
                       responsible: Callable[[ObjView], bool] | None = None) -> CacheDiff:
    """Compare the cache (and the queue's ``pending`` pods) with a fresh list from the store.

    Upstream ``CacheComparer.Compare``: nodes by name; bound, non-terminal
    pods must be cached on the same node; unbound pods this scheduler is
    ``responsible`` for must be pending in the queue (when ``pending`` is
    given), or assumed in the cache (a bind in flight). kemu adds a
    resource check: each cached node's requested cpu, memory and pod count
    must equal the sum over the store's pods bound there plus the cache's
    assumed pods not yet bound.
    """
    diff = CacheDiff()
    store_nodes = {_node_name(n): n for n in nodes}
    cached = cache.pods()
    cached_nodes = set(cache.node_names())
    diff.missed_nodes = sorted(set(store_nodes) - cached_nodes)
    diff.redundant_nodes = sorted(cached_nodes - set(store_nodes))

    store_pods = {_key(p): p for p in pods if not _is_terminal(p)}
    pending_keys = None if pending is None else {_key(p) for p in pending}
    for key, pod in store_pods.items():
        node = (pod.get("spec") or {}).get("nodeName") or ""
        state = cached.get(key)
        if node:
            if state is None:
                diff.missed_pods.append(key)
            elif state.node != node:
                diff.misplaced_pods.append((key, state.node, node))
        elif state is not None and state.assumed:
            continue  # bind in flight
        elif state is not None:
            diff.misplaced_pods.append((key, state.node, ""))
        elif pending_keys is not None and (responsible is None or responsible(pod)) and key not in pending_keys:
            diff.missed_pods.append(key)
    for key in cached:
        if key not in store_pods:
            diff.redundant_pods.append(key)
    if pending_keys is not None:
        diff.redundant_pods.extend(k for k in pending_keys if k not in store_pods)
    diff.missed_pods.sort()
    diff.redundant_pods.sort()

    # Requested resources per node, from the store's view.
    want: dict[str, dict[str, int]] = {}
    for key, pod in store_pods.items():
        node = (pod.get("spec") or {}).get("nodeName") or ""
        state = cached.get(key)
        if not node and state is not None and state.assumed:
            node = state.node
        if not node:
            continue
        acc = want.setdefault(node, {CPU: 0, MEMORY: 0, PODS: 0})
        requests = pod_requests(pod)
        acc[CPU] += requests.get(CPU, 0)
        acc[MEMORY] += requests.get(MEMORY, 0)
        acc[PODS] += 1
    snap = cache.snapshot()
    for i, name in enumerate(snap.node_names):
        acc = want.get(name, {CPU: 0, MEMORY: 0, PODS: 0})
        have = {CPU: int(snap.requested(CPU)[i]), MEMORY: int(snap.requested(MEMORY)[i]),
                PODS: int(snap.pod_counts[i])}
        for resource in (CPU, MEMORY, PODS):
            if have[resource] != acc[resource]:
                diff.resource_mismatches.append((name, resource, have[resource], acc[resource]))
    return diff
