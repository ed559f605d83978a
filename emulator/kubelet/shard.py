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

Ownership. The store hashes node names into ``node_shards`` pod streams
(:meth:`Store.shard_of`); kubelet shard ``i`` of ``K`` owns store shards
``s`` with ``s % K == i``, hence every node whose name hashes there, and reads
exactly those pod streams. A label selector (``node_selector``, default:
all) decides which of its nodes kemu manages.

Nodes (``pkg/kubelet/kubelet_node_status.go``, ``pkg/kubelet/nodelease``):

* pool nodes from configuration are registered by the shard that owns their
  name; Node objects created through the API are **adopted**, keeping what
  their manifest gives and filling in what is missing
  (:mod:`emulator.kubelet.nodes`);
* a Lease in ``kube-node-lease`` per node (holderIdentity = node,
  leaseDurationSeconds 40) renewed every 10 s of cluster time (a quarter of
  the duration, as upstream), renewals spread over the interval by name;
* node status at upstream cadence: checked every
  ``nodeStatusUpdateFrequency`` (10 s) and written when something changed
  (conditions, images, allocatable) or ``nodeStatusReportFrequency`` (5 min)
  has passed since the last write. Conditions MemoryPressure / DiskPressure /
  PIDPressure come from the eviction manager, Ready is True while the shard
  runs. While under pressure the node also gets the
  ``node.kubernetes.io/<memory|disk|pid>-pressure:NoSchedule`` taint, which
  upstream the node lifecycle controller adds (kemu has none yet).

Pods:

* **admission** when a pod bound to one of our nodes first appears, in
  creation order (``pkg/kubelet/lifecycle/predicate.go``): the node's pod
  count and the requests of the pods already admitted against allocatable
  (``OutOfpods``, ``OutOfcpu``, ``OutOfmemory``, ``OutOfephemeral-storage``,
  ``OutOf<extended>``; message ``Node didn't have enough resource: cpu,
  requested: 600, used: 600, capacity: 1000``), then node affinity / node
  selector (``NodeAffinity``), then NoExecute taints (``TaintToleration``);
  a pod whose behaviour annotations do not parse is rejected with
  ``UnexpectedAdmissionError``. A rejected pod goes ``Failed`` with the
  reason and ``Pod was rejected: <message>``, as the kubelet's ``rejectPod``
  does - this is what catches pods created with ``spec.nodeName`` preset,
  which skip the store's room check.
* **lifecycle**: sandbox (pod IP from the node's podCIDR, startTime) → for each
  init container: image pull, run for ``kemu.io/init-duration`` (default 1 s),
  exit 0 → image pulls of the app containers (and sidecars) → the model runs
  the containers (startup delay, usage, exits, OOM kills, CrashLoopBackOff,
  evictions) → ``Succeeded``/``Failed`` per the profile. Pod status follows
  upstream's shape: conditions PodReadyToStartContainers, Initialized, Ready,
  ContainersReady, PodScheduled; container statuses with state / lastState /
  ready / restartCount / imageID / containerID; hostIP(s), podIP(s),
  startTime.
* **image pulls** take ``pull_latency + size / pull_bandwidth`` seconds;
  sizes come from ``kemu.io/image-size[.<container>]`` annotations, the
  configured table, or the default. Pulls on one node are serialised
  (``serializeImagePulls: true``, upstream's default); a pulled image is
  remembered by the node and reported in ``status.images`` (largest first,
  at most 50), so the next pod with it starts faster and ImageLocality sees
  it. ``imagePullPolicy: Always`` re-checks a present image (a short pull);
  ``Never`` with the image absent leaves the container waiting in
  ``ErrImageNeverPull``.
* **graceful deletion**: when ``deletionTimestamp`` appears, running
  containers get ``Killing`` (``Stopping container app``) and stop after
  ``min(kemu.io/termination-delay, grace period)`` - exit 0 if the app
  stopped by itself in time, 137 when killed at the end of the grace period;
  the final status is written and the pod deleted with grace 0 (uid
  precondition), as the kubelet's status manager does.
* **events** (Pulling, Pulled, Created, Started, Killing, BackOff, Evicted,
  SystemOOM, node condition events, Starting, NodeReady ...) go through
  :class:`~emulator.kubelet.events.EventRecorder` (deduplicated,
  rate-limited, batched).

Recovery. A new shard object for the same index (an actor restart) re-lists
its nodes and pods through its informers and carries on: its pool nodes
already exist (nothing is registered twice), leases are picked up from the
store, and a pod whose status shows it was admitted (``status.hostIP`` set,
phase not terminal) is **restored**, not admitted again: same pod IP and
startTime, its running containers keep their ``startedAt`` (so usage
profiles continue where they were) and ``restartCount``. Simplifications: a
container that was waiting in back-off restarts at once; a pod that was
still pulling images starts its pulls over (images already pulled are
present).

Usage and metrics. Every ``metrics_window`` (15 s, metrics-server's
resolution) the shard publishes per-node and per-container CPU (average over
the window) and memory working set for ``metrics.k8s.io``
(:mod:`emulator.kubelet.usage`); Prometheus series are summed per node
(:mod:`emulator.kubelet.kubelet_metrics`).

Threads. Informer handlers run on informer threads and only append to a
queue; :meth:`tick` runs on the caller's thread, and everything else the
shard holds is touched only there. :meth:`sync` lets a caller (a test, the
actor's readiness check) wait until the informers have delivered everything
written so far.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import ipaddress
import logging
import math
import threading
import time
import zlib
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np

from emulator import chaos
from emulator.api import errors
from emulator.api.kinds import LEASE, NODE, POD
from emulator.api.pods import pod_requests
from emulator.api.quantity import QuantityError, to_int
from emulator.api.selectors import LabelSelector, parse_label_selector
from emulator.clock import Clock, SystemClock, parse_rfc3339, rfc3339
from emulator.informers import DeletedFinalStateUnknown, SharedInformerFactory
from emulator.kubelet import eviction as ev
from emulator.kubelet import kubelet_metrics as km
from emulator.kubelet import load, usage
from emulator.kubelet import nodes as nd
from emulator.kubelet.events import EventRecorder, ObjectRef, node_ref
from emulator.kubelet.model import KubeletConfig, KubeletModel, TickReport
from emulator.kubelet.profiles import PROFILE_ANNOTATION, PodBehaviour, ProfileError, ProfileLibrary, parse_duration
from emulator.scheduler.plugins.helper import RequiredNodeAffinity, find_untolerated_taint, taint_of
from emulator.server.core import ServerCore

log = logging.getLogger(__name__)

Obj = dict[str, Any]

__all__ = ["KubeletShard", "KubeletShardConfig", "ShardStats", "kubelet_shard_config"]

LEASE_NAMESPACE = "kube-node-lease"
INIT_DURATION_ANNOTATION = "kemu.io/init-duration"
IMAGE_SIZE_ANNOTATION = "kemu.io/image-size"
TERMINATION_DELAY_ANNOTATION = "kemu.io/termination-delay"
PRESSURE_TAINTS = {ev.MEMORY_PRESSURE: "node.kubernetes.io/memory-pressure",
                   ev.DISK_PRESSURE: "node.kubernetes.io/disk-pressure",
                   ev.PID_PRESSURE: "node.kubernetes.io/pid-pressure"}
_EVICTION_SIGNAL = {"memory": ev.MEMORY_AVAILABLE, "ephemeral-storage": ev.NODEFS_AVAILABLE, "pids": ev.PID_AVAILABLE}
_NATIVE_ORDER = ("cpu", "memory", "ephemeral-storage")
_REASON_OF = {"cpu": "OutOfcpu", "memory": "OutOfmemory", "ephemeral-storage": "OutOfephemeral-storage",
              "pods": "OutOfpods"}
_NODE_AFFINITY_DESC = "node(s) didn't match Pod's node affinity/selector"
_TAINT_DESC = "node(s) had untolerated taint(s)"
_TERMINAL = ("Succeeded", "Failed")
_POD_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")

# Pod stages.
NEW = 0
INIT_PULL = 1  # pulling the image of init container `step` (done at next_at)
INIT_RUN = 2  # init container `step` runs until next_at
APP_PULL = 3  # pulling the image of app container `step`
MODEL = 4  # containers run in the model
TERMINATING = 5  # deletion seen; containers stop at next_at
DONE = 6  # terminal status written (or being written); waits for the pod's deletion
BLOCKED = 7  # an image can never be pulled (ErrImageNeverPull)
_STAGE_NAMES = ("New", "InitPull", "InitRun", "AppPull", "Running", "Terminating", "Done", "Blocked")


# ----------------------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class KubeletShardConfig:
    """What every kubelet shard of a cluster is configured with (the ``kubelet`` and ``node_pools`` config keys)."""

    pools: tuple[nd.NodePool, ...] = ()
    node_selector: str = ""  # label selector of the nodes kemu runs kubelets for ("": all)
    kube_reserved: Mapping[str, str] = field(default_factory=dict)  # kubeReserved
    system_reserved: Mapping[str, str] = field(default_factory=dict)  # systemReserved
    model: KubeletConfig = field(default_factory=KubeletConfig)  # eviction thresholds, profiles seed, back-off...
    profile_paths: tuple[str, ...] = ()  # extra profile files or directories
    tick_interval: float = 1.0  # cluster seconds between ticks (the shell's loop)
    lease_duration_seconds: int = 40  # nodeLeaseDurationSeconds
    node_status_update_frequency: float = 10.0  # nodeStatusUpdateFrequency
    node_status_report_frequency: float = 300.0  # nodeStatusReportFrequency
    image_sizes: Mapping[str, str | int] = field(default_factory=dict)  # image reference -> size
    default_image_size: str | int = "100Mi"
    pull_bandwidth: str | int = "50Mi"  # bytes per second
    pull_latency: float = 0.5  # seconds per pull besides the transfer (registry round trips, unpacking)
    present_image_check: float = 0.2  # imagePullPolicy Always with the image present
    serialize_image_pulls: bool = True  # serializeImagePulls
    max_images: int = 50  # nodeStatusMaxImages
    init_duration: str = "1s"  # run time of an ordinary init container without kemu.io/init-duration
    termination_delay: str = "0s"  # how long an app takes to stop on SIGTERM (kemu.io/termination-delay)
    events: str = "all"  # all | warnings | none
    event_burst: int = 25
    event_refill_seconds: float = 300.0
    metrics_window: float = 15.0  # metrics.k8s.io resolution (metrics-server's default)
    write_batch: int = 1000  # objects per pipelined round trip
    # New pods admitted per tick; the rest wait for the next tick. Bounds a tick's work when thousands of
    # pods arrive at once, so heartbeats and the other pods' updates stay on time (upstream the pod
    # workers run beside the heartbeat; here one thread does both).
    max_admissions_per_tick: int = 2000

    @property
    def renew_interval(self) -> float:
        # nodelease: renewInterval = leaseDuration * 0.25 (pkg/kubelet/kubelet.go).
        return self.lease_duration_seconds * 0.25

    def total_nodes(self) -> int:
        return sum(p.count for p in self.pools)


_MODEL_KEYS = {"seed", "default_profile", "memory_qos", "memory_throttling_factor", "pod_pids_limit", "eviction_hard",
               "eviction_soft", "eviction_soft_grace_period", "eviction_pressure_transition_period",
               "backoff_initial", "backoff_max"}


def kubelet_shard_config(kubelet: Mapping[str, Any] | None = None,
                         pools: Iterable[Mapping[str, Any] | nd.NodePool] = ()) -> KubeletShardConfig:
    """Build the config from plain data (YAML): ``kubelet`` settings and a list of node pools.

    Keys of :class:`KubeletShardConfig` and of :class:`~emulator.kubelet.model.KubeletConfig`
    (``seed``, ``eviction_hard`` ...) may be mixed in ``kubelet``; ``-`` and ``_`` are the same.
    """
    values = {str(k).replace("-", "_"): v for k, v in (kubelet or {}).items()}
    model_values = {k: values.pop(k) for k in list(values) if k in _MODEL_KEYS}
    model = replace(KubeletConfig(), **model_values) if model_values else KubeletConfig()
    pool_list = tuple(p if isinstance(p, nd.NodePool) else nd.NodePool.from_dict(p, f"node pool {i}")
                      for i, p in enumerate(pools))
    nd.check_unique_pool_names(pool_list)
    known = {f for f in KubeletShardConfig.__dataclass_fields__ if f not in ("pools", "model")}
    unknown = sorted(set(values) - known)
    if unknown:
        raise nd.NodeConfigError(f"kubelet: unknown key(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(sorted(known | _MODEL_KEYS))}")
    if "profile_paths" in values:
        values["profile_paths"] = tuple(str(p) for p in values["profile_paths"] or ())
    cfg = KubeletShardConfig(pools=pool_list, model=model, **values)
    if cfg.events not in ("all", "warnings", "none"):
        raise nd.NodeConfigError("kubelet: events must be all, warnings or none")
    parse_label_selector(cfg.node_selector)
    if to_int(cfg.pull_bandwidth) <= 0:
        raise nd.NodeConfigError("kubelet: pull_bandwidth must be positive")
    return cfg


# ------------------------------------------------------------------------------------------- state


@dataclass(eq=False)
class _Node:
    name: str
    obj: Obj
    idx: int  # row in the model's node arrays
    alloc: dict[str, int]
    ip: str  # InternalIP
    net: ipaddress.IPv4Network | ipaddress.IPv6Network | None
    used: dict[str, int] = field(default_factory=dict)  # requests of admitted, unfinished pods
    pods: set[str] = field(default_factory=set)  # admitted, unfinished pod uids
    images: dict[str, int] = field(default_factory=dict)  # every name of every present image -> size
    image_entries: dict[str, Obj] = field(default_factory=dict)  # digest -> status.images entry
    pulling: dict[str, float] = field(default_factory=dict)  # normalized image -> pull done at
    pull_free_at: float = 0.0
    ips_used: set[int] = field(default_factory=set)
    ip_next: int = 2
    lease: Obj | None = None
    lease_due: float = 0.0
    last_renew: float | None = None
    status_due: float = 0.0
    last_report: float = -math.inf
    dirty: bool = True
    conditions: dict[str, tuple[bool, str]] = field(default_factory=dict)  # type -> (status, transition time)


@dataclass(slots=True)
class _Pull:
    """One EnsureImageExists: asked at ``asked``, transferring from ``begin`` (after queueing) to ``done``."""

    container: str
    image: str
    asked: float
    begin: float
    done: float
    size: int
    present: bool  # already on the node: nothing transferred
    init: bool  # an init container's image


@dataclass(eq=False)
class _Pod:
    uid: str
    ns: str
    name: str
    node: str
    obj: Obj
    seen_at: float
    created_at: float
    stage: int = NEW
    step: int = 0
    next_at: float = math.inf
    requests: dict[str, int] = field(default_factory=dict)
    ip: str = ""
    ip_index: int = -1
    start_time: str = ""
    init: list[Obj] = field(default_factory=list)  # ordinary init containers (spec order)
    apps: list[Obj] = field(default_factory=list)  # sidecars + app containers (the model's containers)
    sidecars: frozenset[str] = frozenset()
    init_states: list[Obj] = field(default_factory=list)  # per ordinary init container: its state
    created: set[str] = field(default_factory=set)  # app containers created (before the model runs them)
    pull: _Pull | None = None  # the image pull under way
    pull_seconds: float = 0.0  # time in image pulls (excluded from the start SLI)
    init_seconds: float = 0.0
    blocked: Obj | None = None  # waiting state of a container that cannot start
    conditions: dict[str, tuple[str, str]] = field(default_factory=dict)  # type -> (status, transition time)
    rows: list[tuple[str, int]] = field(default_factory=list)  # (container, model row) while in the model
    in_model: bool = False
    reported_ready: bool = False
    restored_at: float | None = None
    restored_last: dict[str, Obj] = field(default_factory=dict)
    termination_delay: float = 0.0
    kill_exit: int = 0
    final: Obj | None = None  # status to write when the pod is done (termination, rejection)
    delete_after_write: bool = False
    dirty: bool = True


@dataclass
class ShardStats:
    """Counters for tests, health checks and the benchmark."""

    ticks: int = 0
    nodes: int = 0
    pods: int = 0
    pods_running: int = 0
    admitted: int = 0
    rejected: int = 0
    restored: int = 0
    pod_status_writes: int = 0
    node_status_writes: int = 0
    lease_renewals: int = 0
    late_renewals: int = 0
    expired_leases: int = 0
    max_renew_gap: float = 0.0
    events_written: int = 0
    events_dropped: int = 0
    deletions: int = 0
    last_tick_seconds: float = 0.0
    max_tick_seconds: float = 0.0
    registered: int = 0
    adopted: int = 0


def _rv(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def micro_time(ts: float) -> str:
    """``metav1.MicroTime`` wire form (RFC 3339, microseconds), as Lease renewTime uses."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()`` of ``seconds`` truncated to milliseconds (as the kubelet prints pull times)."""
    ms = int(seconds * 1000 + 1e-6)
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    whole, frac = divmod(ms, 1000)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    sec_text = f"{secs}.{frac:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{sec_text}"
    if minutes:
        return f"{minutes}m{sec_text}"
    return sec_text


def _phase_of(h: str) -> float:
    """A stable fraction in [0, 1) from a name, to spread periodic work (lease renewals) over its interval."""
    return (zlib.crc32(h.encode()) % 10_000) / 10_000.0


def _container_id(uid: str, name: str, restarts: int) -> str:
    return "containerd://" + hashlib.blake2b(f"{uid}/{name}/{restarts}".encode(), digest_size=32).hexdigest()


# ------------------------------------------------------------------------------------------- the shard


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
        self._resolved = _ResolveCache(profiles)
        self.model = KubeletModel(cfg.model, cast(ProfileLibrary, self._resolved))
        self.store_shards = [s for s in range(store.node_shards) if s % shards == shard_index]
        self.selector: LabelSelector = parse_label_selector(cfg.node_selector)
        self._eviction_hard = ev.parse_thresholds(cfg.model.eviction_hard, hard=True)
        self._bandwidth = float(to_int(cfg.pull_bandwidth))
        self._default_image_size = to_int(cfg.default_image_size)
        self._image_sizes = {nd.normalize_image(k): to_int(v) for k, v in cfg.image_sizes.items()}
        self._image_repo_sizes = {k: to_int(v) for k, v in cfg.image_sizes.items() if ":" not in k.rsplit("/", 1)[-1]}
        self._init_duration = parse_duration(cfg.init_duration)
        self._termination_delay = parse_duration(cfg.termination_delay)
        self.events = EventRecorder(core, mode=cfg.events, burst=cfg.event_burst,
                                    refill_seconds=cfg.event_refill_seconds)
        self.metrics = km.ShardMetrics(shard_index)
        self.metrics.allocation = self.allocation
        self.stats = ShardStats()
        # State touched only by the tick thread.
        self._nodes: dict[str, _Node] = {}
        self._idx_names: list[str] = []  # model node index -> name
        self._pods: dict[str, _Pod] = {}
        self._incoming: dict[str, Obj] = {}  # uid -> pod seen but not admitted yet
        self._orphans: dict[str, dict[str, Obj]] = {}  # node name -> uid -> pods of nodes we do not host (yet)
        self._timed: list[tuple[float, int, str]] = []  # (next_at, seq, uid): pulls and init containers
        self._kills: list[tuple[float, int, str]] = []  # (kill at, seq, uid): terminating pods
        self._seq = 0
        # Leases are renewed by heartbeat(), which the shell may also call from its own thread (so a
        # long tick never delays them): everything lease-related is touched under this lock.
        self._lease_lock = threading.RLock()
        self._lease_heap: list[tuple[float, str]] = []
        self._status_heap: list[tuple[float, str]] = []
        self._leases: dict[str, Obj] = {}  # leases found at start, by node name
        self._pending_leases: list[str] = []  # nodes whose lease must be created
        self._pending_nodes: list[Obj] = []  # pool nodes to register
        self._adoptions: list[Obj] = []  # adopted nodes whose manifest needs filling in
        self._taint_changes: set[str] = set()
        self._dirty_pods: set[str] = set()
        self._gone_usage: list[tuple[str, str]] = []
        self._gone_nodes: list[str] = []
        self._next_usage: float | None = None
        self._last_usage: float | None = None
        self._now = 0.0
        self._started = False
        # Faults injected through emulator.chaos, read once per tick (heartbeat() on another thread
        # only reads the reference, swapped whole).
        self._chaos: chaos.ChaosState = chaos.NO_CHAOS
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

    def start(self, timeout: float = 60.0) -> None:
        """Start the informers, wait for their first lists, pick up leases, and queue pool node registration."""
        if self._started:
            return
        self.factory = SharedInformerFactory(self.store, clock=self.clock)
        node_informer = self.factory.informer_for(NODE)
        self._streams["nodes"] = self.store.stream_key(NODE)
        self._registrations.append(node_informer.add_event_handler(_Handler(self, "node", "nodes")))
        for s in self.store_shards:
            informer = self.factory.pod_shard_informer(s)
            key = f"pods@{s}"
            self._streams[key] = self.store.stream_key(POD, s)
            self._registrations.append(informer.add_event_handler(_Handler(self, "pod", key)))
        self.factory.start()
        deadline = time.monotonic() + timeout
        for reg in self._registrations:
            while not reg.has_synced():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"kubelet shard {self.index}: informers did not sync in {timeout} s")
                self._seen_event.wait(0.01)
                self._seen_event.clear()
        now = self.clock.now()
        self._now = now
        # Leases written by an earlier incarnation of this shard (recovery) or by nothing yet.
        for lease in self.core.list(LEASE, LEASE_NAMESPACE).items:
            name = lease["metadata"]["name"]
            if self.owns(name):
                self._leases[name] = lease
        known = node_informer.indexer
        for pool, i, ordinal in nd.pool_nodes(self.config.pools):
            name = pool.node_name(i)
            if self.owns(name) and known.get_by_key(name) is None:
                self._pending_nodes.append(nd.new_pool_node(pool, i, ordinal, allocatable_of=self._allocatable))
        km.collector().add(self.metrics)
        self._started = True

    def allocation(self) -> list[tuple[str, int, int, int, int]]:
        """Per hosted node: allocatable and requested cpu (millicores) and memory (bytes), for the metrics.

        Called from the metrics server's thread while the tick thread runs: it copies the node table
        (one C-level step under the GIL) and reads single dict entries, which are atomic.
        """
        out = []
        for node in list(self._nodes.values()):
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
        rv = _rv(target) if isinstance(target, dict) else 0
        with self._seen_lock:
            if rv > self._seen.get(stream, 0):
                self._seen[stream] = rv
        self._seen_event.set()

    # ---------------------------------------------------------------------------------------- tick

    def tick(self, now: float | None = None) -> ShardStats:
        """Advance every node and pod of the shard to ``now`` (cluster time) and write what changed."""
        if not self._started:
            raise RuntimeError("start() the shard before ticking it")
        wall = time.perf_counter()
        now = self.clock.now() if now is None else now
        self._now = now
        self._chaos = chaos.read(self.store.redis, self.store.config.prefix)
        # A partitioned shard runs its model but writes nothing; what piles up (dirty pods, due
        # leases and node status, events) is written by the first tick after the restore.
        cut = self.index in self._chaos.partitioned
        if not cut:
            self._register_pool_nodes(now)
        self._drain(now)
        self.heartbeat(now)  # first: never behind this tick's pod work
        self._admit_incoming(now)
        self._advance_timed(now)
        if not cut:  # load targets: share each target's rate among its ready pods (emulator.kubelet.load)
            load.exchange(self.model, self.store.redis, self.store.config.prefix, self.index, now)
        report = self.model.tick(now)
        self._apply_report(report, now)
        self._advance_kills(now)
        self.metrics.update(self.model, self._idx_names)
        if not cut:
            self._flush_pods(now)
            self._flush_nodes(now)
            self._flush_events()
            self._publish_usage(now)
        elapsed = time.perf_counter() - wall
        st = self.stats
        st.ticks += 1
        st.nodes = len(self._nodes)
        st.pods = len(self._pods)
        st.last_tick_seconds = elapsed
        st.max_tick_seconds = max(st.max_tick_seconds, elapsed)
        km.TICK_SECONDS.observe(elapsed)
        return st

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
                self._on_pod(typ, obj, now)

    def _on_node(self, typ: str, obj: Any, now: float) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        name = (obj.get("metadata") or {}).get("name", "")
        if not name or not self.owns(name):
            return
        node = self._nodes.get(name)
        if typ == "delete":
            if node is not None:
                self._unhost(node)
            return
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if node is None:
            if self.selector.matches(labels):
                self._host(obj, now, adopted=True)
            return
        if _rv(obj) < _rv(node.obj):
            return
        node.obj = obj
        if not self.selector.matches(labels):
            self._unhost(node)
            return
        alloc = self._alloc_of(obj)
        if alloc != node.alloc:
            node.alloc = alloc
            node.dirty = True

    def _on_pod(self, typ: str, obj: Any, now: float) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        meta = obj.get("metadata") or {}
        uid = meta.get("uid") or ""
        rec = self._pods.get(uid)
        if typ == "delete":
            self._incoming.pop(uid, None)
            node_name = (obj.get("spec") or {}).get("nodeName") or ""
            self._orphans.get(node_name, {}).pop(uid, None)
            if rec is not None:
                self._forget_pod(rec)
            return
        if rec is not None:
            if _rv(obj) >= _rv(rec.obj):
                rec.obj = obj
            if meta.get("deletionTimestamp") and rec.stage not in (TERMINATING, DONE):
                self._begin_termination(rec, now)
            return
        status = obj.get("status") or {}
        if status.get("phase") in _TERMINAL:
            self._incoming.pop(uid, None)
            return
        node_name = (obj.get("spec") or {}).get("nodeName") or ""
        if node_name not in self._nodes:
            self._orphans.setdefault(node_name, {})[uid] = obj
            return
        self._incoming[uid] = obj

    # ----------------------------------------------------------------------------------------- nodes

    def _allocatable(self, capacity: Mapping[str, Any]) -> dict[str, str]:
        cfg = self.config
        return nd.allocatable(capacity, kube_reserved=cfg.kube_reserved, system_reserved=cfg.system_reserved,
                              eviction_hard=self._eviction_hard)

    @staticmethod
    def _alloc_of(obj: Mapping[str, Any]) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, value in ((obj.get("status") or {}).get("allocatable") or {}).items():
            try:
                out[name] = nd.resource_amount(name, value)
            except QuantityError:
                continue
        return out

    def _default_capacity(self) -> dict[str, str]:
        return dict(nd.INSTANCE_TYPES[nd.DEFAULT_INSTANCE_TYPE])

    def _register_pool_nodes(self, now: float) -> None:
        if not self._pending_nodes:
            return
        pending, self._pending_nodes = self._pending_nodes, []
        batch = self.config.write_batch
        for start in range(0, len(pending), batch):
            chunk = pending[start:start + batch]
            for body, result in zip(chunk, self.core.create_many(NODE, chunk), strict=True):
                if isinstance(result, errors.StatusError):
                    if result.reason != "AlreadyExists":
                        log.warning("kubelet shard %d: registering node %s failed: %s", self.index,
                                    body["metadata"]["name"], result.message)
                    continue  # it exists: the informer brings it
                self.stats.registered += 1
                self._host(result, now, adopted=False)

    def _host(self, obj: Obj, now: float, *, adopted: bool) -> None:
        name = obj["metadata"]["name"]
        if adopted:
            completed = nd.complete_node(obj, default_capacity=self._default_capacity(),
                                         allocatable_of=self._allocatable)
            if completed is not None:
                self._adoptions.append(completed)
                obj = completed
            self.stats.adopted += 1
        try:
            idx = self.model.add_node(obj)
        except (ValueError, QuantityError, ProfileError) as e:
            log.warning("kubelet shard %d: cannot run node %s: %s", self.index, name, e)
            return
        while len(self._idx_names) <= idx:
            self._idx_names.append("")
        self._idx_names[idx] = name
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        ip = next((a.get("address", "") for a in status.get("addresses") or () if a.get("type") == "InternalIP"),
                  nd.internal_ip(name, None))
        net = None
        if spec.get("podCIDR"):
            try:
                net = ipaddress.ip_network(spec["podCIDR"], strict=False)
            except ValueError:
                net = None
        node = _Node(name, obj, idx, self._alloc_of(obj), ip, net)
        for entry in status.get("images") or ():
            self._remember_image(node, entry)
        # A node run before (a restarted shard) keeps its transition times where nothing changed.
        stamp = rfc3339(now)
        previous = {c.get("type"): c for c in status.get("conditions") or ()}

        def since(ctype: str, wanted: str) -> str:
            cond = previous.get(ctype) or {}
            return cond.get("lastTransitionTime") or stamp if cond.get("status") == wanted else stamp

        node.conditions = {c: (False, since(c, "False")) for c in ev.CONDITIONS}
        node.conditions["Ready"] = (True, since("Ready", "True"))
        self._nodes[name] = node
        interval = self.config.renew_interval
        with self._lease_lock:
            lease = self._leases.pop(name, None)
            if lease is not None:
                node.lease = lease
                renew = (lease.get("spec") or {}).get("renewTime")
                last = parse_rfc3339(renew) if renew else now - interval
                node.last_renew = last
                node.lease_due = min(last + interval, now + interval * _phase_of(name))
            else:
                self._pending_leases.append(name)
                node.lease_due = now + interval * (0.5 + 0.5 * _phase_of(name))
            heapq.heappush(self._lease_heap, (node.lease_due, name))
        # First status write right away (conditions, heartbeat), then on the update cadence.
        node.status_due = now
        node.dirty = True
        heapq.heappush(self._status_heap, (node.status_due, name))
        ref = node_ref(name)
        if not adopted or not any(c.get("type") == "Ready" for c in status.get("conditions") or ()):
            self.events.record(ref, "Normal", "Starting", "Starting kubelet.", when=now, host=name)
            self.events.record(ref, "Normal", "NodeReady", f"Node {name} status is now: NodeReady", when=now,
                               host=name)
        for uid, pod in self._orphans.pop(name, {}).items():
            self._incoming[uid] = pod

    def _unhost(self, node: _Node) -> None:
        for uid in list(node.pods):
            rec = self._pods.get(uid)
            if rec is not None:
                self._forget_pod(rec)
        for rec in [r for r in self._pods.values() if r.node == node.name]:
            self._forget_pod(rec)
        self.model.remove_node(node.name)
        self._nodes.pop(node.name, None)
        self._gone_nodes.append(node.name)

    def _remember_image(self, node: _Node, entry: Mapping[str, Any]) -> None:
        names = [str(n) for n in entry.get("names") or ()]
        if not names:
            return
        size = int(entry.get("sizeBytes") or 0)
        node.image_entries[names[0]] = {"names": names, "sizeBytes": size}
        for name in names:
            node.images[name] = size

    def _image_present(self, node: _Node, image: str) -> bool:
        return nd.normalize_image(image) in node.images or nd.qualified_image(image) in node.images

    # ------------------------------------------------------------------------------------ admission

    def _admit_incoming(self, now: float) -> None:
        if not self._incoming:
            return
        # HandlePodAdditions admits in creation order (creationTimestamp has 1 s resolution: then by rv).
        incoming = sorted(self._incoming.values(),
                          key=lambda p: ((p.get("metadata") or {}).get("creationTimestamp") or "", _rv(p)))
        if self._chaos.broken:
            # chaos break-runtime: the sandbox never comes up, so the pod is never admitted and stays
            # Pending (it is kept in _incoming and starts once the runtime is restored).
            incoming = [p for p in incoming if (p.get("spec") or {}).get("nodeName") not in self._chaos.broken]
        limit = max(1, self.config.max_admissions_per_tick)
        for pod in incoming[:limit]:
            self._incoming.pop(pod["metadata"].get("uid") or "", None)
            self._admit(pod, now)

    def _new_record(self, pod: Obj, node: _Node, now: float) -> _Pod:
        meta = pod["metadata"]
        created = meta.get("creationTimestamp")
        rec = _Pod(meta["uid"], meta.get("namespace") or "default", meta["name"], node.name, pod, now,
                   parse_rfc3339(created) if created else now)
        spec = pod.get("spec") or {}
        inits = list(spec.get("initContainers") or ())
        rec.init = [c for c in inits if c.get("restartPolicy") != "Always"]
        sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
        rec.sidecars = frozenset(str(c.get("name")) for c in sidecars)
        rec.apps = [*sidecars, *(spec.get("containers") or ())]
        rec.init_states = [{"waiting": {"reason": "PodInitializing"}} for _ in rec.init]
        return rec

    def _admit(self, pod: Obj, now: float) -> None:
        spec = pod.get("spec") or {}
        node = self._nodes.get(spec.get("nodeName") or "")
        if node is None:
            return
        rec = self._new_record(pod, node, now)
        self._pods[rec.uid] = rec
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        if meta.get("deletionTimestamp"):
            # Deleted before it ever ran here: nothing to stop; confirm the deletion.
            rec.stage = DONE
            rec.delete_after_write = True
            rec.final = None
            self._dirty_pods.add(rec.uid)
            return
        if status.get("hostIP") and status.get("phase") not in _TERMINAL:
            self._restore(rec, node, now)
            return
        rejection = self._admission_check(rec, node)
        if rejection is None:
            try:
                self._parse_behaviour(rec, node)
            except (ProfileError, ValueError, QuantityError) as e:
                rejection = ("UnexpectedAdmissionError", f"Allocate failed due to {e}, which is unexpected")
        if rejection is not None:
            self._reject(rec, *rejection, now=now)
            return
        if not self._allocate_ip(rec, node):
            self._reject(rec, "UnexpectedAdmissionError", "Allocate failed due to no free pod IP on the node, "
                         "which is unexpected", now=now)
            return
        self._account(rec, node)
        self.stats.admitted += 1
        rec.start_time = rfc3339(now)
        self._start_pipeline(rec, node, now)

    def _admission_check(self, rec: _Pod, node: _Node) -> tuple[str, str] | None:
        """The kubelet's ``generalFilter``: resources (pods first), node affinity, NoExecute taints."""
        pod = rec.obj
        alloc, used = node.alloc, node.used
        allowed_pods = alloc.get("pods", 110)
        if len(node.pods) + 1 > allowed_pods:
            return "OutOfpods", (f"Node didn't have enough resource: pods, requested: 1, used: {len(node.pods)}, "
                                 f"capacity: {allowed_pods}")
        rec.requests = {k: v for k, v in pod_requests(pod).items() if v}
        names = [r for r in _NATIVE_ORDER if r in rec.requests]
        names += sorted(r for r in rec.requests if r not in _NATIVE_ORDER)
        for name in names:
            want = rec.requests[name]
            if name not in _NATIVE_ORDER and name not in alloc:
                continue  # removeMissingExtendedResources: cluster-level resources are not the node's business
            have, taken = alloc.get(name, 0), used.get(name, 0)
            if want > have - taken:
                reason = _REASON_OF.get(name, f"OutOf{name}")
                return reason, (f"Node didn't have enough resource: {name}, requested: {want}, used: {taken}, "
                                f"capacity: {have}")
        spec = pod.get("spec") or {}
        labels = (node.obj.get("metadata") or {}).get("labels") or {}
        affinity = RequiredNodeAffinity.of(spec.get("nodeSelector") or {}, spec.get("affinity"))
        if not affinity.matches(labels, node.name):
            return "NodeAffinity", f"Predicate NodeAffinity failed: {_NODE_AFFINITY_DESC}"
        taints = [taint_of(t) for t in (node.obj.get("spec") or {}).get("taints") or ()]
        if taints and find_untolerated_taint(taints, spec.get("tolerations") or [], frozenset({"NoExecute"})):
            return "TaintToleration", f"Predicate TaintToleration failed: {_TAINT_DESC}"
        return None

    def _parse_behaviour(self, rec: _Pod, node: _Node) -> None:
        """Check the pod's behaviour annotations now (admission), not when its containers are created."""
        annotations = (rec.obj.get("metadata") or {}).get("annotations") or {}
        node_default = ((node.obj.get("metadata") or {}).get("annotations") or {}).get(PROFILE_ANNOTATION)
        behaviour = self.profiles.resolve(rec.obj, seed=self.model.config.seed, default=node_default)
        self._resolved.keep(behaviour)  # the model resolves it again when the containers are created
        text = annotations.get(TERMINATION_DELAY_ANNOTATION)
        rec.termination_delay = parse_duration(text) if text else self._termination_delay
        for c in rec.init:
            self._init_duration_of(rec, c)
        for c in [*rec.init, *rec.apps]:
            self._image_size_of(rec, c)

    def _init_duration_of(self, rec: _Pod, container: Mapping[str, Any]) -> float:
        annotations = (rec.obj.get("metadata") or {}).get("annotations") or {}
        text = annotations.get(f"{INIT_DURATION_ANNOTATION}.{container.get('name')}") or annotations.get(
            INIT_DURATION_ANNOTATION)
        return parse_duration(text) if text else self._init_duration

    def _image_size_of(self, rec: _Pod, container: Mapping[str, Any]) -> int:
        annotations = (rec.obj.get("metadata") or {}).get("annotations") or {}
        text = annotations.get(f"{IMAGE_SIZE_ANNOTATION}.{container.get('name')}") or annotations.get(
            IMAGE_SIZE_ANNOTATION)
        if text:
            return to_int(text)
        # The configured table: the image as written (tag defaulted), else its repository at any tag.
        norm = nd.normalize_image(str(container.get("image") or ""))
        if norm in self._image_sizes:
            return self._image_sizes[norm]
        repo = norm.split("@", 1)[0] if "@" in norm else norm[: norm.rfind(":")]
        return self._image_repo_sizes.get(repo, self._default_image_size)

    def _reject(self, rec: _Pod, reason: str, message: str, *, now: float) -> None:
        """``rejectPod``: Warning event and a Failed status with the reason."""
        self.stats.rejected += 1
        km.ADMISSION_REJECTIONS.labels(str(self.index), reason).inc()
        self._pod_event(rec, "Warning", reason, message, at=now)
        status = dict(rec.obj.get("status") or {})
        status.update({"phase": "Failed", "reason": reason, "message": f"Pod was rejected: {message}"})
        rec.final = status
        rec.stage = DONE
        self._dirty_pods.add(rec.uid)

    def _account(self, rec: _Pod, node: _Node) -> None:
        node.pods.add(rec.uid)
        for name, amount in rec.requests.items():
            node.used[name] = node.used.get(name, 0) + amount

    def _release(self, rec: _Pod) -> None:
        node = self._nodes.get(rec.node)
        if node is None or rec.uid not in node.pods:
            return
        node.pods.discard(rec.uid)
        for name, amount in rec.requests.items():
            node.used[name] = node.used.get(name, 0) - amount
        if rec.ip_index >= 0:
            node.ips_used.discard(rec.ip_index)

    def _allocate_ip(self, rec: _Pod, node: _Node, wanted: str | None = None) -> bool:
        net = node.net
        if net is None:
            return True  # no podCIDR: no pod IP (host-network-like), as a kubelet without CNI ranges
        last = net.num_addresses - 2
        if wanted:
            try:
                index = int(ipaddress.ip_address(wanted)) - int(net.network_address)
            except ValueError:
                index = -1
            if 0 < index <= last and index not in node.ips_used:
                node.ips_used.add(index)
                rec.ip_index, rec.ip = index, wanted
                return True
        for _ in range(max(last - 1, 0)):
            index = node.ip_next
            node.ip_next = index + 1 if index < last else 2
            if index not in node.ips_used:
                node.ips_used.add(index)
                rec.ip_index = index
                rec.ip = str(net.network_address + index)
                return True
        return False

    # ------------------------------------------------------------------------------ start pipeline

    def _start_pipeline(self, rec: _Pod, node: _Node, t: float) -> None:
        if rec.init:
            rec.stage, rec.step = INIT_PULL, 0
            self._begin_pull(rec, node, rec.init[0], t, init=True)
        else:
            rec.stage, rec.step = APP_PULL, 0
            if rec.apps:
                self._begin_pull(rec, node, rec.apps[0], t, init=False)
            else:
                self._run_in_model(rec, node, t)
        self._dirty_pods.add(rec.uid)
        self._schedule(rec)

    def _schedule(self, rec: _Pod) -> None:
        if rec.stage in (INIT_PULL, INIT_RUN, APP_PULL) and math.isfinite(rec.next_at):
            self._seq += 1
            heapq.heappush(self._timed, (rec.next_at, self._seq, rec.uid))

    def _begin_pull(self, rec: _Pod, node: _Node, container: Mapping[str, Any], t: float, *, init: bool) -> None:
        """``EnsureImageExists`` for one container at time ``t``: when the image will be there."""
        name = str(container.get("name"))
        image = str(container.get("image") or "")
        policy = container.get("imagePullPolicy") or "IfNotPresent"
        norm = nd.normalize_image(image)
        present = self._image_present(node, image)
        size = self._image_size_of(rec, container)
        if policy == "Never" and not present:
            rec.stage = BLOCKED
            rec.next_at = math.inf
            message = f'Container image "{image}" is not present with pull policy of Never'
            rec.blocked = {"name": name, "init": init, "waiting": {"reason": "ErrImageNeverPull", "message": message}}
            self._pod_event(rec, "Warning", "ErrImageNeverPull", message, at=t, container=name, init=init)
            return
        if present and policy != "Always":
            rec.pull = _Pull(name, image, t, t, t, size, True, init)
            rec.next_at = t
            return
        in_flight = node.pulling.get(norm)
        if in_flight is not None and in_flight > t:
            begin = done = in_flight  # another pod is pulling it: wait for that pull, then it is present
        else:
            duration = self.config.present_image_check if present else (
                self.config.pull_latency + size / self._bandwidth)
            begin = max(t, node.pull_free_at) if self.config.serialize_image_pulls else t
            done = begin + duration
            if self.config.serialize_image_pulls:
                node.pull_free_at = done
            node.pulling[norm] = done
        self._pod_event(rec, "Normal", "Pulling", f'Pulling image "{image}"', at=t, container=name, init=init)
        rec.pull = _Pull(name, image, t, begin, done, size, False, init)
        rec.next_at = done

    def _finish_pull(self, rec: _Pod, node: _Node) -> None:
        pull = rec.pull
        assert pull is not None
        rec.pull = None
        if pull.present:
            self._pod_event(rec, "Normal", "Pulled", f'Container image "{pull.image}" already present on machine',
                            at=pull.done, container=pull.container, init=pull.init)
            return
        norm = nd.normalize_image(pull.image)
        if node.pulling.get(norm) == pull.done:
            node.pulling.pop(norm, None)
        if not self._image_present(node, pull.image):
            self._remember_image(node, nd.image_entry(pull.image, pull.size))
            node.dirty = True
        waited = pull.done - pull.asked
        rec.pull_seconds += waited
        # images.go: "Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes."
        self._pod_event(rec, "Normal", "Pulled",
                        f'Successfully pulled image "{pull.image}" in {go_duration(pull.done - pull.begin)} '
                        f"({go_duration(waited)} including waiting). Image size: {pull.size} bytes.",
                        at=pull.done, container=pull.container, init=pull.init)

    def _advance_timed(self, now: float) -> None:
        heap = self._timed
        while heap and heap[0][0] <= now:
            t, _, uid = heapq.heappop(heap)
            rec = self._pods.get(uid)
            if rec is None or rec.next_at != t or rec.stage not in (INIT_PULL, INIT_RUN, APP_PULL):
                continue
            node = self._nodes.get(rec.node)
            if node is None:
                continue
            self._step(rec, node, t)
            self._dirty_pods.add(uid)
            self._schedule(rec)

    def _step(self, rec: _Pod, node: _Node, t: float) -> None:
        """Everything of the pod's start pipeline that is due at ``t`` (several steps may be)."""
        while rec.next_at <= t and rec.stage in (INIT_PULL, INIT_RUN, APP_PULL):
            at = rec.next_at
            if rec.stage == INIT_PULL:
                self._finish_pull(rec, node)
                c = rec.init[rec.step]
                name = str(c.get("name"))
                self._pod_event(rec, "Normal", "Created", f"Created container: {name}", at=at, container=name,
                                init=True)
                self._pod_event(rec, "Normal", "Started", f"Started container {name}", at=at, container=name,
                                init=True)
                rec.init_states[rec.step] = {"running": {"startedAt": rfc3339(at)}}
                rec.stage = INIT_RUN
                duration = self._init_duration_of(rec, c)
                rec.init_seconds += duration
                rec.next_at = at + duration
            elif rec.stage == INIT_RUN:
                started = rec.init_states[rec.step].get("running", {}).get("startedAt") or rfc3339(at)
                rec.init_states[rec.step] = {"terminated": {"exitCode": 0, "reason": "Completed",
                                                            "startedAt": started, "finishedAt": rfc3339(at)}}
                rec.step += 1
                if rec.step < len(rec.init):
                    rec.stage = INIT_PULL
                    self._begin_pull(rec, node, rec.init[rec.step], at, init=True)
                else:
                    rec.stage, rec.step = APP_PULL, 0
                    if rec.apps:
                        self._begin_pull(rec, node, rec.apps[0], at, init=False)
                    else:
                        self._run_in_model(rec, node, at)
            else:  # APP_PULL
                self._finish_pull(rec, node)
                name = str(rec.apps[rec.step].get("name"))
                self._pod_event(rec, "Normal", "Created", f"Created container: {name}", at=at, container=name)
                rec.created.add(name)
                rec.step += 1
                if rec.step < len(rec.apps):
                    self._begin_pull(rec, node, rec.apps[rec.step], at, init=False)
                else:
                    self._run_in_model(rec, node, at)

    def _run_in_model(self, rec: _Pod, node: _Node, t: float) -> None:
        """All images are there: hand the containers to the model (it applies the startup delay)."""
        try:
            self.model.add_pod(rec.obj, t, node=node.name)
        except (ProfileError, KeyError, ValueError) as e:  # checked at admission; a changed node profile can do it
            log.warning("kubelet shard %d: pod %s/%s cannot run: %s", self.index, rec.ns, rec.name, e)
            rec.stage, rec.next_at = BLOCKED, math.inf
            rec.blocked = {"name": str(rec.apps[0].get("name")) if rec.apps else "", "init": False,
                           "waiting": {"reason": "CreateContainerConfigError", "message": str(e)}}
            return
        rec.in_model = True
        rec.stage, rec.next_at = MODEL, math.inf
        rows = self.model.container_rows(rec.uid)
        rec.rows = list(rows.items())
        self.metrics.forget_rows(list(rows.values()))

    # -------------------------------------------------------------------------------------- recovery

    def _restore(self, rec: _Pod, node: _Node, now: float) -> None:
        """Take over a pod an earlier incarnation of this shard admitted (see the module docstring)."""
        pod = rec.obj
        status = pod.get("status") or {}
        rec.requests = {k: v for k, v in pod_requests(pod).items() if v}
        self._account(rec, node)
        self._allocate_ip(rec, node, wanted=status.get("podIP"))
        rec.start_time = status.get("startTime") or rfc3339(now)
        rec.restored_at = now
        rec.reported_ready = True  # its start was measured by the incarnation that started it
        for cond in status.get("conditions") or ():
            if cond.get("type") in _POD_CONDITIONS:
                rec.conditions[cond["type"]] = (cond.get("status", "False"), cond.get("lastTransitionTime") or "")
        self.stats.restored += 1
        # It ran before with these annotations; the model reports problems when it adds it.
        with contextlib.suppress(ProfileError, ValueError, QuantityError):
            self._parse_behaviour(rec, node)
        statuses = {s.get("name"): s for s in [*(status.get("initContainerStatuses") or ()),
                                               *(status.get("containerStatuses") or ())]}
        app_statuses = [statuses.get(str(c.get("name"))) or {} for c in rec.apps]
        ran = any(s.get("restartCount") or "running" in (s.get("state") or {}) or (s.get("lastState") or {})
                  for s in app_statuses)
        if not ran:
            self._start_pipeline(rec, node, now)  # it was still starting: start over (images are present)
        else:
            for i, c in enumerate(rec.init):
                done = statuses.get(str(c.get("name")), {}).get("state", {}).get("terminated")
                rec.init_states[i] = {"terminated": done} if done else {
                    "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": rec.start_time,
                                   "finishedAt": rec.start_time}}
            rec.created = {str(c.get("name")) for c in rec.apps}
            self._run_in_model(rec, node, now)
            if rec.in_model:
                model = self.model
                for name, row in rec.rows:
                    st = statuses.get(name) or {}
                    restarts = int(st.get("restartCount") or 0)
                    running = (st.get("state") or {}).get("running")
                    if running and running.get("startedAt"):
                        model.restarts[row] = restarts
                        model.start_at[row] = min(parse_rfc3339(running["startedAt"]), now)
                    else:
                        model.restarts[row] = restarts + (1 if restarts or st.get("lastState") else 0)
                        model.start_at[row] = now
                    if st.get("lastState"):
                        rec.restored_last[name] = st["lastState"]
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            self._begin_termination(rec, now)
        self._dirty_pods.add(rec.uid)

    # ------------------------------------------------------------------------------ model results

    def _apply_report(self, report: TickReport, now: float) -> None:
        for event in report.events:
            rec = self._pods.get(event.pod_uid) if event.pod_uid else None
            if event.pod_uid is None:
                self.events.record(node_ref(event.node), event.type, event.reason, event.message, when=event.time,
                                   host=event.node, annotations=event.annotations or None)
                continue
            if rec is None:
                continue
            if event.reason == "Started" and rec.restored_at is not None and event.time < rec.restored_at:
                continue  # a restored container "starting" at its old startedAt: not a new start
            if event.reason == "Started" and event.container and self._restarted(rec, event.container):
                # A restart goes through the same steps as a first start (image present, create, start).
                image = next((str(c.get("image")) for c in rec.apps if c.get("name") == event.container), "")
                self._pod_event(rec, "Normal", "Pulled", f'Container image "{image}" already present on machine',
                                at=event.time, container=event.container)
                self._pod_event(rec, "Normal", "Created", f"Created container: {event.container}", at=event.time,
                                container=event.container)
            if event.reason == ev.EVICTED_REASON:
                signal = _EVICTION_SIGNAL.get(event.annotations.get("starved_resource", ""), "unknown")
                self.metrics.evictions[signal] = self.metrics.evictions.get(signal, 0) + 1
            self._pod_event(rec, event.type, event.reason, event.message, at=event.time, container=event.container,
                            annotations=event.annotations or None)
        self._dirty_pods.update(uid for uid in report.changed_pods if uid in self._pods)
        for name in report.changed_nodes:
            node = self._nodes.get(name)
            if node is None:
                continue
            stamp = rfc3339(now)
            changed = False
            for ctype, value in self.model.node_conditions(name).items():
                if node.conditions.get(ctype, (False, ""))[0] != value:
                    node.conditions[ctype] = (value, stamp)
                    changed = True
            if changed:
                node.dirty = True
                self._taint_changes.add(name)

    def _restarted(self, rec: _Pod, container: str) -> bool:
        row = next((r for n, r in rec.rows if n == container), None)
        return row is not None and int(self.model.restarts[row]) > 0

    # ----------------------------------------------------------------------------------- termination

    def _begin_termination(self, rec: _Pod, now: float) -> None:
        meta = rec.obj.get("metadata") or {}
        grace = float(meta.get("deletionGracePeriodSeconds") or 0)
        if rec.stage in (MODEL, TERMINATING) and rec.in_model:
            running = [name for name, row in rec.rows if int(self.model.state[row]) == 2]
            for name in running:
                self._pod_event(rec, "Normal", "Killing", f"Stopping container {name}", at=now, container=name)
            stop_after = rec.termination_delay if running else 0.0
            rec.kill_exit = 137 if stop_after > grace else 0
            kill_at = now + min(stop_after, grace)
        else:
            rec.kill_exit = 0
            kill_at = now
        rec.stage = TERMINATING
        rec.next_at = kill_at
        self._seq += 1
        heapq.heappush(self._kills, (kill_at, self._seq, rec.uid))

    def _advance_kills(self, now: float) -> None:
        heap = self._kills
        while heap and heap[0][0] <= now:
            t, _, uid = heapq.heappop(heap)
            rec = self._pods.get(uid)
            if rec is None or rec.stage != TERMINATING or rec.next_at != t:
                continue
            rec.final = self._terminated_status(rec, t)
            self._finish(rec)
            rec.delete_after_write = True
            self._dirty_pods.add(uid)

    def _terminated_status(self, rec: _Pod, t: float) -> Obj:
        """The pod's last status: every container stopped at ``t`` (``kill_exit`` for the running ones)."""
        status = self._render(rec, t)
        stamp = rfc3339(t)
        codes: list[int] = []

        def stop(cs: Obj) -> Obj:
            state = cs.get("state") or {}
            if "running" in state:
                code = rec.kill_exit
                term = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                        "startedAt": state["running"].get("startedAt"), "finishedAt": stamp}
            elif "terminated" in state:
                term = state["terminated"]
                code = int(term.get("exitCode") or 0)
            else:
                code = 137
                term = {"exitCode": 137, "reason": "ContainerStatusUnknown",
                        "message": "The container could not be located when the pod was terminated",
                        "startedAt": None, "finishedAt": stamp}
            codes.append(code)
            return {**cs, "state": {"terminated": term}, "ready": False, "started": False}

        status["containerStatuses"] = [stop(cs) for cs in status.get("containerStatuses") or ()]
        if status.get("initContainerStatuses"):
            status["initContainerStatuses"] = [
                cs if "terminated" in (cs.get("state") or {}) else stop(cs) for cs in status["initContainerStatuses"]]
        if status.get("phase") not in _TERMINAL:
            status["phase"] = "Succeeded" if codes and all(c == 0 for c in codes) else "Failed"
        status["conditions"] = self._conditions(rec, t, ready=False, initialized=True, sandbox=False,
                                                phase=status["phase"], unready=[])
        return status

    def _finish(self, rec: _Pod) -> None:
        """The pod's containers are gone: leave the model, free its room and IP; only its status write remains."""
        if rec.in_model:
            self.model.remove_pod(rec.uid)
            rec.in_model = False
            rec.rows = []
        self._release(rec)
        rec.stage = DONE
        rec.next_at = math.inf
        self._gone_usage.append((rec.ns, rec.name))

    def _forget_pod(self, rec: _Pod) -> None:
        """The pod was deleted from the store."""
        self._resolved.drop(rec.uid)
        if rec.in_model:
            self.model.remove_pod(rec.uid)
            rec.in_model = False
        self._release(rec)
        self._pods.pop(rec.uid, None)
        self._dirty_pods.discard(rec.uid)
        self.events.forget(rec.uid)
        self._gone_usage.append((rec.ns, rec.name))

    # ----------------------------------------------------------------------------------- pod status

    def _render(self, rec: _Pod, now: float) -> Obj:
        """The pod's status as the kubelet reports it now (``generateAPIPodStatus``)."""
        node = self._nodes.get(rec.node)
        base = rec.obj.get("status") or {}
        status: Obj = {"phase": "Pending", "qosClass": base.get("qosClass")}
        by_name: dict[str, Obj] = {}
        if rec.in_model:
            ms = self.model.pod_status(rec.uid)
            status["phase"] = ms["phase"]
            status["qosClass"] = status["qosClass"] or ms.get("qosClass")
            if ms.get("reason"):
                status["reason"] = ms["reason"]
                status["message"] = ms["message"]
            for cs in ms["containerStatuses"]:
                by_name[cs["name"]] = self._decorate(rec, cs)
        else:
            for c in rec.apps:
                name = str(c.get("name"))
                reason = "ContainerCreating" if rec.stage == APP_PULL or not rec.init else "PodInitializing"
                waiting: Obj = {"reason": reason}
                if rec.blocked and rec.blocked["name"] == name and not rec.blocked["init"]:
                    waiting = rec.blocked["waiting"]
                by_name[name] = {"name": name, "image": str(c.get("image") or ""), "imageID": "",
                                 "restartCount": 0, "ready": False, "started": False,
                                 "state": {"waiting": waiting}, "lastState": {}}
        spec = rec.obj.get("spec") or {}
        init_statuses: list[Obj] = []
        regular = 0
        for c in spec.get("initContainers") or ():
            name = str(c.get("name"))
            if name in rec.sidecars:
                init_statuses.append(by_name.pop(name))
                continue
            state = rec.init_states[regular] if regular < len(rec.init_states) else {"waiting": {}}
            regular += 1
            if rec.blocked and rec.blocked["name"] == name and rec.blocked["init"]:
                state = {"waiting": rec.blocked["waiting"]}
            done = "terminated" in state
            init_statuses.append({"name": name, "image": str(c.get("image") or ""),
                                  "imageID": nd.image_digest(str(c.get("image") or "")) if done or "running" in state
                                  else "", "restartCount": 0, "ready": done, "started": "running" in state,
                                  "state": state, "lastState": {},
                                  **({"containerID": _container_id(rec.uid, name, 0)}
                                     if done or "running" in state else {})})
        containers = [by_name[str(c.get("name"))] for c in spec.get("containers") or ()
                      if str(c.get("name")) in by_name]
        initialized = all("terminated" in s for s in rec.init_states)
        unready = [cs["name"] for cs in [*containers, *(s for s in init_statuses if s["name"] in rec.sidecars)]
                   if not cs.get("ready")]
        ready = rec.in_model and not unready and status["phase"] == "Running"
        if node is not None:
            status["hostIP"] = node.ip
            status["hostIPs"] = [{"ip": node.ip}]
        if rec.ip:
            status["podIP"] = rec.ip
            status["podIPs"] = [{"ip": rec.ip}]
        if rec.start_time:
            status["startTime"] = rec.start_time
        if init_statuses:
            status["initContainerStatuses"] = init_statuses
        status["containerStatuses"] = containers
        status["conditions"] = self._conditions(rec, now, ready=ready, initialized=initialized, sandbox=True,
                                                phase=status["phase"], unready=unready)
        if status["qosClass"] is None:
            status.pop("qosClass")
        return status

    def _decorate(self, rec: _Pod, cs: Obj) -> Obj:
        """Model container status + the runtime's identifiers (imageID, containerID) and restored lastState."""
        name = cs["name"]
        image = cs.get("image") or ""
        state = cs.get("state") or {}
        out = dict(cs)
        if not out.get("lastState") and name in rec.restored_last:
            out["lastState"] = rec.restored_last[name]
        if "running" in state or "terminated" in state or out.get("lastState"):
            out["imageID"] = nd.image_digest(image)
            restarts = int(cs.get("restartCount") or 0)
            out["containerID"] = _container_id(rec.uid, name, restarts)
        elif name in rec.created and (state.get("waiting") or {}).get("reason") == "ContainerCreating":
            out["imageID"] = nd.image_digest(image)
        return out

    def _conditions(self, rec: _Pod, now: float, *, ready: bool, initialized: bool, sandbox: bool, phase: str,
                    unready: list[str]) -> list[Obj]:
        stamp = rfc3339(now)
        pending_init = [str(c.get("name")) for c, s in zip(rec.init, rec.init_states, strict=True)
                        if "terminated" not in s]
        wanted: dict[str, tuple[str, str | None, str | None]] = {
            "PodReadyToStartContainers": ("True" if sandbox else "False", None, None),
            "Initialized": ("True", None, None) if initialized else (
                "False", "ContainersNotInitialized", f"containers with incomplete status: [{' '.join(pending_init)}]"),
            "PodScheduled": ("True", None, None),
        }
        if ready:
            wanted["Ready"] = wanted["ContainersReady"] = ("True", None, None)
        elif phase == "Succeeded":
            wanted["Ready"] = wanted["ContainersReady"] = ("False", "PodCompleted", None)
        else:
            text = f"containers with unready status: [{' '.join(unready)}]"
            wanted["ContainersReady"] = ("False", "ContainersNotReady", text)
            wanted["Ready"] = ("False", "ContainersNotReady", text)
        base = {c.get("type"): c for c in (rec.obj.get("status") or {}).get("conditions") or ()}
        out = []
        for ctype in _POD_CONDITIONS:
            status, reason, message = wanted[ctype]
            previous = rec.conditions.get(ctype)
            if previous is None and ctype in base and base[ctype].get("status") == status:
                previous = (status, base[ctype].get("lastTransitionTime") or stamp)
            if previous is None or previous[0] != status:
                previous = (status, stamp)
                rec.conditions[ctype] = previous
            cond: Obj = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": previous[1]}
            if reason:
                cond["reason"] = reason
            if message:
                cond["message"] = message
            out.append(cond)
        return out

    def _flush_pods(self, now: float) -> None:
        if not self._dirty_pods:
            return
        dirty, self._dirty_pods = self._dirty_pods, set()
        if self._chaos.stopped:
            # chaos stop-kubelet: nothing is reported for the node's pods (a pod deleted there stays
            # Terminating); they stay dirty and are written once the kubelet is back.
            stopped = self._chaos.stopped
            held = {uid for uid in dirty if (rec := self._pods.get(uid)) is not None and rec.node in stopped}
            self._dirty_pods |= held
            dirty -= held
        writes: list[tuple[_Pod, Obj]] = []
        deletes: list[_Pod] = []
        for uid in dirty:
            rec = self._pods.get(uid)
            if rec is None:
                continue
            if rec.stage == DONE:
                status = rec.final
                rec.final = None
            else:
                status = self._render(rec, now)
                if rec.in_model and status["phase"] in _TERMINAL:
                    self._finish(rec)  # ran to completion or was evicted: its last status is this one
                elif not rec.reported_ready and status["phase"] == "Running" and any(
                        c.get("type") == "Ready" and c.get("status") == "True" for c in status["conditions"]):
                    rec.reported_ready = True
                    km.POD_START_SLI.observe(max(0.0, now - rec.created_at - rec.pull_seconds - rec.init_seconds))
                    km.POD_START.observe(max(0.0, now - rec.seen_at))
            if status is not None and status != (rec.obj.get("status") or {}):
                writes.append((rec, status))
            elif rec.delete_after_write:
                deletes.append(rec)
        batch = self.config.write_batch
        for start in range(0, len(writes), batch):
            chunk = writes[start:start + batch]
            results = self.core.update_status_many(POD, [{**rec.obj, "status": status} for rec, status in chunk])
            for (rec, status), result in zip(chunk, results, strict=True):
                if isinstance(result, errors.StatusError):
                    if result.code == 404:
                        self._forget_pod(rec)
                    else:
                        log.warning("kubelet shard %d: status of pod %s/%s not written: %s", self.index, rec.ns,
                                    rec.name, result.message)
                        if rec.stage == DONE:
                            rec.final = status
                        self._dirty_pods.add(rec.uid)
                    continue
                rec.obj = result
                self.stats.pod_status_writes += 1
                if rec.delete_after_write:
                    deletes.append(rec)
        if writes:
            km.POD_STATUS_UPDATES.labels(str(self.index)).inc(len(writes))
        for rec in deletes:
            rec.delete_after_write = False
            try:
                self.core.delete(POD, rec.ns, rec.name, grace_period_seconds=0, preconditions={"uid": rec.uid})
                self.stats.deletions += 1
            except errors.StatusError as e:
                if e.code not in (404, 409):
                    log.warning("kubelet shard %d: deleting pod %s/%s failed: %s", self.index, rec.ns, rec.name,
                                e.message)

    # ----------------------------------------------------------------------------------- node status

    def _node_status(self, node: _Node, now: float) -> Obj:
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
        entries = sorted(node.image_entries.values(), key=lambda e: (-int(e["sizeBytes"]), e["names"][0]))
        status["images"] = entries[: self.config.max_images]
        return status

    def _flush_nodes(self, now: float) -> None:
        for name in list(self._taint_changes):
            self._taint_changes.discard(name)
            node = self._nodes.get(name)
            if node is not None:
                self._sync_pressure_taints(node)
        for obj in self._adoptions:
            self._write_adoption(obj)
        self._adoptions = []
        heap = self._status_heap
        due: list[_Node] = []
        update_every = self.config.node_status_update_frequency
        while heap and heap[0][0] <= now:
            t, name = heapq.heappop(heap)
            node = self._nodes.get(name)
            if node is None or node.status_due != t:
                continue
            if name in self._chaos.stopped:
                node.dirty = True  # chaos stop-kubelet: no status now; once restored, posted at the next check
            elif node.dirty or now - node.last_report >= self.config.node_status_report_frequency:
                due.append(node)
            # Spread over the period by name, so all nodes do not write in the same tick.
            node.status_due = t + update_every if node.last_report > -math.inf else (
                now + update_every * (0.5 + 0.5 * _phase_of(name)))
            heapq.heappush(heap, (node.status_due, name))
        batch = self.config.write_batch
        for start in range(0, len(due), batch):
            chunk = due[start:start + batch]
            objs = [{**n.obj, "status": self._node_status(n, now)} for n in chunk]
            for node, result in zip(chunk, self.core.update_status_many(NODE, objs), strict=True):
                if isinstance(result, errors.StatusError):
                    log.warning("kubelet shard %d: status of node %s not written: %s", self.index, node.name,
                                result.message)
                    continue
                node.obj = result
                node.dirty = False
                node.last_report = now
                self.stats.node_status_writes += 1
        if due:
            km.NODE_STATUS_UPDATES.labels(str(self.index)).inc(len(due))

    def _write_adoption(self, completed: Obj) -> None:
        """Write what an adopted Node lacked: labels and podCIDR (spec/metadata), then its status."""
        name = completed["metadata"]["name"]
        node = self._nodes.get(name)
        try:
            current = self.core.get(NODE, None, name)
            body = {**current, "metadata": {**current["metadata"], "labels": completed["metadata"]["labels"]},
                    "spec": {**(current.get("spec") or {}), **{k: v for k, v in completed["spec"].items()
                                                                if k in ("podCIDR", "podCIDRs")}}}
            if body != current:
                current = self.core.update(NODE, body)
            status = {**(completed.get("status") or {}), **{k: v for k, v in (current.get("status") or {}).items()
                                                           if v}}
            status.update({k: completed["status"][k] for k in ("capacity", "allocatable")
                           if not (current.get("status") or {}).get(k)})
            result = self.core.update_status(NODE, {**current, "status": status})
        except errors.StatusError as e:
            log.warning("kubelet shard %d: adopting node %s failed: %s", self.index, name, e.message)
            return
        if node is not None:
            node.obj = result
            node.alloc = self._alloc_of(result)

    def _sync_pressure_taints(self, node: _Node) -> None:
        """Keep ``node.kubernetes.io/<x>-pressure:NoSchedule`` in step with the pressure conditions."""
        wanted = {PRESSURE_TAINTS[c] for c in ev.CONDITIONS if node.conditions.get(c, (False, ""))[0]}

        def mutate(obj: Obj) -> Obj | None:
            spec = dict(obj.get("spec") or {})
            taints = list(spec.get("taints") or ())
            kept = [t for t in taints if t.get("key") not in PRESSURE_TAINTS.values() or t.get("key") in wanted]
            have = {t.get("key") for t in kept}
            added = [{"key": k, "effect": "NoSchedule", "timeAdded": rfc3339(self._now)} for k in sorted(wanted - have)]
            if not added and len(kept) == len(taints):
                return None
            spec["taints"] = kept + added
            if not spec["taints"]:
                spec.pop("taints")
            return {**obj, "spec": spec}

        for _ in range(8):
            try:
                current = self.core.get(NODE, None, node.name)
                new = mutate(current)
                if new is None:
                    return
                node.obj = self.core.update(NODE, new)
                return
            except errors.StaleResourceVersion:
                continue
            except errors.StatusError as e:
                log.warning("kubelet shard %d: pressure taints of %s not written: %s", self.index, node.name,
                            e.message)
                return

    # ----------------------------------------------------------------------------------------- leases

    def _lease_body(self, node: _Node, now: float) -> Obj:
        uid = (node.obj.get("metadata") or {}).get("uid")
        meta: Obj = {"name": node.name, "namespace": LEASE_NAMESPACE}
        if uid:
            # nodelease setNodeOwnerFunc: the Node owns its Lease, so the garbage collector removes it with the node.
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": uid}]
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": node.name, "leaseDurationSeconds": self.config.lease_duration_seconds,
                         "renewTime": micro_time(now)}}

    def heartbeat(self, now: float | None = None) -> int:
        """Create missing leases and renew the ones due (``pkg/kubelet/nodelease``); returns renewals written.

        :meth:`tick` calls it first thing; a shell may also call it from a thread of its own every
        second or so, so that heartbeats keep their period while a tick is busy with thousands of
        pods (upstream the lease controller is its own goroutine). Safe to call concurrently with
        :meth:`tick`.
        """
        if not self._started or self.index in self._chaos.partitioned:
            return 0  # chaos partition: the due renewals stay due, and go out at once after the restore
        with self._lease_lock:
            return self._flush_leases(self.clock.now() if now is None else now)

    def _flush_leases(self, now: float) -> int:
        interval = self.config.renew_interval
        st = self.stats
        creates: list[_Node] = []
        for name in self._pending_leases:
            node = self._nodes.get(name)
            if node is not None and node.lease is None:
                creates.append(node)
        self._pending_leases = []
        renewals: list[_Node] = []
        heap = self._lease_heap
        held: list[tuple[float, str]] = []
        while heap and heap[0][0] <= now:
            t, name = heapq.heappop(heap)
            node = self._nodes.get(name)
            if node is None or node.lease_due != t:
                continue
            if name in self._chaos.stopped:
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
                if now - t > 2 * self.config.tick_interval:
                    st.late_renewals += 1
                    km.LEASE_LATE.labels(str(self.index)).inc()
                if gap > self.config.lease_duration_seconds:
                    st.expired_leases += 1
            node.last_renew = now
            node.lease_due = now + interval
            heapq.heappush(heap, (node.lease_due, name))
        for entry in held:
            heapq.heappush(heap, entry)
        batch = self.config.write_batch
        for start in range(0, len(creates), batch):
            chunk = creates[start:start + batch]
            for node, result in zip(chunk, self.core.create_many(LEASE, [self._lease_body(n, now) for n in chunk]),
                                    strict=True):
                if isinstance(result, errors.StatusError):
                    if result.reason == "AlreadyExists":
                        try:
                            node.lease = self.core.get(LEASE, LEASE_NAMESPACE, node.name)
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
                                             "leaseDurationSeconds": self.config.lease_duration_seconds,
                                             "renewTime": micro_time(now)}}
                owners = self._lease_body(node, now)["metadata"].get("ownerReferences")
                if owners and (lease.get("metadata") or {}).get("ownerReferences") != owners:
                    # The node was deleted and created again: the lease now belongs to the new one.
                    renewed["metadata"] = {**(lease.get("metadata") or {}), "ownerReferences": owners}
                objs.append(renewed)
            for node, result in zip(chunk, self.core.update_many(LEASE, objs), strict=True):
                if isinstance(result, errors.StatusError):
                    node.lease = None  # gone (404) or broken: create it again
                    self._pending_leases.append(node.name)
                    continue
                node.lease = result
                st.lease_renewals += 1
        if renewals:
            km.LEASE_RENEWALS.labels(str(self.index)).inc(len(renewals))
        return len(renewals)

    # ----------------------------------------------------------------------------------------- events

    def _pod_event(self, rec: _Pod, type_: str, reason: str, message: str, *, at: float,
                   container: str | None = None, init: bool = False,
                   annotations: Mapping[str, str] | None = None) -> None:
        field_path = None
        if container:
            field_path = f"spec.initContainers{{{container}}}" if init or container in rec.sidecars else \
                f"spec.containers{{{container}}}"
        self.events.record(ObjectRef("Pod", rec.ns, rec.name, rec.uid), type_, reason, message, when=at,
                           host=rec.node, field_path=field_path, annotations=annotations)

    def _flush_events(self) -> None:
        dropped = self.events.dropped
        written = self.events.flush()
        if written:
            km.EVENTS_WRITTEN.labels(str(self.index)).inc(written)
        if dropped > self.stats.events_dropped:
            km.EVENTS_DROPPED.labels(str(self.index)).inc(dropped - self.stats.events_dropped)
        self.stats.events_written += written
        self.stats.events_dropped = dropped

    # ----------------------------------------------------------------------------------------- usage

    def _publish_usage(self, now: float) -> None:
        window = self.config.metrics_window
        if self._next_usage is None:
            self._next_usage = now + window
            self._last_usage = now
            self.metrics.take_window()
            return
        if now < self._next_usage:
            return
        span = max(now - (self._last_usage or now), 1e-9)
        self._last_usage = now
        self._next_usage = now + window
        cpu_usec = self.metrics.take_window()
        memory = self.model.cgroups.memory_current
        node_of = self.model.cgroups.node
        running = self.model.state == 2
        n_nodes = len(self._idx_names)
        node_cpu = np.bincount(node_of, weights=cpu_usec[: len(node_of)], minlength=n_nodes)
        node_mem = np.bincount(node_of, weights=np.where(running, memory, 0.0), minlength=n_nodes)
        nodes = {name: (int(node_cpu[node.idx] * 1000 / span), int(node_mem[node.idx]))
                 for name, node in self._nodes.items()}
        pods: dict[tuple[str, str], list[usage.ContainerUsage]] = {}
        for rec in self._pods.values():
            if not rec.in_model:
                continue
            pods[(rec.ns, rec.name)] = [(name, int(cpu_usec[row] * 1000 / span) if row < len(cpu_usec) else 0,
                                         int(memory[row]) if running[row] else 0) for name, row in rec.rows]
        gone = [key for key in self._gone_usage if key not in pods]
        self._gone_usage = []
        gone_nodes, self._gone_nodes = self._gone_nodes, []
        pipe = self.store.redis.pipeline(transaction=False)
        app = load.app_series(self.model, self._pods)  # load-target pods' http_requests_per_second, latency
        usage.write_snapshot(pipe, self.store.config.prefix, timestamp=now, window=span, nodes=nodes, pods=pods,
                             gone_pods=gone, gone_nodes=gone_nodes, app=app)
        pipe.execute()

    # ----------------------------------------------------------------------------------------- reads

    def nodes(self) -> list[str]:
        """Names of the nodes this shard runs."""
        return sorted(self._nodes)

    def pod_stage(self, uid: str) -> str | None:
        rec = self._pods.get(uid)
        return None if rec is None else _STAGE_NAMES[rec.stage]

    def pods(self) -> dict[str, tuple[str, str, str]]:
        """uid -> (namespace/name, node, stage) of every pod the shard handles."""
        return {uid: (f"{r.ns}/{r.name}", r.node, _STAGE_NAMES[r.stage]) for uid, r in self._pods.items()}

    def health(self) -> dict[str, Any]:
        st = self.stats
        return {"shard": self.index, "shards": self.shards, "started": self._started, "nodes": len(self._nodes),
                "pods": len(self._pods), "ticks": st.ticks, "lastTickSeconds": round(st.last_tick_seconds, 4),
                "maxTickSeconds": round(st.max_tick_seconds, 4), "leaseRenewals": st.lease_renewals,
                "lateRenewals": st.late_renewals, "expiredLeases": st.expired_leases,
                "maxRenewGap": round(st.max_renew_gap, 3), "admitted": st.admitted, "rejected": st.rejected,
                "restored": st.restored, "registered": st.registered, "adopted": st.adopted,
                "podStatusWrites": st.pod_status_writes, "nodeStatusWrites": st.node_status_writes,
                "events": st.events_written, "eventsDropped": st.events_dropped, "inbox": len(self._inbox)}


class _ResolveCache:
    """The model's profile library, reusing the resolution admission already did for a pod.

    Resolving a pod's behaviour (annotations, profile, seeded draws) costs ~0.1 ms; admission
    does it to reject bad annotations, and the model does it again when the containers are
    created. The model only calls ``resolve`` and ``get``, so this stands in for the library.
    """

    def __init__(self, library: ProfileLibrary) -> None:
        self.library = library
        self._kept: dict[str, PodBehaviour] = {}

    def keep(self, behaviour: PodBehaviour) -> None:
        self._kept[behaviour.uid] = behaviour

    def drop(self, uid: str) -> None:
        self._kept.pop(uid, None)

    def resolve(self, pod: Mapping[str, Any], *, seed: int, default: str | None = None) -> PodBehaviour:
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        kept = self._kept.pop(uid, None)
        return kept if kept is not None else self.library.resolve(pod, seed=seed, default=default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.library, name)


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

