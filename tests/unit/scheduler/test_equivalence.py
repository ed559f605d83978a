"""Property test: the vectorised path decides exactly as the per-node path, on random clusters and pods.

Same feasibility mask, same statuses (plugin, code, reasons) for every rejected node, same raw and
normalised scores per plugin, same chosen node for a stream of pods, same FitError text -- for
every scoring strategy. Seeds are fixed, so a failure reproduces.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from emulator.scheduler import in_tree_registry
from emulator.scheduler.framework.interface import CycleState
from emulator.scheduler.framework.profile import Profile
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import FitError, PodInfo, ScheduleResult
from tests.builders import pod, res_container, sched_node, taint

ZONES = ("z1", "z2", "z3")
IMAGES = {"web:1": 300 * 2**20, "ml:2": 4000 * 2**20, "tiny:latest": 10 * 2**20, "mid:3": 600 * 2**20}
TAINT_KEYS = ("dedicated", "gpu", "spot")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def random_node(i: int, rng: random.Random) -> dict[str, Any]:
    extra = {"nvidia.com/gpu": str(rng.choice((2, 4, 8)))} if rng.random() < 0.3 else {}
    if rng.random() < 0.2:
        extra["ephemeral-storage"] = f"{rng.randint(1, 50)}Gi"
    labels = {"zone": rng.choice(ZONES), "gen": str(rng.randint(1, 9))}
    if rng.random() < 0.5:
        labels["disk"] = rng.choice(("ssd", "hdd"))
    taints = [taint(rng.choice(TAINT_KEYS), rng.choice(("", "a", "b")), rng.choice(EFFECTS))
              for _ in range(rng.choice((0, 0, 0, 1, 2)))]
    images = {name: size for name, size in IMAGES.items() if rng.random() < 0.35}
    return sched_node(f"node-{i:03d}", cpu=str(rng.choice((2, 4, 8, 16))), memory=f"{rng.choice((4, 8, 16, 64))}Gi",
                      pods=str(rng.choice((4, 110))), labels=labels, taints=taints,
                      unschedulable=rng.random() < 0.05, images=images, **extra)


def random_requests(rng: random.Random) -> dict[str, str]:
    requests: dict[str, str] = {}
    if rng.random() < 0.85:
        requests["cpu"] = rng.choice(("0", "50m", "250m", "1", "1500m", "3"))
    if rng.random() < 0.85:
        requests["memory"] = rng.choice(("0", "64Mi", "512Mi", "2Gi", "6Gi"))
    if rng.random() < 0.15:
        requests["nvidia.com/gpu"] = str(rng.randint(1, 4))
    if rng.random() < 0.05:
        requests["ephemeral-storage"] = f"{rng.randint(1, 20)}Gi"
    return requests


def random_expression(rng: random.Random) -> dict[str, Any]:
    operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"))
    if operator in ("In", "NotIn"):
        key = rng.choice(("zone", "disk"))
        values = rng.sample(["z1", "z2", "z3", "ssd", "hdd"], rng.randint(1, 2))
        return {"key": key, "operator": operator, "values": values}
    if operator in ("Gt", "Lt"):
        return {"key": "gen", "operator": operator, "values": [str(rng.randint(0, 9))]}
    return {"key": rng.choice(("zone", "disk", "missing")), "operator": operator}


def random_term(rng: random.Random, names: list[str]) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": [random_expression(rng) for _ in range(rng.randint(1, 2))]}
    if rng.random() < 0.2:
        term["matchFields"] = [{"key": "metadata.name", "operator": rng.choice(("In", "NotIn")),
                                "values": [rng.choice(names)]}]
    return term


def random_pod(i: int, rng: random.Random, names: list[str], node: str | None = None) -> dict[str, Any]:
    containers = [res_container(f"c{j}", random_requests(rng), image=rng.choice([*IMAGES, "web", "other:1"]),
                                host_ports=[("", rng.choice(("TCP", "UDP")), rng.choice((80, 443)))]
                                if rng.random() < 0.1 else None)
                  for j in range(rng.randint(1, 2))]
    init = [res_container("init", random_requests(rng), image=rng.choice(list(IMAGES)))] if rng.random() < 0.2 else None
    spec: dict[str, Any] = {}
    if rng.random() < 0.4:
        spec["tolerations"] = [{"key": rng.choice(TAINT_KEYS), "operator": rng.choice(("Exists", "Equal")),
                                "value": rng.choice(("", "a")), "effect": rng.choice(("", *EFFECTS))}
                               for _ in range(rng.randint(1, 2))]
    if rng.random() < 0.2:
        spec["nodeSelector"] = {"zone": rng.choice(ZONES)}
    affinity: dict[str, Any] = {}
    if rng.random() < 0.25:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [random_term(rng, names) for _ in range(rng.randint(1, 2))]}
    if rng.random() < 0.3:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": rng.randint(1, 100), "preference": random_term(rng, names)} for _ in range(rng.randint(1, 3))]
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    return pod(f"pod-{i}", containers=containers, init=init, node=node, **spec)


PROFILES: dict[str, dict[str, Any]] = {
    "least-allocated": {},
    "most-allocated": {"NodeResourcesFit": {"scoringStrategy": {"type": "MostAllocated", "resources": [
        {"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 3}]}}},
    "requested-to-capacity": {
        "NodeResourcesFit": {"scoringStrategy": {"type": "RequestedToCapacityRatio", "resources": [
            {"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 4},
            {"name": "ephemeral-storage", "weight": 1}],
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 40, "score": 7},
                                                   {"utilization": 100, "score": 2}]}}},
        "NodeResourcesBalancedAllocation": {"resources": [
            {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 1}]}},
}


def frameworks(config: dict[str, Any], seed: int) -> tuple[Framework, Framework]:
    registry = in_tree_registry()
    made = []
    for vectorised in (True, False):
        profile = Profile.default(registry, plugin_config=dict(config))
        made.append(Framework(registry, profile, rng=random.Random(seed), vectorised=vectorised))
    return made[0], made[1]


def random_cluster(seed: int, n: int) -> tuple[Snapshot, random.Random, list[str]]:
    rng = random.Random(seed)
    nodes = [random_node(i, rng) for i in range(n)]
    names = [node["metadata"]["name"] for node in nodes]
    bound = [random_pod(10_000 + i, rng, names, node=rng.choice(names)) for i in range(n)]
    return Snapshot.build(nodes, bound), rng, names


@pytest.mark.parametrize("profile", list(PROFILES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_filter_and_score_agree(profile, seed):
    snapshot, rng, names = random_cluster(seed, 60)
    vec, ref = frameworks(PROFILES[profile], seed)
    checked_scores = 0
    for i in range(40):
        info = PodInfo.of(random_pod(i, rng, names))
        states = [CycleState(), CycleState()]
        outcomes = []
        for fw, state in zip((vec, ref), states, strict=True):
            _, status, _ = fw.run_pre_filter_plugins(state, info, snapshot)
            if status is not None:
                outcomes.append(("prefilter", status.code, status.message))
                continue
            mask, statuses = fw.run_filter_plugins(state, info, snapshot)
            rejected = sorted((name, s.plugin, int(s.code), tuple(s.reasons)) for name, s in statuses.items())
            outcomes.append((mask.tolist(), rejected, statuses.reason_counts()))
        assert outcomes[0] == outcomes[1]
        if outcomes[0][0] == "prefilter":
            continue
        feasible = np.flatnonzero(outcomes[0][0])
        if len(feasible) < 2:
            continue
        scored = [fw.prioritize_nodes(state, info, snapshot, feasible) for fw, state in zip((vec, ref), states,
                                                                                              strict=True)]
        assert scored[0].totals.tolist() == scored[1].totals.tolist()
        assert {k: v.tolist() for k, v in scored[0].plugin_scores.items()} == \
               {k: v.tolist() for k, v in scored[1].plugin_scores.items()}
        checked_scores += 1
    assert checked_scores >= 5  # the random pods really exercised scoring


@pytest.mark.parametrize("profile", list(PROFILES))
@pytest.mark.parametrize("seed", [11, 12])
def test_streamed_placements_agree(profile, seed):
    # 150 nodes: above 100, so node sampling and the round-robin start index are exercised too.
    snapshot, rng, names = random_cluster(seed, 150)
    vec, ref = frameworks(PROFILES[profile], seed)
    snap_vec, snap_ref = snapshot.fork(), snapshot.fork()
    placed = failed = 0
    for i in range(60):
        info = PodInfo.of(random_pod(i, rng, names))
        a = vec.schedule_one(info, snap_vec)
        b = ref.schedule_one(info, snap_ref)
        if isinstance(a, FitError):
            assert isinstance(b, FitError) and str(a) == str(b)
            failed += 1
            continue
        assert isinstance(a, ScheduleResult) and a == b
        snap_vec.assume(info, a.node_index)
        snap_ref.assume(info, b.node_index)
        placed += 1
        assert vec.next_start_node_index == ref.next_start_node_index
    assert placed >= 20 and failed >= 1
    assert snap_vec.requested("cpu").tolist() == snap_ref.requested("cpu").tolist()
