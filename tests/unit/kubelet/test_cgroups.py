"""cgroup accounting: CFS quota/period throttling, weights under contention, memory, OOM, oom_score_adj.

Expected values are computed here from the kernel/kubelet formulas:

* quota = max(limit_millis * period // 1000, 1000) us (MilliCPUToQuota);
* a container wanting d millicores against quota q per period P is throttled
  in every period where d * P / 1000 > q, for P - q * 1000 / d us;
* shares = clamp(millis * 1024 // 1000, 2, 262144), weight = 1 + (shares - 2) * 9999 // 262142;
* oom_score_adj: Guaranteed -997, BestEffort 1000, Burstable
  min(max(3, 1000 - 1000 * request // capacity), 999) (upstream code floors at
  1000 + guaranteedOOMScoreAdj = 3; older docs say 2, from the old -998);
* badness = 1000 * usage / capacity + oom_score_adj.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from emulator.kubelet.cgroups import (
    CgroupTable,
    memory_high,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    node_oom_victims,
    oom_score_adj,
    share_cpu,
    shares_to_weight,
)

MI = 1024**2
GI = 1024**3
P = 100_000  # default CFS period, us


def quota(millis: int, period: int = P) -> int:
    return 0 if millis == 0 else max(millis * period // 1000, 1000)


def weight(request_millis: int) -> int:
    shares = 2 if request_millis == 0 else min(max(request_millis * 1024 // 1000, 2), 262_144)
    return 1 + (shares - 2) * 9999 // 262_142


@pytest.mark.parametrize(("millis", "period"), [(500, P), (1, P), (0, P), (2500, 50_000), (333, P), (4000, 1_000_000)],
                         ids=["500m", "1m-min-1ms", "none", "2500m-50ms", "333m", "4cpu-1s"])
def test_milli_cpu_to_quota(millis: int, period: int) -> None:
    assert milli_cpu_to_quota(millis, period) == quota(millis, period)


@pytest.mark.parametrize("millis", [0, 1, 100, 250, 1000, 4000, 256_000, 300_000],
                         ids=["0", "1m", "100m", "250m", "1", "4", "256", "300-clamped"])
def test_shares_and_weight(millis: int) -> None:
    assert shares_to_weight(milli_cpu_to_shares(millis)) == weight(millis)
    assert 1 <= weight(millis) <= 10_000


# -- throttling ------------------------------------------------------------------------------

THROTTLE = [
    # limit, demand, tick, ticks, period
    (500, 900, 1.0, 10, P),
    (500, 300, 1.0, 10, P),
    (500, 900, 0.25, 40, P),
    (500, 900, 0.03, 334, P),
    (0, 900, 1.0, 10, P),
    (1500, 2000, 1.0, 10, 50_000),
    (500, 500, 1.0, 10, P),
]


@pytest.mark.parametrize(("limit", "demand", "dt", "ticks", "period"), THROTTLE,
                         ids=["500m-limit-900m-demand", "300m-demand-never-throttled", "quarter-second-ticks",
                              "ticks-not-period-multiples", "no-limit-no-periods", "50ms-period",
                              "demand-equals-limit"])
def test_cfs_throttling(limit: int, demand: float, dt: float, ticks: int, period: int) -> None:
    table = CgroupTable(2)
    table.configure(0, node=0, cpu_limit_millis=limit, cpu_request_millis=limit, period_usec=period)
    running = np.array([True, False])
    for _ in range(ticks):
        table.tick(dt, running, cpu_demand=np.array([demand, 0.0]), memory_demand=np.zeros(2),
                   node_cpu_millis=np.array([64_000.0]), node_memory=np.array([64.0 * GI]))

    elapsed_us = round(dt * 1e6) * ticks
    q = quota(limit, period)
    cap = q * 1000 / period if q else math.inf
    periods = elapsed_us // period if q else 0
    throttled = periods if demand * period / 1000 > q and q else 0
    assert table.nr_periods[0] == periods
    assert table.nr_throttled[0] == throttled
    assert table.throttled_usec[0] == pytest.approx(throttled * (period - q * 1000 / demand) if throttled else 0)
    assert table.usage_usec[0] == pytest.approx(min(demand, cap) * elapsed_us / 1000)
    assert table.nr_periods[1] == table.usage_usec[1] == 0  # a row that is not running accrues nothing


def test_the_issue_example_in_numbers() -> None:
    # 500m limit, steady 900m demand, 10 s: 100 periods, all throttled, 4.44 s throttled, 5 s used.
    table = CgroupTable(1)
    table.configure(0, node=0, cpu_limit_millis=500)
    for _ in range(10):
        result = table.tick(1.0, np.array([True]), cpu_demand=np.array([900.0]), memory_demand=np.zeros(1),
                            node_cpu_millis=np.array([4000.0]), node_memory=np.array([GI]))
    assert result.cpu_millis[0] == 500.0 and result.throttled[0]
    assert (table.nr_periods[0], table.nr_throttled[0]) == (100, 100)
    assert table.throttled_usec[0] == pytest.approx(100 * (100_000 - 50_000 * 1000 / 900))
    assert table.usage_usec[0] == pytest.approx(5_000_000)


# -- sharing under contention ------------------------------------------------------------------


def reference_share(want: list[float], weights: list[float], capacity: float) -> list[float]:
    """Weighted max-min fairness by repeated proportional sharing (one node)."""
    granted = [0.0] * len(want)
    open_rows = [i for i, w in enumerate(want) if w > 0]
    left = capacity
    while open_rows:
        total_w = sum(weights[i] for i in open_rows)
        share = {i: left * weights[i] / total_w for i in open_rows}
        satisfied = [i for i in open_rows if want[i] <= share[i]]
        if not satisfied:
            for i in open_rows:
                granted[i] = share[i]
            break
        for i in satisfied:
            granted[i] = want[i]
            left -= want[i]
        open_rows = [i for i in open_rows if i not in satisfied]
    return granted


CONTENTION = [
    ([1000, 3000, 500], [1, 2, 3], 2000),
    ([1000, 1000], [39, 39], 1000),
    ([4000, 100, 100], [1, 1, 1], 1000),
    ([300, 300], [1, 5], 1000),  # room for everyone
    ([900, 900, 900, 900], [1, 2, 4, 8], 1500),
]


@pytest.mark.parametrize(("want", "weights", "capacity"), CONTENTION,
                         ids=["weighted-1-2-3", "equal", "small-ones-satisfied", "no-contention", "powers-of-two"])
def test_share_cpu_one_node(want: list[float], weights: list[float], capacity: float) -> None:
    granted = share_cpu(np.array(want, float), np.array(weights, float), np.zeros(len(want), np.int64),
                        np.array([float(capacity)]))
    np.testing.assert_allclose(granted, reference_share(want, weights, capacity))
    assert granted.sum() <= max(capacity, sum(want)) + 1e-6


def test_share_cpu_many_nodes_random() -> None:
    rng = np.random.default_rng(11)
    n, nodes = 3000, 40
    node = rng.integers(0, nodes, n)
    want = rng.uniform(0, 2000, n) * (rng.random(n) > 0.1)
    weights = rng.integers(1, 100, n).astype(float)
    capacity = rng.uniform(5_000, 60_000, nodes)
    granted = share_cpu(want, weights, node, capacity)
    for k in range(nodes):
        rows = np.flatnonzero(node == k)
        expected = reference_share(list(want[rows]), list(weights[rows]), float(capacity[k]))
        np.testing.assert_allclose(granted[rows], expected, rtol=1e-9, atol=1e-6)


def test_contention_below_quota_is_not_throttling() -> None:
    table = CgroupTable(2)
    table.configure(0, node=0, cpu_limit_millis=500, cpu_request_millis=100)
    table.configure(1, node=0, cpu_request_millis=900)
    result = table.tick(1.0, np.array([True, True]), cpu_demand=np.array([900.0, 2000.0]), memory_demand=np.zeros(2),
                        node_cpu_millis=np.array([1000.0]), node_memory=np.array([GI]))
    w0, w1 = weight(100), weight(900)
    assert result.cpu_millis[0] == pytest.approx(1000 * w0 / (w0 + w1))  # less than its 500m quota
    assert result.cpu_millis.sum() == pytest.approx(1000)
    assert table.nr_periods[0] == 10 and table.nr_throttled[0] == 0


# -- oom_score_adj ------------------------------------------------------------------------------


def pod(containers: list[dict], **spec: object) -> dict:
    return {"metadata": {"name": "p"}, "spec": {"containers": containers, **spec}}


def c(name: str = "app", req: dict | None = None, lim: dict | None = None, **extra: object) -> dict:
    return {"name": name, "resources": {"requests": req or {}, "limits": lim or {}}, **extra}


def burstable(request: int, capacity: int) -> int:
    return min(max(3, 1000 - 1000 * request // capacity), 999)


CAP = 16 * GI
OOM_ADJ = [
    (pod([c(req={"cpu": "1", "memory": "1Gi"}, lim={"cpu": "1", "memory": "1Gi"})]), 0, -997),
    (pod([c()]), 0, 1000),
    (pod([c(req={"memory": "1Gi"})]), 0, burstable(GI, CAP)),
    (pod([c(req={"cpu": "100m"})]), 0, burstable(0, CAP)),
    (pod([c(req={"memory": str(CAP - MI)})]), 0, burstable(CAP - MI, CAP)),
    (pod([c(req={"memory": str(CAP)})]), 0, 3),
    (pod([c(req={"memory": "4Gi"}, lim={"memory": "8Gi"})]), 0, burstable(4 * GI, CAP)),
    (pod([c(req={"memory": "1Gi"})], priority=2_000_001_000, priorityClassName="system-node-critical"), 0, -997),
    (pod([c(req={"memory": "1Gi"})], priority=2_000_000_000, priorityClassName="system-cluster-critical"), 0,
     burstable(GI, CAP)),
    (pod([c(req={"memory": "1Gi"})], initContainers=[c("proxy", restartPolicy="Always")]), "proxy",
     burstable(GI, CAP)),
    ({**pod([c(req={"memory": "1Gi"})]), "status": {"qosClass": "BestEffort"}}, 0, 1000),
]


@pytest.mark.parametrize(("the_pod", "which", "expected"), OOM_ADJ,
                         ids=["guaranteed", "best-effort", "burstable-1Gi-of-16Gi", "burstable-no-memory-request",
                              "burstable-almost-all", "burstable-floor-3", "burstable-with-limit", "node-critical",
                              "cluster-critical-is-not-node-critical", "sidecar-follows-smallest-regular",
                              "status-qos-class-wins"])
def test_oom_score_adj(the_pod: dict, which: int | str, expected: int) -> None:
    spec = the_pod["spec"]
    container = spec["containers"][which] if isinstance(which, int) else next(
        x for x in spec["initContainers"] if x["name"] == which)
    assert oom_score_adj(the_pod, container, CAP) == expected


MEMORY_HIGH = [
    (100 * MI, 200 * MI, GI, math.floor((100 * MI + 0.9 * 100 * MI) / 4096) * 4096),
    (256 * MI, 256 * MI, GI, math.inf),  # request == limit: not set
    (100 * MI, 0, GI, math.floor((100 * MI + 0.9 * (GI - 100 * MI)) / 4096) * 4096),  # no limit: node allocatable
    (0, 0, GI, math.floor(0.9 * GI / 4096) * 4096),
]


@pytest.mark.parametrize(("req", "limit", "allocatable", "expected"), MEMORY_HIGH,
                         ids=["burstable", "guaranteed", "no-limit", "best-effort"])
def test_memory_high(req: int, limit: int, allocatable: int, expected: float) -> None:
    assert memory_high(req, limit, allocatable) == expected


# -- memory: pressure, memory.max, node OOM -----------------------------------------------------


def test_memory_high_pressure_and_memory_max_oom() -> None:
    table = CgroupTable(3)
    table.configure(0, node=0, memory_limit=256 * MI, memory_high_bytes=200 * MI)
    table.configure(1, node=0, memory_limit=256 * MI)
    table.configure(2, node=0, memory_limit=256 * MI)
    demand = np.array([220.0 * MI, 256.0 * MI, 257.0 * MI])
    result = table.tick(1.0, np.ones(3, bool), cpu_demand=np.zeros(3), memory_demand=demand,
                        node_cpu_millis=np.array([1000.0]), node_memory=np.array([8.0 * GI]))
    assert list(result.cgroup_oom) == [2]  # above memory.max; exactly at it is not
    assert list(result.memory) == [220 * MI, 256 * MI, 0]
    assert list(table.high_events) == [1, 0, 0] and table.high_usec[0] == 1e6
    assert list(table.oom_kills) == [0, 0, 1]


def reference_victims(usage: list[float], node: list[int], adj: list[int], capacity: list[float]) -> list[int]:
    usage = list(usage)
    victims = []
    while True:
        over = {k for k in range(len(capacity))
                if sum(u for u, n in zip(usage, node, strict=True) if n == k) > capacity[k]}
        round_victims = []
        for k in sorted(over):
            cands = [i for i in range(len(usage)) if node[i] == k and usage[i] > 0 and adj[i] > -1000]
            if cands:
                round_victims.append(max(cands, key=lambda i: (1000 * usage[i] / capacity[k] + adj[i], -i)))
        if not round_victims:
            return victims
        for i in round_victims:
            usage[i] = 0.0
        victims += round_victims


NODE_OOM = [
    # usage (Mi), node, oom_score_adj, capacity (Mi)
    ([300, 400, 400], [0, 0, 0], [1000, 900, -997], [1024]),  # BestEffort first though smaller
    ([200, 500, 400], [0, 0, 0], [938, 938, -997], [1024]),  # same adj: the bigger one
    ([600, 600], [0, 0], [-997, -997], [1024]),  # Guaranteed are killable too, as a last resort
    ([2000], [0], [-1000], [1024]),  # -1000: never
    ([500, 500, 500], [0, 0, 0], [999, 999, 999], [600]),  # two rounds
    ([500, 500, 900, 100], [0, 0, 1, 1], [999, 999, 500, 1000], [1024, 2048]),  # only the node that is over
    ([300, 300, 500], [0, 0, 0], [999, 999, 3], [1000]),  # tie: the first row
]


@pytest.mark.parametrize(("usage", "node", "adj", "capacity"), NODE_OOM,
                         ids=["best-effort-first", "bigger-first", "guaranteed-last-resort", "adj-minus-1000-immune",
                              "two-rounds", "only-over-nodes", "tie-lowest-row"])
def test_node_oom_killer_picks_highest_badness(usage: list[float], node: list[int], adj: list[int],
                                               capacity: list[float]) -> None:
    victims = node_oom_victims(np.array(usage, float) * MI, np.array(node), np.array(adj),
                               np.array(capacity, float) * MI, np.ones(len(usage), bool))
    assert list(victims) == reference_victims([u * MI for u in usage], node, adj, [c * MI for c in capacity])


def test_node_oom_killer_with_no_node_yet_kills_nothing() -> None:
    # A kubelet shard with no node at all (every node removed, or none added yet) still ticks its table.
    rows = 4
    victims = node_oom_victims(np.zeros(rows), np.zeros(rows, np.int64), np.zeros(rows, np.int64), np.zeros(0),
                               np.zeros(rows, bool))
    assert list(victims) == []


def test_node_oom_in_a_tick() -> None:
    adjs, usage, capacity = [-997, 938, 1000], [400, 400, 300], 1000
    badness = [1000 * u / capacity + a for u, a in zip(usage, adjs, strict=True)]  # 3, 1338, 1300
    table = CgroupTable(3)
    for row, adj in enumerate(adjs):
        table.configure(row, node=0, adj=adj)
    result = table.tick(1.0, np.ones(3, bool), cpu_demand=np.zeros(3),
                        memory_demand=np.array(usage, float) * MI,
                        node_cpu_millis=np.array([1000.0]), node_memory=np.array([capacity * MI], float))
    victim = int(np.argmax(badness))
    assert list(result.node_oom) == [victim] and len(result.cgroup_oom) == 0
    assert result.node_memory[0] == (sum(usage) - usage[victim]) * MI


def test_pod_pid_limit_caps_forks() -> None:
    table = CgroupTable(3)
    for row, p in enumerate([0, 0, 1]):
        table.configure(row, node=0, pod=p)
    result = table.tick(1.0, np.ones(3, bool), cpu_demand=np.zeros(3), memory_demand=np.zeros(3),
                        node_cpu_millis=np.array([1000.0]), node_memory=np.array([GI]),
                        pids_demand=np.array([600.0, 600.0, 50.0]), pod_pids_limit=1024)
    assert result.pids[0] + result.pids[1] <= 1024 and result.pids[2] == 50
    assert list(table.pids_max_events) == [1, 1, 0]
