"""A kubelet shard: every emulated node of one shard, run against the cluster through informers and batched writes.

One :class:`KubeletShard` plays the kubelet of hundreds or thousands of
nodes. It is plain Python - no Ray: ``actors/kubelet.py`` only gives it a
process and a tick loop - and it is a state machine driven from outside:

* **informers** (:mod:`emulator.informers`) feed it: one Node informer (every
  node; the shard keeps the ones it owns) and the sharded pod informer of each
  store node shard it owns (pods bound to its nodes only). Their handlers only
  queue what they see; everything else happens in
* :meth:`KubeletShard.tick`, which the shell calls about once a second of
  cluster time. One tick drains the queue, admits new pods, advances image
  pulls and init containers, runs the resource model for every container of
  every node at once (:class:`~emulator.kubelet.model.KubeletModel`: profiles,
  cgroups, OOM, restarts, eviction), then writes what changed - **in
  batches**: one pipelined round trip for all the tick's pod status updates,
  one for node status, one for lease renewals, one for events
  (:meth:`ServerCore.update_status_many`, ``create_many``), instead of a
  request per object.

The shard composes pkg/kubelet's managers, one module each, sharing the node and
pod records of :mod:`emulator.kubelet.state`:

* :mod:`~emulator.kubelet.nodestatus` - registration (pool nodes, adopted API
  nodes) and node status (``kubelet_node_status.go``, ``nodestatus/setters.go``);
* :mod:`~emulator.kubelet.nodelease` - a Lease per node renewed every 10 s
  (component-helpers ``lease``);
* :mod:`~emulator.kubelet.admission` - admit handlers (``lifecycle/predicate.go``);
* :mod:`~emulator.kubelet.pod_workers` - each pod from admission to deletion: init
  containers, start, restarts, graceful termination, recovery (``pod_workers.go``);
* :mod:`~emulator.kubelet.images` - pulls by size and the per-node image cache
  (``images/image_manager.go``);
* :mod:`~emulator.kubelet.pod_status` and :mod:`~emulator.kubelet.status_manager` -
  the status a pod reports (``generateAPIPodStatus``) and the batched pod and
  node status writes (``status/status_manager.go``), reconciled with the store
  every 10 s and after a failed write (:mod:`~emulator.kubelet.status_reconcile`);
* :mod:`~emulator.kubelet.usage_publisher` - usage for ``metrics.k8s.io`` every
  ``metrics_window``; :class:`~emulator.kubelet.events.EventRecorder` - events.

Ownership. The store hashes node names into ``node_shards`` pod streams
(:meth:`Store.shard_of`); kubelet shard ``i`` of ``K`` owns store shards
``s`` with ``s % K == i``, hence every node whose name hashes there, and reads
exactly those pod streams. A label selector (``node_selector``, default:
all) decides which of its nodes kemu manages.

Nodes at run time. Each tick registers the emulated cloud's booted instances the shard
owns and removes terminated ones (:mod:`~emulator.kubelet.cloudnodes`).
:meth:`KubeletShard.add_node` registers a node with the shard now (a Node manifest,
adopted as an API-created node is, or a node of a pool) and
:meth:`KubeletShard.remove_node` takes one away as a cloud provider deleting the
instance would: its lease stops, the Node object is deleted (the garbage collector
removes the Lease it owns) and its pods are handled as the pod garbage collector
handles pods of a node that no longer exists (``Failed`` with a ``DisruptionTarget``
condition, then deleted with grace 0) - kemu runs no pod GC controller.

The store away. A tick never fails because the store is unreachable: the model runs on,
and what it could not write is kept (pod and node status, leases, registrations) and written
by the first tick after the store is back, without a restart.

Recovery. A new shard object for the same index (an actor restart) re-lists
its nodes and pods through its informers and carries on: its pool nodes
already exist (nothing is registered twice), leases are picked up from the
store, and a pod whose status shows it was admitted (``status.hostIP`` set,
phase not terminal) is **restored**, not admitted again (see
:mod:`~emulator.kubelet.pod_workers`).

Threads. Informer handlers run on informer threads and only append to a
queue; :meth:`tick` runs on the caller's thread, and everything else the
shard holds is touched only there - or under the same lock, by
:meth:`add_node` / :meth:`remove_node` called from another thread (the actor's
method thread); :meth:`heartbeat` may run on a thread of its own (leases have
their own lock). :meth:`sync` lets a caller (a test, the actor's readiness check)
wait until the informers have delivered everything written so far.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from emulator import chaos, loadtargets
from emulator.api import errors
from emulator.api.kinds import NODE, POD
from emulator.api.meta import resource_version
from emulator.api.selectors import LabelSelector, parse_label_selector
from emulator.api.types import Obj
from emulator.clock import Clock, SystemClock, rfc3339
from emulator.informers import DeletedFinalStateUnknown, SharedInformerFactory
from emulator.kubelet import kubelet_metrics as km
from emulator.kubelet import load, queueworker
from emulator.kubelet import nodes as nd
from emulator.kubelet.admission import PodAdmission, ResolveCache
from emulator.kubelet.cloudnodes import CloudNodes
from emulator.kubelet.config import KubeletShardConfig, kubelet_shard_config
from emulator.kubelet.events import EventRecorder
from emulator.kubelet.images import ImageManager
from emulator.kubelet.model import KubeletModel
from emulator.kubelet.nodelease import NodeLeases
from emulator.kubelet.nodestatus import NodeStatus
from emulator.kubelet.pod_workers import PodWorkers
from emulator.kubelet.profiles import ProfileLibrary
from emulator.kubelet.state import STAGE_NAMES, TERMINAL, NodeRecord, ShardState, ShardStats
from emulator.kubelet.status_manager import StatusManager
from emulator.kubelet.status_reconcile import store_unreachable
from emulator.kubelet.usage_publisher import UsagePublisher
from emulator.server.core import ServerCore

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# The longest watch linger a shard asks of its process's multiplexer (see KubeletShard._watch_linger_ms).
KUBELET_LINGER_MS = 50.0

# How often a kubelet's store client retries a command while Redis cannot be reached. Few: the shard rides
# out an outage through its status reconciliation (failed writes stay dirty and go out at a later tick, as
# upstream's status manager retries at its next sync), not by blocking its tick for the store client's
# full back-off (StoreConfig.retries waits seconds per command, and a tick issues many).
KUBELET_STORE_RETRIES = 1

__all__ = ["KUBELET_STORE_RETRIES", "KubeletShard", "KubeletShardConfig", "ShardStats", "kubelet_shard_config"]


class KubeletShard:
    """The kubelets of every managed node of shard ``shard_index`` of ``shards`` (see the module docstring)."""

    def __init__(self, core: ServerCore, shard_index: int, shards: int,  # noqa: PLR0917 - the documented signature
                 config: KubeletShardConfig | None = None, clock: Clock | None = None,
                 profiles: ProfileLibrary | None = None) -> None:
        store = core.store
        if not 1 <= shards <= store.node_shards:
            raise ValueError(f"kubelet shards must be between 1 and the store's node_shards ({store.node_shards}), "
                             f"not {shards}")
        if not 0 <= shard_index < shards:
            raise ValueError(f"shard index {shard_index} out of range for {shards} shards")
        self.core = core
        self.store = store
        self.index = shard_index
        self.shards = shards
        self.config = config or KubeletShardConfig()
        self.clock = clock or core.clock or SystemClock()
        cfg = self.config
        if profiles is None:
            profiles = ProfileLibrary.load(*cfg.profile_paths, default=cfg.model.default_profile)
        self.profiles = profiles
        resolved = ResolveCache(profiles)
        self.model = KubeletModel(cfg.model, cast(ProfileLibrary, resolved))
        self.store_shards = [s for s in range(store.node_shards) if s % shards == shard_index]
        self.selector: LabelSelector = parse_label_selector(cfg.node_selector)
        self.events = EventRecorder(core, mode=cfg.events, burst=cfg.event_burst,
                                    refill_seconds=cfg.event_refill_seconds)
        self.metrics = km.ShardMetrics(shard_index)
        self.metrics.allocation = self.allocation
        # The managers, sharing the node and pod tables (touched only by the tick thread, or under _lock).
        self.state = ShardState(core, shard_index, cfg, self.model, self.events, self.metrics)
        self.stats: ShardStats = self.state.stats
        self.usage = UsagePublisher(self.state)
        self.images = ImageManager(self.state)
        self.admission = PodAdmission(self.state, resolved, self.images)
        self.metrics.devices = self.admission.devices.series  # DCGM-style per-device series
        self.workers = PodWorkers(self.state, self.admission, self.images, self.usage)
        self.node_status = NodeStatus(self.state, self.images)
        self.status = StatusManager(self.state, self.workers, self.node_status)
        self.leases = NodeLeases(self.state)
        self.cloud = CloudNodes(self)  # instances of the emulated cloud this shard boots and terminates
        # tick() holds it; add_node / remove_node take it, so they may be called from another thread.
        self._lock = threading.RLock()
        self._removed: set[str] = set()  # uids of nodes remove_node deleted, until the informer says so too
        self._started = False
        self._store_down: str | None = None  # what failed first while the store was unreachable
        self._io_failures = 0
        # Informer side.
        self._inbox: deque[tuple[str, str, Any]] = deque()
        self._seen_lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self._seen_event = threading.Event()
        self.factory: SharedInformerFactory | None = None
        self._registrations: list[Any] = []
        self._streams: dict[str, str] = {}  # informer name -> stream key

    # ---------------------------------------------------------------------------------- lifecycle

    def owns(self, node_name: str) -> bool:
        """Whether ``node_name`` hashes to this kubelet shard."""
        return self.store.shard_of(node_name) % self.shards == self.index

    def _watch_linger_ms(self) -> float:
        """How long the watch reader may batch events: 5 % of a tick's wall time, at most 50 ms.

        What the informers deliver waits in the inbox for the next tick anyway (every
        ``tick_interval`` cluster seconds), so a linger this short against the tick hardly moves
        when a pod is admitted, while it cuts the stream reads and informer wake-ups a shard pays
        per event burst (docs/performance.md).
        """
        speed = getattr(self.clock, "speed", 1.0) or 1.0
        return min(KUBELET_LINGER_MS, 0.05 * self.config.tick_interval / speed * 1000)

    def start(self, timeout: float = 60.0) -> None:
        """Start the informers, wait for their first lists, pick up leases, and queue pool node registration."""
        if self._started:
            return
        self.factory = SharedInformerFactory(self.store, clock=self.clock, linger_ms=self._watch_linger_ms())
        self.state.remember = self.factory.multiplexer.remember
        node_informer = self.factory.informer_for(NODE)
        self._streams["nodes"] = self.store.stream_key(NODE)
        # The handlers only queue for the tick (_enqueue): run on each informer's own processing thread,
        # they spare a thread wake-up per informer per watch batch (16 pod informers on a one-shard cluster).
        self._registrations.append(node_informer.add_event_handler(_Handler(self, "node", "nodes"), inline=True))
        for s in self.store_shards:
            informer = self.factory.pod_shard_informer(s)
            key = f"pods@{s}"
            self._streams[key] = self.store.stream_key(POD, s)
            self._registrations.append(informer.add_event_handler(_Handler(self, "pod", key), inline=True))
        self.factory.start()
        deadline = time.monotonic() + timeout
        for reg in self._registrations:
            while not reg.has_synced():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"kubelet shard {self.index}: informers did not sync in {timeout} s")
                self._seen_event.wait(0.01)
                self._seen_event.clear()
        self.state.now = self.clock.now()
        # Leases written by an earlier incarnation of this shard (recovery) or by nothing yet.
        self.leases.load(self.owns)
        known = node_informer.indexer
        self.node_status.queue_registration(
            nd.new_pool_node(pool, i, ordinal, allocatable_of=self.node_status.allocatable)
            for pool, i, ordinal in nd.pool_nodes(self.config.pools)
            if self.owns(pool.node_name(i)) and known.get_by_key(pool.node_name(i)) is None)
        km.collector().add(self.metrics)
        self._started = True

    def allocation(self) -> list[tuple[str, int, int, int, int]]:
        """Per hosted node: allocatable and requested cpu (millicores) and memory (bytes), for the metrics.

        Called from the metrics server's thread while the tick thread runs: it copies the node table
        (one C-level step under the GIL) and reads single dict entries, which are atomic.
        """
        out = []
        for node in list(self.state.nodes.values()):
            alloc, used = node.alloc, node.used
            out.append((node.name, alloc.get("cpu", 0), alloc.get("memory", 0), used.get("cpu", 0),
                        used.get("memory", 0)))
        return out

    def stop(self) -> None:
        """Stop the informers (nodes, leases and pods stay in the store: a new shard object carries on)."""
        km.collector().remove(self.metrics)
        load.collector().remove(self.model.load)
        if self.factory is not None:
            self.factory.shutdown()
            self.factory = None
        self._started = False

    def sync(self, timeout: float = 10.0) -> bool:
        """Wait until the informers delivered every event written to our streams so far (True) or time out."""
        deadline = time.monotonic() + timeout
        pipe = self.store.redis.pipeline(transaction=False)
        names = list(self._streams)
        for name in names:
            pipe.xrevrange(self._streams[name], count=1)
        targets: dict[str, int] = {}
        for name, reply in zip(names, pipe.execute(), strict=True):
            if reply:
                entry_id = reply[0][0]
                targets[name] = int((entry_id.decode() if isinstance(entry_id, bytes) else entry_id).split("-")[0])
        while True:
            synced = all(r.has_synced() for r in self._registrations)
            with self._seen_lock:
                behind = [n for n, rv in targets.items() if self._seen.get(n, 0) < rv]
            if synced and not behind:
                return True
            if time.monotonic() > deadline:
                return False
            self._seen_event.wait(0.005)
            self._seen_event.clear()

    # called on informer threads
    def _enqueue(self, kind: str, typ: str, obj: Any, stream: str) -> None:
        self._inbox.append((kind, typ, obj))
        target = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        rv = int(resource_version(target) or 0) if isinstance(target, dict) else 0
        with self._seen_lock:
            if rv > self._seen.get(stream, 0):
                self._seen[stream] = rv
        self._seen_event.set()

    # ---------------------------------------------------------------------------------------- tick

    def tick(self, now: float | None = None) -> ShardStats:
        """Advance every node and pod of the shard to ``now`` (cluster time) and write what changed."""
        if not self._started:
            raise RuntimeError("start() the shard before ticking it")
        with self._lock:
            return self._tick(now)

    def _tick(self, now: float | None) -> ShardStats:
        wall = time.perf_counter()
        now = self.clock.now() if now is None else now
        state = self.state
        state.now = now
        io = self._store_io
        failed_before = self._io_failures
        # Chaos state is read once per tick; with the store unreachable the last one read holds.
        read = io("reading chaos state", chaos.read, self.store.redis, self.store.config.prefix)
        if read is not None:
            state.chaos = read
        # A partitioned shard runs its model but writes nothing; what piles up (dirty pods, due
        # leases and node status, events) is written by the first tick after the restore.
        cut = self.index in state.chaos.partitioned
        if not cut:
            for obj in io("registering nodes", self.node_status.register) or ():
                self._host(obj, now, adopted=False)
            io("syncing cloud instances", self.cloud.sync, now)
            # Queue workers: what the pods ready since the last tick consumed up to now, before the
            # deletions seen below send SIGTERM (a terminating worker takes no new item).
            io("draining queues", queueworker.drain, self.model, self.store.redis, self.store.config.prefix, now)
        self._drain(now)
        io("renewing leases", self.heartbeat, now)  # first: never behind this tick's pod work
        self.workers.admit_incoming(now)
        self.workers.advance_timed(now)
        # Load targets: the model asks for each target's share once it knows which pods are ready
        # this tick (emulator.kubelet.load); a partitioned shard keeps the last shares.
        report = self.model.tick(now, None if cut else self._load_shares)
        self.workers.apply_report(report, now)
        self.node_status.apply_conditions(report.changed_nodes, now)
        self.workers.advance_kills(now)
        self.metrics.update(self.model, state.idx_names)
        if not cut:
            # The status manager: reconcile with the store when due, then write what changed. A
            # failed write stays queued, so an unreachable store delays statuses but loses none.
            self.status.reconcile(now)
            self.status.flush_pods(now)
            io("writing adopted nodes", self.node_status.flush_node_objects)
            self.status.flush_nodes(now)
            io("writing events", self._flush_events)
            io("publishing usage", self.usage.publish, now)
            if self._store_down is not None and self._io_failures == failed_before and not self.status.outage:
                log.warning("kubelet shard %d: the store is reachable again (%s had failed)", self.index,
                            self._store_down)
                self._store_down = None
        elapsed = time.perf_counter() - wall
        st = self.stats
        st.ticks += 1
        st.nodes = len(state.nodes)
        st.pods = len(state.pods)
        st.last_tick_seconds = elapsed
        st.max_tick_seconds = max(st.max_tick_seconds, elapsed)
        km.TICK_SECONDS.observe(elapsed)
        return st

    def _load_shares(self, ready: dict[str, int]) -> dict[str, float] | None:
        """The tick's load-target exchange (:func:`emulator.loadtargets.exchange`); None with the store away."""
        return self._store_io("exchanging load targets", loadtargets.exchange, self.store.redis,
                              self.store.config.prefix, self.index, ready, self.state.now)

    def _store_io(self, what: str, fn: Callable[..., _T], *args: Any) -> _T | None:
        """Run one step of the tick that talks to the store; None if the store is unreachable.

        A kubelet keeps running its pods while the API server is away: the tick carries on with
        the model, and what could not be written is kept for the next tick (status, leases,
        registrations) or dropped (events, as upstream's broadcaster drops them after its retries).
        """
        try:
            return fn(*args)
        except Exception as e:
            if not store_unreachable(e):
                raise
            self._io_failures += 1
            if self._store_down is None:
                log.warning("kubelet shard %d: %s failed, the store is unreachable: %s", self.index, what, e)
                self._store_down = what
            self.status.reconciler.write_failed()
            return None

    def heartbeat(self, now: float | None = None) -> int:
        """Create missing leases and renew the ones due (:mod:`~emulator.kubelet.nodelease`); returns renewals.

        :meth:`tick` calls it first thing; a shell may also call it from a thread of its own every
        second or so, so that heartbeats keep their period while a tick is busy with thousands of
        pods (upstream the lease controller is its own goroutine). Safe to call concurrently with
        :meth:`tick`.
        """
        if not self._started or self.index in self.state.chaos.partitioned:
            return 0  # chaos partition: the due renewals stay due, and go out at once after the restore
        return self.leases.heartbeat(self.clock.now() if now is None else now)

    def _flush_events(self) -> None:
        dropped = self.events.dropped
        written = self.events.flush()
        if written:
            km.EVENTS_WRITTEN.labels(str(self.index)).inc(written)
        if dropped > self.stats.events_dropped:
            km.EVENTS_DROPPED.labels(str(self.index)).inc(dropped - self.stats.events_dropped)
        self.stats.events_written += written
        self.stats.events_dropped = dropped

    # ------------------------------------------------------------------------------------- informers

    def _drain(self, now: float) -> None:
        inbox = self._inbox
        n = len(inbox)
        if not n:
            return
        items = [inbox.popleft() for _ in range(n)]
        for kind, typ, obj in items:  # nodes first: their pods may arrive in the same batch
            if kind == "node":
                self._on_node(typ, obj, now)
        for kind, typ, obj in items:
            if kind == "pod":
                self.workers.on_pod(typ, obj, now)

    def _on_node(self, typ: str, obj: Any, now: float) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        if not name or not self.owns(name):
            return
        if self._removed and meta.get("uid") in self._removed:
            if typ == "delete":  # remove_node deleted it; the informer has caught up
                self._removed.discard(meta.get("uid"))
            return  # an event from before remove_node: the node must not be hosted again
        node = self.state.nodes.get(name)
        if typ == "delete":
            if node is not None:
                self._unhost(node)
            return
        labels = meta.get("labels") or {}
        if node is None:
            if self.selector.matches(labels):
                self._host(obj, now, adopted=True)
            return
        if int(resource_version(obj) or 0) < int(resource_version(node.obj) or 0):
            return
        node.obj = obj
        if not self.selector.matches(labels):
            self._unhost(node)
            return
        self.node_status.refresh(node, obj)

    # ----------------------------------------------------------------------------------------- nodes

    def _host(self, obj: Obj, now: float, *, adopted: bool) -> NodeRecord | None:
        """Start running a node: its record, lease, status cadence, and the pods that waited for it."""
        node = self.node_status.initial_node(obj, now, adopted=adopted)
        if node is None:
            return None
        self.state.nodes[node.name] = node
        self.leases.node_added(node, now)
        self.status.node_added(node, now)
        self.workers.node_added(node.name)
        return node

    def _unhost(self, node: NodeRecord) -> None:
        """Stop running a node (deleted, or no longer selected): forget its pods; its lease is no longer renewed."""
        self.workers.node_removed(node)
        self.model.remove_node(node.name)
        self.state.nodes.pop(node.name, None)
        self.usage.node_gone(node.name)

    def add_node(self, node: Mapping[str, Any] | nd.NodePool, index: int | None = None) -> Obj:
        """Register a node with this shard now and return its Node object (a cloud provider's new instance).

        ``node`` is a Node manifest - created through the API and adopted (what it lacks is filled
        in, as for any API-created node), or adopted as it is if it exists already - or a node pool
        (a :class:`~emulator.kubelet.nodes.NodePool` or its config mapping) with ``index``, the pool
        node's number, registered as pool nodes are. The node must hash to this shard
        (:meth:`owns`) and match the shard's ``node_selector``. Its lease is created by the next
        heartbeat and its status written by the next tick; pods bound to it are admitted from the
        next tick on.
        """
        if not self._started:
            raise RuntimeError("start() the shard before adding nodes to it")
        if isinstance(node, nd.NodePool) or "metadata" not in node:
            pool = node if isinstance(node, nd.NodePool) else nd.NodePool.from_dict(node)
            if index is None or index < 0:
                raise ValueError(f"a node of pool {pool.name!r} needs its index (>= 0)")
            body, adopted = self._pool_node(pool, index), False
        else:
            body, adopted = dict(node), True
        meta = body.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            raise ValueError("the Node needs metadata.name")
        if not self.owns(name):
            raise ValueError(f"node {name} hashes to kubelet shard {self.store.shard_of(name) % self.shards}, "
                             f"not {self.index}")
        if not self.selector.matches(meta.get("labels") or {}):
            raise ValueError(f"node {name} does not match the kubelet node selector {self.config.node_selector!r}")
        with self._lock:
            now = self.clock.now()
            hosted = self.state.nodes.get(name)
            if hosted is not None:
                return hosted.obj
            try:
                created = self.core.create(NODE, {"apiVersion": "v1", "kind": "Node", **body})
                if not adopted:
                    self.stats.registered += 1
            except errors.StatusError as e:
                if e.reason != "AlreadyExists":
                    raise
                created, adopted = self.core.get(NODE, None, name), True
            self._removed.discard((created.get("metadata") or {}).get("uid"))
            record = self._host(created, now, adopted=adopted)
            if record is None:
                raise ValueError(f"kubelet shard {self.index} cannot run node {name} (see the log)")
            return record.obj

    def _pool_node(self, pool: nd.NodePool, index: int) -> Obj:
        """The Node of pool node ``index``: a configured one keeps its addresses; a new one hashes its own."""
        ordinal = next((o for p, i, o in nd.pool_nodes(self.config.pools) if p.name == pool.name and i == index),
                       None)
        body = nd.new_pool_node(pool, index, ordinal or 0, allocatable_of=self.node_status.allocatable)
        if ordinal is None:  # beyond the configured pools: podCIDR and IP as for an adopted node
            name = body["metadata"]["name"]
            cidr = nd.pod_cidr(None, name)
            body["spec"].update({"podCIDR": cidr, "podCIDRs": [cidr]})
            body["status"]["addresses"][0]["address"] = nd.internal_ip(name, None)
        return body

    def remove_node(self, name: str) -> bool:
        """Take a node away now, as a cloud provider deleting its instance; False if it did not exist.

        The shard stops running it (its lease is no longer renewed; the garbage collector removes
        the Lease with the Node that owns it), deletes the Node object, and does what the pod
        garbage collector does for pods bound to a node that no longer exists (``gcOrphaned``,
        without its 40 s quarantine: kemu runs no pod GC controller).
        """
        if not self.owns(name):
            raise ValueError(f"node {name} hashes to kubelet shard {self.store.shard_of(name) % self.shards}, "
                             f"not {self.index}")
        with self._lock:
            node = self.state.nodes.get(name)
            if node is not None:
                self._unhost(node)
            try:
                current = self.core.get(NODE, None, name)
            except errors.StatusError as e:
                if e.code != 404:
                    raise
                return node is not None
            uid = (current.get("metadata") or {}).get("uid")
            if uid:
                self._removed.add(uid)
            try:
                self.core.delete(NODE, None, name, preconditions={"uid": uid} if uid else None)
            except errors.StatusError as e:
                if e.code != 404:
                    raise
            _gc_orphaned(self.core, name, self.clock.now())
            return True

    # ----------------------------------------------------------------------------------------- reads

    def nodes(self) -> list[str]:
        """Names of the nodes this shard runs."""
        return sorted(self.state.nodes)

    def pod_stage(self, uid: str) -> str | None:
        rec = self.state.pods.get(uid)
        return None if rec is None else STAGE_NAMES[rec.stage]

    def pods(self) -> dict[str, tuple[str, str, str]]:
        """uid -> (namespace/name, node, stage) of every pod the shard handles."""
        return {uid: (f"{r.ns}/{r.name}", r.node, STAGE_NAMES[r.stage]) for uid, r in self.state.pods.items()}

    def health(self) -> dict[str, Any]:
        st = self.stats
        return {"shard": self.index, "shards": self.shards, "started": self._started, "nodes": len(self.state.nodes),
                "pods": len(self.state.pods), "ticks": st.ticks, "lastTickSeconds": round(st.last_tick_seconds, 4),
                "maxTickSeconds": round(st.max_tick_seconds, 4), "leaseRenewals": st.lease_renewals,
                "lateRenewals": st.late_renewals, "expiredLeases": st.expired_leases,
                "maxRenewGap": round(st.max_renew_gap, 3), "admitted": st.admitted, "rejected": st.rejected,
                "restored": st.restored, "registered": st.registered, "adopted": st.adopted,
                "podStatusWrites": st.pod_status_writes, "nodeStatusWrites": st.node_status_writes,
                "statusWriteErrors": st.status_write_errors, "reconcilePasses": st.reconcile_passes,
                "reconciled": st.reconciled, "lastReconcileSeconds": round(st.last_reconcile_seconds, 4),
                "events": st.events_written, "eventsDropped": st.events_dropped, "inbox": len(self._inbox)}


def _gc_orphaned(core: ServerCore, node_name: str, now: float) -> None:
    """Pods bound to a node that no longer exists: ``Failed`` + ``DisruptionTarget``, then deleted with grace 0.

    What ``pkg/controller/podgc/gc_controller.go`` ``gcOrphaned`` / ``markFailedAndDeletePodWithCondition``
    do (reason ``DeletionByPodGC``, message ``PodGC: node no longer exists``).
    """
    for pod in core.list(POD, field_selector=f"spec.nodeName={node_name}").items:
        meta = pod["metadata"]
        status = dict(pod.get("status") or {})
        if status.get("phase") not in TERMINAL:
            status["phase"] = "Failed"
        condition = {"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                     "lastTransitionTime": rfc3339(now), "reason": "DeletionByPodGC",
                     "message": "PodGC: node no longer exists"}
        status["conditions"] = [*(c for c in status.get("conditions") or () if c.get("type") != "DisruptionTarget"),
                                condition]
        try:
            # Unconditional (no resourceVersion): the server retries a conflicting write, as podgc's patch does.
            core.update_status(POD, {**pod, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"},
                                     "status": status})
            core.delete(POD, meta.get("namespace"), meta["name"], grace_period_seconds=0,
                        preconditions={"uid": meta.get("uid")})
        except errors.StatusError as e:
            if e.code not in (404, 409):
                log.warning("pod GC of %s/%s (node %s gone) failed: %s", meta.get("namespace"), meta["name"],
                            node_name, e.message)


class _Handler:
    """Informer handler: queue for the tick thread (and note how far each stream has been delivered)."""

    def __init__(self, shard: KubeletShard, kind: str, stream: str) -> None:
        self.shard = shard
        self.kind = kind
        self.stream = stream

    def on_add(self, obj: Obj, is_in_initial_list: bool) -> None:
        self.shard._enqueue(self.kind, "add", obj, self.stream)

    def on_update(self, old: Obj, new: Obj) -> None:
        self.shard._enqueue(self.kind, "update", new, self.stream)

    def on_delete(self, obj: Any) -> None:
        self.shard._enqueue(self.kind, "delete", obj, self.stream)
