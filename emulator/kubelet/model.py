"""The kubelet model a shard drives: nodes and pods in, ``tick(now)`` out.

:class:`KubeletModel` hosts any number of nodes and their pods' containers in
one set of arrays (one row per container, one per pod, one per node) and
advances them all in one :meth:`~KubeletModel.tick`:

1. containers whose start time has come (first start after the profile's
   startup delay, or a restart once its back-off has passed) start: a new
   container instance with fresh cgroup counters, ``restartCount`` + 1 on
   restarts;
2. every running container's profile is evaluated at its own run time
   (vectorised, :class:`~emulator.kubelet.curves.CurveSet`); containers
   whose run duration is over exit with the profile's exit code at the exact
   end time;
3. the cgroup model accounts the tick (:class:`~emulator.kubelet.cgroups.
   CgroupTable`): CPU quota and sharing, throttling, memory, pids, OOM kills
   at memory.max and by the node OOM killer (exit 137, ``OOMKilled``);
4. exited containers are restarted or not by ``restartPolicy``, after the
   CrashLoopBackOff delay (:mod:`emulator.kubelet.restarts`);
5. every 10 s the eviction manager (:mod:`emulator.kubelet.eviction`) checks
   thresholds and node conditions and evicts at most one pod per node
   (phase ``Failed``, reason ``Evicted``, upstream message), after any pods
   over their ephemeral-storage limits.

What comes out: a :class:`TickReport` with events (``Started``, ``BackOff``,
``Evicted``, ``SystemOOM``, node condition events...), the uids of pods
whose status changed (render them with :meth:`~KubeletModel.pod_status`),
and the names of nodes whose pressure conditions changed
(:meth:`~KubeletModel.node_conditions`). Usage for ``metrics.k8s.io`` and
load-aware scheduling is in :meth:`~KubeletModel.pod_usage` and
:meth:`~KubeletModel.node_usage`.

Simplifications (on purpose, documented here so results can be judged):
demand is constant over a tick (use ticks of about a second); ordinary init
containers are not run (sidecars run alongside the app containers); the
startup delay applies to the first start only (restarts start as soon as
the back-off allows); only running containers use ephemeral storage (a dead
container's writable layer is treated as collected); evicted and killed
pods stop at once (no termination grace period); probes, readiness and pod
conditions are left to the caller.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from emulator.api.pods import container_limits, container_requests, qos_class
from emulator.api.quantity import format_bytes, parse_quantity, to_int
from emulator.kubelet import eviction as ev
from emulator.kubelet import model_status as status
from emulator.kubelet.cgroups import (
    OOM_KILLED_EXIT_CODE,
    QUOTA_PERIOD_USEC,
    CgroupTable,
    is_critical_pod,
    memory_high,
    oom_score_adj,
)
from emulator.kubelet.load import LoadTable
from emulator.kubelet.model_eviction import evict_round
from emulator.kubelet.model_state import (
    BACKOFF,
    COMPLETED,
    ERROR,
    FREE,
    OOM_KILLED,
    RUNNING,
    TERMINATED,
    WAITING,
    KubeletEvent,
    PodRecord,
    TickReport,
)
from emulator.kubelet.profiles import (
    PROFILE_ANNOTATION,
    ContainerBehaviour,
    CurveSet,
    PodBehaviour,
    ProfileLibrary,
)
from emulator.kubelet.queueworker import QueueTable
from emulator.kubelet.restarts import (
    INITIAL_BACKOFF,
    MAX_BACKOFF,
    BackOff,
    restart_policy_code,
    should_restart,
)

__all__ = ["KubeletConfig", "KubeletEvent", "KubeletModel", "TickReport"]

DEFAULT_PID_MAX = 4_194_304  # /proc/sys/kernel/pid_max on 64-bit hosts with many CPUs


@dataclass(frozen=True)
class KubeletConfig:
    """The KubeletConfiguration fields the model uses (upstream names in comments)."""

    seed: int = 0  # run seed for profile randomness
    default_profile: str = "default"
    cpu_cfs_quota_period: float = QUOTA_PERIOD_USEC / 1e6  # cpuCFSQuotaPeriod, seconds
    memory_qos: bool = False  # MemoryQoS feature gate
    memory_throttling_factor: float = 0.9  # memoryThrottlingFactor
    pod_pids_limit: int = -1  # podPidsLimit; -1: unlimited
    eviction_hard: str | Mapping[str, str] = field(default_factory=lambda: dict(ev.DEFAULT_HARD_THRESHOLDS))
    eviction_soft: str | Mapping[str, str] = field(default_factory=dict)
    eviction_soft_grace_period: Mapping[str, float] = field(default_factory=dict)  # seconds per signal
    eviction_pressure_transition_period: float = ev.PRESSURE_TRANSITION_PERIOD
    eviction_monitoring_period: float = ev.MONITORING_PERIOD
    backoff_initial: float = INITIAL_BACKOFF
    backoff_max: float = MAX_BACKOFF


class _Grow:
    """Doubling capacity for a group of parallel arrays."""

    @staticmethod
    def arr(a: np.ndarray, capacity: int, fill: Any) -> np.ndarray:
        extra = capacity - len(a)
        if extra <= 0:
            return a
        return np.concatenate([a, np.full((extra, *a.shape[1:]), fill, dtype=a.dtype)])


class KubeletModel:
    """Nodes, pods and containers of one shard, advanced together. Deterministic for a given seed and tick times."""

    def __init__(self, config: KubeletConfig | None = None, profiles: ProfileLibrary | None = None,
                 capacity: int = 1024) -> None:
        self.config = config or KubeletConfig()
        self.profiles = profiles or ProfileLibrary.load(default=self.config.default_profile)
        self.now: float | None = None
        self._period_usec = round(self.config.cpu_cfs_quota_period * 1e6)
        self._pod_pids_limit = math.inf if self.config.pod_pids_limit < 0 else float(self.config.pod_pids_limit)
        # -- containers
        n = capacity
        self.cgroups = CgroupTable(n)
        self.cpu_curve = CurveSet(n)
        self.memory_curve = CurveSet(n)
        self.disk_curve = CurveSet(n)
        self.pids_curve = CurveSet(n)
        self.backoff = BackOff(n, self.config.backoff_initial, self.config.backoff_max)
        self.load = LoadTable(n, 64)  # load targets of pods, request costs of containers
        self.queues = QueueTable(64)  # queue workers (emulator.kubelet.queueworker)
        self.state = np.zeros(n, dtype=np.int8)
        self.c_pod = np.zeros(n, dtype=np.int64)
        self.start_at = np.full(n, np.inf)
        self.started_at = np.zeros(n)
        self.finished_at = np.zeros(n)
        self.duration = np.full(n, np.inf)
        self.exit_code = np.zeros(n, dtype=np.int64)  # what the profile exits with
        self.last_exit_code = np.zeros(n, dtype=np.int64)
        self.last_reason = np.zeros(n, dtype=np.int8)
        self.has_exited = np.zeros(n, dtype=bool)
        self.restarts = np.zeros(n, dtype=np.int64)
        self.policy = np.zeros(n, dtype=np.int8)
        self.disk_usage = np.zeros(n)
        self.disk_limit = np.zeros(n)
        self.memory_request = np.zeros(n)
        self.disk_request = np.zeros(n)
        self._c_name: list[str] = [""] * n
        self._c_image: list[str] = [""] * n
        self._c_requests: list[Mapping[str, Any]] = [{}] * n
        self._c_limit_text: list[str] = [""] * n
        self._free_rows: list[int] = list(range(n - 1, -1, -1))
        # -- pods
        self._pods: dict[str, PodRecord] = {}
        self._pod_rows: list[PodRecord | None] = []
        self._free_pod_rows: list[int] = []
        # Never empty: free container rows point at pod row 0, so an eviction round on nodes
        # without any pod yet must still be able to index it.
        self.p_active = np.zeros(64, dtype=bool)
        self.p_node = np.zeros(64, dtype=np.int64)
        self.p_priority = np.zeros(64, dtype=np.int64)
        self.p_critical = np.zeros(64, dtype=bool)
        self.p_policy = np.zeros(64, dtype=np.int8)
        self.p_disk_limit = np.zeros(64)
        self._p_disk_limit_text: list[str] = [""] * 64
        # -- nodes
        self._node_index: dict[str, int] = {}
        self._node_names: list[str] = []
        self._node_profile: list[str | None] = []
        self.n_cpu = np.zeros(0)
        self.n_memory = np.zeros(0)
        self.n_disk = np.zeros(0)
        self.n_pid_max = np.zeros(0)
        self.n_system_memory = np.zeros(0)
        self.n_system_disk = np.zeros(0)
        self.n_system_pids = np.zeros(0)
        self.n_active = np.zeros(0, dtype=bool)
        hard = ev.parse_thresholds(self.config.eviction_hard, hard=True)
        soft = ev.parse_thresholds(self.config.eviction_soft, hard=False,
                                   grace_periods=self.config.eviction_soft_grace_period)
        self.eviction = ev.EvictionManager(
            [*hard, *soft],
            pressure_transition_period=self.config.eviction_pressure_transition_period,
            monitoring_period=self.config.eviction_monitoring_period,
        )
        self._last: _Usage | None = None

    # -- nodes --------------------------------------------------------------------------

    def add_node(self, node: Mapping[str, Any] | str, *, cpu: str | int | None = None, memory: str | int | None = None,
                 ephemeral_storage: str | int = "100Gi", pid_max: int = DEFAULT_PID_MAX, system_memory: int = 0,
                 system_disk: int = 0, system_pids: int = 0, default_profile: str | None = None) -> int:
        """Register a node, from a Node object (``status.capacity``) or a name plus capacities.

        ``system_*`` are the node's own use outside pods (OS, kubelet, images),
        counted in the eviction signals and the node OOM check.
        ``default_profile`` (or the Node's ``kemu.io/profile`` annotation) is
        the profile of its pods that name none, instead of the config's.
        """
        if isinstance(node, str):
            name = node
            capacity: Mapping[str, Any] = {"cpu": cpu or "8", "memory": memory or "32Gi",
                                           "ephemeral-storage": ephemeral_storage}
        else:
            name = str((node.get("metadata") or {}).get("name"))
            capacity = dict((node.get("status") or {}).get("capacity") or {})
            capacity.setdefault("ephemeral-storage", ephemeral_storage)
            if cpu is not None:
                capacity["cpu"] = cpu
            if memory is not None:
                capacity["memory"] = memory
        if name in self._node_index:
            raise ValueError(f"node {name!r} is already registered")
        if default_profile is None and not isinstance(node, str):
            default_profile = ((node.get("metadata") or {}).get("annotations") or {}).get(PROFILE_ANNOTATION)
        if default_profile is not None:
            self.profiles.get(default_profile, f"node {name}: default profile")
        self._node_profile.append(default_profile)
        idx = len(self._node_names)
        self._node_index[name] = idx
        self._node_names.append(name)
        size = idx + 1

        def put(a: np.ndarray, value: float, fill: float = 0.0) -> np.ndarray:
            a = _Grow.arr(a, size, fill)
            a[idx] = value
            return a

        self.n_cpu = put(self.n_cpu, parse_quantity(capacity.get("cpu", "8")).milli_value())
        self.n_memory = put(self.n_memory, to_int(capacity.get("memory", "32Gi")))
        self.n_disk = put(self.n_disk, to_int(capacity.get("ephemeral-storage", ephemeral_storage)))
        self.n_pid_max = put(self.n_pid_max, pid_max)
        self.n_system_memory = put(self.n_system_memory, system_memory)
        self.n_system_disk = put(self.n_system_disk, system_disk)
        self.n_system_pids = put(self.n_system_pids, system_pids)
        self.n_active = _Grow.arr(self.n_active, size, False)
        self.n_active[idx] = True
        self.eviction.grow(size)
        return idx

    def node_names(self) -> list[str]:
        return [n for i, n in enumerate(self._node_names) if self.n_active[i]]

    def remove_node(self, name: str) -> None:
        """Forget a node and every pod on it (node indexes are never reused, so arrays stay aligned).

        The name is free again: a node deleted and created anew (``kubectl delete/apply``) is
        added under a new index.
        """
        idx = self._node_index.pop(name)
        for pod in [p for p in self._pods.values() if p.node == idx]:
            self.remove_pod(pod.uid)
        self.n_active[idx] = False
        self.n_cpu[idx] = self.n_memory[idx] = 0.0
        self.eviction.forget_node(idx)

    # -- pods --------------------------------------------------------------------------

    def add_pod(self, pod: Mapping[str, Any], now: float, node: str | None = None) -> PodBehaviour:
        """Admit a pod bound to one of our nodes; its containers start after their startup delay.

        Raises :class:`~emulator.kubelet.profiles.ProfileError` for bad behaviour annotations,
        ``KeyError`` for an unknown node, ``ValueError`` for a pod already admitted.
        """
        metadata = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        node_name = node or spec.get("nodeName")
        if node_name not in self._node_index or not self.n_active[self._node_index[node_name]]:
            raise KeyError(f"pod {metadata.get('namespace')}/{metadata.get('name')} is bound to unknown node "
                           f"{node_name!r}")
        n_idx = self._node_index[node_name]
        behaviour = self.profiles.resolve(pod, seed=self.config.seed, default=self._node_profile[n_idx])
        uid = behaviour.uid
        if uid in self._pods:
            raise ValueError(f"pod {uid} is already admitted")
        specs = {c.get("name"): c for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]}
        p_row = self._alloc_pod_row()
        record = PodRecord(uid, str(metadata.get("name", "")), str(metadata.get("namespace", "default")), n_idx, [],
                      spec.get("restartPolicy") or "Always", "", now, behaviour=behaviour)
        record.qos = (pod.get("status") or {}).get("qosClass") or qos_class(pod)
        record.row = p_row
        self._pods[uid] = record
        self._pod_rows[p_row] = record
        self.load.assign_pod(p_row, behaviour.load_target, behaviour.request_latency)
        self.queues.assign_pod(p_row, behaviour.queue, behaviour.queue_rate)
        self.p_active[p_row] = True
        self.p_node[p_row] = n_idx
        self.p_priority[p_row] = int(spec.get("priority") or 0)
        self.p_critical[p_row] = is_critical_pod(pod)

        disk_limits: list[int] = []
        policy = restart_policy_code(record.restart_policy)
        self.p_policy[p_row] = policy
        for cb in behaviour.containers:
            container = specs[cb.name]
            row = self._alloc_row()
            record.rows.append(row)
            self._init_row(row, p_row, n_idx, pod, container, cb=cb, policy=policy, now=now)
            disk_limits.append(int(self.disk_limit[row]))
        all_limited = bool(disk_limits) and all(disk_limits)
        self.p_disk_limit[p_row] = float(sum(disk_limits)) if all_limited else 0.0
        self._p_disk_limit_text[p_row] = format_bytes(sum(disk_limits)) if all_limited else ""
        return behaviour

    def _init_row(self, row: int, p_row: int, node: int, pod: Mapping[str, Any], container: Mapping[str, Any], *,
                  cb: ContainerBehaviour, policy: int, now: float) -> None:
        requests = container_requests(container)
        limits = container_limits(container)
        mem_req, mem_lim = requests.get("memory", 0), limits.get("memory", 0)
        high = math.inf
        if self.config.memory_qos:
            high = memory_high(mem_req, mem_lim, int(self.n_memory[node]), self.config.memory_throttling_factor)
        self.cgroups.configure(
            row, node=node, pod=p_row, cpu_limit_millis=limits.get("cpu", 0),
            cpu_request_millis=requests.get("cpu", 0), memory_limit=mem_lim, memory_high_bytes=high,
            adj=oom_score_adj(pod, container, int(self.n_memory[node]), self._pod_rows[p_row].qos),
            period_usec=self._period_usec,
        )
        self.cpu_curve.assign(row, cb.cpu)
        self.load.assign_row(row, cb.cost_per_request, limits.get("cpu", 0), requests.get("cpu", 0))
        self.memory_curve.assign(row, cb.memory)
        self.disk_curve.assign(row, cb.ephemeral_storage)
        self.pids_curve.assign(row, cb.pids)
        self.backoff.reset(row)
        self.state[row] = WAITING
        self.c_pod[row] = p_row
        self.start_at[row] = now + cb.startup_delay
        self.started_at[row] = 0.0
        self.finished_at[row] = 0.0
        self.duration[row] = cb.duration
        self.exit_code[row] = cb.exit_code
        self.last_exit_code[row] = 0
        self.last_reason[row] = COMPLETED
        self.has_exited[row] = False
        self.restarts[row] = 0
        self.policy[row] = policy
        self.disk_usage[row] = 0.0
        self.disk_limit[row] = float(limits.get("ephemeral-storage", 0))
        self.memory_request[row] = float(mem_req)
        self.disk_request[row] = float(requests.get("ephemeral-storage", 0))
        self._c_name[row] = cb.name
        self._c_image[row] = str(container.get("image", ""))
        self._c_requests[row] = _request_texts(container)
        limit_text = ((container.get("resources") or {}).get("limits") or {}).get("ephemeral-storage")
        self._c_limit_text[row] = str(parse_quantity(limit_text)) if limit_text is not None else ""

    def remove_pod(self, uid: str) -> None:
        """The pod is gone (deleted): free its rows."""
        record = self._pods.pop(uid, None)
        if record is None:
            return
        rows = np.array(record.rows, dtype=np.int64)
        self.state[rows] = FREE
        self.start_at[rows] = np.inf
        for curves in (self.cpu_curve, self.memory_curve, self.disk_curve, self.pids_curve):
            curves.clear(rows)
        self.load.clear_rows(rows)
        self.load.clear_pod(record.row)
        self.queues.clear_pod(record.row)
        self.cgroups.memory_current[rows] = 0.0
        self.cgroups.node[rows] = 0
        self.disk_usage[rows] = 0.0
        self._free_rows.extend(record.rows)
        p_row = record.row
        self.p_active[p_row] = False
        self._pod_rows[p_row] = None
        self._free_pod_rows.append(p_row)

    def begin_termination(self, uid: str) -> None:
        """The kubelet sent the pod's containers SIGTERM (its deletion began); they run on until they stop.

        A queue worker takes no new item from then on, as a worker that handles SIGTERM finishes
        and exits (:mod:`~emulator.kubelet.queueworker`). Readiness is left alone: upstream's prober
        keeps a running container without a readiness probe ready while the pod terminates
        (``prober_manager.go`` ``UpdatePodStatus``; ``worker.go`` stops only liveness and startup
        probes on a deletionTimestamp), so the Ready condition stays True until the containers stop.
        """
        record = self._pods.get(uid)
        if record is not None:
            self.queues.clear_pod(record.row)

    def _alloc_row(self) -> int:
        if not self._free_rows:
            old = len(self.state)
            new = max(2 * old, 1024)
            self._grow_rows(new)
            self._free_rows = list(range(new - 1, old - 1, -1))
        return self._free_rows.pop()

    def _grow_rows(self, n: int) -> None:
        self.cgroups.grow(n)
        for curves in (self.cpu_curve, self.memory_curve, self.disk_curve, self.pids_curve):
            curves.grow(n)
        self.backoff.grow(n)
        self.load.grow(n, len(self.p_active))
        g = _Grow.arr
        self.state = g(self.state, n, FREE)
        self.c_pod = g(self.c_pod, n, 0)
        self.start_at = g(self.start_at, n, np.inf)
        self.started_at = g(self.started_at, n, 0.0)
        self.finished_at = g(self.finished_at, n, 0.0)
        self.duration = g(self.duration, n, np.inf)
        self.exit_code = g(self.exit_code, n, 0)
        self.last_exit_code = g(self.last_exit_code, n, 0)
        self.last_reason = g(self.last_reason, n, 0)
        self.has_exited = g(self.has_exited, n, False)
        self.restarts = g(self.restarts, n, 0)
        self.policy = g(self.policy, n, 0)
        self.disk_usage = g(self.disk_usage, n, 0.0)
        self.disk_limit = g(self.disk_limit, n, 0.0)
        self.memory_request = g(self.memory_request, n, 0.0)
        self.disk_request = g(self.disk_request, n, 0.0)
        extra = n - len(self._c_name)
        self._c_name += [""] * extra
        self._c_image += [""] * extra
        self._c_requests += [{}] * extra
        self._c_limit_text += [""] * extra

    def _alloc_pod_row(self) -> int:
        if self._free_pod_rows:
            return self._free_pod_rows.pop()
        row = len(self._pod_rows)
        self._pod_rows.append(None)
        size = max(len(self.p_active), 64)
        while size <= row:
            size *= 2
        self.p_active = _Grow.arr(self.p_active, size, False)
        self.p_node = _Grow.arr(self.p_node, size, 0)
        self.p_priority = _Grow.arr(self.p_priority, size, 0)
        self.p_critical = _Grow.arr(self.p_critical, size, False)
        self.p_policy = _Grow.arr(self.p_policy, size, 0)
        self.p_disk_limit = _Grow.arr(self.p_disk_limit, size, 0.0)
        self._p_disk_limit_text += [""] * (size - len(self._p_disk_limit_text))
        self.load.grow(len(self.state), size)
        self.queues.grow(size)
        return row

    # -- the tick -------------------------------------------------------------------------

    def tick(self, now: float,
             shares: Callable[[dict[str, int]], Mapping[str, float] | None] | None = None) -> TickReport:
        """Advance every container to ``now`` (seconds, cluster clock).

        ``shares``, when given and some pod has a load target, is called once the tick's starts and
        exits are known, with the ready pods per target *as they serve this tick*; it returns each
        target's requests/s per ready pod (None: keep the last shares). So the requests a target's
        ready pods serve in a tick sum to its rate, also in the tick pods become ready or stop.
        """
        report = TickReport()
        dt = 0.0 if self.now is None else max(0.0, now - self.now)
        self.now = now

        # 1. Starts and restarts that are due (start at their exact scheduled time).
        due = np.flatnonzero(((self.state == WAITING) | (self.state == BACKOFF)) & (self.start_at <= now))
        if len(due):
            self._start(due, report)

        # 2. Profiles at each running container's own time; runs that are over exit.
        running = self.state == RUNNING
        t_local = np.where(running, now - self.started_at, 0.0)
        finished = np.flatnonzero(running & (t_local >= self.duration))
        if len(finished):
            running[finished] = False
            ends = self.started_at[finished] + self.duration[finished]
            codes = self.exit_code[finished]
            self._exit(finished, ends, codes, np.where(codes == 0, COMPLETED, ERROR), report)
        cpu = self.cpu_curve.evaluate(t_local)
        # Load targets: the ready pods after this tick's starts and exits are the ones that serve it.
        ready = self._pods_ready(running) if self.load.targets() else None
        if ready is not None and shares is not None:  # every target seen: a count that drops to 0 is published
            got = shares(self.load.ready_counts(ready))
            if got is not None:
                self.load.set_shares(got)
        if not self.load.active:
            ready = None  # no pod serves a target: nothing to add or account
        if ready is not None:  # ready pods of load targets serve their share: CPU = base + share * cost
            cpu += self.load.demand(self.c_pod, ready, running)
        memory = self.memory_curve.evaluate(t_local)
        disk = self.disk_curve.evaluate(t_local)
        pids = self.pids_curve.evaluate(t_local)

        # 3. The kernel: CPU, pids, memory and OOM kills.
        result = self.cgroups.tick(
            dt, running, cpu_demand=cpu, memory_demand=memory,
            node_cpu_millis=self.n_cpu, node_memory=np.maximum(self.n_memory - self.n_system_memory, 0.0),
            pids_demand=pids, pod_pids_limit=self._pod_pids_limit,
        )
        self.disk_usage = np.where(running, disk, 0.0)
        if ready is not None:
            self.load.account(dt, self.c_pod, ready, cpu, running)
        if len(result.node_oom):
            for row in result.node_oom:
                node = self._node_names[int(self.cgroups.node[row])]
                record = self._pod_rows[int(self.c_pod[row])]
                report.events.append(KubeletEvent(
                    now, "SystemOOM", f"System OOM encountered, victim process: {self._c_name[row]}", node,
                    record.uid if record else None, self._c_name[row], "Warning"))
        killed = np.concatenate([result.cgroup_oom, result.node_oom])
        if len(killed):
            self._exit(killed, np.full(len(killed), now), np.full(len(killed), OOM_KILLED_EXIT_CODE),
                       np.full(len(killed), OOM_KILLED), report)
        self._last = _Usage(result.cpu_millis, result.memory, self.disk_usage, result.pids,
                            result.node_cpu_millis, result.node_memory)

        # 4. Eviction manager, on its own period.
        status.update_phases(self, report)
        if self.eviction.due(now):
            evict_round(self, now, result.node_memory, result.pids, report)
        return report

    def _start(self, rows: np.ndarray, report: TickReport) -> None:
        restarting = rows[self.state[rows] == BACKOFF]
        if len(restarting):
            self.backoff.next(restarting, self.finished_at[restarting], self.start_at[restarting])
            self.restarts[restarting] += 1
        self.state[rows] = RUNNING
        self.started_at[rows] = self.start_at[rows]
        self.start_at[rows] = np.inf
        self.cgroups.reset_counters(rows)
        for row in rows:
            record = self._pod_rows[int(self.c_pod[row])]
            if record is None:
                continue
            name = self._c_name[row]
            report.events.append(KubeletEvent(float(self.started_at[row]), "Started", f"Started container {name}",
                                              self._node_names[record.node], record.uid, name))
            self._touch(record, report)

    def _exit(self, rows: np.ndarray, when: np.ndarray, codes: np.ndarray, reasons: np.ndarray,
              report: TickReport) -> None:
        self.finished_at[rows] = when
        self.last_exit_code[rows] = codes
        self.last_reason[rows] = reasons
        self.has_exited[rows] = True
        again = should_restart(self.policy[rows], codes)
        restart_rows = rows[again]
        self.state[rows[~again]] = TERMINATED
        if len(restart_rows):
            self.state[restart_rows] = BACKOFF
            self.start_at[restart_rows] = self.backoff.restart_at(restart_rows, self.finished_at[restart_rows])
        for row in rows:
            record = self._pod_rows[int(self.c_pod[row])]
            if record is None:
                continue
            if self.state[row] == BACKOFF and self.start_at[row] > self.finished_at[row]:
                name = self._c_name[row]
                pod_text = f"{record.name}_{record.namespace}({record.uid})"  # format.Pod
                report.events.append(KubeletEvent(
                    float(self.finished_at[row]), "BackOff",
                    f"Back-off restarting failed container {name} in pod {pod_text}",
                    self._node_names[record.node], record.uid, name, "Warning"))
            self._touch(record, report)

    def _touch(self, record: PodRecord, report: TickReport) -> None:
        """A container of the pod changed state: report the pod; its phase is recomputed once, at the tick's end."""
        report.changed_pods.add(record.uid)

    # -- load targets ----------------------------------------------------------------------

    def _pods_ready(self, running: np.ndarray) -> np.ndarray:
        """Per pod row: active with every container running (kemu models no probes, so running is ready)."""
        n = len(self.p_active)
        live = self.state != FREE
        rows = np.bincount(self.c_pod, weights=live, minlength=n)[:n]
        up = np.bincount(self.c_pod, weights=running & live, minlength=n)[:n]
        return self.p_active & (rows > 0) & (up == rows)

    def pods_ready(self) -> np.ndarray:
        """Per pod row: whether the pod is ready now (queue workers consume only then)."""
        return self._pods_ready(self.state == RUNNING)

    def load_ready_counts(self) -> dict[str, int]:
        """Ready pods per load target on this model's nodes (every target seen, zeros included)."""
        if not self.load.targets():
            return {}
        return self.load.ready_counts(self._pods_ready(self.state == RUNNING))

    def set_load_shares(self, shares: Mapping[str, float]) -> None:
        """Each load target's requests/s per ready pod (cluster-wide), used from the next tick on."""
        self.load.set_shares(shares)

    def take_load_window(self) -> dict[str, tuple[float, float]]:
        """uid -> (requests/s served, mean latency in seconds) of each load-target pod since the last call."""
        if not self.load.targets():
            return {}
        window = self.load.take_window()
        out = {}
        for row in np.flatnonzero(self.load.p_target[: len(self._pod_rows)] >= 0):
            record = self._pod_rows[row]
            if record is not None:
                out[record.uid] = (float(window.rate[row]), float(window.latency[row]))
        return out

    # -- reading the state ---------------------------------------------------------------

    def pod_phase(self, uid: str) -> str:
        return self._pods[uid].phase

    def pod_status(self, uid: str) -> dict[str, Any]:
        """``status`` fields the kubelet owns: phase, reason/message, qosClass and containerStatuses."""
        return status.pod_status(self, uid)

    def container_rows(self, uid: str) -> dict[str, int]:
        """Row index of each of the pod's containers (for reading the arrays directly)."""
        record = self._pods[uid]
        return {self._c_name[r]: r for r in record.rows}

    def pod_usage(self, uid: str) -> dict[str, dict[str, float]]:
        """Last tick's usage per container: cpu (millicores), memory (working set, bytes), disk, pids.

        Containers added since the last tick read 0."""
        last = self._last

        def at(a: np.ndarray | None, row: int) -> float:
            return float(a[row]) if a is not None and row < len(a) else 0.0

        cpu = last.cpu if last else None
        pids = last.pids if last else None
        return {self._c_name[r]: {"cpu": at(cpu, r), "memory": at(self.cgroups.memory_current, r),
                                  "ephemeral-storage": at(self.disk_usage, r), "pids": at(pids, r)}
                for r in self._pods[uid].rows}

    def node_usage(self) -> dict[str, dict[str, float]]:
        """Last tick's per-node totals over pods (cpu millicores, memory bytes)."""
        last = self._last
        n = len(last.node_cpu) if last else 0
        return {name: {"cpu": float(last.node_cpu[i]) if last and i < n else 0.0,
                       "memory": float(last.node_memory[i]) if last and i < n else 0.0}
                for i, name in enumerate(self._node_names) if self.n_active[i]}

    def node_conditions(self, name: str) -> dict[str, bool]:
        idx = self._node_index[name]
        return {c: bool(self.eviction.condition[idx, k]) for k, c in enumerate(ev.CONDITIONS)}


@dataclass
class _Usage:
    cpu: np.ndarray
    memory: np.ndarray
    disk: np.ndarray
    pids: np.ndarray
    node_cpu: np.ndarray
    node_memory: np.ndarray


def _request_texts(container: Mapping[str, Any]) -> dict[str, Any]:
    """Requests as written, with limits filling missing requests (apiserver defaulting)."""
    resources = container.get("resources") or {}
    texts = dict(resources.get("limits") or {})
    texts.update(resources.get("requests") or {})
    return texts
