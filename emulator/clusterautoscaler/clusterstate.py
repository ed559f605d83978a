"""What the autoscaler knows about each node group between scans (upstream ``clusterstate/``).

Upstream ``clusterstate.ClusterStateRegistry``: per node group, the nodes
registered and ready, the instances asked for but not registered yet
(*upcoming*: counted in scale-up so one burst is not answered twice), the
instances that never came up within ``--max-node-provision-time``
(*long unregistered*: deleted, and the group backed off, as a timed-out
scale-up), and the back-off itself (``utils/backoff/exponential_backoff.go``:
``--initial-node-group-backoff-duration`` 5 min doubling up to
``--max-node-group-backoff-duration`` 30 min, forgotten after
``--node-group-backoff-reset-timeout`` 3 h without failures).

:func:`status_document` renders the ``cluster-autoscaler-status`` ConfigMap's
``status`` key in upstream's YAML shape (``clusterstate/api/types.go``,
``ClusterAutoscalerStatus``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from emulator.api.gotime import go_duration
from emulator.api.types import Obj
from emulator.clock import rfc3339
from emulator.clusterautoscaler.cloudprovider import CloudProvider, InstanceState, NodeGroup
from emulator.clusterautoscaler.config import AutoscalingOptions

__all__ = ["Backoff", "ClusterState", "GroupCounts", "is_node_ready", "status_document"]


def is_node_ready(node: Mapping[str, Any]) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


@dataclass
class BackoffEntry:
    until: float
    duration: float
    last_failure: float
    code: str
    message: str


class Backoff:
    """Exponential per-group back-off after failed scale-ups (see the module docstring)."""

    def __init__(self, options: AutoscalingOptions) -> None:
        self.options = options
        self.entries: dict[str, BackoffEntry] = {}

    def backoff(self, group: str, now: float, code: str, message: str) -> float:
        o = self.options
        prev = self.entries.get(group)
        duration = o.initial_node_group_backoff_duration
        if prev is not None and now - prev.last_failure < o.node_group_backoff_reset_timeout:
            duration = min(prev.duration * 2, o.max_node_group_backoff_duration)
        self.entries[group] = BackoffEntry(now + duration, duration, now, code, message)
        return now + duration

    def active(self, group: str, now: float) -> BackoffEntry | None:
        entry = self.entries.get(group)
        return entry if entry is not None and now < entry.until else None


@dataclass
class GroupCounts:
    """One group's nodes this scan (upstream ``Readiness`` + the provider's target)."""

    registered: list[str] = field(default_factory=list)
    ready: int = 0
    unready: int = 0
    upcoming: int = 0  # asked for, not registered yet, not overdue
    long_unregistered: list[str] = field(default_factory=list)
    deleting: int = 0
    target: int = 0


@dataclass
class ScaleUpRequest:
    group: str
    increase: int
    time: float
    expected: int


class ClusterState:
    """Per-scan counts plus what persists across scans (scale-up requests, back-off)."""

    def __init__(self, options: AutoscalingOptions) -> None:
        self.options = options
        self.backoff = Backoff(options)
        self.counts: dict[str, GroupCounts] = {}
        self.requests: dict[str, ScaleUpRequest] = {}
        self.unregistered = 0
        self.transitions: dict[str, tuple[str, float]] = {}

    def update(self, provider: CloudProvider, nodes: Sequence[Obj], now: float) -> dict[str, list[str]]:
        """Recount every group; returns the long-unregistered instances per group (to delete and back off)."""
        by_group: dict[str, list[Obj]] = {}
        for node in nodes:
            group = provider.node_group_for_node(node)
            if group is not None:
                by_group.setdefault(group.id(), []).append(node)
        overdue: dict[str, list[str]] = {}
        self.counts = {}
        self.unregistered = 0
        for group in provider.node_groups():
            gid = group.id()
            c = GroupCounts(target=group.target_size())
            registered = {(n.get("metadata") or {}).get("name") for n in by_group.get(gid, ())}
            for n in by_group.get(gid, ()):
                c.registered.append(n["metadata"]["name"])
                if is_node_ready(n):
                    c.ready += 1
                else:
                    c.unready += 1
            for inst in group.nodes():
                if inst.state == InstanceState.DELETING:
                    c.deleting += 1
                elif inst.name not in registered:
                    if now - inst.created > self.options.max_node_provision_time:
                        c.long_unregistered.append(inst.name)
                    else:
                        c.upcoming += 1
                        self.unregistered += 1
            if c.long_unregistered:
                overdue[gid] = c.long_unregistered
            self.counts[gid] = c
            req = self.requests.get(gid)
            if req is not None and (len(c.registered) >= req.expected or c.upcoming == 0):
                del self.requests[gid]  # the scale-up is done (or its instances were given up on)
        return overdue

    def register_scale_up(self, group: NodeGroup, increase: int, now: float) -> None:
        c = self.counts.get(group.id())
        registered = len(c.registered) if c is not None else 0
        prev = self.requests.get(group.id())
        expected = registered + (c.upcoming if c is not None else 0) + increase
        self.requests[group.id()] = ScaleUpRequest(group.id(), increase + (prev.increase if prev else 0),
                                                   prev.time if prev else now, expected)
        if c is not None:
            c.upcoming += increase
            c.target += increase

    def register_failed_scale_up(self, group: str, now: float, code: str, message: str) -> None:
        self.backoff.backoff(group, now, code, message)
        self.requests.pop(group, None)

    def upcoming(self) -> dict[str, int]:
        return {g: c.upcoming for g, c in self.counts.items() if c.upcoming > 0}

    def transition(self, key: str, status: str, now: float) -> float:
        """When ``key`` last changed to ``status`` (now if it just did)."""
        prev = self.transitions.get(key)
        if prev is None or prev[0] != status:
            self.transitions[key] = (status, now)
            return now
        return prev[1]

    def timeout_message(self, group: str) -> str:
        return (f"Scale-up timed out for node group {group} after "
                f"{go_duration(self.options.max_node_provision_time)}")


def _counts_doc(ready: int, unready: int, upcoming: int, long_unregistered: int) -> dict[str, Any]:
    return {"registered": {"total": ready + unready, "ready": ready, "notStarted": 0,
                           "unready": {"total": unready, "resourceUnready": 0}},
            "longUnregistered": long_unregistered, "unregistered": upcoming}


def status_document(state: ClusterState, provider: CloudProvider, now: float, *, candidates: Mapping[str, int],
                    scale_up_in_progress: bool) -> dict[str, Any]:
    """The ``status`` document of the ``cluster-autoscaler-status`` ConfigMap (upstream's YAML shape)."""
    stamp = rfc3339(now)

    def probe(key: str, status: str) -> dict[str, str]:
        return {"lastProbeTime": stamp, "lastTransitionTime": rfc3339(state.transition(key, status, now))}

    groups: list[dict[str, Any]] = []
    total = GroupCounts()
    for group in provider.node_groups():
        gid = group.id()
        c = state.counts.get(gid, GroupCounts())
        total.ready += c.ready
        total.unready += c.unready
        total.upcoming += c.upcoming
        total.long_unregistered += c.long_unregistered
        backoff = state.backoff.active(gid, now)
        up_status = "Backoff" if backoff else "InProgress" if gid in state.requests else "NoActivity"
        scale_up: dict[str, Any] = {"status": up_status}
        if backoff is not None:
            scale_up["backoffInfo"] = {"errorCode": backoff.code, "errorMessage": backoff.message}
        healthy = "Healthy" if c.ready >= min(group.min_size(), c.target) else "Unhealthy"
        down = candidates.get(gid, 0)
        groups.append({
            "name": gid,
            "health": {"status": healthy, "nodeCounts": _counts_doc(c.ready, c.unready, c.upcoming,
                                                                    len(c.long_unregistered)),
                       "cloudProviderTarget": c.target, "minSize": group.min_size(), "maxSize": group.max_size(),
                       **probe(f"{gid}/health", healthy)},
            "scaleUp": {**scale_up, **probe(f"{gid}/scaleUp", up_status)},
            "scaleDown": {"status": "CandidatesPresent" if down else "NoCandidates", "candidates": down,
                          **probe(f"{gid}/scaleDown", "CandidatesPresent" if down else "NoCandidates")},
        })
    all_down = sum(candidates.values())
    up = "InProgress" if scale_up_in_progress else "NoActivity"
    down_status = "CandidatesPresent" if all_down else "NoCandidates"
    return {
        "time": stamp,
        "autoscalerStatus": "Running",
        "clusterWide": {
            "health": {"status": "Healthy",
                       "nodeCounts": _counts_doc(total.ready, total.unready, total.upcoming,
                                                 len(total.long_unregistered)),
                       **probe("cluster/health", "Healthy")},
            "scaleUp": {"status": up, **probe("cluster/scaleUp", up)},
            "scaleDown": {"status": down_status, "candidates": all_down, **probe("cluster/scaleDown", down_status)},
        },
        "nodeGroups": groups,
    }
