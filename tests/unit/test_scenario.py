"""Scenario files: validation with the field named, and seeded, repeatable workloads."""

from __future__ import annotations

from typing import Any

import pytest

from loadgen.runner import pod_stream
from loadgen.scenario import Scenario, ScenarioError


def test_same_seed_same_pods_other_seed_other_pods() -> None:
    s = Scenario.from_dict({"workload": {"pods": 200, "cpu": ["100m", "250m", "1"], "memory": ["64Mi", "1Gi"]}})
    assert pod_stream(s.workload, 1) == pod_stream(s.workload, 1)
    assert pod_stream(s.workload, 1) != pod_stream(s.workload, 2)


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
    ],
    ids=["pods-not-int", "pods-negative", "bad-quantity", "bad-list-item", "zero-batch", "unknown-top",
         "unknown-nested", "not-mapping"],
)
def test_bad_scenario_names_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as exc:
        Scenario.from_dict(data)
    assert message in str(exc.value)
