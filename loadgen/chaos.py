"""Chaos phases at run time: inject each scheduled fault into the running cluster and time its recovery.

The plan (:mod:`loadgen.plan`) turns a ``chaos`` phase into inject/restore
actions on the run's timeline; the executor hands each one to
:meth:`Injector.on_fault` and goes on driving load, because a fault's recovery
is measured beside the load, never in its way. Every injection runs in its own
thread:

- **kills** are a ``kill -9`` of one replica of a part. The part's supervisor
  brings it back - Ray for the kubelet shard and scheduler actors
  (``max_restarts=-1``), kemu's own (:mod:`emulator.supervisor`) for
  redis-server and the API server - and the recovery time is from the kill
  until the replica answers again (a PING, ``/readyz``). A controller
  manager is killed by crashing the leader (its Lease is *not* released, as
  after a real crash) and starting a replacement, as a supervisor would;
  recovery is until some manager leads again, which takes the Lease's
  duration, as upstream's leader election does.
- **held faults** (partition a kubelet shard, stop a node's kubelet) are rows
  of the fault table (:mod:`emulator.chaos`) set at injection and cleared at
  their restore action; recovery is from the restore until the silenced
  kubelets write again: the affected nodes' Leases renewed and every node
  Ready.

A fault without a target carries a seeded ``pick`` in [0, 1) that is mapped
onto the parts found at injection (the shard index, the node), so a seed
replays the same faults on any cluster size. The summary lists each fault
with its target and recovery time; the run is OK only if every one
recovered.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from emulator import chaos as fault_table
from emulator.api.kinds import LEASE, NODE
from emulator.clock import parse_rfc3339
from loadgen.invariants import node_ready
from loadgen.plan import INJECT_FAULT, Action
from loadgen.scenario import (
    KILL_APISERVER,
    KILL_CONTROLLER_MANAGER,
    KILL_KUBELET_SHARD,
    KILL_REDIS,
    KILL_SCHEDULER,
    PARTITION_SHARD,
    STOP_KUBELET,
)

if TYPE_CHECKING:
    from emulator.supervisor import Supervisor

RECOVERY_TIMEOUT = 120.0  # seconds a part gets to come back before the fault counts as not recovered


class ChaosUnsupported(RuntimeError):
    """The cluster cannot take this fault (e.g. its schedulers are threads of this process, not actors)."""


@dataclass
class FaultResult:
    """One injected fault: what, where, when (seconds from the run's start), and how long recovery took."""

    id: str
    kind: str
    target: str = ""
    at: float = 0.0
    recovered_s: float | None = None
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "target": self.target, "at": round(self.at, 2),
                "recoverySeconds": None if self.recovered_s is None else round(self.recovered_s, 2),
                "recovered": self.recovered_s is not None, **({"error": self.error} if self.error else {})}


def _pick(pick: float, n: int) -> int:
    return min(n - 1, math.floor(pick * n))


class Injector:
    """Applies a run's chaos actions through ``core`` (held faults) and to ``cluster`` (kills: a
    :class:`emulator.cluster.LocalCluster`; ``None`` when the run drives a cluster someone else started)."""

    def __init__(self, core: Any, cluster: Any = None, *, supervisor: Supervisor | None = None,
                 t_start: float | None = None, timeout: float = RECOVERY_TIMEOUT) -> None:
        self.cluster = cluster
        self.supervisor = supervisor
        self.core = core
        self.timeout = timeout
        self.t_start = time.perf_counter() if t_start is None else t_start
        self.results: list[FaultResult] = []
        self._held: dict[str, tuple[FaultResult, str]] = {}  # id -> (result, fault-table target)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    # -- the executor's callback -----------------------------------------------------------------------------

    def on_fault(self, action: Action) -> None:
        detail = dict(action.detail)
        if action.op == INJECT_FAULT:
            result = FaultResult(detail["id"], action.name, at=time.perf_counter() - self.t_start)
            with self._lock:
                self.results.append(result)
            self._spawn(lambda: self._inject(result, detail.get("target", ""), detail.get("pick", 0.0)), result)
        else:
            held = self._held.pop(detail["id"], None)
            if held is not None:
                self._spawn(lambda: self._restore(*held), held[0])

    def _spawn(self, fn: Callable[[], None], result: FaultResult) -> None:
        def run() -> None:
            try:
                fn()
            except Exception as e:  # a fault that could not be injected or did not recover is reported, not raised
                result.error = f"{type(e).__name__}: {e}"

        t = threading.Thread(target=run, name=f"chaos-{result.id}", daemon=True)
        t.start()
        self._threads.append(t)

    # -- faults ----------------------------------------------------------------------------------------------

    def _inject(self, result: FaultResult, target: str, pick: float) -> None:
        kind = result.kind
        if self.cluster is None and kind not in (PARTITION_SHARD, STOP_KUBELET):
            raise ChaosUnsupported(f"{kind}: an attached run cannot kill parts of a cluster it did not start")
        if kind == KILL_KUBELET_SHARD:
            self._crash_replica(result, self.cluster.kubelets, "kubelet shard", target, pick)
        elif kind == KILL_SCHEDULER:
            self._crash_replica(result, self.cluster.schedulers, "scheduler", target, pick)
        elif kind == KILL_CONTROLLER_MANAGER:
            result.target = "leader"
            result.recovered_s = self._crash_controller_manager()
        elif kind == PARTITION_SHARD:
            index = int(target) if target else _pick(pick, self._shards())
            self._hold(result, fault_table.shard_target(index), fault_table.PARTITION, f"shard/{index}")
        elif kind == STOP_KUBELET:
            name = target or self._node_at(pick)
            self._hold(result, fault_table.node_target(name), fault_table.STOP_KUBELET, f"node/{name}")
        elif kind == KILL_REDIS:
            result.target = "redis-server"
            result.recovered_s = self._kill_process("redis-server", self.core.store.redis.ping)
        elif kind == KILL_APISERVER:
            url = getattr(self.cluster, "api_url", None)
            if not url:
                raise ChaosUnsupported("kill-apiserver: the run started no API server")
            result.target = "apiserver"
            result.recovered_s = self._kill_process("apiserver", lambda: _readyz(url, self.cluster.api_token))

    def _shards(self) -> int:
        """How many kubelet shards the run started (an attached run names its target shard instead)."""
        runner = getattr(self.cluster, "kubelets", None)
        if runner is None:
            raise ChaosUnsupported("partition-shard: give a target shard index (the run did not start the shards)")
        return len(runner.actors)

    def _crash_replica(self, result: FaultResult, runner: Any, what: str, target: str, pick: float) -> None:
        crash = getattr(runner, "crash", None)
        if crash is None:
            raise ChaosUnsupported(f"a {what} can be killed only when it runs as a Ray actor (the `kemu` command)")
        index = int(target) if target else _pick(pick, len(runner.actors))
        result.target = str(index)
        result.recovered_s = crash(index, self.timeout)

    def _kill_process(self, name: str, answers: Callable[[], object]) -> float:
        """kill -9 the supervised process ``name``; the seconds until its restarted process answers."""
        if self.supervisor is None:
            raise ChaosUnsupported(f"kill {name}: the run's processes are not supervised")
        t0 = time.perf_counter()
        old = self.supervisor.kill(name)
        deadline = t0 + self.timeout
        while True:
            part = next(p for p in self.supervisor.parts() if p.name == name)
            if part.state == "running" and part.pid not in (None, old):
                try:
                    answers()
                    return time.perf_counter() - t0
                except Exception:  # not serving yet (Redis replaying its AOF, the API server binding)
                    pass
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{name} not back {self.timeout} s after kill -9")
            time.sleep(0.05)  # the supervisor restarts it from its own thread: nothing here to wait on

    def _crash_controller_manager(self) -> float:
        """Crash the leading in-process manager without releasing its Lease; start its replacement; time until
        some manager leads with its controllers running again."""
        managers = getattr(self.cluster, "controller_managers", None)
        if not managers:
            raise ChaosUnsupported("a controller manager can be killed only when it runs in the run's process")
        from emulator.controllers.manager import ControllerManager

        leader = next((m for m in managers if m.is_leader), managers[0])
        t0 = time.perf_counter()
        leader.crash()
        managers.remove(leader)
        managers.append(ControllerManager(self.core, leader.config).start())
        deadline = t0 + self.timeout
        while not any(m.active for m in managers):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"no controller manager leads {self.timeout} s after the crash")
            time.sleep(0.1)  # leadership is decided by the Lease in another thread: nothing here to wait on
        return time.perf_counter() - t0

    def _node_at(self, pick: float) -> str:
        names = sorted(n["metadata"]["name"] for n in self.core.list(NODE).items)
        if not names:
            raise ChaosUnsupported("stop-kubelet: the cluster has no nodes")
        return names[_pick(pick, len(names))]

    def _hold(self, result: FaultResult, row: str, fault: str, shown: str) -> None:
        redis, prefix = self.core.store.redis, self.core.store.config.prefix
        fault_table.set_fault(redis, prefix, row, fault)
        result.target = shown
        self._held[result.id] = (result, row)

    def _restore(self, result: FaultResult, row: str) -> None:
        """Clear the fault; recovered once the silenced kubelets wrote again: every affected node's Lease renewed
        after the restore (a kubelet renews every 10 s of cluster time) and every node Ready."""
        redis, prefix = self.core.store.redis, self.core.store.config.prefix
        fault_table.clear(redis, prefix, row)
        t0, since = time.perf_counter(), self.core.clock.now()
        node = row.removeprefix("node/") if row.startswith("node/") else None
        deadline = t0 + self.timeout
        while not self._renewed_since(since, node):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"kubelets silent {self.timeout} s after {result.target} was restored")
            time.sleep(0.2)  # the shards write on their own ticks: nothing here to wait on
        result.recovered_s = time.perf_counter() - t0

    def _renewed_since(self, since: float, node: str | None) -> bool:
        nodes = self.core.list(NODE).items
        if not all(node_ready(n) for n in nodes):
            return False
        names = {node} if node else {n["metadata"]["name"] for n in nodes}
        renewed = {lease["metadata"]["name"] for lease in self.core.list(LEASE, namespace="kube-node-lease").items
                   if parse_rfc3339((lease.get("spec") or {}).get("renewTime") or "1970-01-01T00:00:00Z") >= since}
        return names <= renewed

    # -- end of run ------------------------------------------------------------------------------------------

    def finish(self) -> dict[str, Any]:
        """Restore what still holds, wait for every recovery, and the summary's ``chaos`` section."""
        for ident in list(self._held):
            result, row = self._held.pop(ident)
            self._spawn(lambda result=result, row=row: self._restore(result, row), result)
        for t in self._threads:
            t.join(self.timeout + 5)
        faults = [r.as_dict() for r in sorted(self.results, key=lambda r: r.at)]
        times = [f["recoverySeconds"] for f in faults if f["recovered"]]
        return {"injected": len(faults), "recovered": len(times),
                "recoverySeconds": {"max": max(times, default=None),
                                    "mean": round(sum(times) / len(times), 2) if times else None},
                "faults": faults}



def _readyz(url: str, token: str | None) -> None:
    """The API server at ``url`` answers ``/readyz`` with 200 (raises otherwise)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    httpx.get(f"{url}/readyz", headers=headers, timeout=2.0, verify=False).raise_for_status()
