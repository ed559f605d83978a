"""Node-pressure eviction, as the kubelet's eviction manager does it.

Follows ``pkg/kubelet/eviction`` (``eviction_manager.go`` synchronize,
``helpers.go``):

* **Signals**, per node: ``memory.available`` = memory capacity - working
  set; ``nodefs.available`` = ephemeral-storage capacity - used (container
  writable layers and logs plus the node's own use); ``pid.available`` = pid
  max - running processes. imagefs and inode signals are not observed, so
  thresholds on them never fire (as upstream, where an unobserved signal
  meets no threshold).
* **Thresholds**: ``signal<quantity`` or ``signal<percent%`` of capacity, met
  when *available < threshold*. Hard ones (default ``memory.available<100Mi``,
  ``nodefs.available<10%``, ``nodefs.inodesFree<5%``, ``imagefs.available<15%``,
  ``imagefs.inodesFree<5%``) act at once; soft ones once met continuously for
  their grace period. ``pid.available`` has no default; configure one (e.g.
  ``pid.available<10%``) to evict fork bombs. Minimum reclaim is not modelled.
* **Node conditions** MemoryPressure / DiskPressure / PIDPressure are True
  while a threshold on one of their signals was met (grace periods ignored)
  within the pressure transition period (default 5 minutes), so they do not
  flap.
* **Each synchronize** (every 10 s, ``evictionMonitoringPeriod``): first
  local-storage eviction — every pod whose ephemeral-storage use exceeds its
  pod-level total limit, or with a container over its own limit, is evicted;
  if any were, that is all for this round. Otherwise, if a threshold is met
  past its grace period, the thresholds are ordered memory first, the pods
  ranked for the starved resource, and **at most one pod per node** is
  evicted — the first that is not critical (static, mirror or priority >=
  2000000000 pods are never evicted).
* **Ranking** (``rankMemoryPressure`` etc.): memory — pods whose working set
  exceeds their memory request first, then lower priority, then larger
  usage minus request; disk — pods over their ephemeral-storage request
  first, then priority, then usage minus request; pids — lower priority
  first, then more processes. BestEffort pods request nothing, so any use
  exceeds the request: they go first; Guaranteed pods cannot exceed their
  request (it equals the limit) and go last.
* **Messages** are upstream's, reason ``Evicted``: ``The node was low on
  resource: memory. Threshold quantity: 100Mi, available: 51200Ki. Container
  app was using 300Mi, request is 0, has larger consumption of memory. ``
  (trailing space included), with annotations ``offending_containers``,
  ``offending_containers_usage`` and ``starved_resource``.

The manager keeps per-node state in arrays (threshold first-observed times,
condition last-observed times) and evaluates every node's signals at once;
only nodes that must evict run the (small, per-node) ranking.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from emulator.api.quantity import Format, Quantity, QuantityError, format_bytes, parse_quantity

__all__ = [
    "CONDITION_MESSAGES",
    "DEFAULT_HARD_THRESHOLDS",
    "DISK_PRESSURE",
    "EVICTED_REASON",
    "MEMORY_PRESSURE",
    "MONITORING_PERIOD",
    "PID_PRESSURE",
    "PRESSURE_TRANSITION_PERIOD",
    "ConditionChange",
    "ContainerUsage",
    "Eviction",
    "EvictionManager",
    "LocalStorage",
    "PodStats",
    "Threshold",
    "eviction_message",
    "parse_thresholds",
    "rank_pods",
]

MEMORY_AVAILABLE = "memory.available"
NODEFS_AVAILABLE = "nodefs.available"
PID_AVAILABLE = "pid.available"
KNOWN_SIGNALS = (
    MEMORY_AVAILABLE, "allocatableMemory.available", NODEFS_AVAILABLE, "nodefs.inodesFree", "imagefs.available",
    "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", PID_AVAILABLE,
)
# helpers.go signalToResource.
SIGNAL_RESOURCE = {
    MEMORY_AVAILABLE: "memory", "allocatableMemory.available": "memory", NODEFS_AVAILABLE: "ephemeral-storage",
    "imagefs.available": "ephemeral-storage", "containerfs.available": "ephemeral-storage",
    "nodefs.inodesFree": "inodes", "imagefs.inodesFree": "inodes", "containerfs.inodesFree": "inodes",
    PID_AVAILABLE: "pids",
}

MEMORY_PRESSURE = "MemoryPressure"
DISK_PRESSURE = "DiskPressure"
PID_PRESSURE = "PIDPressure"
CONDITIONS = (MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE)
_SIGNAL_CONDITION = {
    MEMORY_AVAILABLE: MEMORY_PRESSURE, "allocatableMemory.available": MEMORY_PRESSURE,
    PID_AVAILABLE: PID_PRESSURE,
}  # every other (filesystem) signal: DiskPressure


def _condition_of(signal: str) -> str:
    return _SIGNAL_CONDITION.get(signal, DISK_PRESSURE)


# Node condition reason/message pairs set by the kubelet (pkg/kubelet/nodestatus/setters.go), by status.
CONDITION_MESSAGES: dict[str, dict[bool, tuple[str, str]]] = {
    MEMORY_PRESSURE: {
        True: ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
        False: ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    },
    DISK_PRESSURE: {
        True: ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        False: ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    },
    PID_PRESSURE: {
        True: ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
        False: ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    },
}

DEFAULT_HARD_THRESHOLDS: dict[str, str] = {  # pkg/kubelet/eviction/defaults_linux.go
    MEMORY_AVAILABLE: "100Mi",
    NODEFS_AVAILABLE: "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
    "imagefs.inodesFree": "5%",
}
MONITORING_PERIOD = 10.0  # kubelet.go evictionMonitoringPeriod
PRESSURE_TRANSITION_PERIOD = 300.0  # KubeletConfiguration evictionPressureTransitionPeriod default
EVICTED_REASON = "Evicted"

# helpers.go message fragments, trailing spaces included.
_NODE_LOW = "The node was low on resource: {}. "
_THRESHOLD_MET = "Threshold quantity: {}, available: {}. "
_CONTAINER_OVER = "Container {} was using {}, request is {}, has larger consumption of {}. "
_CONTAINER_EPHEMERAL = 'Container {} exceeded its local ephemeral storage limit "{}". '
_POD_EPHEMERAL = "Pod ephemeral local storage usage exceeds the total limit of containers {}. "


# -- thresholds -------------------------------------------------------------------------


@dataclass(frozen=True)
class Threshold:
    """One eviction threshold: ``signal < quantity`` or ``signal < percentage of capacity``."""

    signal: str
    quantity: int | None = None  # bytes, or a count for pid.available
    percentage: float | None = None  # 0..1
    grace_period: float = 0.0
    hard: bool = True
    text: str = ""  # the quantity as written, canonicalised ("100Mi", "10%")

    def value(self, capacity: np.ndarray) -> np.ndarray:
        """The threshold in signal units for each node's capacity."""
        if self.percentage is not None:
            return np.floor(capacity * self.percentage)
        return np.full(np.shape(capacity), float(self.quantity or 0))

    def quantity_text(self, capacity: float) -> str:
        """What the eviction message prints (``GetThresholdQuantity(...).String()``, BinarySI)."""
        if self.percentage is not None:
            return format_bytes(int(capacity * self.percentage))
        return self.text


def parse_thresholds(
    spec: str | Mapping[str, str], *, hard: bool = True, grace_periods: Mapping[str, float] | None = None
) -> list[Threshold]:
    """Thresholds from the kubelet flag form (``memory.available<100Mi,nodefs.available<10%``) or
    the KubeletConfiguration map form (``{"memory.available": "100Mi"}``). Soft thresholds need a
    grace period per signal (``evictionSoftGracePeriod``)."""
    if isinstance(spec, str):
        items: list[tuple[str, str]] = []
        for part in filter(None, (p.strip() for p in spec.split(","))):
            match = re.fullmatch(r"([A-Za-z.]+)\s*<\s*(\S+)", part)
            if match is None:
                raise ValueError(f"invalid eviction threshold {part!r}: expected signal<quantity or signal<percent%")
            items.append((match.group(1), match.group(2)))
    else:
        items = [(str(k), str(v)) for k, v in spec.items()]
    result = []
    for signal, value in items:
        if signal not in KNOWN_SIGNALS:
            raise ValueError(f"unknown eviction signal {signal!r}; signals: {', '.join(KNOWN_SIGNALS)}")
        grace = 0.0
        if not hard:
            if grace_periods is None or signal not in grace_periods:
                raise ValueError(f"soft eviction threshold {signal} needs a grace period")
            grace = float(grace_periods[signal])
        if value.endswith("%"):
            pct = float(value[:-1])
            if not 0 <= pct <= 100:
                raise ValueError(f"eviction threshold {signal}: percentage {value} is not within 0%..100%")
            if pct == 0:
                continue  # upstream: a 0% threshold is disabled
            result.append(Threshold(signal, None, pct / 100.0, grace, hard, value))
        else:
            try:
                q = parse_quantity(value)
            except QuantityError as e:
                raise ValueError(f"eviction threshold {signal}: {value!r} is not a quantity ({e})") from None
            if q.amount < 0:
                raise ValueError(f"eviction threshold {signal}: {value} is negative")
            result.append(Threshold(signal, q.value(), None, grace, hard, str(q)))
    return result


# -- ranking ------------------------------------------------------------------------------


@dataclass
class PodStats:
    """Per-pod arrays the manager ranks by; one entry per pod row (``active`` marks live pods)."""

    node: np.ndarray
    active: np.ndarray
    critical: np.ndarray
    priority: np.ndarray
    memory_usage: np.ndarray
    memory_request: np.ndarray
    disk_usage: np.ndarray
    disk_request: np.ndarray
    pids: np.ndarray


def rank_pods(resource: str, pods: np.ndarray, stats: PodStats) -> np.ndarray:
    """``pods`` (row indexes) in eviction order for the starved ``resource``; ties keep the given order."""
    prio = stats.priority[pods]
    if resource == "memory":
        usage, request = stats.memory_usage[pods], stats.memory_request[pods]
    elif resource == "pids":
        # rankPIDPressure: orderedBy(priority, process)
        return pods[np.lexsort((np.arange(len(pods)), -stats.pids[pods], prio))]
    else:
        usage, request = stats.disk_usage[pods], stats.disk_request[pods]
    exceeds = usage > request
    # lexsort: last key is primary. Exceeding first, then lower priority, then larger usage - request.
    return pods[np.lexsort((np.arange(len(pods)), -(usage - request), prio, ~exceeds))]


# -- messages --------------------------------------------------------------------------


@dataclass(frozen=True)
class ContainerUsage:
    """A container's use of the starved resource, for the eviction message."""

    name: str
    usage: int
    request: int
    request_text: str  # the request as the spec writes it ("128Mi"), "0" when unset


def _available_text(signal: str, available: float) -> str:
    if signal == PID_AVAILABLE:  # makeSignalObservations: DecimalSI for pids, BinarySI otherwise
        return Quantity(Decimal(int(available)), Format.DECIMAL_SI).canonical()
    return format_bytes(int(max(available, 0)))


def eviction_message(
    resource: str, threshold_text: str | None, available_text: str | None, containers: Sequence[ContainerUsage]
) -> tuple[str, dict[str, str]]:
    """Upstream ``evictionMessage``: the text and the event annotations."""
    message = _NODE_LOW.format(resource)
    if threshold_text is not None and available_text is not None:
        message += _THRESHOLD_MET.format(threshold_text, available_text)
    names: list[str] = []
    usages: list[str] = []
    if resource in ("memory", "ephemeral-storage"):
        for c in containers:
            if c.usage > c.request:
                usage_text = format_bytes(int(c.usage))
                message += _CONTAINER_OVER.format(c.name, usage_text, c.request_text, resource)
                names.append(c.name)
                usages.append(usage_text)
    annotations = {
        "offending_containers": ",".join(names),
        "offending_containers_usage": ",".join(usages),
        "starved_resource": resource,
    }
    return message, annotations


def container_ephemeral_message(container: str, limit_text: str) -> str:
    return _CONTAINER_EPHEMERAL.format(container, limit_text)


def pod_ephemeral_message(limit_text: str) -> str:
    return _POD_EPHEMERAL.format(limit_text)


# ``details(pod_row, resource)``: the pod's containers' use of ``resource``, for messages.
ContainerDetails = Callable[[int, str], Sequence[ContainerUsage]]


# -- the manager ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Eviction:
    """A pod the manager evicts (reason ``Evicted``). ``message`` is final; annotations go on the event."""

    pod: int
    node: int
    signal: str | None  # None: local-storage limit eviction
    resource: str
    message: str
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConditionChange:
    node: int
    type: str  # MemoryPressure | DiskPressure | PIDPressure
    status: bool
    reason: str
    message: str


@dataclass
class SyncResult:
    evictions: list[Eviction] = field(default_factory=list)
    conditions: list[ConditionChange] = field(default_factory=list)
    thresholds_met: list[tuple[int, str]] = field(default_factory=list)  # (node, resource) reclaim attempts


class EvictionManager:
    """Thresholds, per-node observation state and the synchronize step, for many nodes at once."""

    def __init__(
        self,
        thresholds: Sequence[Threshold] | None = None,
        *,
        pressure_transition_period: float = PRESSURE_TRANSITION_PERIOD,
        monitoring_period: float = MONITORING_PERIOD,
        nodes: int = 0,
    ) -> None:
        if thresholds is None:
            thresholds = parse_thresholds(DEFAULT_HARD_THRESHOLDS)
        # byEvictionPriority: memory signals first, the rest in configured order.
        self.thresholds = sorted(thresholds, key=lambda t: SIGNAL_RESOURCE.get(t.signal) != "memory")
        self.transition = pressure_transition_period
        self.period = monitoring_period
        self.next_sync = -math.inf
        n = len(self.thresholds)
        self.first_observed = np.full((nodes, n), np.nan)  # when each threshold was first seen met
        self.condition_seen = np.full((nodes, len(CONDITIONS)), np.nan)  # last time each condition's signal met
        self.condition = np.zeros((nodes, len(CONDITIONS)), dtype=bool)  # as reported on the node

    def grow(self, nodes: int) -> None:
        extra = nodes - len(self.condition)
        if extra > 0:
            self.first_observed = np.vstack([self.first_observed, np.full((extra, len(self.thresholds)), np.nan)])
            self.condition_seen = np.vstack([self.condition_seen, np.full((extra, len(CONDITIONS)), np.nan)])
            self.condition = np.vstack([self.condition, np.zeros((extra, len(CONDITIONS)), dtype=bool)])

    def forget_node(self, node: int) -> None:
        self.first_observed[node] = np.nan
        self.condition_seen[node] = np.nan
        self.condition[node] = False

    def due(self, now: float) -> bool:
        return now >= self.next_sync

    def synchronize(
        self,
        now: float,
        signals: Mapping[str, tuple[np.ndarray, np.ndarray]],
        pods: PodStats,
        *,
        node_active: np.ndarray | None = None,
        local_storage: LocalStorage | None = None,
        details: ContainerDetails | None = None,
    ) -> SyncResult:
        """One eviction-manager round over all nodes.

        ``signals`` maps a signal name to (available, capacity) arrays over
        nodes; unobserved signals are absent. ``details(pod, resource)``
        returns the containers' usage for messages. Evicted pods are the
        caller's to stop and mark ``Failed``/``Evicted``.
        """
        self.next_sync = now + self.period
        result = SyncResult()
        n_nodes = len(self.condition)
        if node_active is None:
            node_active = np.ones(n_nodes, dtype=bool)

        # Thresholds met now, grace periods ignored: (nodes x thresholds).
        met = np.zeros((n_nodes, len(self.thresholds)), dtype=bool)
        for j, threshold in enumerate(self.thresholds):
            observed = signals.get(threshold.signal)
            if observed is not None:
                available, capacity = observed
                met[:, j] = node_active & (available < threshold.value(capacity))
        self.first_observed = np.where(met, np.where(np.isnan(self.first_observed), now, self.first_observed), np.nan)

        # Node conditions: last time any of a condition's thresholds was met, held for the transition period.
        for k, condition in enumerate(CONDITIONS):
            cols = [j for j, t in enumerate(self.thresholds) if _condition_of(t.signal) == condition]
            if cols:
                seen_now = met[:, cols].any(axis=1)
                self.condition_seen[seen_now, k] = now
            with np.errstate(invalid="ignore"):
                status = node_active & (now - self.condition_seen[:, k] < self.transition)
            for node in np.flatnonzero(status != self.condition[:, k]):
                reason, message = CONDITION_MESSAGES[condition][bool(status[node])]
                result.conditions.append(ConditionChange(int(node), condition, bool(status[node]), reason, message))
            self.condition[:, k] = status

        # Local-storage limits first: every violating pod goes, and a node that evicted any stops there.
        done_nodes: set[int] = set()
        if local_storage is not None:
            for ev in local_storage.violations(pods):
                result.evictions.append(ev)
                done_nodes.add(ev.node)

        # Thresholds past their grace period drive eviction; the first (memory first) is reclaimed.
        with np.errstate(invalid="ignore"):
            actionable = met & (now - self.first_observed >= np.array([t.grace_period for t in self.thresholds]))
        for node in np.flatnonzero(actionable.any(axis=1)):
            if int(node) in done_nodes:
                continue
            j = int(np.flatnonzero(actionable[node])[0])
            threshold = self.thresholds[j]
            resource = SIGNAL_RESOURCE[threshold.signal]
            result.thresholds_met.append((int(node), resource))
            candidates = np.flatnonzero(pods.active & (pods.node == node))
            available, capacity = signals[threshold.signal]
            for pod in rank_pods(resource, candidates, pods):
                if pods.critical[pod]:
                    continue  # evictPod refuses critical pods and tries the next
                containers = details(int(pod), resource) if details is not None else []
                message, annotations = eviction_message(
                    resource,
                    threshold.quantity_text(float(capacity[node])),
                    _available_text(threshold.signal, float(available[node])),
                    containers,
                )
                result.evictions.append(Eviction(int(pod), int(node), threshold.signal, resource, message, annotations))
                break  # at most one pod per node per round
        return result


@dataclass
class LocalStorage:
    """Container-level ephemeral-storage data for limit eviction (``localStorageEviction``).

    Arrays over container rows: owning pod row, whether running, usage and
    limit (0 = none); ``limit_text`` / ``names`` give the strings messages
    print; ``pod_limit`` / ``pod_limit_text`` are the pods' total limits (0 =
    not every container sets one, so there is no pod-level limit).
    """

    pod: np.ndarray
    alive: np.ndarray
    usage: np.ndarray
    limit: np.ndarray
    pod_limit: np.ndarray
    names: Sequence[str]
    limit_text: Sequence[str]
    pod_limit_text: Sequence[str]

    def violations(self, pods: PodStats) -> list[Eviction]:
        usage = np.where(self.alive, self.usage, 0.0)
        per_pod = np.bincount(self.pod, weights=usage, minlength=len(pods.active))
        pod_over = pods.active & (self.pod_limit > 0) & (per_pod > self.pod_limit)
        container_over = self.alive & (self.limit > 0) & (usage > self.limit)
        offenders = np.flatnonzero(container_over & ~pod_over[self.pod] & pods.active[self.pod])
        result: list[Eviction] = []
        for pod in np.flatnonzero(pod_over):
            message = pod_ephemeral_message(self.pod_limit_text[pod])
            result.append(Eviction(int(pod), int(pods.node[pod]), None, "ephemeral-storage", message))
        seen: set[int] = set()
        for row in offenders:
            pod = int(self.pod[row])
            if pod in seen:
                continue  # one eviction per pod, naming its first offending container
            seen.add(pod)
            message = container_ephemeral_message(self.names[row], self.limit_text[row])
            result.append(Eviction(pod, int(pods.node[pod]), None, "ephemeral-storage", message))
        return result
