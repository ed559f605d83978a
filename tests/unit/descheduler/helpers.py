"""Builders and a one-call runner for descheduler table tests (dry-run evictor: nothing is written)."""

from __future__ import annotations

from typing import Any

from emulator.clock import ManualClock, rfc3339
from emulator.descheduler.api import load_policy
from emulator.descheduler.descheduler import Descheduler, PassResult
from emulator.descheduler.framework import ClusterSnapshot
from tests import builders as b

T0 = 1_700_000_000.0


def node(name: str, cpu: str = "4", memory: str = "16Gi", *, pods: str = "110", labels: dict[str, str] | None = None,
         taints: list[dict] | None = None, unschedulable: bool = False) -> dict:
    return b.sched_node(name, cpu, memory, pods=pods, labels=labels, taints=taints, unschedulable=unschedulable)


def pod(name: str, node_name: str | None, cpu: str | None = "100m", *, owner: str | None = "rs-a",
        owner_kind: str = "ReplicaSet", priority: int | None = None, labels: dict[str, str] | None = None,
        phase: str = "Running", namespace: str = "default", memory: str | None = None, created: float = T0,
        started: float | None = None, image: str = "nginx:1.27", annotations: dict[str, str] | None = None,
        restarts: int = 0, **spec: Any) -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    body = b.pod(name, namespace, containers=[b.res_container(requests=requests, image=image)], labels=labels,
                 node=node_name, **spec)
    if owner:
        b.owned_by(body, owner_kind, owner)
    if priority is not None:
        body["spec"]["priority"] = priority
    body["metadata"]["creationTimestamp"] = rfc3339(created)
    if annotations:
        body["metadata"]["annotations"] = dict(annotations)
    body["status"] = {"phase": phase, "startTime": rfc3339(created if started is None else started),
                      "containerStatuses": [{"name": "app", "restartCount": restarts, "ready": phase == "Running"}]}
    return body


def policy(*profiles: dict, **top: Any) -> dict:
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": list(profiles), **top}


def profile(point: str, plugin: str, args: dict | None = None, *, evictor: dict | None = None,
            name: str = "test") -> dict:
    configs = []
    if evictor is not None:
        configs.append({"name": "DefaultEvictor", "args": evictor})
    if args is not None:
        configs.append({"name": plugin, "args": args})
    return {"name": name, "pluginConfig": configs, "plugins": {point: {"enabled": [plugin]}}}


def run(pol: dict, nodes: list[dict], pods: list[dict], *, now: float = T0, priority_classes: dict | None = None,
        node_usage: dict | None = None, pod_usage: dict | None = None, pdbs: list[dict] | None = None) -> PassResult:
    clock = ManualClock(now)
    snapshot = ClusterSnapshot.build(nodes, pods, priority_classes=priority_classes or {}, pdbs=pdbs or [],
                                     node_usage_source=lambda: dict(node_usage or {}),
                                     pod_usage_source=lambda: dict(pod_usage or {}))
    return Descheduler(load_policy(pol), clock, dry_run=True).run_once(snapshot)


def evicted(result: PassResult) -> list[str]:
    return [e.name for e in result.evicted]
