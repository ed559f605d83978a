"""LoadAware (crane-scheduler's Dynamic plugin): filter and score from the load annotations, per node and vectorised.

Expected values are worked out here from crane's formulas (``stats.go``): a node is filtered when a fresh
predicate metric exceeds its ``maxLimitPecent``; its score is
``int(sum((1 - usage) * weight * 100) / sum(weight)) - int(hotValue * 10)``, clamped to 0..100, where a
stale metric contributes 0 but keeps its weight; an annotation counts while ``now < stamp + period + 5m``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from emulator.clock import ManualClock
from emulator.loadaware.hotvalue import BindingRecords
from emulator.loadaware.policy import HOT_VALUE, METRICS, NodeLoads, Policy, format_value, parse_value
from emulator.scheduler.framework.interface import Code, CycleState
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.plugins import load_aware
from tests.builders import req_pod, sched_node
from tests.unit.scheduler.util import run_filter, run_score

NOW = 1_700_000_000.0
WEIGHTS = {"cpu_usage_avg_5m": 0.2, "cpu_usage_max_avg_1h": 0.3, "cpu_usage_max_avg_1d": 0.5,
           "mem_usage_avg_5m": 0.2, "mem_usage_max_avg_1h": 0.3, "mem_usage_max_avg_1d": 0.5}
# crane's default: active = syncPolicy period + 5 minutes.
ACTIVE = {"cpu_usage_avg_5m": 180 + 300, "cpu_usage_max_avg_1h": 900 + 300, "cpu_usage_max_avg_1d": 10800 + 300,
          "mem_usage_avg_5m": 180 + 300, "mem_usage_max_avg_1h": 900 + 300, "mem_usage_max_avg_1d": 10800 + 300}


def loaded(name: str, usage: dict[str, float], *, age: float = 0.0, hot: int | None = None,
           hot_age: float = 0.0) -> dict:
    node = sched_node(name)
    node["metadata"]["annotations"] = {m: format_value(v, NOW - age) for m, v in usage.items()}
    if hot is not None:
        node["metadata"]["annotations"][HOT_VALUE] = format_value(hot, NOW - hot_age, integer=True)
    return node


def uniform(cpu: float, mem: float) -> dict[str, float]:
    return {m: (cpu if m.startswith("cpu") else mem) for m in METRICS}


def plugin(args: dict | None = None, now: float = NOW) -> load_aware.LoadAware:
    clock = ManualClock(now)

    class Handle:
        profile_name = "p"

        def __init__(self) -> None:
            self.clock = clock

        def snapshot(self) -> None:
            return None

    return load_aware.new(args, Handle())


def expected_score(usage: dict[str, float], hot: float = 0.0, fresh: dict[str, bool] | None = None) -> int:
    total = sum((1 - round(usage.get(m, 0), 5)) * w * 100 for m, w in WEIGHTS.items()
                if m in usage and (fresh is None or fresh[m]))
    return max(0, min(100, math.trunc(total / sum(WEIGHTS.values())) - math.trunc(hot * 10)))


def test_annotation_value_round_trip():
    text = format_value(0.352104, NOW)
    assert text == "0.35210,2023-11-14T22:13:20Z"
    assert parse_value(text) == (pytest.approx(0.3521), NOW)
    for bad in ("", "0.3", "abc,2023-11-14T22:13:20Z", "-0.1,2023-11-14T22:13:20Z", "0.1,now", "0.1,x,y"):
        assert parse_value(bad) is None, bad


@pytest.mark.parametrize(("usage", "age", "rejected_by"), [
    (uniform(0.30, 0.30), 0, None),
    ({**uniform(0.30, 0.30), "cpu_usage_avg_5m": 0.66}, 0, "cpu_usage_avg_5m"),
    ({**uniform(0.30, 0.30), "cpu_usage_avg_5m": 0.65}, 0, None),  # not above the limit
    ({**uniform(0.30, 0.30), "cpu_usage_max_avg_1h": 0.80}, 0, "cpu_usage_max_avg_1h"),
    ({**uniform(0.30, 0.30), "mem_usage_avg_5m": 0.70}, 0, "mem_usage_avg_5m"),
    ({**uniform(0.30, 0.30), "mem_usage_max_avg_1h": 0.90}, 0, "mem_usage_max_avg_1h"),
    ({**uniform(0.30, 0.30), "cpu_usage_max_avg_1d": 0.99}, 0, None),  # 1d is scored, not filtered
    (uniform(0.90, 0.90), 0, "cpu_usage_avg_5m"),  # the first predicate over its limit is the reason
    (uniform(0.90, 0.90), ACTIVE["cpu_usage_max_avg_1h"], None),  # every predicate metric stale: ignored
    (uniform(0.90, 0.30), ACTIVE["cpu_usage_avg_5m"], "cpu_usage_max_avg_1h"),  # 5m stale, 1h still fresh
    ({}, 0, None),  # never annotated
], ids=["cool", "cpu5m-over", "cpu5m-at-limit", "cpu1h-over", "mem5m-over", "mem1h-over", "1d-not-a-predicate",
        "first-reason", "stale-ignored", "5m-stale-1h-fresh", "no-annotations"])
def test_filter(usage, age, rejected_by):
    snapshot = Snapshot.build([loaded("n", usage, age=age), sched_node("bare")])
    status, bare = run_filter(plugin(), req_pod("p", "100m", "128Mi"), snapshot)
    assert bare is None
    if rejected_by is None:
        assert status is None
    else:
        assert status is not None and status.code == Code.UNSCHEDULABLE
        assert status.reasons == [f"Load[{rejected_by}] of node is too high"]


def test_daemonset_pods_are_never_filtered():
    snapshot = Snapshot.build([loaded("hot", uniform(0.95, 0.95))])
    pod = req_pod("ds-pod", "100m", "128Mi")
    pod["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "ds", "uid": "u", "controller": True}]
    assert run_filter(plugin(), pod, snapshot) == [None]
    assert run_filter(plugin(), req_pod("p", "100m", "128Mi"), snapshot)[0] is not None


def test_zero_threshold_switches_a_predicate_off():
    args = {"predicate": [{"name": "cpu_usage_avg_5m", "maxLimitPecent": 0}]}
    snapshot = Snapshot.build([loaded("hot", uniform(0.95, 0.95))])
    assert run_filter(plugin(args), req_pod("p", "100m", "128Mi"), snapshot) == [None]


@pytest.mark.parametrize(("usage", "age", "hot", "hot_age"), [
    (uniform(0.0, 0.0), 0, None, 0),
    (uniform(0.5, 0.5), 0, None, 0),
    (uniform(0.2, 0.6), 0, None, 0),
    ({"cpu_usage_avg_5m": 0.1, "cpu_usage_max_avg_1h": 0.4, "cpu_usage_max_avg_1d": 0.7,
      "mem_usage_avg_5m": 0.25, "mem_usage_max_avg_1h": 0.35, "mem_usage_max_avg_1d": 0.45}, 0, None, 0),
    (uniform(0.3, 0.3), 0, 3, 0),
    (uniform(0.3, 0.3), 0, 3, 301),  # hot value older than 5 minutes: ignored
    (uniform(0.3, 0.3), 0, 20, 0),  # the penalty cannot push the score below 0
    (uniform(1.3, 0.1), 0, None, 0),  # usage above 1 (over-committed) gives a negative share
    (uniform(0.3, 0.3), ACTIVE["cpu_usage_avg_5m"], None, 0),  # the 5m windows stale: 0 points, weight kept
], ids=["idle", "half", "cpu-low-mem-high", "mixed-windows", "hot", "hot-stale", "hot-floor", "over-1", "5m-stale"])
def test_score(usage, age, hot, hot_age):
    snapshot = Snapshot.build([loaded("n", usage, age=age, hot=hot, hot_age=hot_age)])
    _, (score,) = run_score(plugin(), req_pod("p", "100m", "128Mi"), snapshot)
    fresh = {m: age < ACTIVE[m] for m in METRICS}
    effective_hot = hot if hot is not None and hot_age < 300 else 0
    assert score == expected_score(usage, effective_hot, fresh)


def test_unannotated_node_scores_zero():
    # crane: every metric missing contributes 0 of its weight -> 0, below any annotated node.
    snapshot = Snapshot.build([sched_node("bare"), loaded("busy", uniform(0.6, 0.6))])
    _, scores = run_score(plugin(), req_pod("p", "100m", "128Mi"), snapshot)
    assert scores == [0, expected_score(uniform(0.6, 0.6))]


def test_own_placements_damp_a_burst_onto_one_node():
    # Two nodes, "new" idle and "old" at 40%: the 1m rule (every 2 binds) and the 5m rule (every 5) add up.
    snapshot = Snapshot.build([loaded("new", uniform(0.0, 0.0)), loaded("old", uniform(0.4, 0.4))])
    la = plugin()
    pod = PodInfo.of(req_pod("p", "100m", "128Mi"))
    placed = []
    for i in range(12):
        _, scores = run_score(la, pod, snapshot)
        node = "new" if scores[0] >= scores[1] else "old"
        placed.append(node)
        la.reserve(CycleState(), PodInfo.of(req_pod(f"b{i}", "100m", "128Mi")), node)
    # Each node: its annotation score minus 10 * (n // 2 + n // 5 + n // 30) after n binds (ties to "new").
    binds = {"new": 0, "old": 0}
    base = {"new": 100, "old": 60}
    for node in placed:
        score = {n: max(0, base[n] - 10 * (k // 2 + k // 5 + k // 30)) for n, k in binds.items()}
        assert node == ("new" if score["new"] >= score["old"] else "old")
        binds[node] += 1
    assert "old" in placed and placed[0] == "new"


def test_unreserve_forgets_the_placement():
    la = plugin()
    state = CycleState()
    pod = PodInfo.of(req_pod("p", "100m", "128Mi"))
    for _ in range(2):
        la.reserve(state, pod, "n")
    assert la.local_hot(NOW) == {"n": 1}
    la.unreserve(state, pod, "n")
    assert la.local_hot(NOW) == {}


def test_binding_records_count_per_range():
    records = BindingRecords(horizon=1800)
    for age, node in [(10, "a"), (30, "a"), (90, "a"), (400, "a"), (2000, "a"), (5, "b")]:
        records.add(node, NOW - age)
    assert records.counts(NOW, [60, 300, 1800]) == {"a": [2, 3, 4], "b": [1, 1, 1]}
    assert Policy().hot_value_of([2, 3, 4]) == 2 // 2 + 3 // 5 + 4 // 30


def test_policy_from_crane_file(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("""
apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  syncPolicy:
    - {name: cpu_usage_avg_5m, period: 1m}
  predicate:
    - {name: cpu_usage_avg_5m, maxLimitPecent: 0.5}
  priority:
    - {name: cpu_usage_avg_5m, weight: 1}
  hotValue:
    - {timeRange: 1m, count: 1}
""")
    la = plugin({"policyConfigPath": str(path)})
    assert la.policy.active_duration("cpu_usage_avg_5m") == 60 + 300
    assert la.policy.active_duration("mem_usage_avg_5m") == 0  # no syncPolicy entry: never fresh
    snapshot = Snapshot.build([loaded("a", uniform(0.4, 0.9)), loaded("b", uniform(0.6, 0.1))])
    assert [s is None for s in run_filter(la, req_pod("p", "100m", "128Mi"), snapshot)] == [True, False]
    assert run_score(la, req_pod("p", "100m", "128Mi"), snapshot)[1] == [60, 40]


@pytest.mark.parametrize("bad", [
    {"predicate": [{"name": "gpu_usage", "maxLimitPecent": 0.5}]},
    {"hotValue": [{"timeRange": "1m", "count": 0}]},
    {"syncPolicy": [{"name": "cpu_usage_avg_5m", "period": "soon"}]},
    {"priorities": []},
], ids=["unknown-metric", "zero-count", "bad-duration", "unknown-field"])
def test_bad_policy_is_rejected(bad):
    with pytest.raises(ValueError):
        plugin(bad)


def test_max_annotation_age_overrides_the_sync_periods():
    la = plugin({"maxAnnotationAge": "30s"})
    snapshot = Snapshot.build([loaded("old", uniform(0.9, 0.9), age=31), loaded("new", uniform(0.9, 0.9), age=29)])
    assert [s is None for s in run_filter(la, req_pod("p", "100m", "128Mi"), snapshot)] == [True, False]


def test_node_loads_parse_vectorised_matches_per_value():
    nodes = [loaded(f"n{i}", uniform(i / 10, 1 - i / 10), age=i) for i in range(5)]
    loads = NodeLoads.parse([n["metadata"]["annotations"] for n in nodes])
    assert np.allclose(loads.column("cpu_usage_avg_5m"), [i / 10 for i in range(5)])
    assert loads.stamps[:, 0].tolist() == [NOW - i for i in range(5)]
