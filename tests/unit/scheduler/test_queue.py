"""The scheduling queue: order, backoff, the unschedulable pool, moves on cluster events, gates, the nominator.

Time is a ManualClock: every backoff and timeout below is decided by advancing it, never by sleeping.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from emulator.clock import ManualClock
from emulator.scheduler.framework.interface import Code, Status
from emulator.scheduler.framework.types import PodInfo, QueuedPodInfo
from emulator.scheduler.plugins.scheduling_gates import SchedulingGates
from emulator.scheduler.queue import (
    ACTIVE,
    ASSIGNED_POD_DELETE,
    BACKOFF,
    GATED,
    NODE_ADD,
    NODE_CONDITION_CHANGE,
    NODE_LABEL_CHANGE,
    NODE_TAINT_CHANGE,
    UNSCHEDULABLE,
    QueuedPod,
    SchedulingQueue,
    is_pod_updated,
    node_change_events,
)
from tests.builders import pod, sched_node, taint


def _pod(name: str, priority: int = 0, **spec: Any) -> dict[str, Any]:
    body = pod(name, **spec)
    body["metadata"]["uid"] = f"uid-{name}"
    body["spec"]["priority"] = priority
    return body


def _queue(clock: ManualClock, name: str = "q", **kwargs: Any) -> SchedulingQueue:
    gates = SchedulingGates()
    return SchedulingQueue(clock=clock, name=name, pre_enqueue=lambda p: (
        None if (s := gates.pre_enqueue(p)) is None else s.with_plugin(gates.name)), **kwargs)


def _drain(q: SchedulingQueue) -> list[str]:
    out = []
    while (qp := q.pop(timeout=0)) is not None:
        out.append(qp.pod_info.name)
        q.done(qp)
    return out


def _fail(q: SchedulingQueue, *plugins: str) -> str:
    """Pop the head and report it rejected by ``plugins`` (none: an error); the queue it went to."""
    qp = q.pop(timeout=0)
    assert qp is not None
    qp.unschedulable_plugins = set(plugins)
    return q.add_unschedulable_if_not_present(qp, q.scheduling_cycle)


def test_active_queue_orders_by_priority_then_arrival():
    clock = ManualClock()
    q = _queue(clock)
    for name, prio in [("low", 0), ("high", 100), ("mid", 10)]:
        q.add(_pod(name, prio))
        clock.advance(1)
    q.add(_pod("high-later", 100))
    assert _drain(q) == ["high", "high-later", "mid", "low"]


def test_custom_queue_sort_less_is_used():
    def by_name_desc(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.pod_info.name > b.pod_info.name

    q = SchedulingQueue(by_name_desc, priority_sort=False, clock=ManualClock(), name="q-custom")
    for name in ["b", "d", "a", "c"]:
        q.add(_pod(name, priority=1000 if name == "a" else 0))
    assert _drain(q) == ["d", "c", "b", "a"]


@pytest.mark.parametrize(("attempts", "backoff"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (9, 10.0)])
def test_backoff_doubles_per_attempt_up_to_the_maximum(attempts, backoff):
    # backoff_queue.go calculateBackoffDuration: initial * 2^(attempts-1), capped at max.
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("p"))
    for _ in range(attempts - 1):
        assert _fail(q) == BACKOFF
        clock.advance(60)
        assert q.flush_backoff_completed() == 1
    assert _fail(q) == BACKOFF  # an error (no rejecting plugin) always backs off
    clock.advance(backoff - 0.01)
    assert q.pop(timeout=0) is None
    assert q.counts()[BACKOFF] == 1
    clock.advance(0.02)
    qp = q.pop(timeout=0)
    assert qp is not None and qp.attempts == attempts + 1


def test_unschedulable_pod_waits_for_an_interesting_event():
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("p"))
    assert _fail(q, "NodeResourcesFit") == UNSCHEDULABLE
    clock.advance(60)  # backoff long over: still nothing without an event
    assert q.pop(timeout=0) is None
    # A node condition change does not help NodeResourcesFit ...
    assert q.move_all_to_active_or_backoff(NODE_CONDITION_CHANGE) == 0
    assert q.counts()[UNSCHEDULABLE] == 1
    # ... a pod deletion (room freed) does.
    assert q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE) == 1
    assert _drain(q) == ["p"]


@pytest.mark.parametrize(("plugins", "event", "moves"), [
    ({"TaintToleration"}, NODE_TAINT_CHANGE, True),
    ({"TaintToleration"}, ASSIGNED_POD_DELETE, False),
    ({"NodeAffinity"}, NODE_LABEL_CHANGE, True),
    ({"NodeAffinity"}, NODE_TAINT_CHANGE, False),
    ({"NodeAffinity", "TaintToleration"}, NODE_TAINT_CHANGE, True),
    ({"NodePorts"}, ASSIGNED_POD_DELETE, True),
    ({"SomeCustomPlugin"}, NODE_LABEL_CHANGE, True),  # unknown plugins care about everything
    (set(), NODE_LABEL_CHANGE, True),
    ({"NodeResourcesFit"}, NODE_ADD, True),
])
def test_event_moves_only_pods_a_rejecting_plugin_cares_about(plugins, event, moves):
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("p"))
    qp = q.pop(timeout=0)
    assert qp is not None
    qp.unschedulable_plugins = set(plugins)
    q.add_unschedulable_if_not_present(qp, q.scheduling_cycle)
    if not plugins:
        assert q.counts()[BACKOFF] == 1  # no rejecting plugin: an error, straight to backoff
        return
    clock.advance(30)
    assert q.move_all_to_active_or_backoff(event) == (1 if moves else 0)
    assert q.counts()[ACTIVE] == (1 if moves else 0)


def test_moved_pod_still_backing_off_goes_to_backoff_queue():
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("p"))
    _fail(q, "NodeResourcesFit")
    clock.advance(0.5)  # first backoff is 1 s
    assert q.move_all_to_active_or_backoff(NODE_ADD) == 1
    assert q.counts() == {ACTIVE: 0, BACKOFF: 1, UNSCHEDULABLE: 0, GATED: 0}
    clock.advance(0.6)
    assert _drain(q) == ["p"]


def test_event_during_scheduling_cycle_sends_a_rejected_pod_to_backoff():
    # moveRequestCycle: the event may have made the pod schedulable while it was being tried.
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("p"))
    qp = q.pop(timeout=0)
    assert qp is not None
    q.move_all_to_active_or_backoff(NODE_ADD)  # arrives while p is in flight
    qp.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(qp, q.scheduling_cycle) == BACKOFF


def test_unschedulable_pods_are_flushed_after_five_minutes():
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("p"))
    _fail(q, "NodeAffinity")
    clock.advance(299)
    assert q.flush_unschedulable_leftover() == 0
    clock.advance(2)
    assert q.flush_unschedulable_leftover() == 1
    assert _drain(q) == ["p"]


def test_gated_pod_waits_until_its_gates_are_removed():
    clock = ManualClock()
    q = _queue(clock)
    gated = _pod("g", schedulingGates=[{"name": "example.com/wait"}])
    q.add(gated)
    assert q.counts() == {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 1}
    assert q.move_all_to_active_or_backoff(NODE_ADD) == 0  # no cluster event opens a gate
    status_update = {**gated, "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}}
    q.update(gated, status_update)  # a status-only update changes nothing
    assert q.counts()[GATED] == 1
    ungated = {**gated, "spec": {**gated["spec"], "schedulingGates": []}}
    q.update(gated, ungated)
    assert q.counts()[GATED] == 0
    assert _drain(q) == ["g"]


def _in_flight(name: str) -> tuple[SchedulingQueue, dict[str, Any], QueuedPod]:
    """A queue (on a ManualClock) with the pod ``name`` added and popped: in flight in a scheduling cycle."""
    q = _queue(ManualClock())
    p = _pod(name)
    q.add(p)
    qp = q.pop(timeout=0)
    assert qp is not None
    return q, p, qp


def test_update_while_in_flight_is_recorded_not_queued_twice():
    q, p, qp = _in_flight("p")
    changed = {**p, "metadata": {**p["metadata"], "labels": {"new": "label"}}}
    q.update(p, changed)
    assert len(q) == 1 and q.counts()[ACTIVE] == 0  # only the in-flight copy
    qp.unschedulable_plugins = {"NodeAffinity"}
    assert q.add_unschedulable_if_not_present(qp, q.scheduling_cycle) == BACKOFF  # the update may help
    assert qp.pod_info.labels == {"new": "label"}  # requeued with the newest object


def test_pod_deleted_while_in_flight_is_not_requeued():
    q, p, qp = _in_flight("p")
    q.delete(p)
    assert q.add_unschedulable_if_not_present(qp, q.scheduling_cycle) == ""
    assert len(q) == 0


def test_delete_removes_from_every_queue():
    clock = ManualClock()
    q = _queue(clock)
    for name in ("a", "b", "c"):
        q.add(_pod(name))
    _fail(q, "NodeAffinity")  # a -> unschedulable
    _fail(q)  # b -> backoff
    for name in ("a", "b", "c"):
        q.delete(_pod(name))
    assert len(q) == 0 and _drain(q) == []


def test_activate_skips_backoff():
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("p"))
    _fail(q)
    assert q.pop(timeout=0) is None
    q.activate([_pod("p")])
    assert _drain(q) == ["p"]


def test_pop_blocks_until_timeout_when_empty_and_returns_none_when_closed():
    q = _queue(ManualClock())
    assert q.pop(timeout=0.01) is None
    q.close()
    assert q.pop() is None


def test_nominator_tracks_pods_by_node():
    clock = ManualClock()
    q = _queue(clock)
    p = _pod("p", 100)
    p["status"] = {"nominatedNodeName": "n1"}
    q.add(p)  # a pod arriving with a nomination is recorded
    assert [i.name for i in q.nominated_pods_for_node("n1")] == ["p"]
    q.add_nominated_pod(PodInfo(p), "n2")
    assert q.nominated_pods_for_node("n1") == [] and q.nominated_node(p) == "n2"
    q.delete(p)
    assert q.nominated_pods_for_node("n2") == []


def test_pending_pods_summary_and_metrics():
    clock = ManualClock()
    q = _queue(clock, name="q-metrics")
    for name in ("a", "b", "c"):
        q.add(_pod(name))
    _fail(q, "NodeAffinity")
    pods, summary = q.pending_pods()
    assert summary == "activeQ:2; backoffQ:0; unschedulablePods:1" and len(pods) == 3
    value = REGISTRY.get_sample_value("scheduler_queue_incoming_pods_total",
                                      {"queue": "active", "event": "UnscheduledPodAdd", "scheduler": "q-metrics"})
    assert value == 3
    value = REGISTRY.get_sample_value("scheduler_queue_incoming_pods_total",
                                      {"queue": "unschedulable", "event": "ScheduleAttemptFailure",
                                       "scheduler": "q-metrics"})
    assert value == 1


def test_is_pod_updated_ignores_status_and_bookkeeping():
    p = _pod("p")
    p["metadata"]["resourceVersion"] = "1"
    status_only = {**p, "metadata": {**p["metadata"], "resourceVersion": "2"}, "status": {"phase": "Pending"}}
    assert not is_pod_updated(p, status_only)
    assert is_pod_updated(p, {**p, "spec": {**p["spec"], "nodeSelector": {"a": "b"}}})


@pytest.mark.parametrize(("change", "events"), [
    (lambda n: n["metadata"].update(labels={"zone": "b"}), [NODE_LABEL_CHANGE]),
    (lambda n: n["spec"].update(taints=[taint("k")]), [NODE_TAINT_CHANGE]),
    (lambda n: n["status"].update(allocatable={"cpu": "16", "memory": "32Gi", "pods": "110"}),
     ["NodeAllocatableChange"]),
    (lambda n: n["status"].update(conditions=[{"type": "Ready", "status": "False"}]), [NODE_CONDITION_CHANGE]),
    (lambda n: n["metadata"].update(resourceVersion="99"), []),
])
def test_node_change_events(change, events):
    old = sched_node("n", labels={"zone": "a"})
    old["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    new = {**old, "metadata": dict(old["metadata"]), "spec": dict(old["spec"]), "status": dict(old["status"])}
    change(new)
    assert node_change_events(old, new) == events


def test_gating_status_names_the_plugin():
    # The gate's plugin is recorded, so only its events (a pod update) can release the pod.
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("g", schedulingGates=[{"name": "x"}]))
    where = q.get("default/g")
    assert where is not None and where[0] == GATED and where[1].gating_plugin == "SchedulingGates"
    assert Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def _attempt(q: SchedulingQueue, outcome: str) -> None:
    """Pop the pod and fail it: ``R`` rejected by NodeResourcesFit (an event arrived meanwhile, so it goes to
    backoffQ rather than the unschedulable pool), ``E`` an error (a lost bind race, say)."""
    qp = q.pop(timeout=0)
    assert qp is not None
    qp.unschedulable_plugins = {"NodeResourcesFit"} if outcome == "R" else set()
    if outcome == "R":
        q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
    assert q.add_unschedulable_if_not_present(qp, q.scheduling_cycle) == BACKOFF


# upstream backoff_queue.go getBackoffTime: the count is the pod's consecutive errors if its last attempt was an
# error, else the times plugins rejected it; calculateBackoffDuration: 1 s * 2^(count-1), capped at 10 s.
@pytest.mark.parametrize(("outcomes", "count"), [
    ("R", 1), ("RR", 2), ("RRR", 3), ("RRRRR", 5),
    ("E", 1), ("EE", 2),
    ("RRRE", 1),  # an error after rejections: one consecutive error
    ("RREE", 2),
    ("EER", 1),  # a rejection after errors: the errors are no longer consecutive, one rejection counts
    ("RER", 2),
], ids=str)
def test_backoff_counts_consecutive_errors_else_rejections(outcomes, count):
    clock = ManualClock()
    q = _queue(clock)
    q.add(_pod("p"))
    for i, outcome in enumerate(outcomes):
        if i:
            clock.advance(60)  # the backoff so far waited out
            assert q.flush_backoff_completed() == 1
        _attempt(q, outcome)
    backoff = min(1.0 * 2 ** (count - 1), 10.0)
    clock.advance(backoff - 0.01)
    assert q.flush_backoff_completed() == 0
    clock.advance(0.02)
    assert q.flush_backoff_completed() == 1


# upstream SchedulerPopFromBackoffQ: with activeQ empty, pop takes the pod whose backoff ends first from backoffQ
# at once -- not one backing off after an error (podErrorBackoffQ), and never ahead of a pod in activeQ.
@pytest.mark.parametrize(("backing_off", "active", "enabled", "popped"), [
    ({"rejected": "R"}, (), True, "rejected"),
    ({"errored": "E"}, (), True, None),
    ({"errored": "E", "rejected": "R"}, (), True, "rejected"),
    ({"rejected": "R"}, ("new",), True, "new"),
    ({"rejected": "R"}, (), False, None),
    ({"refused": "R", "rejected": "R"}, (), True, "rejected"),  # PreEnqueue still runs: refused is gated
], ids=["rejected-pod-popped-early", "error-backoff-waited-out", "rejected-pod-past-an-error-one",
        "active-pod-first", "turned-off", "pre-enqueue-refuses-the-first"])
def test_pop_takes_a_backing_off_pod_when_active_is_empty(backing_off, active, enabled, popped):
    clock = ManualClock()
    refused: set[str] = set()  # a PreEnqueue plugin refusing these pods from their second attempt on
    q = SchedulingQueue(clock=clock, name="q-pop-backoff", pop_from_backoff=enabled, pre_enqueue=lambda p: (
        Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "refused").with_plugin("Refuser")
        if p["metadata"]["name"] in refused else None))
    for name, outcome in backing_off.items():
        q.add(_pod(name))
        _attempt(q, outcome)
        clock.advance(0.001)  # the later pod's backoff ends later
    refused.update(name for name in backing_off if name.startswith("refused"))
    assert q.counts()[BACKOFF] == len(backing_off)
    for name in active:
        q.add(_pod(name))
    qp = q.pop(timeout=0)
    assert (qp.pod_info.name if qp is not None else None) == popped
    assert q.counts()[GATED] == len(refused)
