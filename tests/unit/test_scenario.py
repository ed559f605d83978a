"""Scenario files: validation with the field named, and seeded, repeatable workloads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emulator.config import Config
from loadgen.runner import arrival_times, cluster_config, pod_stream
from loadgen.scenario import Scenario, ScenarioError

ROOT = Path(__file__).resolve().parents[2]


def test_same_seed_same_pods_other_seed_other_pods() -> None:
    s = Scenario.from_dict({"workload": {"pods": 200, "cpu": ["100m", "250m", "1"], "memory": ["64Mi", "1Gi"]}})
    assert pod_stream(s.workload, 1) == pod_stream(s.workload, 1)
    assert pod_stream(s.workload, 1) != pod_stream(s.workload, 2)


def test_profiles_priorities_and_poisson_arrivals_are_seeded() -> None:
    s = Scenario.from_dict({"workload": {
        "pods": 300, "rate": 100, "arrival": "poisson", "profile": ["web", "batch"],
        "priorities": [{"name": "high", "value": 1000, "weight": 1}, {"name": "low", "value": 0, "weight": 3}]}})
    pods = pod_stream(s.workload, 5)
    assert pods == pod_stream(s.workload, 5)
    assert {p["metadata"]["annotations"]["kemu.io/profile"] for p in pods} == {"web", "batch"}
    classes = [p["spec"]["priorityClassName"] for p in pods]
    assert set(classes) == {"high", "low"} and classes.count("low") > classes.count("high")  # weights 3:1

    times = arrival_times(s.workload, 5)
    assert times == arrival_times(s.workload, 5) and times != arrival_times(s.workload, 6)
    assert times == sorted(times) and 2.0 < times[-1] < 4.0  # 300 pods at ~100/s


def test_constant_and_unthrottled_arrivals() -> None:
    constant = Scenario.from_dict({"workload": {"pods": 4, "rate": 2}}).workload
    assert arrival_times(constant, 0) == [0.0, 0.5, 1.0, 1.5]
    assert arrival_times(Scenario.from_dict({"workload": {"pods": 3}}).workload, 0) == [0.0, 0.0, 0.0]


def test_cluster_becomes_a_kubelet_node_pool_and_schedulers() -> None:
    s = Scenario.from_dict({"seed": 3, "cluster": {"nodes": 12, "node_cpu": "8", "node_memory": "32Gi",
                                                   "node_pods": 50, "zones": 2, "kubelet_shards": 2},
                            "schedulers": {"count": 2}})
    cfg = cluster_config(Config(), s)
    assert cfg.node_pools == [{"name": "node", "count": 12, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "50"},
                               "zones": ["zone-a", "zone-b"]}]
    assert (cfg.kubelet_shards, cfg.schedulers, cfg.kubelet["seed"]) == (2, 2, 3)
    assert cfg.wants_kubelets() and cfg.scheduler_count() == 2
    none = cluster_config(Config(), Scenario.from_dict({"cluster": {"nodes": 0}}))
    assert not none.wants_kubelets() and none.scheduler_count() == 0


def test_quickstart_scenario_loads() -> None:
    s = Scenario.load(ROOT / "loadgen" / "scenarios" / "quickstart.yaml")
    assert s.cluster.nodes >= 100 and s.workload.pods >= 1000 and s.workload.rate > 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"workload": {"pods": "many"}}, "workload.pods: expected an integer >= 0, got 'many'"),
        ({"workload": {"pods": -1}}, "workload.pods: expected an integer >= 0"),
        ({"cluster": {"node_cpu": "12xyz"}}, "cluster.node_cpu: quantities must match"),
        ({"workload": {"memory": ["1Gi", "lots"]}}, "workload.memory[1]: quantities must match"),
        ({"workload": {"batch": 0}}, "workload.batch: must be at least 1"),
        ({"clusters": {}}, "unknown key clusters"),
        ({"cluster": {"gpus": 1}}, "unknown key cluster.gpus"),
        ({"cluster": [1]}, "cluster: expected a mapping"),
        ({"cluster": {"kubelet_shards": "two"}}, "cluster.kubelet_shards: expected an integer >= 0"),
        ({"cluster": {"zones": 0}}, "cluster.zones: must be between 1 and 26"),
        ({"schedulers": {"count": -1}}, "schedulers.count: expected an integer >= 0"),
        ({"schedulers": {"replicas": 2}}, "unknown key schedulers.replicas"),
        ({"cluster": {"nodes": 5}, "schedulers": {"count": 0}}, "schedulers.count: must be at least 1"),
        ({"workload": {"rate": "fast"}}, "workload.rate: expected a number >= 0, got 'fast'"),
        ({"workload": {"rate": -5}}, "workload.rate: expected a number >= 0"),
        ({"workload": {"arrival": "bursty"}}, "workload.arrival: must be one of constant, poisson"),
        ({"workload": {"arrival": "poisson"}}, "workload.rate: poisson arrivals need a rate > 0"),
        ({"workload": {"max_backlog": 0}}, "workload.max_backlog: must be at least 1"),
        ({"workload": {"profile": ["web", "nope"]}}, "workload.profile[1]: unknown profile 'nope'"),
        ({"workload": {"priorities": {"high": 1}}}, "workload.priorities: expected a list"),
        ({"workload": {"priorities": [{"value": 1}]}}, "workload.priorities[0].name: expected a PriorityClass"),
        ({"workload": {"priorities": [{"name": "x", "value": "hi"}]}}, "workload.priorities[0].value: expected"),
        ({"workload": {"priorities": [{"name": "x", "weight": -1}]}}, "workload.priorities[0].weight: expected"),
        ({"workload": {"priorities": [{"name": "x", "tier": 1}]}}, "unknown key workload.priorities[0].tier"),
        ({"workload": {"pods": 5, "expect_pending": 6}}, "workload.expect_pending: 6 is more than workload.pods"),
        ({"workload": {"settle_timeout": "soon"}}, "workload.settle_timeout: expected a number >= 0"),
    ],
    ids=["pods-not-int", "pods-negative", "bad-quantity", "bad-list-item", "zero-batch", "unknown-top",
         "unknown-nested", "not-mapping", "shards-not-int", "zero-zones", "schedulers-negative",
         "schedulers-unknown", "nodes-without-scheduler", "rate-not-number", "rate-negative", "bad-arrival",
         "poisson-without-rate", "zero-backlog", "unknown-profile", "priorities-not-list", "priority-no-name",
         "priority-bad-value", "priority-bad-weight", "priority-unknown-key", "too-many-pending",
         "settle-not-number"],
)
def test_bad_scenario_names_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as exc:
        Scenario.from_dict(data)
    assert message in str(exc.value)
