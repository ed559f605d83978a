"""The load-aware comparison's loadgen parts: scenario keys, compare variants, merged effectiveness, the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen import plan as planning
from loadgen.compare import comparison_rows, merge_effectiveness
from loadgen.scenario import Scenario, ScenarioError

SCENARIO = Path(__file__).resolve().parents[2] / "loadgen" / "scenarios" / "loadaware.yaml"


def test_the_loadaware_scenario_and_its_variants():
    s = Scenario.load(SCENARIO)
    assert list(s.compare) == ["default", "dynamic"]
    assert s.controller_manager["controllers"] == ["*", "node-annotator"]
    dynamic = s.variant("dynamic")
    assert dynamic.name == "loadaware-dynamic" and dynamic.schedulers.config == "schedulers/loadaware.yaml"
    assert dynamic.resolve(dynamic.schedulers.config).exists()
    assert s.variant("default").schedulers == s.schedulers
    # The same seed gives both variants the same pods.
    assert [a.pod for a in planning.build(s.variant("default")).actions] == \
        [a.pod for a in planning.build(dynamic).actions]
    # Pre-load pinned node by node, so every variant starts from the same hot nodes.
    preloads = [a.pod.manifest(a.name, a.namespace, a.phase) for a in planning.build(s).actions
                if a.phase.startswith("preload")]
    assert len(preloads) == 24
    assert all(p["metadata"]["annotations"] == {"kemu.io/cpu": "3", "kemu.io/memory": "10Gi"} for p in preloads)
    assert sorted(p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in preloads) == sorted(
        f"hot-{k:05d}" for k in range(6) for _ in range(4))


@pytest.mark.parametrize(("compare", "error"), [
    ({"x": {"scheduler": {}}}, "compare.x"),
    ({"x": {"schedulers": {"cuont": 1}}}, "compare.x.schedulers"),
    ({"x": "fast"}, "compare.x"),
], ids=["unknown-section", "unknown-key", "not-a-mapping"])
def test_bad_compare_sections(compare, error):
    with pytest.raises(ScenarioError, match=error):
        Scenario.from_dict({"compare": compare})


def test_effectiveness_merged_across_replicas():
    stats = [
        {"effectiveness": {"p": {"cpu_utilization_total_avg": 0.2, "memory_utilization_total_avg": 0.4,
                                 "effective_dynamic_schedule_count": 3.0, "total_schedule_count": 4,
                                 "effective_schedule_ratio": 0.75}}},
        {"effectiveness": {"p": {"cpu_utilization_total_avg": 0.5, "memory_utilization_total_avg": None,
                                 "effective_dynamic_schedule_count": 0.5, "total_schedule_count": 1,
                                 "effective_schedule_ratio": 0.5}}},
    ]
    # Counts add up; averages are weighted by each replica's binds (4 and 1).
    assert merge_effectiveness(stats) == {"p": pytest.approx({
        "cpu_utilization_total_avg": (0.2 * 4 + 0.5 * 1) / 5, "memory_utilization_total_avg": 0.4,
        "effective_dynamic_schedule_count": 3.5, "total_schedule_count": 5, "effective_schedule_ratio": 3.5 / 5})}


def test_comparison_rows_put_variants_side_by_side():
    def summary(ratio: float, evicted: int) -> dict:
        return {"effectiveness": {"default-scheduler": {
                    "cpu_utilization_total_avg": 0.5, "memory_utilization_total_avg": 0.5,
                    "effective_dynamic_schedule_count": ratio * 10, "total_schedule_count": 10,
                    "effective_schedule_ratio": ratio}},
                "nodeUtilization": {"samples": 3, "cpu": {"p50": 0.3, "p90": 0.6, "max": 0.9, "worstMax": 1.0},
                                    "memory": {"p50": 0.2, "p90": 0.4, "max": 0.5, "worstMax": 0.6}},
                "evictions": {"podsEvicted": evicted, "events": evicted},
                "cpuThrottling": {"podsThrottled": evicted * 2, "throttledPeriods": evicted * 100},
                "podsPerPool": {"hot": evicted * 10, "small": 30 - evicted * 10} if evicted else {"small": 30}}

    rows = comparison_rows({"default": summary(0.4, 3), "dynamic": summary(0.9, 0)})
    assert rows[0] == ["metric", "default", "dynamic"]
    table = {r[0]: r[1:] for r in rows[1:]}
    assert table["effective_schedule_ratio"] == ["40.0%", "90.0%"]
    assert table["node cpu max"] == ["90.0%", "90.0%"]
    assert table["pods evicted"] == ["3", "0"]
    assert table["pods CPU-throttled"] == ["6", "0"] and table["throttled CFS periods"] == ["300", "0"]
    assert table["pods scheduled"] == ["-", "-"]  # absent from these summaries
    assert table["pods on pool hot"] == ["30", "0"] and table["pods on pool small"] == ["0", "30"]
