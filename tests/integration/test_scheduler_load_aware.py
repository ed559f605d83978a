"""LoadAware end to end: the real scheduler (SchedulerHost, real store) places by measured load, not requests.

Nodes carry the load annotations the node annotator writes (here written directly, with the current time,
so they are fresh). Each test has a control profile -- the default plugins alone -- showing where a pod goes
without LoadAware, so LoadAware is what moved it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from emulator.api.kinds import NODE, POD
from emulator.informers import SharedInformerFactory
from emulator.loadaware.extender_server import ExtenderServer, LoadAwareExtender, attach
from emulator.loadaware.policy import HOT_VALUE, METRICS, format_value
from emulator.scheduler.scheduler import SchedulerOptions
from emulator.store.store import Store
from tests.builders import req_pod, sched_node
from tests.integration.test_scheduler import bound_to, core, hosts  # noqa: F401  (fixtures)
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

CONFIG = "kubescheduler.config.k8s.io/v1"


def annotated_node(name: str, cpu_used: float, mem_used: float, **shape: Any) -> dict[str, Any]:
    node = sched_node(name, **shape)
    now = time.time()
    node["metadata"]["annotations"] = {m: format_value(cpu_used if m.startswith("cpu") else mem_used, now)
                                       for m in METRICS}
    node["metadata"]["annotations"][HOT_VALUE] = format_value(0, now, integer=True)
    return node


def load_aware_profile(name: str, weight: int = 2, **args: Any) -> dict[str, Any]:
    profile: dict[str, Any] = {"schedulerName": name,
                               "plugins": {"multiPoint": {"enabled": [{"name": "LoadAware", "weight": weight}]}}}
    if args:
        profile["pluginConfig"] = [{"name": "LoadAware", "args": args}]
    return profile


def config(*profiles: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": CONFIG, "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "default-scheduler"}, *profiles]}


def schedule(core: Any, pod: dict[str, Any]) -> str:  # noqa: F811
    core.create(POD, pod)
    name = pod["metadata"]["name"]
    wait_for(lambda: bound_to(core, name) is not None, 20, f"{name} to be bound")
    return bound_to(core, name) or ""


def test_new_pods_go_to_cool_nodes_with_load_aware_and_not_with_the_default_profile(core, hosts):  # noqa: F811
    # "hot-a"/"hot-b": few requests, but their pods use far more than they asked for (85% CPU measured).
    # "cool": half its CPU requested, 20% used. Requests-based scoring prefers the hot ones.
    for name in ("hot-a", "hot-b"):
        core.create(NODE, annotated_node(name, 0.85, 0.50, cpu="16", memory="64Gi"))
        core.create(POD, req_pod(f"resident-{name}", "1", "4Gi", node=name))
    core.create(NODE, annotated_node("cool", 0.20, 0.20, cpu="16", memory="64Gi"))
    core.create(POD, req_pod("resident-cool", "8", "32Gi", node="cool"))
    host = hosts(SchedulerOptions(name="la-e2e"), config=config(load_aware_profile("load-aware")))

    assert schedule(core, req_pod("control", "1", "2Gi")) in ("hot-a", "hot-b")
    placed = [schedule(core, req_pod(f"la-{i}", "1", "2Gi", schedulerName="load-aware")) for i in range(3)]
    assert placed == ["cool"] * 3  # the hot nodes are over cpu_usage_avg_5m's 0.65: filtered out

    # Effectiveness, by hand: medians over the three nodes are 0.85 (cpu) and 0.5 (mem). "cool" is below both
    # (+1 per bind); a hot node is below neither (0.85 is not below 0.85, 0.5 not below 0.5).
    def stats() -> dict[str, Any]:
        return host.schedulers[0].snapshot_stats()["effectiveness"]

    # Counted just after the store's bind returns: wait for the bind threads to get there.
    wait_for(lambda: stats()["load-aware"]["total_schedule_count"] == 3
             and stats()["default-scheduler"]["total_schedule_count"] == 1, 10, "the binds to be counted")
    got = stats()
    assert got["load-aware"] == pytest.approx({
        "cpu_utilization_total_avg": 0.2, "memory_utilization_total_avg": 0.2,
        "effective_dynamic_schedule_count": 3.0, "total_schedule_count": 3, "effective_schedule_ratio": 1.0})
    assert got["default-scheduler"] == pytest.approx({
        "cpu_utilization_total_avg": 0.85, "memory_utilization_total_avg": 0.5,
        "effective_dynamic_schedule_count": 0.0, "total_schedule_count": 1, "effective_schedule_ratio": 0.0})


def test_a_cool_new_node_does_not_take_the_whole_burst(core, hosts):  # noqa: F811
    # A new, empty node next to two nodes at 35%: without damping every pod of a burst goes to the new node
    # (its load annotation lags); with the hot value it stops being the best once it took a few.
    core.create(NODE, annotated_node("new", 0.0, 0.0, cpu="32", memory="128Gi"))
    for name in ("old-1", "old-2"):
        core.create(NODE, annotated_node(name, 0.35, 0.35, cpu="32", memory="128Gi"))
    hosts(SchedulerOptions(name="la-burst"), config=config(
        load_aware_profile("damped", weight=10), load_aware_profile("undamped", weight=10, hotValue=[])))

    def burst(scheduler: str, n: int) -> Counter[str]:
        names = [f"{scheduler}-{i}" for i in range(n)]
        core.create_many(POD, [req_pod(name, "100m", "128Mi", schedulerName=scheduler) for name in names])
        wait_for(lambda: all(bound_to(core, name) for name in names), 30, f"the {scheduler} burst")
        return Counter(bound_to(core, name) for name in names)

    undamped = burst("undamped", 20)
    assert undamped == {"new": 20}
    damped = burst("damped", 20)
    # By hand: the new node scores 100 - 10 * (n // 2 + n // 5) after n binds, an old one 65 - 10 * (...) --
    # the new node is best for its first few pods only, then the three share the rest.
    assert 0 < damped["new"] < 20 and damped["old-1"] > 0 and damped["old-2"] > 0
    assert damped["new"] == max(damped.values())


# ----------------------------------------------------------------------------- the HTTP extender


@pytest.fixture
def start_extender(redis_url: str) -> Iterator[Callable[[], ExtenderServer]]:
    """The extender on a real local HTTP server, its node cache fed by real informers on the store."""
    store = Store.connect(redis_url)
    factory = SharedInformerFactory(store)
    servers: list[ExtenderServer] = []

    def start() -> ExtenderServer:
        extender = LoadAwareExtender()
        attach(extender, factory)
        factory.start()
        assert all(factory.wait_for_cache_sync(10).values())
        servers.append(ExtenderServer(extender).start())
        return servers[-1]

    yield start
    for server in servers:
        server.close()
    factory.shutdown()
    store.close()


def extender_config(url: str, *, cache: bool = True) -> dict[str, Any]:
    return {"apiVersion": CONFIG, "kind": "KubeSchedulerConfiguration",
            "extenders": [{"urlPrefix": url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 2,
                           "nodeCacheCapable": cache, "ignorable": False}]}


@pytest.mark.parametrize("cache", [True, False], ids=["node-cache-capable", "full-nodes"])
def test_http_extender_filters_and_prioritizes_like_the_plugin(core, hosts, start_extender, cache):  # noqa: F811
    for name in ("hot-a", "hot-b"):
        core.create(NODE, annotated_node(name, 0.85, 0.50, cpu="16", memory="64Gi"))
    core.create(NODE, annotated_node("warm", 0.50, 0.50, cpu="16", memory="64Gi"))
    core.create(NODE, annotated_node("cool", 0.20, 0.20, cpu="16", memory="64Gi"))
    core.create(POD, req_pod("resident-cool", "8", "32Gi", node="cool"))
    core.create(POD, req_pod("resident-warm", "6", "24Gi", node="warm"))
    server = start_extender()  # after the nodes exist: its synced cache has them
    extender = server.extender

    # The policy's answers, as the plugin computes them, over the extender's verbs.
    pod = req_pod("probe", "1", "2Gi")
    verdict = extender.filter({"Pod": pod, "NodeNames": ["hot-a", "hot-b", "warm", "cool", "unknown"]})
    assert verdict["NodeNames"] == ["warm", "cool", "unknown"]  # a node without annotations is not filtered
    assert verdict["FailedNodes"] == {"hot-a": "Load[cpu_usage_avg_5m] of node is too high",
                                      "hot-b": "Load[cpu_usage_avg_5m] of node is too high"}
    # 0..100 -> 0..10: warm int(50) // 10 = 5, cool int(80) // 10 = 8, unknown 0.
    assert extender.prioritize({"Pod": pod, "NodeNames": ["warm", "cool", "unknown"]}) == [
        {"Host": "warm", "Score": 5}, {"Host": "cool", "Score": 8}, {"Host": "unknown", "Score": 0}]

    # Control: the default plugins alone (another scheduler, no extender) prefer the barely requested hot nodes.
    hosts(SchedulerOptions(name="control"), config={"apiVersion": CONFIG, "kind": "KubeSchedulerConfiguration",
                                                    "profiles": [{"schedulerName": "control"}]})
    assert schedule(core, req_pod("control", "1", "2Gi", schedulerName="control")) in ("hot-a", "hot-b")
    # Through the HTTP extender, over a real local server: hot nodes filtered, cool (8) beats warm (5) by
    # 3 * 10 * weight 2 = 60 points, more than the default plugins' preference for warm's fewer requests.
    hosts(SchedulerOptions(name="la-extender"), config=extender_config(server.url, cache=cache))
    assert schedule(core, req_pod("via-extender", "1", "2Gi")) == "cool"
