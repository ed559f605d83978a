"""Chaos controls against a real Redis: real kubelet shards on a ManualClock, with the node lifecycle,
taint eviction and ReplicaSet controllers and a real scheduler where the scenario needs them.

As in ``test_kubelet_shard.py`` every step is: wait until the informers delivered what was written
(a condition with a deadline), advance cluster time, tick, wait again. Faults are set through
:mod:`emulator.chaos` - the same table ``kemu chaos`` writes - and the shards pick them up on their
next tick.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator import chaos
from emulator.api.kinds import LEASE, NODE, POD, REPLICASET
from emulator.api.types import Obj
from emulator.cli import main
from emulator.clock import ManualClock, parse_rfc3339
from emulator.cluster import ClusterState
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.kubelet.shard import KubeletShard, kubelet_shard_config
from emulator.scheduler.scheduler import SchedulerOptions
from emulator.scheduler_host import HostSettings, SchedulerHost
from emulator.server.core import ServerCore
from tests import builders as b
from tests import workloads as w
from tests.kubelet_standin import is_ready
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

T0 = 1_700_000_000.0
LABELS = {"app": "web"}


@pytest.fixture
def stop_later() -> Iterator[list[Any]]:
    """Things with a ``stop()`` to call at the end, last started first stopped."""
    started: list[Any] = []
    yield started
    for thing in reversed(started):
        thing.stop()


def start_shards(core: ServerCore, clock: ManualClock, stop_later: list[Any], count: int, shards: int = 1
                 ) -> list[KubeletShard]:
    cfg = kubelet_shard_config({}, [{"name": "n", "count": count}])
    out = []
    for i in range(shards):
        shard = KubeletShard(core, i, shards, cfg, clock)
        shard.start(timeout=30)
        stop_later.append(shard)
        out.append(shard)
    return out


def step(shards: list[KubeletShard], clock: ManualClock, seconds: float = 1.0) -> None:
    for shard in shards:
        assert shard.sync(10), "informers did not catch up"
    clock.advance(seconds)
    for shard in shards:
        shard.tick()
    for shard in shards:
        assert shard.sync(10), "informers did not catch up"


def run_until(shards: list[KubeletShard], clock: ManualClock, done: Callable[[], bool], limit: float,
              seconds: float = 1.0, between: Callable[[], None] | None = None) -> None:
    waited = 0.0
    while not done():
        assert waited < limit, f"condition not met after {limit} cluster seconds"
        step(shards, clock, seconds)
        if between is not None:
            between()
        waited += seconds


def renew_time(core: ServerCore, node: str) -> float:
    return parse_rfc3339(core.get(LEASE, "kube-node-lease", node)["spec"]["renewTime"])


def heartbeat_time(core: ServerCore, node: str) -> float:
    ready = next(c for c in core.get(NODE, None, node)["status"]["conditions"] if c["type"] == "Ready")
    return parse_rfc3339(ready["lastHeartbeatTime"])


def ready_status(core: ServerCore, node: str) -> str:
    return next(c["status"] for c in core.get(NODE, None, node)["status"]["conditions"] if c["type"] == "Ready")


def bound_pod(name: str, node: str) -> Obj:
    body = b.pod(name, containers=[b.container(cpu="100m", memory="64Mi")], node=node)
    body["metadata"]["annotations"] = {"kemu.io/startup-delay": "0s"}
    return body


# ------------------------------------------------------------------------------------- the table


def test_fault_table_validates_targets_and_restores(env: tuple[ServerCore, ManualClock]) -> None:
    core, _ = env
    client, prefix = core.store.redis, core.store.config.prefix
    chaos.set_fault(client, prefix, "node/a", chaos.STOP_KUBELET)
    chaos.set_fault(client, prefix, "node/b", chaos.BREAK_RUNTIME)
    chaos.set_fault(client, prefix, "shard/1", chaos.PARTITION)
    assert chaos.faults(client, prefix) == {"node/a": "stop-kubelet", "node/b": "break-runtime",
                                            "shard/1": "partition"}
    state = chaos.read(client, prefix)
    assert (state.stopped, state.broken, state.partitioned) == ({"a"}, {"b"}, {1})
    for target, fault in (("node/a", chaos.PARTITION), ("shard/x", chaos.PARTITION), ("pod/a", chaos.STOP_KUBELET)):
        with pytest.raises(chaos.ChaosError):
            chaos.set_fault(client, prefix, target, fault)
    assert chaos.clear(client, prefix, "node/a") and not chaos.clear(client, prefix, "node/a")
    assert chaos.clear_all(client, prefix) == 2
    assert chaos.faults(client, prefix) == {} and not chaos.read(client, prefix)


# ------------------------------------------------------------------------------------ stop-kubelet


def test_stop_kubelet_stops_only_that_nodes_heartbeats_until_restored(env: tuple[ServerCore, ManualClock],
                                                                      stop_later: list[Any]) -> None:
    core, clock = env
    shards = start_shards(core, clock, stop_later, 2)
    for _ in range(12):  # leases created, a first node status written for both
        step(shards, clock)
    chaos.set_fault(core.store.redis, core.store.config.prefix, "node/n-00000", chaos.STOP_KUBELET)
    step(shards, clock)
    frozen_lease, frozen_beat = renew_time(core, "n-00000"), heartbeat_time(core, "n-00000")
    for _ in range(60):
        step(shards, clock)
    assert renew_time(core, "n-00000") == frozen_lease
    assert heartbeat_time(core, "n-00000") == frozen_beat
    assert clock.now() - renew_time(core, "n-00001") <= 10.0  # the other node kept its 10 s renewals
    assert clock.now() - frozen_lease > 40.0

    restored_at = clock.now()
    chaos.clear(core.store.redis, core.store.config.prefix, "node/n-00000")
    step(shards, clock)
    assert renew_time(core, "n-00000") > restored_at  # the overdue renewal goes out on the first tick
    run_until(shards, clock, lambda: heartbeat_time(core, "n-00000") > restored_at, 12)


def test_stopped_node_goes_unknown_its_pods_are_evicted_after_300s_and_replaced_elsewhere(
        env: tuple[ServerCore, ManualClock], redis_url: str, stop_later: list[Any]) -> None:
    core, clock = env
    shards = start_shards(core, clock, stop_later, 3)
    manager = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=(
        "nodelifecycle", "taint-eviction-controller", "replicaset")), clock=clock)
    stop_later.append(manager)
    # Scheduling does not depend on cluster time: a real scheduler host on its own connection.
    scheduler = SchedulerHost(HostSettings(redis_url), [SchedulerOptions()])
    stop_later.append(scheduler.start(sync_timeout=30))
    step(shards, clock)
    manager.start()
    assert manager.wait_active(20)
    lifecycle = manager.controllers()["nodelifecycle"]
    nodes = ["n-00000", "n-00001", "n-00002"]

    def observed(alive: list[str]) -> Callable[[], None]:
        # A ManualClock jumps in microseconds: wait until the controller saw each live renewal, or
        # it would count a heartbeat it has not processed yet as a missed one.
        def check() -> None:
            stamps = {n: core.get(LEASE, "kube-node-lease", n)["spec"]["renewTime"] for n in alive}
            wait_for(lambda: all(s in lifecycle._probe.get(n, ("", 0))[0] for n, s in stamps.items()), 10,
                     "the node lifecycle controller saw the renewals")
        return check

    def pods() -> list[Obj]:
        return [p for p in core.list(POD, "default", label_selector="app=web").items
                if not p["metadata"].get("deletionTimestamp")]

    core.create(REPLICASET, w.replica_set("web", 3, LABELS))
    run_until(shards, clock, lambda: len(pods()) == 3 and all(is_ready(p) for p in pods()), 60,
              between=observed(nodes))
    victim = pods()[0]["spec"]["nodeName"]
    doomed = {p["metadata"]["name"] for p in pods() if p["spec"]["nodeName"] == victim}
    alive = [n for n in nodes if n != victim]

    chaos.set_fault(core.store.redis, core.store.config.prefix, f"node/{victim}", chaos.STOP_KUBELET)
    run_until(shards, clock, lambda: ready_status(core, victim) == "Unknown", 60, seconds=2.0,
              between=observed(alive))
    assert ready_status(core, alive[0]) == "True" and ready_status(core, alive[1]) == "True"
    unknown_at = clock.now()

    def evicted() -> bool:
        return all(core.get(POD, "default", n)["metadata"].get("deletionTimestamp") for n in doomed)

    run_until(shards, clock, evicted, 330, seconds=5.0, between=observed(alive))
    # tolerationSeconds 300 for unreachable:NoExecute (DefaultTolerationSeconds), counted from the taint.
    assert clock.now() - unknown_at >= 295
    run_until(shards, clock, lambda: len(pods()) == 3 and all(is_ready(p) for p in pods()), 60,
              between=observed(alive))
    assert all(p["spec"]["nodeName"] in alive for p in pods())
    # The stopped kubelet never confirms the deletions: its pods stay Terminating, as upstream.
    assert all(core.get(POD, "default", n)["metadata"].get("deletionTimestamp") for n in doomed)


# ---------------------------------------------------------------------------------- break-runtime


def test_break_runtime_keeps_pods_pending_while_other_nodes_run_theirs(env: tuple[ServerCore, ManualClock],
                                                                       stop_later: list[Any]) -> None:
    core, clock = env
    shards = start_shards(core, clock, stop_later, 2)
    step(shards, clock)
    chaos.set_fault(core.store.redis, core.store.config.prefix, "node/n-00000", chaos.BREAK_RUNTIME)
    core.create(POD, bound_pod("stuck", "n-00000"))
    core.create(POD, bound_pod("fine", "n-00001"))
    run_until(shards, clock, lambda: is_ready(core.get(POD, "default", "fine")), 30)
    for _ in range(30):
        step(shards, clock)
    stuck = core.get(POD, "default", "stuck")
    assert (stuck["status"] or {}).get("phase", "Pending") == "Pending" and not is_ready(stuck)
    assert not stuck["status"].get("containerStatuses") and not stuck["status"].get("hostIP")
    assert ready_status(core, "n-00000") == "True"  # nothing tells the scheduler to stay away
    assert clock.now() - renew_time(core, "n-00000") <= 10.0

    chaos.clear_all(core.store.redis, core.store.config.prefix)
    run_until(shards, clock, lambda: is_ready(core.get(POD, "default", "stuck")), 30)


# ---------------------------------------------------------------------------------- partition


def test_partitioned_shard_renews_nothing_until_restored(env: tuple[ServerCore, ManualClock],
                                                         stop_later: list[Any]) -> None:
    core, clock = env
    shards = start_shards(core, clock, stop_later, 8, shards=2)
    for _ in range(12):
        step(shards, clock)
    cut = shards[1].nodes()
    kept = shards[0].nodes()
    assert cut and kept, "both shards own nodes"
    chaos.set_fault(core.store.redis, core.store.config.prefix, "shard/1", chaos.PARTITION)
    step(shards, clock)
    frozen = {n: (renew_time(core, n), heartbeat_time(core, n)) for n in cut}
    for _ in range(45):
        step(shards, clock)
    assert {n: (renew_time(core, n), heartbeat_time(core, n)) for n in cut} == frozen
    assert all(clock.now() - renew_time(core, n) <= 10.0 for n in kept)

    restored_at = clock.now()
    chaos.clear(core.store.redis, core.store.config.prefix, "shard/1")
    step(shards, clock)
    assert all(renew_time(core, n) > restored_at for n in cut)


# ---------------------------------------------------------------------------------------- CLI


def test_cli_sets_lists_and_restores_faults_of_the_detached_cluster(env: tuple[ServerCore, ManualClock],
                                                                    redis_url: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    core, _ = env
    monkeypatch.setenv("KEMU_HOME", str(tmp_path))
    # A state file naming this (live) process stands in for `kemu up --detach`.
    ClusterState(os.getpid(), redis_url, False, str(tmp_path), 0.0).write()
    client, prefix = core.store.redis, core.store.config.prefix
    assert main(["chaos", "stop-kubelet", "n-00003"]) == 0
    assert main(["chaos", "break-runtime", "n-00004"]) == 0
    assert main(["chaos", "partition-shard", "2"]) == 0
    assert chaos.faults(client, prefix) == {"node/n-00003": "stop-kubelet", "node/n-00004": "break-runtime",
                                            "shard/2": "partition"}
    capsys.readouterr()
    assert main(["chaos", "list", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == chaos.faults(client, prefix)
    assert main(["chaos", "restore", "n-00003"]) == 0
    assert "restored node/n-00003" in capsys.readouterr().out
    assert main(["chaos", "restore"]) == 1  # neither a target nor --all
    assert main(["chaos", "restore", "--all"]) == 0
    assert "restored 2 target(s)" in capsys.readouterr().out
    assert chaos.faults(client, prefix) == {}
    assert main(["chaos", "list"]) == 0
    assert "no faults injected" in capsys.readouterr().out
