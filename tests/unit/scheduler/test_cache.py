"""The scheduler cache: assume / forget / confirm / expire, incremental node and pod events, the comparer."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.clock import ManualClock
from emulator.scheduler.cache import Cache, compare_with_store
from emulator.scheduler.framework.types import CPU, MEMORY, PodInfo
from tests.builders import req_pod, sched_node

GI = 1024**3


def _pod(name: str, cpu: str = "1", node: str | None = None, **kwargs: Any) -> dict[str, Any]:
    body = req_pod(name, cpu, "1Gi", node=node, **kwargs)
    body["metadata"]["uid"] = f"uid-{name}"
    return body


def _cache(ttl: float = 30.0, nodes: int = 2) -> tuple[Cache, ManualClock]:
    clock = ManualClock()
    cache = Cache(clock=clock, assumed_ttl=ttl)
    for i in range(nodes):
        cache.on_node_add(sched_node(f"n{i}", cpu="4", memory="8Gi"))
    cache.apply_pending()
    return cache, clock


def _requested(cache: Cache, node: str, resource: str = CPU) -> int:
    snap = cache.snapshot()
    index = snap.index_of(node)
    assert index is not None
    return int(snap.requested(resource)[index])


def test_assume_counts_at_once_and_forget_gives_back():
    cache, _ = _cache()
    info = PodInfo(_pod("p"))
    with cache.cycle():
        cache.assume(info, "n0")
    assert _requested(cache, "n0") == 1000 and cache.is_assumed("default/p")
    cache.forget("default/p", "n0")
    assert _requested(cache, "n0") == 0 and cache.get("default/p") is None


def test_assuming_a_cached_pod_is_refused():
    cache, _ = _cache()
    info = PodInfo(_pod("p"))
    cache.assume(info, "n0")
    with pytest.raises(KeyError):
        cache.assume(info, "n1")


def test_informer_confirms_an_assumed_pod_and_forget_is_then_ignored():
    cache, _ = _cache()
    info = PodInfo(_pod("p"))
    cache.assume(info, "n0")
    cache.on_pod_add(_pod("p", node="n0"))
    assert not cache.is_assumed("default/p")
    cache.forget("default/p", "n0")  # a late failure report cannot undo what the store says
    assert _requested(cache, "n0") == 1000


def test_confirmation_on_another_node_moves_the_pod():
    # Someone else bound it elsewhere: the informer's view wins.
    cache, _ = _cache()
    cache.assume(PodInfo(_pod("p")), "n0")
    cache.on_pod_add(_pod("p", node="n1"))
    assert (_requested(cache, "n0"), _requested(cache, "n1")) == (0, 1000)


def test_assumed_pod_expires_after_ttl_once_binding_finished():
    cache, clock = _cache(ttl=30.0)
    cache.assume(PodInfo(_pod("p")), "n0")
    clock.advance(100)
    assert cache.cleanup_assumed() == []  # binding not finished: never expires
    cache.finish_binding("default/p")
    cache.apply_pending()
    clock.advance(29)
    assert cache.cleanup_assumed() == []
    clock.advance(2)
    expired = cache.cleanup_assumed()
    assert [s.info.key for s in expired] == ["default/p"]
    assert _requested(cache, "n0") == 0 and cache.expired == 1


def test_ttl_zero_never_expires():
    cache, clock = _cache(ttl=0)
    cache.assume(PodInfo(_pod("p")), "n0")
    cache.finish_binding("default/p")
    clock.advance(10**6)
    assert cache.cleanup_assumed() == [] and cache.is_assumed("default/p")


def test_confirmed_pod_does_not_expire():
    cache, clock = _cache(ttl=5)
    cache.assume(PodInfo(_pod("p")), "n0")
    cache.finish_binding("default/p")
    cache.on_pod_add(_pod("p", node="n0"))
    clock.advance(60)
    assert cache.cleanup_assumed() == [] and _requested(cache, "n0") == 1000


@pytest.mark.parametrize(("event", "cpu"), [
    ("status-update", 1000),  # status changes do not touch the arrays
    ("resize", 2000),
    ("terminal", 0),  # a finished pod leaves
    ("delete", 0),
])
def test_pod_events_update_the_snapshot_in_place(event, cpu):
    cache, _ = _cache()
    bound = _pod("p", node="n0")
    cache.on_pod_add(bound)
    assert _requested(cache, "n0") == 1000
    generation = cache.snapshot().generation
    new = {**bound, "status": {"phase": "Running"}}
    if event == "resize":
        new = _pod("p", cpu="2", node="n0")
    elif event == "terminal":
        new = {**bound, "status": {"phase": "Succeeded"}}
    if event == "delete":
        cache.on_pod_delete(bound)
    else:
        cache.on_pod_update(bound, new)
    assert _requested(cache, "n0") == cpu
    assert cache.rebuilds == 1  # only the initial node burst rebuilt the arrays
    if event == "status-update":
        assert cache.snapshot().generation == generation


def test_node_burst_rebuilds_once_and_heartbeats_do_not_rebuild():
    cache = Cache(clock=ManualClock())
    nodes = [sched_node(f"n{i}", cpu="4") for i in range(50)]
    for node in nodes:
        cache.on_node_add(node)
    assert cache.snapshot().num_nodes == 50 and cache.rebuilds == 1
    heartbeat = {**nodes[0], "status": {**nodes[0]["status"], "conditions": [{"type": "Ready", "status": "True",
                                                                              "lastHeartbeatTime": "now"}]}}
    cache.on_node_update(nodes[0], heartbeat)
    cache.apply_pending()
    assert cache.rebuilds == 1
    relabelled = {**nodes[0], "metadata": {**nodes[0]["metadata"], "labels": {"zone": "b"}}}
    cache.on_node_update(nodes[0], relabelled)
    snap = cache.snapshot()
    assert cache.rebuilds == 2 and snap.labels(snap.index_of("n0")) == {"zone": "b"}


def _with_images(node: dict[str, Any], images: dict[str, int]) -> dict[str, Any]:
    return {**node, "status": {**node["status"],
                               "images": [{"names": [name], "sizeBytes": size} for name, size in images.items()]}}


def _with_annotation(node: dict[str, Any], value: str) -> dict[str, Any]:
    return {**node, "metadata": {**node["metadata"], "annotations": {"kemu.io/usage": value}}}


def _with_allocatable_cpu(node: dict[str, Any], cpu: str) -> dict[str, Any]:
    return {**node, "status": {**node["status"], "allocatable": {**node["status"]["allocatable"], "cpu": cpu}}}


def _with_taint(node: dict[str, Any], key: str) -> dict[str, Any]:
    return {**node, "spec": {**node["spec"], "taints": [{"key": key, "effect": "NoSchedule"}]}}


@pytest.mark.parametrize(("change", "rebuilds", "pause_on", "cpu_millis"), [
    (lambda n: _with_images(n, {"registry.k8s.io/pause:3.9": 300_000}), 1, [1], 4000),  # a kubelet pulled an image
    (lambda n: _with_annotation(n, "cpu=0.4"), 1, [], 4000),  # a usage annotation
    (lambda n: _with_allocatable_cpu(n, "8"), 2, [], 8000),  # the arrays change: rebuilt
    (lambda n: _with_taint(n, "dedicated"), 2, [], 4000),
], ids=["images", "annotation", "allocatable", "taint"])
def test_a_node_update_that_moves_no_array_is_swapped_in_place(change: Any, rebuilds: int, pause_on: list[int],
                                                               cpu_millis: int):
    cache = Cache(clock=ManualClock())
    nodes = [sched_node(f"n{i}", cpu="4") for i in range(3)]
    for node in nodes:
        cache.on_node_add(node)
    cache.on_pod_add(_pod("p", node="n1"))
    before = cache.snapshot()
    fork = before.fork()
    new = change(nodes[1])
    cache.on_node_update(nodes[1], new)
    snap = cache.snapshot()
    assert cache.rebuilds == rebuilds
    assert snap.node(snap.index_of("n1")) is new and _requested(cache, "n1") == 1000
    assert fork.node(fork.index_of("n1")) is nodes[1]  # a fork taken before keeps the node it saw
    assert (snap is before) == (rebuilds == 1)
    assert snap.image("registry.k8s.io/pause:3.9")[0].tolist() == pause_on
    assert fork.image("registry.k8s.io/pause:3.9")[0].tolist() == []
    assert snap.allocatable(CPU).tolist() == [4000, cpu_millis, 4000]


def test_pod_before_its_node_is_counted_when_the_node_arrives():
    cache = Cache(clock=ManualClock())
    cache.on_pod_add(_pod("p", node="late"))
    assert cache.snapshot().num_nodes == 0
    cache.on_node_add(sched_node("late", cpu="4"))
    assert _requested(cache, "late") == 1000
    assert cache.dump()["podsOnUnknownNodes"] == []


def test_assumption_survives_a_rebuild():
    cache, _ = _cache()
    cache.assume(PodInfo(_pod("p")), "n0")
    cache.on_node_add(sched_node("n9", cpu="4"))
    assert _requested(cache, "n0") == 1000 and cache.rebuilds == 2


def test_staleness_is_the_age_of_the_newest_applied_event():
    cache, _ = _cache()
    cache.on_pod_add(_pod("p", node="n0"))
    cache.apply_pending()
    assert 0 <= cache.staleness < 1.0


def test_dump_lists_nodes_pods_and_assumptions():
    cache, _ = _cache()
    cache.on_pod_add(_pod("a", node="n0"))
    cache.assume(PodInfo(_pod("b")), "n1")
    dump = cache.dump()
    by_name = {n["name"]: n for n in dump["nodes"]}
    assert by_name["n0"]["pods"] == ["default/a"] and by_name["n1"]["pods"] == ["default/b"]
    assert by_name["n0"]["requested"][CPU] == 1000 and by_name["n0"]["requested"][MEMORY] == GI
    assert dump["assumedPods"] == ["default/b"]


# -- the comparer ---------------------------------------------------------------------------------------------


def _store_view() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [sched_node("n0", cpu="4", memory="8Gi"), sched_node("n1", cpu="4", memory="8Gi")]
    pods = [_pod("a", node="n0"), _pod("b", node="n1"), _pod("pending")]
    return nodes, pods


def test_comparer_finds_nothing_when_cache_matches_store():
    nodes, pods = _store_view()
    cache, _ = _cache()
    for p in pods[:2]:
        cache.on_pod_add(p)
    assert not compare_with_store(cache, nodes, pods, pending=[pods[2]])


def test_comparer_accepts_a_bind_in_flight():
    nodes, pods = _store_view()
    cache, _ = _cache()
    for p in pods[:2]:
        cache.on_pod_add(p)
    cache.assume(PodInfo(pods[2]), "n1")  # assumed, the store has not seen the bind yet
    assert not compare_with_store(cache, nodes, pods, pending=[])


def test_comparer_reports_every_kind_of_difference():
    nodes, pods = _store_view()
    cache = Cache(clock=ManualClock())
    cache.on_node_add(nodes[0])
    cache.on_node_add(sched_node("ghost", cpu="4"))
    cache.on_pod_add(_pod("a", node="ghost"))  # misplaced
    cache.on_pod_add(_pod("gone", cpu="2", node="n0"))  # deleted in the store, the cache missed it
    diff = compare_with_store(cache, nodes, pods, pending=[])
    assert diff.missed_nodes == ["n1"] and diff.redundant_nodes == ["ghost"]
    assert diff.missed_pods == ["default/b", "default/pending"]
    assert diff.redundant_pods == ["default/gone"]
    assert diff.misplaced_pods == [("default/a", "ghost", "n0")]
    assert ("n0", CPU, 2000, 1000) in diff.resource_mismatches and ("ghost", CPU, 1000, 0) in diff.resource_mismatches
    assert bool(diff) and set(diff.as_dict()) == {"missedNodes", "redundantNodes", "missedPods", "redundantPods",
                                                  "misplacedPods", "resourceMismatches"}


def test_comparer_skips_pending_pods_of_other_schedulers():
    nodes, pods = _store_view()
    cache, _ = _cache()
    for p in pods[:2]:
        cache.on_pod_add(p)
    diff = compare_with_store(cache, nodes, pods, pending=[], responsible=lambda p: False)
    assert not diff


@pytest.mark.parametrize("change", [
    {"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}},  # preemption: a victim terminating
    {"status": {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}},
    {"status": {"phase": "Running", "startTime": "2024-01-01T00:00:00Z"}},  # MoreImportantPod's start time
], ids=["deletion-timestamp", "disruption-target", "start-time"])
def test_a_status_update_shows_in_the_snapshot_without_moving_any_array(change):
    # Upstream's NodeInfo holds the updated pod: PodEligibleToPreemptOthers and MoreImportantPod read these.
    cache, _ = _cache()
    bound = _pod("p", node="n0")
    cache.on_pod_add(bound)
    snap = cache.snapshot()
    generation = snap.generation
    assert snap.pods_on(0)[0].memo("start", lambda p: (p.pod.get("status") or {}).get("startTime")) is None
    new = {**bound, **{part: {**(bound.get(part) or {}), **fields} for part, fields in change.items()}}
    cache.on_pod_update(bound, new)
    snap = cache.snapshot()
    shown = snap.pods_on(0)[0]
    for part, fields in change.items():
        assert all(shown.pod[part][name] == value for name, value in fields.items())
    assert shown.memo("start", lambda p: (p.pod.get("status") or {}).get("startTime")) == \
        (new.get("status") or {}).get("startTime")
    assert snap.generation == generation and _requested(cache, "n0") == 1000
