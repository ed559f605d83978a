"""The nominated-pods pass judged node by node, against upstream's rule worked out per node in the test.

Upstream ``pkg/scheduler/framework/runtime/framework.go`` (``RunFilterPluginsWithNominatedPods``,
``addGENominatedPods``): on a node with nominated pods of priority >= the incoming pod's (other than the pod
itself), every Filter plugin runs twice -- on a copy of the node with those pods added (their PreFilter
``AddPod`` extensions run on a clone of the CycleState), then on the node as it is; the first failing pass gives
the status. Every other node gets the plain filters' verdict.

The framework judges the few nodes with nominations one by one (``Snapshot.node_info_with``) and, beyond
``PER_NODE_LIMIT`` of them, all nodes at once from the nominated pods' columns. Random clusters (taints,
cordoned nodes, full nodes, host ports, extended resources) with nominated pods of various priorities on a few
or many nodes: each node's verdict and reasons must be the reference's, and so must the cycle's visit (which
nodes are feasible, which rejected ones it met) from any start.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from emulator.clock import ManualClock
from emulator.scheduler import in_tree_registry
from emulator.scheduler.framework.interface import CycleState, Status, is_success
from emulator.scheduler.framework.nominated import PER_NODE_LIMIT
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import Diagnosis, NodeToStatus, PodInfo
from emulator.scheduler.framework.visiting import visit_all_but, visit_all_nodes
from emulator.scheduler.queue import SchedulingQueue
from tests.builders import affinity_term, pod_affinity, req_pod, sched_node, taint, toleration

HOST = "kubernetes.io/hostname"
FOO = "example.com/foo"


def a_pod(name: str, cpu: str, memory: str, priority: int, *, node: str | None = None, port: int | None = None,
          foo: int = 0, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body = req_pod(name, cpu, memory, node=node, priority=priority, extra={FOO: str(foo)} if foo else None, **spec)
    body["metadata"]["uid"] = f"uid-{name}"
    body["metadata"]["labels"] = dict(labels or {})
    if port is not None:
        body["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return body


def random_pod(rng: random.Random, name: str, priority: int, **kw: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if rng.random() < 0.15:
        extra["port"] = rng.choice([80, 8080])
    if rng.random() < 0.15:
        extra["foo"] = rng.choice([1, 2])
    if rng.random() < 0.3:
        extra["tolerations"] = [toleration("dedicated", "gpu", "NoSchedule")]
    if rng.random() < 0.15:
        extra["labels"] = {"app": "web"}
    return a_pod(name, rng.choice(["100m", "500m", "1", "2", "3"]), rng.choice(["256Mi", "1Gi", "4Gi"]), priority,
                 **extra, **kw)


def random_cluster(rng: random.Random, n: int) -> Snapshot:
    nodes = []
    for i in range(n):
        extra = {FOO: str(rng.choice([0, 2, 4]))} if rng.random() < 0.5 else {}
        nodes.append(sched_node(
            f"n{i:02d}", cpu=rng.choice(["2", "4", "8"]), memory=rng.choice(["4Gi", "16Gi"]),
            pods=rng.choice(["3", "10", "110"]), labels={HOST: f"n{i:02d}"},
            taints=[taint("dedicated", "gpu")] if rng.random() < 0.15 else None,
            unschedulable=rng.random() < 0.08, **extra))
    residents = [random_pod(rng, f"r{j}", 0, node=f"n{rng.randrange(n):02d}") for j in range(3 * n)]
    return Snapshot.build(nodes, residents)


def framework(vectorised: bool) -> tuple[Framework, SchedulingQueue]:
    fw = Framework(in_tree_registry(), rng=random.Random(0), vectorised=vectorised)
    queue = SchedulingQueue(fw.queue_sort_less(), clock=ManualClock(), name="nominated-per-node-test")
    fw.nominator = queue
    return fw, queue


def reference(fw: Framework, state: CycleState, pod: PodInfo, snapshot: Snapshot,
              nominated: list[tuple[PodInfo, str]]) -> list[Status | None]:
    """Per node, upstream's two passes (the first only with nominated pods of priority >= the pod's)."""
    filters = [p for p in fw.plugins_at("filter") if p.name not in state.skip_filter_plugins]
    extensions = [(p.name, p.pre_filter_extensions()) for p in fw.plugins_at("preFilter")
                  if p.name not in state.skip_filter_plugins and p.pre_filter_extensions() is not None]

    def run(st: CycleState, snap: Snapshot, index: int) -> Status | None:
        info = snap.node_info(index)
        for plugin in filters:
            status = plugin.filter(st, pod, info)
            if not is_success(status):
                assert status is not None
                return status
        return None

    out: list[Status | None] = []
    for index, name in enumerate(snapshot.node_names):
        added = [p for p, node in nominated if node == name and p.priority >= pod.priority and p.key != pod.key]
        if added:
            fork = snapshot.fork()
            cloned = state.clone()
            for p in added:
                fork.assume(p, index)
            for p in added:
                for _, ext in extensions:
                    assert is_success(ext.add_pod(cloned, pod, p, fork.node_info(index)))
            first = run(cloned, fork, index)
            if first is not None:
                out.append(first)
                continue
        out.append(run(state, snapshot, index))
    return out


def reasons(status: Status | None) -> tuple[int, list[str]] | None:
    return None if status is None else (int(status.code), status.all_reasons())


# (seed, nodes, nominated pods, incoming priority, incoming affinity): few nominated nodes take the per-node path,
# more than PER_NODE_LIMIT the columns'; anti-affinity to a nominated pod's label needs its AddPod extension.
CASES = [
    (1, 12, 3, 0, False),
    (2, 12, 6, 5, False),
    (3, 20, 1, 10, False),
    (4, 20, 8, 5, True),
    (5, 30, 12, 0, False),
    (6, 40, PER_NODE_LIMIT + 10, 5, False),
    (7, 40, PER_NODE_LIMIT + 20, 0, False),
    (8, 40, PER_NODE_LIMIT + 8, 5, True),
    (9, 8, 5, 10, False),
    (10, 25, 10, 5, False),
]
IDS = ["3-on-12", "6-on-12-mid", "1-on-20-high", "8-anti-affinity", "12-on-30", "many-mid", "many-low",
       "many-anti-affinity", "5-on-8-high", "10-on-25"]


@pytest.mark.parametrize(("seed", "n", "k", "priority", "anti"), CASES, ids=IDS)
def test_every_node_gets_upstreams_two_pass_verdict(seed, n, k, priority, anti):
    rng = random.Random(seed)
    snapshot = random_cluster(rng, n)
    fw, queue = framework(True)
    nominated = []
    for j in range(k):
        p = PodInfo(random_pod(rng, f"nom{j}", rng.choice([0, 5, 10])))
        node = snapshot.node_names[rng.randrange(n)]
        queue.add_nominated_pod(p, node)
        nominated.append((p, node))
    for trial in range(3):
        spec: dict[str, Any] = {}
        if anti:
            spec["affinity"] = pod_affinity(anti_required=[affinity_term(HOST, {"app": "web"})])
        incoming = PodInfo(random_pod(rng, f"in{trial}", priority, **spec))
        state = CycleState()
        _, status, _ = fw.run_pre_filter_plugins(state, incoming, snapshot)
        assert status is None or status.is_success(), status
        expected = reference(fw, state, incoming, snapshot, nominated)

        feasible, statuses = fw.run_filter_plugins(state, incoming, snapshot)
        got = [None if feasible[i] else statuses.get(name) for i, name in enumerate(snapshot.node_names)]
        assert [reasons(s) for s in got] == [reasons(s) for s in expected]

        # The cycle's visit from several starts, stopping after `wanted` feasible nodes and one more: the same nodes
        # met (the first pass runs only on the nominated nodes the visit meets), the same reasons.
        for start in rng.sample(range(n), min(n, 8)):
            wanted = rng.randrange(1, n + 1)
            want_feasible, want_rejected, seen = [], {}, 0
            for i in ((start + j) % n for j in range(n)):
                if expected[i] is None:
                    seen += 1
                    if seen > wanted:
                        break
                    want_feasible.append(i)
                else:
                    want_rejected[snapshot.node_names[i]] = reasons(expected[i])
            diagnosis = Diagnosis(NodeToStatus(snapshot))
            found = fw._filter(state, incoming, snapshot, None, start, wanted=wanted, diagnosis=diagnosis)
            assert found.tolist() == want_feasible, (start, wanted)
            got_rejected = {name: reasons(s) for name, s in diagnosis.node_to_status.items()}
            assert got_rejected == want_rejected, (start, wanted)


@pytest.mark.parametrize(("seed", "n", "failed", "wanted"), [
    (0, 10, 0, 3), (1, 10, 3, 3), (2, 10, 3, 10), (3, 10, 10, 4), (4, 50, 5, 7), (5, 50, 8, 42),
    (6, 50, 49, 1), (7, 1, 1, 1), (8, 1, 0, 1), (9, 100, 20, 80),
], ids=["none-failed", "few", "all-wanted", "all-failed", "mid", "many-wanted", "one-left", "single-failed",
        "single-ok", "wraps"])
def test_visit_all_but_matches_the_masked_visit(seed, n, failed, wanted):
    rng = random.Random(seed)
    bad = np.asarray(rng.sample(range(n), failed), dtype=np.intp)
    passes = np.ones(n, dtype=bool)
    passes[bad] = False
    for start in range(n):
        want = visit_all_nodes(passes, start, wanted)
        got = visit_all_but(bad, n, start, wanted)
        assert got[0].tolist() == want[0].tolist()
        assert sorted(got[1].tolist()) == sorted(want[1].tolist())


@pytest.mark.parametrize("seed", range(6), ids=lambda s: f"seed-{s}")
def test_node_info_with_is_a_fork_with_the_pods_assumed(seed):
    rng = random.Random(seed)
    snapshot = random_cluster(rng, 6)
    gpu_node = sched_node("gpu", cpu="8", labels={HOST: "gpu"}, **{"nvidia.com/gpu": "2"})
    snapshot = snapshot.add_node(gpu_node)
    for index in range(snapshot.num_nodes):
        pods = [PodInfo(random_pod(rng, f"p{index}-{j}", 5)) for j in range(rng.randrange(1, 4))]
        if index == snapshot.num_nodes - 1:
            pods.append(PodInfo(req_pod(f"g{index}", "1", "1Gi", extra={"nvidia.com/gpu": "1"})))
        fork = snapshot.fork()
        for p in pods:
            fork.assume(p, index)
        want, got = fork.node_info(index), snapshot.node_info_with(index, pods)
        for field in ("index", "name", "pods", "allocatable", "allowed_pod_number", "requested",
                      "nonzero_requested", "image_states", "device_free"):
            assert getattr(got, field) == getattr(want, field), field
        assert dict(got.used_ports.items()) == dict(want.used_ports.items())
        assert snapshot.node_info(index).pods == snapshot.pods_on(index)  # this snapshot unchanged
