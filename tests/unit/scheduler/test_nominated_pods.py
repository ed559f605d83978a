"""Nominated pods in Filter (upstream ``RunFilterPluginsWithNominatedPods`` / ``addGENominatedPods``).

The nominations come from a real :class:`~emulator.scheduler.queue.SchedulingQueue` (the framework's
nominator, as the scheduler wires it). Each case puts pods on two 4-cpu nodes, nominates pods to nodes, and
asks where an incoming pod fits and why not -- on the vectorised path and the per-node reference path alike.
The rule the expectations follow: a node with nominated pods of priority >= the incoming pod's (other than the
pod itself) must pass the filters twice -- with those pods added (their AddPod extensions run on a cloned
CycleState), then without; the first failing pass gives the reason.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from emulator.clock import ManualClock
from emulator.scheduler import in_tree_registry
from emulator.scheduler.framework.interface import CycleState
from emulator.scheduler.framework.nominated import NominatedColumns, nominated_on
from emulator.scheduler.framework.overlay import RequestOverlay
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import FitError, PodInfo, ScheduleResult
from emulator.scheduler.plugins import default_preemption as dp
from emulator.scheduler.queue import SchedulingQueue
from tests.builders import affinity_term, pod_affinity, req_pod, sched_node

HOST = "kubernetes.io/hostname"
CPU = "Insufficient cpu"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
PORTS = "node(s) didn't have free ports for the requested pod ports"


def a_pod(name: str, cpu: str, priority: int = 0, *, node: str | None = None, labels: dict[str, str] | None = None,
          port: int | None = None, **spec: Any) -> dict[str, Any]:
    body = req_pod(name, cpu, "1Gi", node=node, priority=priority, **spec)
    body["metadata"]["uid"] = f"uid-{name}"
    body["metadata"]["labels"] = dict(labels or {})
    if port is not None:
        body["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return body


def cluster() -> Snapshot:
    """n1 and n2, 4 cpu each; n1 runs 2 cpu (so 2 are free), n2 runs nothing."""
    nodes = [sched_node(n, cpu="4", labels={HOST: n}) for n in ("n1", "n2")]
    return Snapshot.build(nodes, [a_pod("resident", "2", node="n1")])


def framework(vectorised: bool) -> tuple[Framework, SchedulingQueue]:
    fw = Framework(in_tree_registry(), rng=random.Random(0), vectorised=vectorised)
    queue = SchedulingQueue(fw.queue_sort_less(), clock=ManualClock(), name="nominated-test")
    fw.nominator = queue
    return fw, queue


def why_not(fw: Framework, incoming: dict[str, Any], snapshot: Snapshot) -> dict[str, list[str]]:
    """Per node: [] where the pod fits, else the reasons it does not (every node judged)."""
    info = PodInfo.of(incoming)
    state = CycleState()
    _, status, _ = fw.run_pre_filter_plugins(state, info, snapshot)
    assert status is None or status.is_success(), status
    feasible, statuses = fw.run_filter_plugins(state, info, snapshot)
    out = {}
    for index, name in enumerate(snapshot.node_names):
        if feasible[index]:
            out[name] = []
        else:
            status = statuses.get(name)
            assert status is not None
            out[name] = status.all_reasons()
    return out


CASES = [
    # (nominated (pod, node), incoming pod, expected per node)
    # Nothing nominated: 2 cpu free on n1.
    ([], a_pod("in", "2"), {"n1": [], "n2": []}),
    # A higher-priority pod nominated to n1 holds its 2 cpu: 2 + 2 + 2 > 4.
    ([(a_pod("hi", "2", 10), "n1")], a_pod("in", "2"), {"n1": [CPU], "n2": []}),
    # Equal priority counts too (>=).
    ([(a_pod("eq", "2", 0), "n1")], a_pod("in", "2"), {"n1": [CPU], "n2": []}),
    # A lower-priority nomination is not added: the incoming pod may take that room.
    ([(a_pod("lo", "2", -5), "n1")], a_pod("in", "2"), {"n1": [], "n2": []}),
    # The pod's own nomination never counts against it.
    ([(a_pod("in", "2", 0), "n1")], a_pod("in", "2"), {"n1": [], "n2": []}),
    # Both fit together: 2 + 1 + 1 <= 4.
    ([(a_pod("hi", "1", 10), "n1")], a_pod("in", "1"), {"n1": [], "n2": []}),
    # Nominations only affect their own node: n2 holds 3 of its 4 cpu for "hi".
    ([(a_pod("hi", "3", 10), "n2")], a_pod("in", "2"), {"n1": [], "n2": [CPU]}),
    # Two nominated pods on n1 add up (1 + 1 + 2 resident + 1 incoming > 4); the lower one is ignored on n2.
    ([(a_pod("a", "1", 10), "n1"), (a_pod("b", "1", 20), "n1"), (a_pod("c", "4", -1), "n2")], a_pod("in", "1"),
     {"n1": [CPU], "n2": []}),
    # A nominated pod's host port is taken on its node.
    ([(a_pod("hi", "100m", 10, port=8080), "n1")], a_pod("in", "100m", port=8080), {"n1": [PORTS], "n2": []}),
    # Required anti-affinity to the nominated pod's label (InterPodAffinity's AddPod runs): the first pass fails.
    ([(a_pod("hi", "100m", 10, labels={"app": "web"}), "n1")],
     a_pod("in", "100m", affinity=pod_affinity(anti_required=[affinity_term(HOST, {"app": "web"})])),
     {"n1": [ANTI_AFFINITY], "n2": []}),
    # Required affinity only the nominated pod would satisfy: the first pass passes on n1, but the second (without
    # it) fails -- a pod never counts on a nominated pod that may not come. n2 never had such a pod.
    ([(a_pod("hi", "100m", 10, labels={"app": "db"}), "n1"),
      (a_pod("other", "100m", 10, labels={"app": "db"}), "n2")],
     a_pod("in", "100m", affinity=pod_affinity(required=[affinity_term(HOST, {"app": "db"})])),
     {"n1": [AFFINITY], "n2": [AFFINITY]}),
]
IDS = ["none", "higher", "equal", "lower-ignored", "itself-ignored", "both-fit", "other-node", "two-add-up",
       "host-port", "anti-affinity-addpod", "affinity-needs-both-passes"]


@pytest.mark.parametrize("vectorised", [True, False], ids=["vectorised", "per-node"])
@pytest.mark.parametrize(("nominated", "incoming", "expected"), CASES, ids=IDS)
def test_nominated_pods_hold_their_room(nominated, incoming, expected, vectorised):
    fw, queue = framework(vectorised)
    for body, node in nominated:
        queue.add_nominated_pod(PodInfo(body), node)
    assert why_not(fw, incoming, cluster()) == expected


@pytest.mark.parametrize(("nominee", "priority", "foreign", "incoming_nominated", "expected"), [
    ("a-first", 0, False, True, [CPU]),  # our own equal-priority nomination: counted (upstream's >=)
    ("z-last", 0, False, True, [CPU]),
    ("a-first", 0, True, True, [CPU]),  # a competing replica's, smaller uid than the incoming pod's: counted
    ("z-last", 0, True, True, []),  # a competing replica's, larger uid, both nominated to n1: not counted
    ("z-last", 0, True, False, [CPU]),  # ... but a pod not nominated to n1 counts it (no stealing)
    ("z-last", 10, True, True, [CPU]),  # higher priority: always counted
], ids=["own-smaller", "own-larger", "foreign-smaller", "foreign-larger-both-nominated",
        "foreign-larger-incoming-not-nominated", "foreign-higher"])
def test_equal_priority_nominations_of_competing_replicas_break_ties_by_uid(nominee, priority, foreign,
                                                                           incoming_nominated, expected):
    fw, queue = framework(True)
    queue.add_nominated_pod(PodInfo(a_pod(nominee, "2", priority)), "n1", foreign=foreign)
    incoming = a_pod("m-incoming", "2")
    if incoming_nominated:
        queue.add_nominated_pod(PodInfo(incoming), "n1")
    assert why_not(fw, incoming, cluster())["n1"] == expected


def test_without_a_nominator_filtering_is_as_before():
    fw = Framework(in_tree_registry(), rng=random.Random(0))
    assert fw.nominator is None
    assert why_not(fw, a_pod("in", "2"), cluster()) == {"n1": [], "n2": []}


def test_schedule_one_goes_around_the_nominated_room_and_the_nominee_lands_there():
    # n1 has 2 cpu free and a 2-cpu high-priority pod nominated there; n2 has 1 cpu free.
    nodes = [sched_node(n, cpu="4", labels={HOST: n}) for n in ("n1", "n2")]
    snapshot = Snapshot.build(nodes, [a_pod("r1", "2", node="n1"), a_pod("r2", "3", node="n2")])
    fw, queue = framework(True)
    hi = a_pod("hi", "2", 10)
    hi["status"] = {"nominatedNodeName": "n1"}
    queue.add_nominated_pod(PodInfo(hi), "n1")
    # A 1-cpu low pod goes to n2, not into hi's room; a 2-cpu one fits nowhere.
    low = fw.schedule_one(a_pod("low", "1"), snapshot)
    assert isinstance(low, ScheduleResult) and low.node == "n2"
    snapshot.assume(PodInfo(a_pod("low", "1")), "n2")
    blocked = fw.schedule_one(a_pod("big", "2"), snapshot)
    assert isinstance(blocked, FitError)
    assert blocked.diagnosis.node_to_status.get("n1").all_reasons() == [CPU]  # type: ignore[union-attr]
    # The nominee itself fits its node (its own nomination does not count against it).
    placed = fw.schedule_one(hi, snapshot)
    assert isinstance(placed, ScheduleResult) and placed.node == "n1"


def test_preemption_dry_run_counts_nominated_pods():
    # n1 and n2: one 3-cpu priority-0 pod each; "first" (priority 10, 3 cpu) is nominated to n1 already.
    # "second" (priority 5, 2 cpu) must preempt. On n1, even with its victim gone, first's 3 cpu + 2 > 4: upstream's
    # SelectVictimsOnNode filters with the nominated pods, so n1 is no candidate and n2 (victim v2) is chosen.
    # Without nominated pods both nodes would tie and the seeded offset would decide.
    nodes = [sched_node(n, cpu="4", labels={HOST: n}) for n in ("n1", "n2")]
    snapshot = Snapshot.build(nodes, [a_pod("v1", "3", node="n1"), a_pod("v2", "3", node="n2")])
    fw, queue = framework(True)
    queue.add_nominated_pod(PodInfo(a_pod("first", "3", 10)), "n1")
    state = CycleState()
    result = fw.schedule_one(a_pod("second", "2", 5), snapshot, state=state)
    assert isinstance(result, FitError)
    chosen = state.get(dp.RESULT_KEY)
    assert chosen is not None and chosen.node_name == "n2"
    assert [v.name for v in chosen.victims] == ["v2"]


@pytest.mark.parametrize("seed", range(12), ids=lambda s: f"seed-{s}")
def test_nominated_columns_follow_the_nominator_change_by_change(seed):
    # Filter's first pass reads the nominated pods' requests from columns kept up to date from the nominator's
    # change log; after every change they must hold what addGENominatedPods' choice (nominated_on) sums to.
    rng = random.Random(seed)
    nodes = [sched_node(f"n{i}", cpu="8") for i in range(6)]
    snapshot = Snapshot.build(nodes, [])
    _, queue = framework(True)
    columns = NominatedColumns()
    pods = [PodInfo(a_pod(f"p{k}", rng.choice(["1", "2", "500m"]), rng.choice([0, 5, 10]))) for k in range(10)]
    for _ in range(40):
        p = rng.choice(pods)
        if rng.random() < 0.25:
            queue.delete_nominated_pod(p.key)
        else:
            queue.add_nominated_pod(p, rng.choice(nodes)["metadata"]["name"], foreign=rng.random() < 0.3)
        incoming = rng.choice(pods)
        counted = columns.counted(queue, incoming, snapshot)
        assert counted is not None
        overlay = RequestOverlay(snapshot)
        counted.add_to(overlay)
        expected = nominated_on(queue, incoming, snapshot)
        want_cpu = [sum(q.requests.get("cpu", 0) for q in expected.get(i, ())) for i in range(len(nodes))]
        assert overlay.requested["cpu"].tolist() == want_cpu
        assert overlay.pod_counts.tolist() == [len(expected.get(i, ())) for i in range(len(nodes))]
        assert np.flatnonzero(counted.mask).tolist() == sorted(expected)
