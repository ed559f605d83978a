"""Preemption end to end: the room freed by preemption goes to the nominated high-priority pod, not to a
lower-priority pod that comes along while the preemptor waits.

The real scheduler (in this process: its queue, cache, informers over the real store in Redis) on a
ManualClock, so that backoff expires only when the test moves the clock: the preemptor is made to back off
longer than the later low-priority pod, so the low-priority pod is the first to see the freed room -- the
moment upstream's ``RunFilterPluginsWithNominatedPods`` exists for. There is no kubelet: the test finishes the
victims' graceful deletions itself (delete with grace 0), as a kubelet would once the containers stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from emulator.api.kinds import NODE, POD, PRIORITYCLASS
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.informers.shared_informer import SharedInformerFactory
from emulator.scheduler import in_tree_registry
from emulator.scheduler.scheduler import Scheduler, SchedulerOptions
from emulator.server.core import ServerCore
from emulator.store.store import Store
from tests.builders import priority_class, req_pod, sched_node
from tests.waiting import store_writes, wait_for

pytestmark = pytest.mark.integration


def a_pod(name: str, cpu: str, priority: str, node: str | None = None) -> Obj:
    body = req_pod(name, cpu, "1Gi", node=node, priority_class=priority)
    body["spec"]["terminationGracePeriodSeconds"] = 30  # victims linger (deletionTimestamp set) until confirmed
    return body


@pytest.fixture
def cluster(redis_url: str) -> Iterator[tuple[ServerCore, ManualClock, Any]]:
    clock = ManualClock()
    store = Store.connect(redis_url)
    core = ServerCore(store, clock)
    core.bootstrap()
    informer_store = Store.connect(redis_url)
    factory: SharedInformerFactory | None = None
    scheduler: Scheduler | None = None

    def start(**options: Any) -> Scheduler:
        nonlocal factory, scheduler
        factory = SharedInformerFactory(informer_store, clock=clock)
        scheduler = Scheduler(core, registry=in_tree_registry(), clock=clock,
                              options=SchedulerOptions(seed=0, bind_workers=1, **options)).attach(factory)
        factory.start()
        assert all(factory.wait_for_cache_sync(30).values())
        wait_for(scheduler.has_synced, 30, "the scheduler's handlers to sync")
        return scheduler.start()

    yield core, clock, start
    if scheduler is not None:
        scheduler.stop()
    if factory is not None:
        factory.shutdown()
    informer_store.close()
    store.close()


def pod_of(core: ServerCore, name: str) -> Obj:
    return core.get(POD, "default", name)


def where(scheduler: Scheduler, name: str) -> str | None:
    """Which queue of the scheduler holds pod ``default/name`` (None: none)."""
    found = scheduler.queue.get(f"default/{name}")
    return found[0] if found is not None else None


def terminating(core: ServerCore) -> set[str]:
    return {p["metadata"]["name"] for p in core.list(POD, "default").items if p["metadata"].get("deletionTimestamp")}


def test_freed_room_goes_to_the_nominated_pod_not_a_later_lower_priority_one(cluster):
    core, clock, start = cluster
    core.create(PRIORITYCLASS, priority_class("low", 100))
    core.create(PRIORITYCLASS, priority_class("high", 1000))
    core.create(NODE, sched_node("n", cpu="4", labels={"kubernetes.io/hostname": "n"}))
    for i in range(4):  # n is full: four 1-cpu low-priority pods
        core.create(POD, a_pod(f"low-{i}", "1", "low", node="n"))
    # Pods wait their backoffs out (upstream's SchedulerPopFromBackoffQ off): the later, lower-priority pod is then
    # the first to see the freed room, which is what this test is about.
    scheduler = start(pop_from_backoff=False)
    wake = store_writes(core, POD)

    # t=0: the 2-cpu high-priority pod preempts two low-priority pods on n and is nominated there.
    core.create(POD, a_pod("urgent", "2", "high"))
    wait_for(lambda: pod_of(core, "urgent")["status"].get("nominatedNodeName") == "n" and len(terminating(core)) == 2,
             30, "urgent nominated to n, two victims terminating", wake=wake)
    victims = terminating(core)
    # The scheduler's cache has seen the victims terminating (so urgent will not preempt again).
    wait_for(lambda: all((s := scheduler.cache.get(f"default/{v}")) is not None and s.pod["metadata"].get(
        "deletionTimestamp") for v in victims), 30, "the cache to see the victims terminating")

    # t=1.5: a node event retries urgent (its 1 s backoff is over): n is still full, and it may not preempt again
    # while its victims terminate -- a second failure, so its backoff is now 2 s (until t=3.5). The later
    # low-priority pod arrives now too: it fails (n is full) with a 1 s backoff (until t=2.5).
    clock.advance(1.5)
    attempts = scheduler.stats.attempts
    core.create(NODE, sched_node("tiny", cpu="1", labels={"kubernetes.io/hostname": "tiny"}))
    core.create(POD, a_pod("late", "2", "low"))
    wait_for(lambda: scheduler.stats.attempts >= attempts + 2 and scheduler.queue.in_flight == 0, 30,
             "urgent retried and late tried once")
    assert where(scheduler, "urgent") == "unschedulable"
    assert where(scheduler, "late") == "unschedulable"
    assert pod_of(core, "urgent")["status"].get("nominatedNodeName") == "n"
    assert terminating(core) == victims  # no second preemption

    # The victims are gone: 2 cpu free on n. Both pods go to backoffQ (the clock has not moved).
    for name in victims:
        core.delete(POD, "default", name, grace_period_seconds=0)
    wait_for(lambda: where(scheduler, "urgent") == "backoff"
             and where(scheduler, "late") == "backoff", 30, "both pods backing off")

    # t=3: late's backoff is over, urgent's is not. late is the first to see the freed room -- and must not take
    # it: urgent (higher priority) is nominated there and Filter counts it (upstream RunFilterPluginsWithNominatedPods).
    clock.advance(1.5)
    attempts = scheduler.stats.attempts
    wait_for(lambda: scheduler.stats.attempts > attempts and scheduler.queue.in_flight == 0, 30, "late tried again")
    assert pod_of(core, "late")["spec"].get("nodeName") is None
    assert where(scheduler, "urgent") == "backoff"

    # t=4: urgent's backoff is over: it binds to n, into the room its preemption made.
    clock.advance(1.0)
    wait_for(lambda: pod_of(core, "urgent")["spec"].get("nodeName"), 30, "urgent bound", wake=wake)
    assert pod_of(core, "urgent")["spec"]["nodeName"] == "n"
    assert pod_of(core, "late")["spec"].get("nodeName") is None  # 2 low + 2 urgent = 4 cpu: still no room
    remaining = {p["metadata"]["name"] for p in core.list(POD, "default").items if p["spec"].get("nodeName") == "n"}
    assert remaining == {f"low-{i}" for i in range(4)} - victims | {"urgent"}
