"""The vectorised preemption dry run gives exactly what the per-node ``SelectVictimsOnNode`` gives.

Seeded random clusters -- nodes of several sizes (some cordoned or tainted), pods of several priorities, start
times and labels, PodDisruptionBudgets over those labels, pods nominated to nodes -- and a preemptor; the dry run
of a vectorised framework (which takes the many-nodes-at-once path for these filters) and of the per-node
reference framework must agree on every candidate (node, victims in order, PDB violations), every rejected
node's status, and the node finally chosen.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from emulator.clock import ManualClock
from emulator.scheduler import in_tree_registry
from emulator.scheduler.cache import Cache
from emulator.scheduler.framework.interface import Code, CycleState
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.plugins import default_preemption as dp
from emulator.scheduler.plugins.listers import StaticLister
from emulator.scheduler.plugins.preemption_dry_run import vector_filters
from emulator.scheduler.queue import SchedulingQueue
from tests.builders import pdb, req_pod, sched_node, taint

HOURS = [f"2024-01-01T{h:02d}:00:00Z" for h in range(24)]


def a_pod(rng: random.Random, name: str, node: str | None = None) -> dict[str, Any]:
    body = req_pod(name, rng.choice(["250m", "500m", "1", "2"]), rng.choice(["256Mi", "1Gi", "2Gi"]), node=node,
                   priority=rng.choice([0, 0, 5, 10, 100]))
    body["metadata"]["uid"] = f"uid-{name}"
    body["metadata"]["labels"] = {"app": rng.choice(["a", "b", "c"])}
    if node is not None and rng.random() < 0.8:
        body["status"] = {"phase": "Running", "startTime": rng.choice(HOURS)}
    return body


def random_case(seed: int) -> tuple[Snapshot, list[dict[str, Any]], list[tuple[dict[str, Any], str]], dict[str, Any]]:
    rng = random.Random(seed)
    nodes = []
    for i in range(rng.randint(5, 40)):
        taints = [taint("dedicated", "x")] if rng.random() < 0.1 else None
        nodes.append(sched_node(f"n{i:02d}", cpu=rng.choice(["2", "4", "8"]), memory="8Gi",
                                pods=rng.choice(["4", "110"]), taints=taints, unschedulable=rng.random() < 0.05))
    pods = []
    for node in nodes:
        for j in range(rng.randint(0, 6)):
            pods.append(a_pod(rng, f"{node['metadata']['name']}-p{j}", node=node["metadata"]["name"]))
    snapshot = Snapshot.build(nodes, pods)
    # Drop pods that overflow their node, so the cluster is one a scheduler could have made.
    for index in range(snapshot.num_nodes):
        while (snapshot.requested("cpu")[index] > snapshot.allocatable("cpu")[index]
               or snapshot.requested("memory")[index] > snapshot.allocatable("memory")[index]
               or snapshot.pod_counts[index] > snapshot.allowed_pods[index]):
            snapshot.forget(snapshot.pods_on(index)[-1], index)
    pdbs = [pdb(f"pdb-{app}", {"app": app}, rng.randint(0, 2)) for app in ("a", "b") if rng.random() < 0.6]
    nominated = [(a_pod(rng, f"nom-{k}"), rng.choice(nodes)["metadata"]["name"]) for k in range(rng.randint(0, 4))]
    preemptor = req_pod("preemptor", rng.choice(["1", "2", "3", "6"]), rng.choice(["512Mi", "3Gi"]),
                        priority=rng.choice([5, 10, 50, 1000]))
    preemptor["metadata"]["uid"] = "uid-preemptor"
    if rng.random() < 0.2:
        preemptor["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    return snapshot, pdbs, nominated, preemptor


def framework(vectorised: bool, pdbs: list[dict[str, Any]], nominated: list[tuple[dict[str, Any], str]],
              seed: int) -> Framework:
    listers = StaticLister({"poddisruptionbudgets.policy": pdbs})
    registry = in_tree_registry()
    registry.unregister(dp.NAME)
    registry.register(dp.NAME, lambda args, handle: dp.new(args, handle, listers=listers,
                                                           rng=random.Random(seed)))
    fw = Framework(registry, rng=random.Random(seed), vectorised=vectorised)
    queue = SchedulingQueue(fw.queue_sort_less(), clock=ManualClock(), name="dry-run-test")
    for body, node in nominated:
        queue.add_nominated_pod(PodInfo(body), node)
    fw.nominator = queue
    return fw


def dry_run(fw: Framework, snapshot: Snapshot, preemptor: dict[str, Any], pdbs: list[dict[str, Any]],
            num_candidates: int) -> tuple[Any, ...]:
    info = PodInfo(preemptor)
    state = CycleState()
    _, status, _ = fw.run_pre_filter_plugins(state, info, snapshot)
    assert status is None or status.is_success()
    _, node_to_status = fw.run_filter_plugins(state, info, snapshot)  # every node judged, none skipped
    plugin = fw.plugins[dp.NAME]
    potential = plugin._potential_nodes(snapshot, node_to_status)
    if not potential:
        return (), (), ()
    vectorised = vector_filters(fw, state) is not None
    assert vectorised == fw.vectorised  # the vectorised framework takes the many-nodes path for these pods
    candidates, statuses, failures = plugin.dry_run_preemption(state, info, snapshot, potential, pdbs,
                                                               offset=len(potential) // 3,
                                                               num_candidates=num_candidates)
    return ([(c.name, [v.name for v in c.victims.pods], c.victims.num_pdb_violations) for c in candidates],
            sorted((name, status.code, tuple(status.all_reasons())) for name, status in statuses.items()),
            failures)


SEEDS = list(range(24))


@pytest.mark.parametrize("num_candidates", [1, 100], ids=lambda n: f"quota-{n}")
@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed-{s}")
def test_vectorised_dry_run_matches_the_per_node_one(seed, num_candidates):
    snapshot, pdbs, nominated, preemptor = random_case(seed)
    vec = dry_run(framework(True, pdbs, nominated, seed), snapshot, preemptor, pdbs, num_candidates)
    ref = dry_run(framework(False, pdbs, nominated, seed), snapshot, preemptor, pdbs, num_candidates)
    assert vec == ref


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed-{s}")
def test_whole_preemption_chooses_the_same_node_and_victims(seed):
    snapshot, pdbs, nominated, preemptor = random_case(seed)
    outcomes = []
    for vectorised in (True, False):
        state = CycleState()
        result = framework(vectorised, pdbs, nominated, seed).schedule_one(preemptor, snapshot, state=state)
        chosen = state.get(dp.RESULT_KEY)
        outcomes.append((type(result).__name__, getattr(result, "message", None),
                         None if chosen is None else (chosen.node_name, [v.name for v in chosen.victims])))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize(("started", "victim"), [
    ({}, "young"),  # neither started: "now" for both, the snapshot's order decides (the later one goes)
    ({"old": HOURS[8]}, "young"),  # the started one is more important (MoreImportantPod: earlier start)
    ({"old": HOURS[8], "young": HOURS[7]}, "old"),  # "young" started first after all: "old" goes
], ids=["none-started", "old-started", "young-started-earlier"])
def test_victims_follow_start_times_the_cache_updates_in_place(started, victim):
    # The cache swaps a pod's newest object into the snapshot's PodInfo without re-placing it; the dry run's
    # per-node order (kept across cycles) must follow a start time that changed that way.
    cache = Cache(clock=ManualClock())
    cache.on_node_add(sched_node("n0", cpu="2", memory="8Gi"))
    bodies = {name: req_pod(name, "1", "1Gi", node="n0", priority=0) for name in ("old", "young")}
    for body in bodies.values():
        cache.on_pod_add(body)
    fw = framework(True, [], [], 0)
    preemptor = req_pod("preemptor", "1", "1Gi", priority=100)
    state = CycleState()
    fw.schedule_one(preemptor, cache.snapshot(), state=state)
    assert [v.name for v in state.get(dp.RESULT_KEY).victims] == ["young"]  # the first dry run: neither started
    for name, start in started.items():
        body = bodies[name]
        cache.on_pod_update(body, {**body, "status": {"phase": "Running", "startTime": start}})
    state = CycleState()
    fw.schedule_one(preemptor, cache.snapshot(), state=state)
    assert [v.name for v in state.get(dp.RESULT_KEY).victims] == [victim]


def upstream_scores(victims: dp.Victims) -> tuple[int, int, int, int, float]:
    """pickOneNodeForPreemption's default score functions (preemption.go), higher is better: fewest PDB
    violations, lowest highest-priority victim, lowest sum of priorities each shifted by MaxInt32 + 1, fewest
    victims, latest earliest start among the highest-priority victims (GetEarliestPodStartTime)."""
    top = max(p.priority for p in victims.pods)
    shifted = sum(p.priority + 2**31 for p in victims.pods)
    earliest = min(dp.pod_start_time(p) for p in victims.pods if p.priority == top)
    return (-victims.num_pdb_violations, -top, -shifted, -len(victims.pods), earliest)


def full_case(seed: int) -> tuple[Snapshot, dict[str, Any]]:
    """Nodes filled with pods of mixed sizes, priorities and start times (some not started), and a preemptor
    that fits only by evicting some: every node is a candidate, with different victims."""
    rng = random.Random(seed)
    nodes = [sched_node(f"n{i:02d}", cpu="4", memory="8Gi", pods="110") for i in range(rng.randint(3, 30))]
    pods = []
    for node in nodes:
        free = 4000
        j = 0
        while free >= 500:
            milli = min(free, rng.choice([500, 1000, 1500]))
            free -= milli
            body = req_pod(f"{node['metadata']['name']}-p{j}", f"{milli}m", "256Mi", node=node["metadata"]["name"],
                           priority=rng.choice([-5, 0, 0, 3, 10]))
            body["metadata"]["uid"] = f"uid-{node['metadata']['name']}-{j}"
            if rng.random() < 0.8:
                body["status"] = {"phase": "Running", "startTime": rng.choice(HOURS)}
            pods.append(body)
            j += 1
    preemptor = req_pod("preemptor", rng.choice(["1", "2", "3"]), "512Mi", priority=rng.choice([5, 50]))
    preemptor["metadata"]["uid"] = "uid-preemptor"
    return Snapshot.build(nodes, pods), preemptor


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed-{s}")
def test_candidates_scores_from_the_vectorised_dry_run_are_upstreams(seed):
    # Without PDBs every candidate of the vectorised dry run carries its scores, worked out for all nodes at once.
    snapshot, preemptor = full_case(seed)
    fw = framework(True, [], [], seed)
    info = PodInfo(preemptor)
    state = CycleState()
    fw.run_pre_filter_plugins(state, info, snapshot)
    _, node_to_status = fw.run_filter_plugins(state, info, snapshot)
    plugin = fw.plugins[dp.NAME]
    potential = plugin._potential_nodes(snapshot, node_to_status)
    candidates, _, _ = plugin.dry_run_preemption(state, info, snapshot, potential, [], offset=0,
                                                 num_candidates=100)
    assert candidates
    assert [c.victims.pick_key for c in candidates] == [upstream_scores(c.victims) for c in candidates]


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed-{s}")
def test_full_nodes_preemption_chooses_as_the_per_node_dry_run(seed):
    snapshot, preemptor = full_case(seed)
    chosen = []
    for vectorised in (True, False):
        state = CycleState()
        framework(vectorised, [], [], seed).schedule_one(preemptor, snapshot, state=state)
        result = state.get(dp.RESULT_KEY)
        chosen.append((result.node_name, [v.name for v in result.victims]))
    assert chosen[0] == chosen[1]


def walk_and_pick(plugin: dp.DefaultPreemption, state: CycleState, info: PodInfo, snapshot: Snapshot,
                  potential: list[int], offset: int, num_candidates: int) -> tuple[str, list[str]] | str:
    """Upstream's DryRunPreemption walk over every candidate, then SelectCandidate (pickOneNodeForPreemption):
    the node and its victims, or the "not helpful" message when there is no candidate."""
    candidates, statuses, failures = plugin.dry_run_preemption(state, info, snapshot, potential, [], offset=offset,
                                                               num_candidates=num_candidates)
    assert not failures
    best = plugin.select_candidate(candidates)
    if best is None:
        return plugin._not_helpful(info, snapshot, statuses)
    return best.name, [v.name for v in best.victims.pods]


CASES = [("random", seed) for seed in SEEDS] + [("full", seed) for seed in SEEDS]


@pytest.mark.parametrize("num_candidates", [1, 2, 5, 100], ids=lambda n: f"quota-{n}")
@pytest.mark.parametrize(("shape", "seed"), CASES, ids=[f"{shape}-{seed}" for shape, seed in CASES])
def test_best_of_the_vectorised_dry_run_is_the_walks_choice(shape, seed, num_candidates):
    # Without PDBs and extenders, PostFilter asks the dry run for the chosen node only (VectorDryRun.best);
    # it must be the node and victims that the walk over all candidates and pickOneNodeForPreemption choose.
    if shape == "random":
        snapshot, _, nominated, preemptor = random_case(seed)
    else:
        (snapshot, preemptor), nominated = full_case(seed), []
    fw = framework(True, [], nominated, seed)
    info = PodInfo(preemptor)
    state = CycleState()
    fw.run_pre_filter_plugins(state, info, snapshot)
    _, node_to_status = fw.run_filter_plugins(state, info, snapshot)
    plugin = fw.plugins[dp.NAME]
    potential = plugin._potential_nodes(snapshot, node_to_status)
    if not potential:
        return
    offset = seed % len(potential)
    answer = plugin._best_vectorised(state, info, snapshot, potential, offset=offset, num_candidates=num_candidates)
    assert answer is not None  # these clusters take the fast path
    result, status = answer
    expected = walk_and_pick(fw.plugins[dp.NAME], state, info, snapshot, potential, offset, num_candidates)
    if isinstance(expected, str):
        assert (status.code, status.message) == (Code.UNSCHEDULABLE, expected)
        assert result is not None and result.nominating_info.nominated_node_name == ""
        return
    assert status.is_success()
    assert (result.node_name, [v.name for v in result.victims]) == expected
