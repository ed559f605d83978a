"""What preemption's dry run keeps across scheduling cycles gives what a fresh dry run computes from scratch.

DefaultPreemption keeps, per node, the pods by importance with their requests (``ImportanceIndex``) and the
summed requests of the pods below each preemptor priority (kept for the nodes whose pods changed), all over the
scheduler cache's one snapshot, changed in place. Tables of event sequences -- pods bound, deleted, their start
times or other status fields updated in place by the cache -- run through one :class:`Cache` and one framework;
after each step a preemption's dry run (every candidate, and the chosen node) must equal a fresh framework's on
the same snapshot.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from emulator.clock import ManualClock
from emulator.scheduler import in_tree_registry
from emulator.scheduler.cache import Cache
from emulator.scheduler.framework.interface import CycleState
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.plugins import default_preemption as dp
from tests.builders import req_pod, sched_node

NODES = ("n0", "n1", "n2", "n3")
HOURS = [f"2024-01-01T{h:02d}:00:00Z" for h in range(24)]


def framework() -> Framework:
    registry = in_tree_registry()
    registry.unregister(dp.NAME)
    registry.register(dp.NAME, lambda args, handle: dp.new(args, handle, rng=random.Random(0)))
    return Framework(registry, rng=random.Random(0))


def body(name: str, node: str, cpu: str, priority: int, start: str | None = None, memory: str = "1Gi",
         storage: str | None = None) -> dict[str, Any]:
    out = req_pod(name, cpu, memory, node=node, priority=priority,
                  extra={"ephemeral-storage": storage} if storage else None)
    out["metadata"]["uid"] = f"uid-{name}"
    if start is not None:
        out["status"] = {"phase": "Running", "startTime": start}
    return out


def dry_run(fw: Framework, snapshot: Snapshot, preemptor: dict[str, Any], offset: int,
            num_candidates: int) -> tuple[Any, ...]:
    info = PodInfo(preemptor)
    state = CycleState()
    fw.run_pre_filter_plugins(state, info, snapshot)
    _, node_to_status = fw.run_filter_plugins(state, info, snapshot)
    plugin = fw.plugins[dp.NAME]
    potential = plugin._potential_nodes(snapshot, node_to_status)
    if not potential:
        return ()
    offset %= len(potential)
    candidates, statuses, failures = plugin.dry_run_preemption(state, info, snapshot, potential, [], offset=offset,
                                                               num_candidates=num_candidates)
    best = plugin._best_vectorised(state, info, snapshot, potential, offset=offset, num_candidates=num_candidates)
    chosen = None
    if best is not None and isinstance(best[0], dp.PreemptionResult):
        chosen = (best[0].node_name, [v.name for v in best[0].victims])
    return ([(c.name, [v.name for v in c.victims.pods], c.victims.pick_key) for c in candidates],
            sorted((name, status.code, tuple(status.all_reasons())) for name, status in statuses.items()),
            failures, chosen)


class Run:
    """One cache, one kept framework; :meth:`step` applies an event, :meth:`check` compares with a fresh one."""

    def __init__(self) -> None:
        self.cache = Cache(clock=ManualClock())
        for name in NODES:
            self.cache.on_node_add(sched_node(name, cpu="4", memory="8Gi", pods="6"))
        self.kept = framework()
        self.pods: dict[str, dict[str, Any]] = {}

    def step(self, event: tuple[Any, ...]) -> None:
        kind, name, *args = event
        if kind == "bind":
            self.pods[name] = body(name, *args)
            self.cache.on_pod_add(self.pods[name])
        elif kind == "delete":
            self.cache.on_pod_delete(self.pods.pop(name))
        elif kind == "start":  # the kubelet reports a start time: the cache updates the PodInfo in place
            old = self.pods[name]
            self.pods[name] = {**old, "status": {"phase": "Running", "startTime": args[0]}}
            self.cache.on_pod_update(old, self.pods[name])
        elif kind == "condition":  # another status change (DisruptionTarget), the start time as it was
            old = self.pods[name]
            status = {**(old.get("status") or {}), "conditions": [{"type": "DisruptionTarget", "status": "True"}]}
            self.pods[name] = {**old, "status": status}
            self.cache.on_pod_update(old, self.pods[name])
        elif kind == "move":  # deleted and created again elsewhere, another shape
            self.cache.on_pod_delete(self.pods.pop(name))
            self.pods[name] = body(name, *args)
            self.cache.on_pod_add(self.pods[name])
        else:
            raise ValueError(kind)

    def check(self, preemptors: list[tuple[str, int]]) -> None:
        snapshot = self.cache.snapshot()
        for k, (cpu, priority) in enumerate(preemptors):
            preemptor = req_pod(f"preemptor-{k}", cpu, "1Gi", priority=priority)
            for offset, quota in ((0, 1), (1, 2), (2, 100)):
                assert dry_run(self.kept, snapshot, preemptor, offset, quota) == \
                    dry_run(framework(), snapshot, preemptor, offset, quota), (cpu, priority, offset, quota)


PREEMPTORS = [("3", 10), ("2", 5), ("4", 100), ("1", 1)]

SEQUENCES: dict[str, list[tuple[Any, ...]]] = {
    "binds-then-deletes": [
        ("bind", "a", "n0", "2", 0), ("bind", "b", "n0", "2", 0), ("bind", "c", "n1", "3", 3),
        ("bind", "d", "n2", "1", 0, HOURS[2]), ("bind", "e", "n2", "3", 0, HOURS[1]),
        ("delete", "a"), ("bind", "f", "n0", "1", 5), ("delete", "e"), ("bind", "g", "n3", "4", 0),
        ("delete", "g"), ("bind", "h", "n3", "2", 1),
    ],
    "start-times-change-in-place": [
        ("bind", "a", "n0", "2", 0), ("bind", "b", "n0", "2", 0), ("bind", "c", "n1", "2", 0, HOURS[5]),
        ("bind", "d", "n1", "2", 0, HOURS[6]), ("start", "b", HOURS[1]), ("start", "a", HOURS[3]),
        ("start", "d", HOURS[2]), ("start", "c", HOURS[9]), ("start", "a", HOURS[0]),
    ],
    "status-updates-in-place": [
        ("bind", "a", "n0", "2", 0, HOURS[3]), ("bind", "b", "n0", "2", 0, HOURS[4]),
        ("condition", "a"), ("bind", "c", "n0", "0", 0), ("condition", "b"), ("delete", "c"),
    ],
    "priorities-above-and-below": [
        ("bind", "a", "n0", "1", 7), ("bind", "b", "n0", "1", 3), ("bind", "c", "n0", "2", 20),
        ("bind", "d", "n1", "1", 5), ("bind", "e", "n1", "3", 4), ("move", "c", "n1", "1", 0),
        ("move", "a", "n2", "3", 50), ("delete", "d"), ("bind", "f", "n2", "1", 9),
    ],
    "resources-appear": [
        ("bind", "a", "n0", "2", 0), ("bind", "b", "n1", "2", 0, None, "512Mi"),
        ("bind", "c", "n1", "1", 0, None, "1Gi", "2Gi"), ("bind", "d", "n2", "3", 1),
        ("move", "b", "n2", "1", 0, HOURS[4], "3Gi"), ("delete", "c"),
    ],
    "full-nodes-churn": [
        *[("bind", f"p{i}", NODES[i % 4], "1", i % 3, HOURS[i]) for i in range(16)],
        ("delete", "p0"), ("bind", "q0", "n0", "1", 0), ("delete", "p5"), ("bind", "q1", "n1", "1", 2),
        ("start", "q0", HOURS[0]), ("move", "p10", "n0", "1", 1), ("delete", "p3"), ("delete", "p7"),
    ],
}


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_kept_dry_run_state_matches_a_fresh_one_after_every_step(name):
    run = Run()
    run.check(PREEMPTORS)
    for event in SEQUENCES[name]:
        run.step(event)
        run.check(PREEMPTORS)


def random_sequence(seed: int) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    live: list[str] = []
    out: list[tuple[Any, ...]] = []
    for i in range(40):
        roll = rng.random()
        if not live or roll < 0.45:
            name = f"r{i}"
            out.append(("bind", name, rng.choice(NODES), rng.choice(["500m", "1", "2"]), rng.choice([0, 0, 3, 7]),
                        rng.choice([None, *HOURS[:6]])))
            live.append(name)
        elif roll < 0.65:
            out.append(("delete", live.pop(rng.randrange(len(live)))))
        elif roll < 0.8:
            out.append(("start", rng.choice(live), rng.choice(HOURS[:6])))
        elif roll < 0.9:
            out.append(("condition", rng.choice(live)))
        else:
            out.append(("move", rng.choice(live), rng.choice(NODES), rng.choice(["500m", "1"]), rng.choice([0, 5]),
                        rng.choice([None, HOURS[7]])))
    return out


@pytest.mark.parametrize("seed", range(8), ids=lambda s: f"seed-{s}")
def test_kept_dry_run_state_matches_a_fresh_one_on_random_sequences(seed):
    run = Run()
    for event in random_sequence(seed):
        run.step(event)
        run.check(PREEMPTORS[:2])
