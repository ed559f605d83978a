"""The eviction manager: thresholds, ranking, messages, conditions, one pod per node per round.

Rules (pkg/kubelet/eviction): a threshold is met when available < threshold;
memory ranking = (usage > request first, lower priority, larger usage -
request); pid ranking = (lower priority, more pids); critical pods are
skipped; conditions hold for the pressure transition period.
"""

from __future__ import annotations

import numpy as np
import pytest

from emulator.api.quantity import format_bytes
from emulator.kubelet.eviction import (
    ContainerUsage,
    EvictionManager,
    LocalStorage,
    PodStats,
    Threshold,
    eviction_message,
    parse_thresholds,
    rank_pods,
)

MI = 1024**2
GI = 1024**3


THRESHOLDS = [
    ("memory.available<100Mi", [Threshold("memory.available", 100 * MI, None, 0.0, True, "100Mi")]),
    ("memory.available<1Gi,nodefs.available<10%",
     [Threshold("memory.available", GI, None, 0.0, True, "1Gi"),
      Threshold("nodefs.available", None, 0.1, 0.0, True, "10%")]),
    ({"pid.available": "5%", "imagefs.available": "0%"}, [Threshold("pid.available", None, 0.05, 0.0, True, "5%")]),
    ({"pid.available": "1000"}, [Threshold("pid.available", 1000, None, 0.0, True, "1k")]),
]


@pytest.mark.parametrize(("spec", "expected"), THRESHOLDS, ids=["flag", "flag-two", "map-percent-0-dropped", "count"])
def test_parse_thresholds(spec: object, expected: list[Threshold]) -> None:
    assert parse_thresholds(spec) == expected


BAD_THRESHOLDS = [
    ("memory.avail<100Mi", "unknown eviction signal"),
    ("memory.available>100Mi", "expected signal<quantity"),
    ("memory.available<lots", "is not a quantity"),
    ("nodefs.available<120%", "not within 0%..100%"),
]


@pytest.mark.parametrize(("spec", "error"), BAD_THRESHOLDS, ids=["signal", "operator", "quantity", "percent"])
def test_bad_thresholds(spec: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_thresholds(spec)


def test_soft_thresholds_need_grace_periods() -> None:
    with pytest.raises(ValueError, match="needs a grace period"):
        parse_thresholds("memory.available<1Gi", hard=False)
    (soft,) = parse_thresholds("memory.available<1Gi", hard=False, grace_periods={"memory.available": 30})
    assert soft.grace_period == 30 and not soft.hard


def stats(rows: list[tuple[float, float, int]], *, node: list[int] | None = None, critical: list[bool] | None = None,
          pids: list[float] | None = None) -> PodStats:
    """rows: (memory usage Mi, memory request Mi, priority)."""
    n = len(rows)
    usage = np.array([r[0] for r in rows], float) * MI
    request = np.array([r[1] for r in rows], float) * MI
    return PodStats(
        node=np.array(node or [0] * n), active=np.ones(n, bool), critical=np.array(critical or [False] * n),
        priority=np.array([r[2] for r in rows]), memory_usage=usage, memory_request=request,
        disk_usage=usage, disk_request=request, pids=np.array(pids or [0.0] * n),
    )


def memory_order(rows: list[tuple[float, float, int]]) -> list[int]:
    return sorted(range(len(rows)), key=lambda i: (not rows[i][0] > rows[i][1], rows[i][2], -(rows[i][0] - rows[i][1])))


RANKING = [
    [(300, 0, 0), (900, 1024, 0), (500, 0, 0)],  # BestEffort (bigger first), then under-request
    [(300, 0, 100), (200, 0, 0)],  # among exceeders, lower priority first
    [(1000, 100, 0), (600, 0, 0)],  # same priority: larger usage - request first
    [(1024, 1024, 0), (100, 50, 1000), (10, 0, 1000)],  # Guaranteed (usage == request) last
    [(100, 200, 5), (100, 300, 1)],  # nobody exceeds: priority, then usage - request
]


@pytest.mark.parametrize("rows", RANKING, ids=["best-effort-first", "priority", "usage-above-request",
                                               "guaranteed-last", "none-exceed"])
def test_rank_memory(rows: list[tuple[float, float, int]]) -> None:
    pods = np.arange(len(rows))
    assert list(rank_pods("memory", pods, stats(rows))) == memory_order(rows)


def test_rank_pids() -> None:
    s = stats([(0, 0, 10), (0, 0, 0), (0, 0, 0)], pids=[5000, 10, 900])
    assert list(rank_pods("pids", np.arange(3), s)) == [2, 1, 0]  # priority 0 first, more pids first


def test_eviction_message_is_upstreams() -> None:
    containers = [ContainerUsage("app", 300 * MI, 0, "0"), ContainerUsage("side", 10 * MI, 64 * MI, "64Mi")]
    message, annotations = eviction_message("memory", "100Mi", format_bytes(50 * MI), containers)
    assert message == ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
                       "Container app was using 300Mi, request is 0, has larger consumption of memory. ")
    assert annotations == {"offending_containers": "app", "offending_containers_usage": "300Mi",
                           "starved_resource": "memory"}
    pid_message, _ = eviction_message("pids", "1k", "999", containers)
    assert pid_message == "The node was low on resource: pids. Threshold quantity: 1k, available: 999. "


def memory_signals(available_mi: list[float], capacity_mi: list[float]) -> dict:
    return {"memory.available": (np.array(available_mi, float) * MI, np.array(capacity_mi, float) * MI)}


def test_one_pod_per_node_per_round_and_critical_pods_are_skipped() -> None:
    manager = EvictionManager(nodes=2)
    rows = [(500, 0, 0), (400, 0, 0), (300, 0, 0), (200, 0, 0)]
    s = stats(rows, node=[0, 0, 1, 1], critical=[True, False, False, False])
    result = manager.synchronize(0.0, memory_signals([50, 60], [4096, 4096]), s)
    # node 0: pod 0 ranks first but is critical -> pod 1; node 1: pod 2.
    assert [(e.pod, e.node) for e in result.evictions] == [(1, 0), (2, 1)]
    assert result.evictions[0].message == (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. ")  # no details given
    assert sorted(result.thresholds_met) == [(0, "memory"), (1, "memory")]
    assert manager.due(9.9) is False and manager.due(10.0) is True


def test_conditions_hold_for_the_transition_period() -> None:
    manager = EvictionManager(nodes=1, pressure_transition_period=300.0)
    s = stats([(100, 0, 0)])
    timeline = [(0, 50, True), (10, 500, True), (299, 500, True), (300, 500, False), (310, 50, True)]
    changes = []
    for t, available, expected in timeline:
        result = manager.synchronize(float(t), memory_signals([available], [4096]), s)
        changes += [(t, c.type, c.status, c.reason) for c in result.conditions]
        assert manager.condition[0, 0] == expected, t
    assert changes == [(0, "MemoryPressure", True, "KubeletHasInsufficientMemory"),
                       (300, "MemoryPressure", False, "KubeletHasSufficientMemory"),
                       (310, "MemoryPressure", True, "KubeletHasInsufficientMemory")]


def test_soft_threshold_waits_for_its_grace_period() -> None:
    soft = parse_thresholds("memory.available<1Gi", hard=False, grace_periods={"memory.available": 30})
    manager = EvictionManager(soft, nodes=1)
    s = stats([(100, 0, 0)])
    evicted_at = [t for t in range(0, 60, 10)
                  if manager.synchronize(float(t), memory_signals([500], [4096]), s).evictions]
    assert evicted_at == [30, 40, 50]  # first met at 0; actionable once 30 s have passed
    assert manager.condition[0, 0]  # the condition did not wait for the grace period


def test_unobserved_signals_meet_no_threshold() -> None:
    manager = EvictionManager(nodes=1)  # defaults include imagefs and inode thresholds
    result = manager.synchronize(0.0, memory_signals([4000], [4096]), stats([(1, 0, 0)]))
    assert not result.evictions and not result.conditions


def test_local_storage_limits() -> None:
    s = stats([(0, 0, 0), (0, 0, 0), (0, 0, 0)])
    local = LocalStorage(
        pod=np.array([0, 1, 1, 2]), alive=np.ones(4, bool),
        usage=np.array([200.0, 60.0, 60.0, 10.0]) * MI, limit=np.array([100.0, 100.0, 100.0, 0.0]) * MI,
        pod_limit=np.array([100.0, 100.0, 0.0]) * MI, names=["a", "b", "c", "d"],
        limit_text=["100Mi"] * 3 + [""], pod_limit_text=["100Mi", "100Mi", ""],
    )
    # pod 0 (its single container over 100Mi) and pod 1 (60 + 60 over its 100Mi total) go; pod 2 has no limit.
    manager = EvictionManager(nodes=1)
    result = manager.synchronize(0.0, memory_signals([50], [4096]), s, local_storage=local)
    messages = {e.pod: e.message for e in result.evictions}
    assert messages == {
        0: "Pod ephemeral local storage usage exceeds the total limit of containers 100Mi. ",
        1: "Pod ephemeral local storage usage exceeds the total limit of containers 100Mi. ",
    }  # and no memory eviction on a node that evicted for local storage
    local.pod_limit[:] = 0
    result = manager.synchronize(10.0, memory_signals([4000], [4096]), s, local_storage=local)
    assert [(e.pod, e.message) for e in result.evictions] == [
        (0, 'Container a exceeded its local ephemeral storage limit "100Mi". ')]
