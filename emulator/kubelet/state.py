"""What a kubelet shard knows about its nodes and pods: the records every manager shares.

Upstream each kubelet keeps this in its managers' own caches (the pod manager's pods, the
status manager's statuses, the node's status in ``kubelet_node_status.go``); a kemu shard runs
thousands of kubelets, so one table of :class:`NodeRecord` and one of :class:`PodRecord` is
shared by the managers (:mod:`~emulator.kubelet.nodestatus`, :mod:`~emulator.kubelet.admission`,
:mod:`~emulator.kubelet.pod_workers`, :mod:`~emulator.kubelet.images`,
:mod:`~emulator.kubelet.status_manager`, :mod:`~emulator.kubelet.nodelease`,
:mod:`~emulator.kubelet.usage_publisher`) through :class:`ShardState`. Everything here is touched
on the tick thread only, except the lease fields (see :mod:`~emulator.kubelet.nodelease`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from emulator.api.types import Obj
from emulator.chaos import NO_CHAOS, ChaosState
from emulator.kubelet import kubelet_metrics as km
from emulator.kubelet.config import KubeletShardConfig
from emulator.kubelet.events import EventRecorder, ObjectRef
from emulator.kubelet.model import KubeletModel
from emulator.server.core import ServerCore

TERMINAL = ("Succeeded", "Failed")

# Pod stages.
NEW = 0
INIT_PULL = 1  # pulling the image of init container `step` (done at next_at)
INIT_RUN = 2  # init container `step` runs until next_at
APP_PULL = 3  # pulling the image of app container `step`
MODEL = 4  # containers run in the model
TERMINATING = 5  # deletion seen; containers stop at next_at
DONE = 6  # terminal status written (or being written); waits for the pod's deletion
BLOCKED = 7  # an image can never be pulled (ErrImageNeverPull)
STAGE_NAMES = ("New", "InitPull", "InitRun", "AppPull", "Running", "Terminating", "Done", "Blocked")


@dataclass(eq=False)
class NodeRecord:
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
class Pull:
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
class PodRecord:
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
    pull: Pull | None = None  # the image pull under way
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
    # The status manager's cache (status_manager.go podStatuses): the status the kubelet last decided on
    # (the resourceVersion the store acknowledged it at is the status reconciler's, apiStatusVersions).
    intended: Obj | None = None


@dataclass
class ShardStats:
    """Counters for tests, health checks and the benchmark."""

    ticks: int = 0
    nodes: int = 0
    pods: int = 0
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
    status_write_errors: int = 0  # pod/node status writes that failed (store unreachable, or refused)
    reconcile_passes: int = 0  # full status reconciliations with the store (syncBatch(all))
    reconciled: int = 0  # pods and nodes whose stored status a reconciliation found stale and re-wrote
    last_reconcile_seconds: float = 0.0


def _ignore(obj: Obj) -> None:
    del obj


@dataclass(eq=False)
class ShardState:
    """The tables and collaborators every manager of one shard shares (built by the shard)."""

    core: ServerCore
    index: int
    config: KubeletShardConfig
    model: KubeletModel
    events: EventRecorder
    metrics: km.ShardMetrics
    stats: ShardStats = field(default_factory=ShardStats)
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    idx_names: list[str] = field(default_factory=list)  # model node index -> name
    pods: dict[str, PodRecord] = field(default_factory=dict)
    dirty_pods: set[str] = field(default_factory=set)  # pods whose status the status manager must sync
    # Faults injected through emulator.chaos, read once per tick (heartbeat() on another thread
    # only reads the reference, swapped whole).
    chaos: ChaosState = NO_CHAOS
    now: float = 0.0
    # Told each pod the shard wrote, as the store now holds it: the shard's watch reader hands the
    # write's event to the informers without decoding it (Multiplexer.remember; set by start()).
    remember: Callable[[Obj], None] = _ignore

    @property
    def label(self) -> str:
        """The shard's index as a Prometheus label value."""
        return str(self.index)

    def pod_event(self, rec: PodRecord, type_: str, reason: str, message: str, *, at: float,
                  container: str | None = None, init: bool = False,
                  annotations: Mapping[str, str] | None = None) -> None:
        field_path = None
        if container:
            field_path = f"spec.initContainers{{{container}}}" if init or container in rec.sidecars else \
                f"spec.containers{{{container}}}"
        self.events.record(ObjectRef("Pod", rec.ns, rec.name, rec.uid), type_, reason, message, when=at,
                           host=rec.node, field_path=field_path, annotations=annotations)


def phase_of(h: str) -> float:
    """A stable fraction in [0, 1) from a name, to spread periodic work (lease renewals) over its interval."""
    return (zlib.crc32(h.encode()) % 10_000) / 10_000.0


def container_id(uid: str, name: str, restarts: int) -> str:
    return "containerd://" + hashlib.blake2b(f"{uid}/{name}/{restarts}".encode(), digest_size=32).hexdigest()
