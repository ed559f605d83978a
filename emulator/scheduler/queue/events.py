"""Cluster events that move pods out of the unschedulable pool, and which plugins care about which.

Upstream ``pkg/scheduler/framework/events.go`` (the event labels), each
in-tree plugin's ``EventsToRegister`` (``pkg/scheduler/framework/plugins/*``)
and ``pkg/scheduler/eventhandlers.go`` / ``framework/events.go``
``NodeSchedulingPropertiesChange`` (what a node update amounts to); our own
Python.
"""

from __future__ import annotations

from collections.abc import Mapping

from emulator.api.types import ObjView

__all__ = [
    "ASSIGNED_POD_ADD",
    "ASSIGNED_POD_DELETE",
    "ASSIGNED_POD_UPDATE",
    "BACKOFF_COMPLETE",
    "FORCE_ACTIVATE",
    "NODE_ADD",
    "NODE_ALLOCATABLE_CHANGE",
    "NODE_ANNOTATION_CHANGE",
    "NODE_CONDITION_CHANGE",
    "NODE_DELETE",
    "NODE_LABEL_CHANGE",
    "NODE_TAINT_CHANGE",
    "PLUGIN_EVENTS",
    "POP_FROM_BACKOFF_Q",
    "SCHEDULE_ATTEMPT_FAILURE",
    "UNSCHEDULABLE_TIMEOUT",
    "UNSCHEDULED_POD_ADD",
    "UNSCHEDULED_POD_UPDATE",
    "WILDCARD_EVENTS",
    "node_change_events",
]


# Cluster events (upstream framework/events.go labels).
NODE_ADD = "NodeAdd"
NODE_DELETE = "NodeDelete"
NODE_ALLOCATABLE_CHANGE = "NodeAllocatableChange"
NODE_LABEL_CHANGE = "NodeLabelChange"
NODE_TAINT_CHANGE = "NodeTaintChange"  # also spec.unschedulable turning false, as upstream
NODE_CONDITION_CHANGE = "NodeConditionChange"
NODE_ANNOTATION_CHANGE = "NodeAnnotationChange"
ASSIGNED_POD_ADD = "AssignedPodAdd"
ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
ASSIGNED_POD_DELETE = "AssignedPodDelete"
UNSCHEDULED_POD_ADD = "UnscheduledPodAdd"
UNSCHEDULED_POD_UPDATE = "UnscheduledPodUpdate"
# Queue-internal events.
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
FORCE_ACTIVATE = "ForceActivate"
POP_FROM_BACKOFF_Q = "PopFromBackoffQ"  # upstream framework.PopFromBackoffQ: popped early, activeQ being empty
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
# Events that move every unschedulable pod, whatever rejected it.
WILDCARD_EVENTS = frozenset({FORCE_ACTIVATE, UNSCHEDULABLE_TIMEOUT})

_NODE_SHAPE = frozenset({NODE_ADD, NODE_ALLOCATABLE_CHANGE, NODE_LABEL_CHANGE, NODE_TAINT_CHANGE})

# Plugin -> the events that may make a pod it rejected schedulable: each plugin's EventsToRegister upstream
# (pkg/scheduler/framework/plugins/*). Plugins missing here are interested in everything.
PLUGIN_EVENTS: Mapping[str, frozenset[str]] = {
    "SchedulingGates": frozenset({UNSCHEDULED_POD_UPDATE}),
    "NodeUnschedulable": frozenset({NODE_ADD, NODE_TAINT_CHANGE, UNSCHEDULED_POD_UPDATE}),
    "NodeName": frozenset({NODE_ADD, UNSCHEDULED_POD_UPDATE}),
    "NodePorts": frozenset({NODE_ADD, ASSIGNED_POD_DELETE, UNSCHEDULED_POD_UPDATE}),
    "NodeResourcesFit": _NODE_SHAPE | {ASSIGNED_POD_DELETE, ASSIGNED_POD_UPDATE, UNSCHEDULED_POD_UPDATE},
    "NodeAffinity": frozenset({NODE_ADD, NODE_LABEL_CHANGE, UNSCHEDULED_POD_UPDATE}),
    "TaintToleration": frozenset({NODE_ADD, NODE_TAINT_CHANGE, UNSCHEDULED_POD_UPDATE}),
    "PodTopologySpread": _NODE_SHAPE | {NODE_DELETE, ASSIGNED_POD_ADD, ASSIGNED_POD_UPDATE, ASSIGNED_POD_DELETE,
                                        UNSCHEDULED_POD_UPDATE},
    "InterPodAffinity": frozenset({NODE_ADD, NODE_LABEL_CHANGE, ASSIGNED_POD_ADD, ASSIGNED_POD_UPDATE,
                                   ASSIGNED_POD_DELETE, UNSCHEDULED_POD_UPDATE}),
    "VolumeZone": frozenset({NODE_ADD, NODE_LABEL_CHANGE, UNSCHEDULED_POD_UPDATE}),
}


def _conditions(node: ObjView) -> dict[str, str]:
    return {c.get("type") or "": c.get("status") or "" for c in (node.get("status") or {}).get("conditions") or ()}


def node_change_events(old: ObjView, new: ObjView) -> list[str]:
    """upstream ``NodeSchedulingPropertiesChange``: the events a node update amounts to (possibly none)."""
    events = []
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if bool(old_spec.get("unschedulable")) != bool(new_spec.get("unschedulable")) and not new_spec.get("unschedulable"):
        events.append(NODE_TAINT_CHANGE)
    if (old.get("status") or {}).get("allocatable") != (new.get("status") or {}).get("allocatable"):
        events.append(NODE_ALLOCATABLE_CHANGE)
    if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
        events.append(NODE_LABEL_CHANGE)
    if old_spec.get("taints") != new_spec.get("taints") and NODE_TAINT_CHANGE not in events:
        events.append(NODE_TAINT_CHANGE)
    if _conditions(old) != _conditions(new):
        events.append(NODE_CONDITION_CHANGE)
    if (old.get("metadata") or {}).get("annotations") != (new.get("metadata") or {}).get("annotations"):
        events.append(NODE_ANNOTATION_CHANGE)
    return events
