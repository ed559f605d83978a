"""The scheduler end to end through the store: placement, failures, profiles, and competing schedulers.

Everything goes through the real store (Redis): pods are created with ``ServerCore``, schedulers run in
:class:`~emulator.scheduler_host.SchedulerHost` s (their own store connections and informers), and the
checks read the store back. Waits are conditions with deadlines, woken by the store's watch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from emulator.api.kinds import EVENT, NODE, POD
from emulator.api.pods import pod_requests
from emulator.api.types import Obj
from emulator.scheduler.scheduler import SchedulerOptions
from emulator.scheduler_host import HostSettings, SchedulerHost
from emulator.server.core import ServerCore
from emulator.store.store import Store
from tests.builders import req_pod, sched_node
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

BIN_PACKING = {"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
    "type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}}]}


@pytest.fixture
def core(redis_url: str) -> Iterator[ServerCore]:
    store = Store.connect(redis_url)
    core = ServerCore(store)
    core.bootstrap()
    yield core
    store.close()


@pytest.fixture
def hosts(redis_url: str) -> Iterator[Callable[..., SchedulerHost]]:
    started: list[SchedulerHost] = []

    def start(*options: SchedulerOptions, config: dict[str, Any] | None = None) -> SchedulerHost:
        host = SchedulerHost(HostSettings(redis_url, config=config), list(options or [SchedulerOptions()]))
        started.append(host.start(sync_timeout=30))
        return host

    yield start
    for host in started:
        host.stop()


def bound_to(core: ServerCore, name: str) -> str | None:
    return core.get(POD, "default", name)["spec"].get("nodeName")


def events_for(core: ServerCore, name: str, reason: str) -> list[Obj]:
    return [e for e in core.list(EVENT, "default").items
            if e["involvedObject"]["name"] == name and e["reason"] == reason]


def test_pod_lands_on_the_unique_best_node(core, hosts):
    core.create(NODE, sched_node("small", cpu="2", memory="4Gi"))
    core.create(NODE, sched_node("busy", cpu="16", memory="64Gi"))
    core.create(NODE, sched_node("roomy", cpu="16", memory="64Gi"))
    core.create(POD, req_pod("resident", "12", "48Gi", node="busy"))
    hosts()
    core.create(POD, req_pod("web", "1", "2Gi"))
    wait_for(lambda: bound_to(core, "web") is not None, 20, "web to be bound")
    # LeastAllocated + BalancedAllocation: "roomy" is the only node where the pod leaves the most room free.
    assert bound_to(core, "web") == "roomy"
    pod = core.get(POD, "default", "web")
    assert next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")["status"] == "True"
    wait_for(lambda: bool(events_for(core, "web", "Scheduled")), 20, "the Scheduled event")
    event = events_for(core, "web", "Scheduled")[0]
    assert event["message"] == "Successfully assigned default/web to roomy"
    assert event["type"] == "Normal" and event["source"]["component"] == "default-scheduler"


def test_infeasible_pod_stays_pending_with_upstream_message_condition_and_event(core, hosts):
    for i in range(3):
        core.create(NODE, sched_node(f"n{i}", cpu="4", memory="8Gi"))
    hosts()
    core.create(POD, req_pod("huge", "64", "1Gi"))

    def condition() -> Obj | None:
        conds = core.get(POD, "default", "huge")["status"].get("conditions") or []
        return next((c for c in conds if c["type"] == "PodScheduled"), None)

    wait_for(lambda: condition() is not None, 20, "the PodScheduled condition")
    expected = ("0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
                "3 Preemption is not helpful for scheduling.")
    cond = condition()
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", expected)
    assert bound_to(core, "huge") is None
    wait_for(lambda: bool(events_for(core, "huge", "FailedScheduling")), 20, "FailedScheduling")
    event = events_for(core, "huge", "FailedScheduling")[0]
    assert (event["type"], event["message"]) == ("Warning", expected)


def test_two_profiles_route_by_scheduler_name(core, hosts):
    core.create(NODE, sched_node("empty", cpu="8", memory="32Gi"))
    core.create(NODE, sched_node("half", cpu="8", memory="32Gi"))
    core.create(POD, req_pod("resident", "4", "16Gi", node="half"))
    hosts(config={"profiles": [{"schedulerName": "default-scheduler"},
                               {"schedulerName": "bin-packer", **BIN_PACKING}]})
    core.create(POD, req_pod("spread", "1", "1Gi"))
    core.create(POD, req_pod("packed", "1", "1Gi", schedulerName="bin-packer"))
    wait_for(lambda: bound_to(core, "spread") is not None and bound_to(core, "packed") is not None, 20,
             "both pods to be bound")
    assert (bound_to(core, "spread"), bound_to(core, "packed")) == ("empty", "half")
    wait_for(lambda: bool(events_for(core, "packed", "Scheduled")), 20, "the Scheduled event")
    assert events_for(core, "packed", "Scheduled")[0]["reportingComponent"] == "bin-packer"


def test_pod_for_an_unknown_scheduler_is_left_untouched(core, hosts):
    core.create(NODE, sched_node("n0"))
    host = hosts()
    stranger = core.create(POD, req_pod("stranger", "1", "1Gi", schedulerName="not-running"))
    core.create(POD, req_pod("marker", "1", "1Gi"))
    # The informer delivers events in order: once "marker" is bound, "stranger" has been seen.
    wait_for(lambda: bound_to(core, "marker") is not None, 20, "the marker pod")
    assert host.schedulers[0].wait_for_idle(10)
    after = core.get(POD, "default", "stranger")
    assert after["metadata"]["resourceVersion"] == stranger["metadata"]["resourceVersion"]
    assert after["spec"].get("nodeName") is None and not after["status"].get("conditions")
    assert events_for(core, "stranger", "FailedScheduling") == []
    assert host.schedulers[0].queue.get("default/stranger") is None


def _fill_exactly(core: ServerCore, nodes: int, per_node: int, timeout: float) -> dict[str, Obj]:
    """Create ``nodes * per_node`` 100m pods (nodes have room for exactly ``per_node`` each) and wait until
    every one is bound; the pods as the store has them."""
    total = nodes * per_node
    bodies = [req_pod(f"p{i:05d}", "100m", "10Mi") for i in range(total)]
    for start in range(0, total, 500):
        assert all(isinstance(r, dict) for r in core.create_many(POD, bodies[start:start + 500]))
    acct = f"{core.store.config.prefix}acct"
    wait_for(lambda: core.store.redis.hlen(acct) >= total, timeout, f"all {total} pods to be bound")
    return {p["metadata"]["name"]: p for p in core.list(POD, "default").items}


def _create_nodes(core: ServerCore, nodes: int, per_node: int) -> None:
    core.create_many(NODE, [sched_node(f"n{i:04d}", cpu=f"{per_node * 100}m", memory="64Gi")
                            for i in range(nodes)])


def _assert_exact_fit(pods: dict[str, Obj], nodes: int, per_node: int) -> None:
    assert len(pods) == nodes * per_node and all(p["spec"].get("nodeName") for p in pods.values())
    per = Counter(p["spec"]["nodeName"] for p in pods.values())
    cpu: Counter[str] = Counter()
    for p in pods.values():
        cpu[p["spec"]["nodeName"]] += pod_requests(p)["cpu"]
    assert set(per.values()) == {per_node} and len(per) == nodes
    assert max(cpu.values()) <= per_node * 100  # no node over-committed


def test_two_scheduler_processes_race_to_fill_the_cluster_exactly(core, redis_url):
    # Two plain-Python scheduler processes (each its own informers and GIL), bin-packing replicas that aim
    # at the same nodes, racing 2,000 pods onto a cluster with room for exactly 2,000.
    from loadgen.bench_scheduler import ProcessSchedulers, replica_options

    nodes, per_node = 200, 10
    _create_nodes(core, nodes, per_node)
    runner = ProcessSchedulers(redis_url, replica_options(2), config={"profiles": [BIN_PACKING]})
    try:
        pods = _fill_exactly(core, nodes, per_node, timeout=90)
        _assert_exact_fit(pods, nodes, per_node)
        wait_for(lambda: len([e for e in core.list(EVENT, "default").items if e["reason"] == "Scheduled"])
           == nodes * per_node, 30, "one Scheduled event per pod")
        stats, _ = runner.stats()
        consistency = runner.consistency()
    finally:
        runner.stop()
    # Every pod bound exactly once: the replicas' successful binds add up to the pod count (a second bind of
    # a pod is refused by the store), both took part, and each pod got one Scheduled event.
    assert sum(st["scheduled"] for st in stats) == nodes * per_node and all(st["scheduled"] for st in stats)
    scheduled_events = Counter(e["involvedObject"]["name"] for e in core.list(EVENT, "default").items
                               if e["reason"] == "Scheduled")
    assert len(scheduled_events) == nodes * per_node and set(scheduled_events.values()) == {1}
    # They collided (counted), forgot the lost assumptions, and retried every loser to success.
    assert sum(st["conflicts"] for st in stats) > 0
    assert all(st["forgotten"] >= st["conflicts"] for st in stats)
    assert all(not any(v for k, v in c.items() if k != "name") for c in consistency), consistency


def test_two_scheduler_threads_share_one_process_without_double_binding(core, hosts):
    # The same race with both loops in this process (shared informers and GIL): correctness only.
    nodes, per_node = 50, 10
    _create_nodes(core, nodes, per_node)
    started = [hosts(SchedulerOptions(name=f"race-{i}", replica=i, replicas=2, seed=i),
                     config={"profiles": [BIN_PACKING]}) for i in range(2)]
    pods = _fill_exactly(core, nodes, per_node, timeout=60)
    _assert_exact_fit(pods, nodes, per_node)
    schedulers = [s for h in started for s in h.schedulers]
    for s in schedulers:
        assert s.wait_for_idle(20)
    stats = [s.snapshot_stats() for s in schedulers]
    assert sum(st["scheduled"] for st in stats) == nodes * per_node and all(st["scheduled"] for st in stats)
    for s in schedulers:
        diff = s.check_consistency()
        assert not diff, diff.as_dict()


def test_cache_comparer_catches_a_difference_planted_in_the_cache(core, hosts):
    core.create(NODE, sched_node("n0"))
    host = hosts()
    core.create(POD, req_pod("p", "1", "1Gi"))
    wait_for(lambda: bound_to(core, "p") is not None, 20, "p to be bound")
    sched = host.schedulers[0]
    assert sched.wait_for_idle(10)
    assert not sched.check_consistency()
    sched.cache.on_pod_delete(core.get(POD, "default", "p"))  # a lost event, as if the informer had missed it
    diff = sched.check_consistency()
    assert diff.missed_pods == ["default/p"] and diff.resource_mismatches
    dump = sched.dump()
    assert dump["cache"]["nodes"][0]["name"] == "n0" and dump["queue"].startswith("activeQ:0")


# -- Ray actors ------------------------------------------------------------------------------------------------


def test_two_scheduler_actors_race_to_fill_the_cluster_exactly(core, redis_url, local_ray):
    import ray

    from actors.scheduler import start_scheduler_actors, stop_scheduler_actors

    nodes, per_node = 40, 10
    total = nodes * per_node
    _create_nodes(core, nodes, per_node)
    actors = start_scheduler_actors(redis_url, 2, config={"profiles": [BIN_PACKING]}, serve_metrics=False)
    try:
        _assert_exact_fit(_fill_exactly(core, nodes, per_node, timeout=90), nodes, per_node)
        # The store commits a bind before the binder counts it: the Scheduled events come after the count.
        wait_for(lambda: len([e for e in core.list(EVENT, "default").items if e["reason"] == "Scheduled"])
           == total, 30, "one Scheduled event per pod")
        stats = [s for batch in ray.get([a.stats.remote() for a in actors]) for s in batch]
        assert [s["name"] for s in stats] == ["kemu-scheduler-0", "kemu-scheduler-1"]
        assert sum(s["scheduled"] for s in stats) == total and all(s["scheduled"] for s in stats)
        # Whether these 400 pods collide at all depends on timing (the 2,000-pod process race above
        # asserts that they do); what must hold is that every conflict was forgotten and retried.
        assert all(s["forgotten"] >= s["conflicts"] for s in stats)
        consistency = [c for batch in ray.get([a.consistency.remote() for a in actors]) for c in batch]
        assert all(not any(v for k, v in c.items() if k != "name") for c in consistency), consistency
    finally:
        stop_scheduler_actors(actors)


def test_local_cluster_runs_its_schedulers_in_process_without_a_runner(redis_url, tmp_path):
    from emulator.cluster import InProcessSchedulers, LocalCluster
    from emulator.config import Config

    cfg = Config(redis_url=redis_url, data_dir=tmp_path, api_enabled=False, controller_managers=0, schedulers=2)
    with LocalCluster(cfg) as cluster:
        assert isinstance(cluster.schedulers, InProcessSchedulers)
        assert [s["name"] for s in cluster.schedulers.health()] == ["kemu-scheduler-0", "kemu-scheduler-1"]
        core = cluster.core
        assert core is not None
        _create_nodes(core, 4, 10)
        pods = _fill_exactly(core, 4, 10, timeout=30)
        _assert_exact_fit(pods, 4, 10)
    assert cluster.schedulers is None


def test_kemu_entry_point_runs_schedulers_as_ray_actors(redis_url, tmp_path, local_ray):
    from actors.cli import scheduler_runner
    from actors.scheduler import SchedulerLauncher
    from emulator.cluster import LocalCluster
    from emulator.config import Config

    cfg = Config(redis_url=redis_url, data_dir=tmp_path, api_enabled=False, controller_managers=0, schedulers=1)
    with LocalCluster(cfg, schedulers=scheduler_runner) as cluster:
        assert isinstance(cluster.schedulers, SchedulerLauncher)
        core = cluster.core
        assert core is not None
        _create_nodes(core, 2, 5)
        _assert_exact_fit(_fill_exactly(core, 2, 5, timeout=60), 2, 5)
        assert [s["name"] for s in cluster.schedulers.health()] == ["kemu-scheduler-0"]


def test_binds_reach_the_schedulers_informers_undecoded_as_the_store_holds_them(core, hosts):
    """The scheduler's binds come back through its watch as the objects the store returned (not decoded).

    A bind's entry can reach the watch reader before the bind's reply reaches the bind thread (then it is
    decoded, as before), so pods are bound one at a time until one bind has come back undecoded.
    """
    core.create(NODE, sched_node("n1", cpu="8", memory="16Gi"))
    host = hosts()
    assert host.factory is not None
    mux = host.factory.multiplexer
    informer = host.factory.informer_for(POD)
    hits = mux.own_hits
    names: list[str] = []

    def bind_one_more() -> bool:
        name = f"p{len(names)}"
        names.append(name)
        core.create(POD, req_pod(name, "100m", "128Mi"))
        wait_for(lambda: ((informer.indexer.get_by_key(f"default/{name}") or {}).get("spec") or {}).get("nodeName")
                 == "n1", 20, f"{name}'s bind to reach the scheduler's informer")
        return mux.own_hits > hits

    wait_for(lambda: bind_one_more() or len(names) >= 20, 60, "a bind to come back undecoded")
    assert mux.own_hits > hits
    for name in names:
        assert informer.indexer.get_by_key(f"default/{name}") == core.get(POD, "default", name)
