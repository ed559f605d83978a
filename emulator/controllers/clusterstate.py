"""Cluster-state metrics, kube-state-metrics style, computed at scrape time from the manager's informers.

kube-state-metrics turns object state into series (``kube_node_status_condition``,
``kube_pod_status_phase`` ...), one series per object. An emulated cluster has
100,000s of pods, so kemu exports **aggregated counts only** -- never a series
per pod -- under its own names (the label sets differ from kube-state-metrics',
so borrowing its names would mislead queries written for it):

* ``kemu_cluster_nodes{condition,status}``: nodes whose condition ``condition``
  (Ready, MemoryPressure, DiskPressure, PIDPressure) has ``status``
  (``true``/``false``/``unknown``; a node that does not report the condition
  yet counts as ``unknown``);
* ``kemu_cluster_nodes_unschedulable``: cordoned nodes;
* ``kemu_cluster_pods{phase}``: pods by ``status.phase``;
* ``kemu_cluster_pods_unscheduled``: Pending pods with no ``spec.nodeName``
  (what the schedulers still owe).

Nothing happens on the event path: the collector reads the leading
controller manager's node and pod informer caches when Prometheus scrapes
(one pass over the cache: tens of milliseconds for 100,000 pods). Every
label combination is always exported, zero included, so a dashboard panel
shows 0 rather than "no data". A process whose managers are all standing by
exports nothing (the leader's process does), so the counts are never doubled.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric

from emulator.collectors import SourceCollector, registered

CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
STATUSES = ("true", "false", "unknown")
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


class StateSource(Protocol):
    """What the collector reads: the current nodes and pods (a leading controller manager's caches)."""

    def cluster_objects(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None: ...


def count(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, dict[tuple[str, ...], float]]:
    """The aggregated series for these objects: metric name -> label values -> value (zeros included)."""
    by_condition = {(c, s): 0.0 for c in CONDITIONS for s in STATUSES}
    unschedulable = 0.0
    for node in nodes:
        seen = {c.get("type"): str(c.get("status", "Unknown")).lower()
                for c in (node.get("status") or {}).get("conditions") or ()}
        for condition in CONDITIONS:
            status = seen.get(condition, "unknown")
            key = (condition, status if status in STATUSES else "unknown")
            by_condition[key] += 1
        if (node.get("spec") or {}).get("unschedulable"):
            unschedulable += 1
    phases = {(p,): 0.0 for p in PHASES}
    unscheduled = 0.0
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        phases[(phase if phase in PHASES else "Unknown",)] += 1
        if phase == "Pending" and not (pod.get("spec") or {}).get("nodeName"):
            unscheduled += 1
    return {"kemu_cluster_nodes": by_condition, "kemu_cluster_nodes_unschedulable": {(): unschedulable},
            "kemu_cluster_pods": phases, "kemu_cluster_pods_unscheduled": {(): unscheduled}}


_FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "kemu_cluster_nodes": ("Nodes by condition and its status (true, false, unknown).", ("condition", "status")),
    "kemu_cluster_nodes_unschedulable": ("Nodes marked unschedulable (cordoned).", ()),
    "kemu_cluster_pods": ("Pods by status.phase.", ("phase",)),
    "kemu_cluster_pods_unscheduled": ("Pending pods not yet bound to a node.", ()),
}


class ClusterStateCollector(SourceCollector):
    """Exports :func:`count` over the first source that has synced caches (see the module docstring)."""

    def describe(self) -> list[Metric]:
        return []  # present only while a leader runs in this process: do not pre-register the names

    def collect(self) -> Iterator[Metric]:
        for source in self.sources():
            objects = source.cluster_objects()
            if objects is None:
                continue
            for name, values in count(*objects).items():
                text, labels = _FAMILIES[name]
                family = GaugeMetricFamily(name, text, labels=list(labels))
                for label_values, value in values.items():
                    family.add_metric(list(label_values), value)
                yield family
            return


def collector() -> ClusterStateCollector:
    """The process's collector, registered in the default registry on first use."""
    return registered(ClusterStateCollector)
