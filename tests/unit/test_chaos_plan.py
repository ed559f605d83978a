"""Chaos phases as data: the scenario's validation and the timeline the plan makes of them."""

from __future__ import annotations

from typing import Any

import pytest

from loadgen import plan as planning
from loadgen.scenario import Scenario, ScenarioError


def scenario(chaos: dict[str, Any], seed: int = 3) -> Scenario:
    return Scenario.from_dict({"seed": seed, "phases": [{"name": "faults", "at": 5, "chaos": chaos}]})


def test_listed_faults_are_injected_in_order_and_held_ones_restored_after_their_duration() -> None:
    plan = planning.build(scenario({"faults": [
        {"kind": "stop-kubelet", "at": 4, "target": "node-1", "duration": 3},
        {"kind": "kill-kubelet-shard", "at": 1, "target": "0"},
        {"kind": "partition-shard", "at": 2}]}))
    timeline = [(a.t, a.op, a.name, dict(a.detail).get("target"), dict(a.detail)["id"]) for a in plan.actions]
    assert timeline == [
        (6.0, planning.INJECT_FAULT, "kill-kubelet-shard", "0", "faults-0"),
        (7.0, planning.INJECT_FAULT, "partition-shard", "", "faults-1"),
        (9.0, planning.INJECT_FAULT, "stop-kubelet", "node-1", "faults-2"),
        (12.0, planning.RESTORE_FAULT, "stop-kubelet", None, "faults-2"),
        (17.0, planning.RESTORE_FAULT, "partition-shard", None, "faults-1"),  # the default duration: 10 s
    ]
    assert plan.phases[0].end == 65.0  # the phase's default duration (60 s) from its start at 5 s
    assert all(0 <= dict(a.detail)["pick"] < 1 for a in plan.actions if a.op == planning.INJECT_FAULT)


def test_random_faults_are_drawn_from_the_seed_within_the_duration() -> None:
    spec = {"random": 6, "kinds": ["kill-scheduler", "stop-kubelet"], "duration": 30, "fault_duration": 2}
    first, again, other = (planning.build(scenario(spec, seed)) for seed in (3, 3, 4))
    injected = [a for a in first.actions if a.op == planning.INJECT_FAULT]
    assert len(injected) == 6
    assert all(5 <= a.t <= 35 and a.name in ("kill-scheduler", "stop-kubelet") for a in injected)
    assert first.actions == again.actions
    assert first.actions != other.actions
    restores = {dict(a.detail)["id"]: a.t for a in first.actions if a.op == planning.RESTORE_FAULT}
    for a in injected:
        assert (dict(a.detail)["id"] in restores) == (a.name == "stop-kubelet")
        if a.name == "stop-kubelet":
            assert restores[dict(a.detail)["id"]] == pytest.approx(a.t + 2)


@pytest.mark.parametrize(("chaos", "message"), [
    ({"faults": [{"kind": "kill-everything"}]}, "phases[0].chaos.faults[0].kind: must be one of kill-kubelet-shard"),
    ({"faults": [{"at": 3}]}, "phases[0].chaos.faults[0].kind: required"),
    ({"faults": [{"kind": "stop-kubelet", "duration": 0}]}, "phases[0].chaos.faults[0]: at must be >= 0"),
    ({"faults": [{"kind": "stop-kubelet", "when": 3}]}, "unknown key phases[0].chaos.faults[0].when"),
    ({"faults": {"kind": "stop-kubelet"}}, "phases[0].chaos.faults: expected a list of faults"),
    ({"random": 2, "kinds": ["kill-redis", "reboot"]}, "phases[0].chaos.kinds[1]: must be one of"),
    ({"random": 2, "kinds": []}, "phases[0].chaos.kinds: random faults need kinds"),
    ({"duration": 0}, "phases[0].chaos: duration and fault_duration must be > 0"),
], ids=["unknown-kind", "missing-kind", "zero-duration", "unknown-key", "faults-not-a-list", "unknown-random-kind",
        "random-without-kinds", "zero-phase-duration"])
def test_bad_chaos_phases_name_the_field(chaos: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        scenario(chaos)
    assert message in str(err.value)
