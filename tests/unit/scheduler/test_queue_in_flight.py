"""Events that arrive while a pod is being scheduled: which ones send a rejected pod to backoffQ.

Upstream ``backend/queue/scheduling_queue.go`` with queueing hints (``determineSchedulingHintForInFlightPod``):
a rejected pod is requeued after its backoff when an event received since it was popped may help one of its
rejecting plugins (the plugin registers for it in ``EventsToRegister``, or the event is a wildcard that moves
every pod), and goes to the unschedulable pool otherwise -- a bound pod appearing does not free room, so it does
not make a pod NodeResourcesFit rejected worth retrying. Time is a ManualClock.
"""

from __future__ import annotations

from typing import Any

import pytest

from emulator.clock import ManualClock
from emulator.scheduler.queue import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    BACKOFF,
    NODE_ADD,
    NODE_ALLOCATABLE_CHANGE,
    NODE_CONDITION_CHANGE,
    NODE_LABEL_CHANGE,
    NODE_TAINT_CHANGE,
    UNSCHEDULABLE,
    SchedulingQueue,
)
from tests.builders import pod


def _pod(name: str) -> dict[str, Any]:
    body = pod(name)
    body["metadata"]["uid"] = f"uid-{name}"
    return body


# (rejecting plugins, events arriving while the pod is in flight, where the failed pod goes). The expected queue
# follows each plugin's upstream EventsToRegister: NodeResourcesFit registers Pod Delete / scale-down and Node
# Add / allocatable / taint / label changes, not Pod Add; InterPodAffinity registers Pod Add; TaintToleration Node
# Add / taint changes; a plugin with no registration is interested in everything.
@pytest.mark.parametrize(("plugins", "events", "queue"), [
    ({"NodeResourcesFit"}, [], UNSCHEDULABLE),
    ({"NodeResourcesFit"}, [ASSIGNED_POD_ADD], UNSCHEDULABLE),
    ({"NodeResourcesFit"}, [ASSIGNED_POD_ADD] * 50, UNSCHEDULABLE),
    ({"NodeResourcesFit"}, [NODE_CONDITION_CHANGE, ASSIGNED_POD_ADD], UNSCHEDULABLE),
    ({"NodeResourcesFit"}, [ASSIGNED_POD_ADD, ASSIGNED_POD_DELETE], BACKOFF),
    ({"NodeResourcesFit"}, [NODE_ADD], BACKOFF),
    ({"NodeResourcesFit"}, [NODE_ALLOCATABLE_CHANGE], BACKOFF),
    ({"InterPodAffinity"}, [ASSIGNED_POD_ADD], BACKOFF),
    ({"TaintToleration"}, [NODE_LABEL_CHANGE, ASSIGNED_POD_DELETE], UNSCHEDULABLE),
    ({"TaintToleration"}, [NODE_TAINT_CHANGE], BACKOFF),
    ({"TaintToleration", "NodeResourcesFit"}, [ASSIGNED_POD_DELETE], BACKOFF),
    ({"SomeCustomPlugin"}, [NODE_CONDITION_CHANGE], BACKOFF),
    ({"SomeCustomPlugin"}, [], UNSCHEDULABLE),
], ids=["no-event", "pod-add", "many-pod-adds", "condition-and-pod-add", "pod-delete", "node-add",
        "allocatable", "affinity-pod-add", "taints-other-events", "taint-change", "either-plugin", "custom-any",
        "custom-no-event"])
def test_in_flight_event_requeues_only_when_a_rejecting_plugin_cares(plugins, events, queue):
    q = SchedulingQueue(clock=ManualClock(), name="q-in-flight")
    q.add(_pod("p"))
    qp = q.pop(timeout=0)
    assert qp is not None
    for event in events:
        q.move_all_to_active_or_backoff(event)
    qp.unschedulable_plugins = set(plugins)
    assert q.add_unschedulable_if_not_present(qp, q.scheduling_cycle) == queue


def test_events_before_the_pop_are_not_in_flight_events():
    q = SchedulingQueue(clock=ManualClock(), name="q-in-flight-before")
    q.add(_pod("p"))
    q.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
    qp = q.pop(timeout=0)
    assert qp is not None
    qp.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(qp, q.scheduling_cycle) == UNSCHEDULABLE


def test_events_after_a_later_pod_was_popped_still_count_for_an_earlier_in_flight_pod():
    # Two pods in flight (the first one binding, say): an event arriving after the second pop came after both pops.
    q = SchedulingQueue(clock=ManualClock(), name="q-in-flight-two")
    q.add(_pod("a"))
    q.add(_pod("b"))
    first = q.pop(timeout=0)
    cycle_a = q.scheduling_cycle
    second = q.pop(timeout=0)
    assert first is not None and second is not None
    q.move_all_to_active_or_backoff(NODE_ADD)
    first.unschedulable_plugins = {"NodeResourcesFit"}
    second.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(first, cycle_a) == BACKOFF
    assert q.add_unschedulable_if_not_present(second, q.scheduling_cycle) == BACKOFF


def test_activating_one_in_flight_pod_requeues_that_pod_only():
    # upstream: ForceActivate for an in-flight pod is a wildcard event naming that pod (isPodWorthRequeuing skips
    # it for every other pod).
    q = SchedulingQueue(clock=ManualClock(), name="q-in-flight-activate")
    q.add(_pod("a"))
    q.add(_pod("b"))
    first = q.pop(timeout=0)
    cycle_a = q.scheduling_cycle
    second = q.pop(timeout=0)
    assert first is not None and second is not None
    q.activate([_pod("b")])
    first.unschedulable_plugins = {"NodeResourcesFit"}
    second.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(first, cycle_a) == UNSCHEDULABLE
    assert q.add_unschedulable_if_not_present(second, q.scheduling_cycle) == BACKOFF
