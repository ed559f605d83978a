"""Property test, whole framework: with topology spread constraints and pod (anti-)affinity in play, the vectorised
framework places a stream of pods exactly as the per-node reference does (same nodes, same FitError texts, same
preemption nominations), on random clusters with fixed seeds."""

from __future__ import annotations

import random
from typing import Any

import pytest

from emulator.scheduler import in_tree_registry
from emulator.scheduler.framework.interface import CycleState
from emulator.scheduler.framework.profile import Profile
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import FitError, PodInfo, ScheduleResult
from emulator.scheduler.plugins import default_preemption
from tests.builders import affinity_term, pod_affinity, spread
from tests.unit.scheduler.test_equivalence import random_node, random_pod

KEYS = ("zone", "disk", "gen")
APPS = ("a", "b", "c")


def decorate(body: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Give a random pod an app label, a priority, and maybe spread constraints and pod (anti-)affinity."""
    body["metadata"]["labels"] = {"app": rng.choice(APPS)}
    body["spec"]["priority"] = rng.choice((0, 0, 5, 10))
    if rng.random() < 0.5:
        body["spec"]["topologySpreadConstraints"] = [
            spread(rng.choice(KEYS), rng.randint(1, 2), rng.choice(("DoNotSchedule", "ScheduleAnyway")),
                   match={"app": rng.choice(APPS)}) for _ in range(rng.randint(1, 2))]
    if rng.random() < 0.4:
        def terms() -> list[dict[str, Any]]:
            return [affinity_term(rng.choice(KEYS), {"app": rng.choice(APPS)}) for _ in range(rng.randint(0, 1))]

        affinity = pod_affinity(terms(), [(rng.randint(1, 50), t) for t in terms()],
                                anti_required=terms(), anti_preferred=[(rng.randint(1, 50), t) for t in terms()])
        if affinity:
            body["spec"]["affinity"] = {**(body["spec"].get("affinity") or {}), **affinity}
    return body


def frameworks(seed: int) -> tuple[Framework, Framework]:
    registry = in_tree_registry()
    out = []
    for vectorised in (True, False):
        out.append(Framework(registry, Profile.default(registry), rng=random.Random(seed), vectorised=vectorised))
    return out[0], out[1]


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_streamed_placements_with_spread_and_affinity_agree(seed):
    rng = random.Random(seed)
    nodes = [random_node(i, rng) for i in range(40)]
    names = [n["metadata"]["name"] for n in nodes]
    bound = [decorate(random_pod(5_000 + i, rng, names, node=rng.choice(names)), rng) for i in range(40)]
    snapshot = Snapshot.build(nodes, bound)
    vec, ref = frameworks(seed)
    snap_vec, snap_ref = snapshot.fork(), snapshot.fork()
    placed = failed = preempted = 0
    for i in range(50):
        info = PodInfo.of(decorate(random_pod(i, rng, names), rng))
        states = (CycleState(), CycleState())
        a = vec.schedule_one(info, snap_vec, state=states[0])
        b = ref.schedule_one(info, snap_ref, state=states[1])
        if isinstance(a, FitError):
            assert isinstance(b, FitError) and str(a) == str(b)
            assert a.nominating_info == b.nominating_info
            chosen = [s.get(default_preemption.RESULT_KEY) for s in states]
            assert (chosen[0] is None) == (chosen[1] is None)
            if chosen[0] is not None:
                assert chosen[0].node_name == chosen[1].node_name
                assert [p.key for p in chosen[0].victims] == [p.key for p in chosen[1].victims]
                preempted += 1
            failed += 1
            continue
        assert isinstance(a, ScheduleResult) and a == b
        snap_vec.assume(info, a.node_index)
        snap_ref.assume(info, b.node_index)
        placed += 1
    assert placed >= 15 and failed >= 1 and preempted >= 1  # the stream really exercised every path
