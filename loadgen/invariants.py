"""The invariants every ``kemu run`` checks at its end: what must hold however the run was disturbed.

A run may inject faults (``chaos`` phases: processes killed, shards partitioned,
kubelets stopped); afterwards the cluster must look as if nothing had been lost.
Each check is a pure function of objects listed from the store (and what the
driver and the pod watch recorded), so tests drive them with hand-built objects:

- **acknowledged writes**: every pod whose create was acknowledged exists, or
  was deleted by someone (the scenario, a controller, an eviction) — the watch
  saw it deleted;
- **no node over-committed**: the requests of the non-terminal pods bound to a
  node fit its allocatable (cpu, memory, extended resources) and its pod
  count, as the scheduler's NodeResourcesFit promised;
- **nothing stuck**: no non-terminal pod bound to a Ready node stays
  Pending (its kubelet never started it, or its status write was lost);
- **leases fresh**: every Ready node's Lease was renewed within its
  leaseDurationSeconds of the cluster clock, as the node lifecycle controller
  requires (pkg/controller/nodelifecycle/node_lifecycle_controller.go);
- **watch delivered**: every pod's events arrived once and in resourceVersion
  order (the pod watcher counts duplicates and reorderings).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from emulator.api.pods import pod_requests
from emulator.clock import parse_rfc3339
from emulator.scheduler.framework.snapshot import node_allocatable

# Violations listed per invariant in the summary: enough to find the objects, not all of them.
_SAMPLES = 5
TERMINAL = ("Succeeded", "Failed")


@dataclass
class Check:
    """One invariant's result: whether it holds, how many objects it looked at, and the first violations."""

    name: str
    checked: int = 0
    violations: list[str] = field(default_factory=list)
    violated: int = 0

    @property
    def holds(self) -> bool:
        return self.violated == 0

    def fail(self, what: str) -> None:
        self.violated += 1
        if len(self.violations) < _SAMPLES:
            self.violations.append(what)

    def as_dict(self) -> dict[str, Any]:
        return {"holds": self.holds, "checked": self.checked, "violated": self.violated,
                "examples": list(self.violations)}


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def node_ready(node: Mapping[str, Any]) -> bool:
    """The Ready condition is True (kemu nodes without conditions count as Ready, as the scheduler reads them)."""
    conditions = (node.get("status") or {}).get("conditions")
    if not conditions:
        return True
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def acknowledged_writes(acknowledged: Iterable[str], pods: Iterable[Mapping[str, Any]],
                        deleted: Iterable[str]) -> Check:
    """Every acknowledged create (``namespace/name``) is in the store, or the pod watch saw it deleted."""
    check = Check("acknowledgedWrites")
    live = {_key(p) for p in pods}
    gone = set(deleted)
    for key in acknowledged:
        check.checked += 1
        if key not in live and key not in gone:
            check.fail(f"pod {key}: created (201) but neither stored nor deleted")
    return check


def node_commitment(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> Check:
    """No node's non-terminal bound pods request more than its allocatable, or outnumber its pod capacity.

    Only resources the node advertises are summed: device-shared resources (``alibabacloud.com/gpu-milli``)
    are accounted per device by the GPU plugins, not against one node-wide total.
    """
    check = Check("noNodeOverCommitted")
    requested: dict[str, dict[str, int]] = {}
    count: dict[str, int] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        total = requested.setdefault(node, {})
        for name, amount in pod_requests(pod).items():
            total[name] = total.get(name, 0) + amount
        count[node] = count.get(node, 0) + 1
    for node in nodes:
        name = node["metadata"]["name"]
        check.checked += 1
        allocatable, max_pods = node_allocatable(node)
        over = [f"{r} {amount} > {allocatable.get(r, 0)}" for r, amount in sorted(requested.get(name, {}).items())
                if r in allocatable and amount > allocatable[r]]
        if max_pods and count.get(name, 0) > max_pods:
            over.append(f"pods {count[name]} > {max_pods}")
        if over:
            check.fail(f"node {name}: " + ", ".join(over))
    return check


def nothing_stuck(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> Check:
    """No non-terminal pod bound to a Ready node is still Pending (never started, or its status was lost)."""
    check = Check("noPodStuck")
    ready = {n["metadata"]["name"] for n in nodes if node_ready(n)}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or node not in ready or pod["metadata"].get("deletionTimestamp"):
            continue
        check.checked += 1
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if phase == "Pending":
            check.fail(f"pod {_key(pod)}: Pending on Ready node {node}")
    return check


def leases_fresh(nodes: Iterable[Mapping[str, Any]], leases: Iterable[Mapping[str, Any]], now: float) -> Check:
    """Every Ready node's Lease in kube-node-lease was renewed within its leaseDurationSeconds of ``now``."""
    check = Check("leasesFresh")
    by_node = {lease["metadata"]["name"]: lease for lease in leases
               if lease["metadata"].get("namespace") == "kube-node-lease"}
    for node in nodes:
        if not node_ready(node):
            continue
        name = node["metadata"]["name"]
        check.checked += 1
        spec = (by_node.get(name) or {}).get("spec") or {}
        renew = spec.get("renewTime")
        if not renew:
            check.fail(f"node {name}: Ready without a Lease")
            continue
        age = now - parse_rfc3339(renew)
        if age > float(spec.get("leaseDurationSeconds") or 40):
            check.fail(f"node {name}: Lease renewed {age:.0f}s ago (> {spec.get('leaseDurationSeconds') or 40}s)")
    return check


def watch_delivered(received: int, duplicates: int, out_of_order: int) -> Check:
    """The pod watch saw no event twice and none out of resourceVersion order."""
    check = Check("watchDeliveredOnceInOrder", checked=received)
    if duplicates:
        check.fail(f"{duplicates} duplicate watch events")
    if out_of_order:
        check.fail(f"{out_of_order} watch events out of resourceVersion order")
    return check


def check_all(*, acknowledged: Iterable[str], deleted: Iterable[str], pods: list[Mapping[str, Any]],
              nodes: list[Mapping[str, Any]], leases: list[Mapping[str, Any]], now: float,
              received: int, duplicates: int, out_of_order: int) -> dict[str, Any]:
    """Every invariant, as the summary's ``invariants`` section: ``holds`` and each check's result."""
    checks = [acknowledged_writes(acknowledged, pods, deleted), node_commitment(nodes, pods),
              nothing_stuck(nodes, pods), leases_fresh(nodes, leases, now),
              watch_delivered(received, duplicates, out_of_order)]
    return {"holds": all(c.holds for c in checks), **{c.name: c.as_dict() for c in checks}}
