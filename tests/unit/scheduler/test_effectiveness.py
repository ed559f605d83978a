"""The effectiveness metrics on a hand-built case: five annotated nodes (and one without), known choices.

Expected values are computed here by hand from the definitions: the mean utilization of the chosen nodes,
+0.5 per resource when the chosen node is below the median over the (annotated) nodes, the ratio to binds.
"""

from __future__ import annotations

import statistics
import time

import pytest
from prometheus_client import REGISTRY

from emulator.loadaware.policy import format_value
from emulator.scheduler.effectiveness import Effectiveness, sample
from emulator.scheduler.framework.snapshot import Snapshot
from tests.builders import sched_node

CPU = {"a": 0.10, "b": 0.30, "c": 0.50, "d": 0.70, "e": 0.90}
MEM = {"a": 0.80, "b": 0.20, "c": 0.60, "d": 0.40, "e": 0.10}
CHOICES = ["a", "b", "c", "e", "a", "d", "f"]  # f has no annotations


def annotated(name: str) -> dict:
    node = sched_node(name)
    if name in CPU:
        node["metadata"]["annotations"] = {"cpu_usage_avg_5m": format_value(CPU[name], time.time()),
                                           "mem_usage_avg_5m": format_value(MEM[name], time.time())}
    return node


def test_hand_built_case():
    snapshot = Snapshot.build([annotated(n) for n in "abcdef"])
    eff = Effectiveness("hand", "built")
    for node in CHOICES:
        eff.observe(sample(snapshot, node))

    # By hand: medians 0.5 (cpu) and 0.4 (mem) over a..e. a: cpu yes, mem no -> .5; b: both -> 1; c: neither
    # (0.5 is not below 0.5) -> 0; e: mem only -> .5; a -> .5; d: neither (0.4 not below 0.4) -> 0; f: unknown -> 0.
    cpu_median, mem_median = statistics.median(CPU.values()), statistics.median(MEM.values())
    assert (cpu_median, mem_median) == (0.5, 0.4)
    effective = sum(0.5 * (CPU[n] < cpu_median) + 0.5 * (MEM[n] < mem_median) for n in CHOICES if n in CPU)
    assert effective == 2.5
    known = [n for n in CHOICES if n in CPU]
    expected = {
        "cpu_utilization_total_avg": (0.1 + 0.3 + 0.5 + 0.9 + 0.1 + 0.7) / 6,
        "memory_utilization_total_avg": (0.8 + 0.2 + 0.6 + 0.1 + 0.8 + 0.4) / 6,
        "effective_dynamic_schedule_count": 2.5,
        "total_schedule_count": 7,
        "effective_schedule_ratio": 2.5 / 7,
    }
    assert len(known) == 6
    got = eff.summary()
    assert got == pytest.approx(expected)
    for name, value in expected.items():
        assert REGISTRY.get_sample_value(f"kemu_scheduler_{name}", {"scheduler": "hand", "profile": "built"}) \
            == pytest.approx(value)


def test_no_binds_and_unknown_nodes():
    eff = Effectiveness("empty", "p")
    assert eff.summary()["effective_schedule_ratio"] is None
    snapshot = Snapshot.build([sched_node("x")])
    assert sample(snapshot, "not-there") is None
    eff.observe(sample(snapshot, "x"))
    assert eff.summary() == {"cpu_utilization_total_avg": None, "memory_utilization_total_avg": None,
                             "effective_dynamic_schedule_count": 0.0, "total_schedule_count": 1,
                             "effective_schedule_ratio": 0.0}
