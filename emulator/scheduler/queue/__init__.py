"""The scheduling queue: activeQ, backoffQ, unschedulable pods and the nominator.

Upstream ``pkg/scheduler/backend/queue/``, one module per upstream file:
:mod:`.scheduling_queue` (``PriorityQueue``: the lock, in-flight pods,
moves on cluster events), :mod:`.active_queue`, :mod:`.backoff_queue`,
:mod:`.unschedulable_pods`, :mod:`.nominator`, the heap they share
(:mod:`.heap`, upstream ``backend/heap``), the queued pod
(:mod:`.queued_pod`) and the cluster events (:mod:`.events`). Import the
names from here.
"""

from emulator.scheduler.queue.backoff_queue import DEFAULT_POD_INITIAL_BACKOFF, DEFAULT_POD_MAX_BACKOFF
from emulator.scheduler.queue.events import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    BACKOFF_COMPLETE,
    FORCE_ACTIVATE,
    NODE_ADD,
    NODE_ALLOCATABLE_CHANGE,
    NODE_ANNOTATION_CHANGE,
    NODE_CONDITION_CHANGE,
    NODE_DELETE,
    NODE_LABEL_CHANGE,
    NODE_TAINT_CHANGE,
    PLUGIN_EVENTS,
    SCHEDULE_ATTEMPT_FAILURE,
    UNSCHEDULABLE_TIMEOUT,
    UNSCHEDULED_POD_ADD,
    UNSCHEDULED_POD_UPDATE,
    WILDCARD_EVENTS,
    node_change_events,
)
from emulator.scheduler.queue.queued_pod import QueuedPod, pod_key
from emulator.scheduler.queue.scheduling_queue import (
    ACTIVE,
    BACKOFF,
    DEFAULT_POD_MAX_IN_UNSCHEDULABLE,
    GATED,
    UNSCHEDULABLE,
    SchedulingQueue,
    is_pod_updated,
)

__all__ = [
    "ACTIVE",
    "ASSIGNED_POD_ADD",
    "ASSIGNED_POD_DELETE",
    "ASSIGNED_POD_UPDATE",
    "BACKOFF",
    "BACKOFF_COMPLETE",
    "DEFAULT_POD_INITIAL_BACKOFF",
    "DEFAULT_POD_MAX_BACKOFF",
    "DEFAULT_POD_MAX_IN_UNSCHEDULABLE",
    "FORCE_ACTIVATE",
    "GATED",
    "NODE_ADD",
    "NODE_ALLOCATABLE_CHANGE",
    "NODE_ANNOTATION_CHANGE",
    "NODE_CONDITION_CHANGE",
    "NODE_DELETE",
    "NODE_LABEL_CHANGE",
    "NODE_TAINT_CHANGE",
    "PLUGIN_EVENTS",
    "SCHEDULE_ATTEMPT_FAILURE",
    "UNSCHEDULABLE",
    "UNSCHEDULABLE_TIMEOUT",
    "UNSCHEDULED_POD_ADD",
    "UNSCHEDULED_POD_UPDATE",
    "WILDCARD_EVENTS",
    "QueuedPod",
    "SchedulingQueue",
    "is_pod_updated",
    "node_change_events",
    "pod_key",
]
