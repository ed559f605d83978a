"""cgroup v2 accounting for every container at once, one tick at a time.

The kubelet configures each container's cgroup from its pod spec
(``pkg/kubelet/cm/helpers_linux.go``, ``pkg/kubelet/qos/policy.go``,
``kuberuntime_container_linux.go``): ``cpu.max`` from the CPU limit, ``cpu.weight``
from the request, ``memory.max`` / ``memory.high``, ``oom_score_adj``. The kernel
then decides how much CPU a container gets (CFS quota per period, weighted sharing
when a node's CPUs are contended), when it is throttled, and when it is OOM-killed
(at ``memory.max``, or by the node OOM killer's ``oom_badness``). This module
models both halves over numpy arrays (one row per container, :class:`CgroupTable`),
so a shard ticks thousands of nodes with a few dozen array operations. The
formulas, with a worked throttling example, are in ``docs/kubelet-model.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.api.pods import BEST_EFFORT, GUARANTEED, container_requests, qos_class

__all__ = [
    "BEST_EFFORT_OOM_SCORE_ADJ",
    "GUARANTEED_OOM_SCORE_ADJ",
    "MEMORY_THROTTLING_FACTOR",
    "MIN_QUOTA_USEC",
    "OOM_KILLED_EXIT_CODE",
    "OOM_KILLED_REASON",
    "QUOTA_PERIOD_USEC",
    "CgroupTable",
    "TickResult",
    "is_critical_pod",
    "memory_high",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "node_oom_victims",
    "oom_score_adj",
    "share_cpu",
    "shares_to_weight",
]

# pkg/kubelet/cm/helpers_linux.go
QUOTA_PERIOD_USEC = 100_000  # 100 ms
MIN_QUOTA_USEC = 1_000  # quota needs to be a minimum of 1 ms
MIN_SHARES = 2
MAX_SHARES = 262_144
SHARES_PER_CPU = 1024
MILLI_CPU_TO_CPU = 1000

# pkg/kubelet/qos/policy.go
GUARANTEED_OOM_SCORE_ADJ = -997
BEST_EFFORT_OOM_SCORE_ADJ = 1000
OOM_SCORE_ADJ_MIN = -1000  # include/uapi/linux/oom.h: never chosen by the OOM killer

# KEP-2570 MemoryQoS: memoryThrottlingFactor default 0.9, page size 4 KiB.
MEMORY_THROTTLING_FACTOR = 0.9
PAGE_SIZE = 4096

OOM_KILLED_EXIT_CODE = 137  # 128 + SIGKILL
OOM_KILLED_REASON = "OOMKilled"

# pkg/scheduling: SystemCriticalPriority and the node-critical class name.
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
SYSTEM_NODE_CRITICAL = "system-node-critical"


# -- configuration (what the kubelet writes) ---------------------------------------------


def milli_cpu_to_quota(milli_cpu: int, period_usec: int = QUOTA_PERIOD_USEC) -> int:
    """CFS quota in µs for a CPU limit (upstream ``MilliCPUToQuota``); 0 means no quota."""
    if milli_cpu <= 0:
        return 0
    return max((milli_cpu * period_usec) // MILLI_CPU_TO_CPU, MIN_QUOTA_USEC)


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """cgroup v1 cpu.shares for a CPU request (upstream ``MilliCPUToShares``)."""
    if milli_cpu <= 0:
        return MIN_SHARES  # the kernel default for "unset" would be 1024; kubelet asks for the minimum
    return min(max((milli_cpu * SHARES_PER_CPU) // MILLI_CPU_TO_CPU, MIN_SHARES), MAX_SHARES)


def shares_to_weight(shares: int) -> int:
    """cgroup v2 cpu.weight for v1 shares (runc ``ConvertCPUSharesToCgroupV2Value``, linear form)."""
    if shares <= 0:
        return 0
    return 1 + ((shares - MIN_SHARES) * 9999) // (MAX_SHARES - MIN_SHARES)


def is_critical_pod(pod: Mapping[str, Any]) -> bool:
    """Upstream ``IsCriticalPod``: static, mirror, or priority at least system-critical."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    source = annotations.get("kubernetes.io/config.source")
    if source is not None and source != "api":
        return True  # static pod
    if "kubernetes.io/config.mirror" in annotations:
        return True
    priority = (pod.get("spec") or {}).get("priority")
    return priority is not None and int(priority) >= SYSTEM_CRITICAL_PRIORITY


def _is_node_critical(pod: Mapping[str, Any]) -> bool:
    return is_critical_pod(pod) and (pod.get("spec") or {}).get("priorityClassName") == SYSTEM_NODE_CRITICAL


def _pod_qos(pod: Mapping[str, Any]) -> str:
    # GetPodQOS prefers the status field once the apiserver has set it.
    return (pod.get("status") or {}).get("qosClass") or qos_class(pod)


def oom_score_adj(
    pod: Mapping[str, Any], container: Mapping[str, Any], memory_capacity: int, qos: str | None = None
) -> int:
    """The container's oom_score_adj (upstream ``GetContainerOOMScoreAdjust``, PodLevelResources off).

    ``qos`` saves recomputing the pod's QoS class when the caller has it."""
    if _is_node_critical(pod):
        return GUARANTEED_OOM_SCORE_ADJ
    qos = qos or _pod_qos(pod)
    if qos == GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == BEST_EFFORT:
        return BEST_EFFORT_OOM_SCORE_ADJ
    capacity = max(int(memory_capacity), 1)
    request = container_requests(container).get("memory", 0)
    adjust = 1000 - (1000 * request) // capacity
    spec = pod.get("spec") or {}
    is_sidecar = container.get("restartPolicy") == "Always" and any(
        c.get("name") == container.get("name") for c in spec.get("initContainers") or ()
    )
    if is_sidecar:
        # A sidecar is never more killable than the least-requesting regular container.
        regular = [container_requests(c).get("memory", 0) for c in spec.get("containers") or ()]
        if regular:
            adjust = min(adjust, 1000 - (1000 * min(regular)) // capacity)
    if adjust < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if adjust == BEST_EFFORT_OOM_SCORE_ADJ:
        return adjust - 1
    return int(adjust)


def memory_high(request: int, limit: int, node_allocatable: int, factor: float = MEMORY_THROTTLING_FACTOR) -> float:
    """MemoryQoS ``memory.high`` in bytes, or ``inf`` when the kubelet would not set it."""
    if limit and request == limit:
        return math.inf  # Guaranteed-style container: memory.high stays "max"
    ceiling = limit if limit else node_allocatable
    if ceiling <= 0:
        return math.inf
    high = math.floor((request + (ceiling - request) * factor) / PAGE_SIZE) * PAGE_SIZE
    return float(high) if high > request else math.inf


# -- the kernel side ----------------------------------------------------------------------


def share_cpu(want: np.ndarray, weight: np.ndarray, node: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """CPU granted per row: ``want`` where the node has room, else weighted max-min fair shares.

    Per over-committed node, find the water level λ with
    ``Σ min(want_i, λ·weight_i) = capacity`` and grant ``min(want_i, λ·weight_i)``.
    Rows are sorted by (node, want/weight); at the k-th row the granted total
    for λ = its ratio is ``Σ_{j≤k} want_j + ratio_k · Σ_{j>k} weight_j``, which
    grows with k, so the level lies just below the first row where it reaches
    the capacity.
    """
    granted = want.copy()
    totals = np.bincount(node, weights=want, minlength=len(capacity))
    over = totals > capacity
    if not over.any():
        return granted
    rows = np.flatnonzero(over[node] & (want > 0))
    a = want[rows]
    w = np.maximum(weight[rows], 1e-9)
    nd = node[rows]
    ratio = a / w
    order = np.lexsort((ratio, nd))
    a, w, nd, ratio, rows = a[order], w[order], nd[order], ratio[order], rows[order]

    new_group = np.empty(len(nd), dtype=bool)
    new_group[0] = True
    np.not_equal(nd[1:], nd[:-1], out=new_group[1:])
    group = np.cumsum(new_group) - 1
    starts = np.flatnonzero(new_group)
    cum_a = np.cumsum(a)
    cum_w = np.cumsum(w)
    base_a = (cum_a - a)[starts][group]  # sum before the group
    base_w = (cum_w - w)[starts][group]
    ends = np.r_[starts[1:], len(nd)] - 1
    group_w = (cum_w[ends] - (cum_w - w)[starts])[group]
    a_le = cum_a - base_a  # Σ want_j, j ≤ k within the group
    w_gt = group_w - (cum_w - base_w)  # Σ weight_j, j > k within the group
    cap = capacity[nd]
    reached = a_le + ratio * w_gt >= cap
    k = starts + np.bincount(group[~reached], minlength=len(starts))
    k = np.minimum(k, ends)  # float rounding guard: the last row always reaches the total
    a_lt_k = (a_le - a)[k]
    w_ge_k = (w_gt + w)[k]
    level = (capacity[nd[starts]] - a_lt_k) / w_ge_k
    granted[rows] = np.minimum(a, level[group] * w)
    return granted


def node_oom_victims(
    usage: np.ndarray, node: np.ndarray, adj: np.ndarray, capacity: np.ndarray, alive: np.ndarray
) -> np.ndarray:
    """Rows the kernel OOM killer kills so every node fits its memory (one victim per node per round).

    ``badness = 1000 * usage / capacity + oom_score_adj`` (see the module
    docstring); rows with ``oom_score_adj == -1000`` or no usage are never
    chosen. Returns the victims' row indexes, in kill order.
    """
    usage = np.where(alive, usage, 0.0)
    victims: list[np.ndarray] = []
    eligible = alive & (adj > OOM_SCORE_ADJ_MIN) & (usage > 0)
    if not eligible.any():  # nothing to kill - and no node at all yet would make `over[node]` index nothing
        return np.zeros(0, dtype=np.int64)
    while True:
        totals = np.bincount(node, weights=usage, minlength=len(capacity))
        over = totals > capacity
        candidates = np.flatnonzero(over[node] & eligible)
        if len(candidates) == 0:
            break
        cnode = node[candidates]
        badness = 1000.0 * usage[candidates] / capacity[cnode] + adj[candidates]
        # Highest badness first per node; among equals the lowest row.
        order = np.lexsort((candidates, -badness, cnode))
        first = np.r_[True, cnode[order][1:] != cnode[order][:-1]]
        chosen = candidates[order][first]
        victims.append(chosen)
        usage[chosen] = 0.0
        eligible[chosen] = False
    return np.concatenate(victims) if victims else np.zeros(0, dtype=np.int64)


@dataclass
class TickResult:
    """What one tick did. Arrays span the table's capacity (rows not running hold 0)."""

    cpu_millis: np.ndarray  # CPU used over the tick, average millicores
    throttled: np.ndarray  # bool: throttled in the periods that ended this tick
    memory: np.ndarray  # working set (memory.current) at the tick's end, bytes
    pids: np.ndarray  # pids.current
    cgroup_oom: np.ndarray  # rows OOM-killed at their own memory.max
    node_oom: np.ndarray  # rows killed by the node-level OOM killer
    node_cpu_millis: np.ndarray  # per node
    node_memory: np.ndarray  # per node, after OOM kills


class CgroupTable:
    """Per-container cgroup settings and counters, one row per container instance.

    Settings are written once per container start (:meth:`configure`);
    counters (``cpu.stat``, ``memory.events``) are reset on (re)start because a
    restarted container gets a new cgroup. Rows not marked running in a
    :meth:`tick` use nothing and accrue nothing.
    """

    def __init__(self, capacity: int = 1024) -> None:
        self.node = np.zeros(capacity, dtype=np.int64)
        self.pod = np.zeros(capacity, dtype=np.int64)
        self.quota_usec = np.zeros(capacity, dtype=np.int64)  # 0: cpu.max "max"
        self.period_usec = np.full(capacity, QUOTA_PERIOD_USEC, dtype=np.int64)
        self.weight = np.ones(capacity, dtype=np.float64)
        self.memory_max = np.full(capacity, np.inf)
        self.memory_high = np.full(capacity, np.inf)
        self.oom_score_adj = np.zeros(capacity, dtype=np.int64)
        # cpu.stat
        self.usage_usec = np.zeros(capacity)
        self.nr_periods = np.zeros(capacity, dtype=np.int64)
        self.nr_throttled = np.zeros(capacity, dtype=np.int64)
        self.throttled_usec = np.zeros(capacity)
        self.period_phase_usec = np.zeros(capacity, dtype=np.int64)
        # memory.events / pressure
        self.memory_current = np.zeros(capacity)
        self.memory_peak = np.zeros(capacity)
        self.high_events = np.zeros(capacity, dtype=np.int64)
        self.high_usec = np.zeros(capacity)
        self.oom_kills = np.zeros(capacity, dtype=np.int64)
        self.pids_current = np.zeros(capacity)
        self.pids_max_events = np.zeros(capacity, dtype=np.int64)

    @property
    def capacity(self) -> int:
        return len(self.node)

    _FIELDS: tuple[tuple[str, Any], ...] = (
        ("node", 0), ("pod", 0), ("quota_usec", 0), ("period_usec", QUOTA_PERIOD_USEC), ("weight", 1.0),
        ("memory_max", np.inf), ("memory_high", np.inf), ("oom_score_adj", 0), ("usage_usec", 0.0),
        ("nr_periods", 0), ("nr_throttled", 0), ("throttled_usec", 0.0), ("period_phase_usec", 0),
        ("memory_current", 0.0), ("memory_peak", 0.0), ("high_events", 0), ("high_usec", 0.0), ("oom_kills", 0),
        ("pids_current", 0.0), ("pids_max_events", 0),
    )
    _COUNTERS = ("usage_usec", "nr_periods", "nr_throttled", "throttled_usec", "period_phase_usec",
                 "memory_current", "memory_peak", "high_events", "high_usec", "pids_current", "pids_max_events")

    def grow(self, capacity: int) -> None:
        if capacity <= self.capacity:
            return
        extra = capacity - self.capacity
        for name, fill in self._FIELDS:
            old = getattr(self, name)
            setattr(self, name, np.concatenate([old, np.full(extra, fill, dtype=old.dtype)]))

    def configure(self, row: int, *, node: int, pod: int = 0, cpu_limit_millis: int = 0, cpu_request_millis: int = 0,
                  memory_limit: int = 0, memory_high_bytes: float = math.inf, adj: int = 0,
                  period_usec: int = QUOTA_PERIOD_USEC) -> None:
        """Write a container's settings from its spec (limits 0 = unlimited)."""
        self.node[row] = node
        self.pod[row] = pod
        self.period_usec[row] = period_usec
        self.quota_usec[row] = milli_cpu_to_quota(cpu_limit_millis, period_usec)
        self.weight[row] = shares_to_weight(milli_cpu_to_shares(cpu_request_millis))
        self.memory_max[row] = float(memory_limit) if memory_limit > 0 else math.inf
        self.memory_high[row] = memory_high_bytes
        self.oom_score_adj[row] = adj
        self.oom_kills[row] = 0
        self.reset_counters(row)

    def reset_counters(self, rows: np.ndarray | int) -> None:
        """A new container instance: fresh cpu.stat and memory counters (oom_kills survive, as a record)."""
        for name in self._COUNTERS:
            getattr(self, name)[rows] = 0

    def tick(
        self,
        dt: float,
        running: np.ndarray,
        *,
        cpu_demand: np.ndarray,
        memory_demand: np.ndarray,
        node_cpu_millis: np.ndarray,
        node_memory: np.ndarray,
        pids_demand: np.ndarray | None = None,
        pod_pids_limit: float = math.inf,
    ) -> TickResult:
        """Account one tick of ``dt`` seconds for the rows flagged ``running``.

        ``cpu_demand`` (millicores) and ``memory_demand`` (bytes) are the
        profile values for this tick; ``node_cpu_millis`` / ``node_memory`` are
        per-node capacities indexed by :attr:`node`. Killed rows (cgroup or
        node OOM) are reported, and their memory is zero in the result; the
        caller stops them.
        """
        dt_usec = round(dt * 1e6)
        # -- CPU --------------------------------------------------------------------
        want = np.where(running, cpu_demand, 0.0)
        limited = self.quota_usec > 0
        cap_rate = np.where(limited, self.quota_usec * 1000.0 / self.period_usec, np.inf)  # millicores
        capped = np.minimum(want, cap_rate)
        granted = share_cpu(capped, self.weight, self.node, node_cpu_millis)
        self.usage_usec += granted * (dt_usec / 1000.0)

        active = limited & (want > 0)
        phase = self.period_phase_usec + np.where(active, dt_usec, 0)
        periods = phase // self.period_usec
        self.period_phase_usec = phase % self.period_usec
        self.nr_periods += periods
        # Throttled: wants more than its quota and actually got all of it
        # (not held below it by contention).
        throttled = active & (want > cap_rate) & (granted >= cap_rate * (1 - 1e-9))
        hit = np.flatnonzero(throttled)
        if len(hit):
            # Runs at rate `want` until the quota is spent, then waits out the period.
            per_period = self.period_usec[hit] - self.quota_usec[hit] * 1000.0 / want[hit]
            self.nr_throttled[hit] += periods[hit]
            self.throttled_usec[hit] += periods[hit] * per_period

        # -- pids ---------------------------------------------------------------------
        pids = np.zeros(self.capacity) if pids_demand is None else np.where(running, pids_demand, 0.0)
        if math.isfinite(pod_pids_limit):
            per_pod = np.bincount(self.pod, weights=pids)
            scale = np.minimum(1.0, pod_pids_limit / np.maximum(per_pod, 1e-9))[self.pod]
            hit = scale < 1.0
            self.pids_max_events += hit & running
            pids = np.where(hit, np.floor(pids * scale), pids)
        self.pids_current = pids

        # -- memory ---------------------------------------------------------------------
        memory = np.where(running, memory_demand, 0.0)
        above_high = running & (memory > self.memory_high)
        self.high_events += above_high
        self.high_usec += above_high * float(dt_usec)
        cgroup_oom = np.flatnonzero(running & (memory > self.memory_max))
        memory[cgroup_oom] = 0.0
        alive = running.copy()
        alive[cgroup_oom] = False
        node_oom = node_oom_victims(memory, self.node, self.oom_score_adj, node_memory, alive)
        memory[node_oom] = 0.0
        killed = np.concatenate([cgroup_oom, node_oom])
        self.oom_kills[killed] += 1
        self.memory_current = memory
        np.maximum(self.memory_peak, memory, out=self.memory_peak)

        n_nodes = len(node_cpu_millis)
        return TickResult(
            cpu_millis=granted,
            throttled=throttled,
            memory=memory,
            pids=pids,
            cgroup_oom=cgroup_oom,
            node_oom=node_oom,
            node_cpu_millis=np.bincount(self.node, weights=granted, minlength=n_nodes),
            node_memory=np.bincount(self.node, weights=memory, minlength=n_nodes),
        )
