"""What Low- and HighNodeUtilization share: node usage, classification, and the eviction loop.

Upstream ``nodeutilization/nodeutilization.go``, ``usageclients.go``,
``classifier/`` and ``normalizer/``, vectorised over nodes with numpy:

* :func:`usage_table` — per node and resource (``cpu`` in millicores,
  ``memory`` in bytes, ``pods`` as a count, extended resources in units): the
  capacity (allocatable when set) and the usage — the sum of the requests of
  the node's running pods (``requestedUsageClient``), or, with
  ``metricsUtilization``, the node's actual cpu and memory from
  ``metrics.k8s.io`` and its pod count (``actualUsageClient``);
* :func:`percentages` — usage / capacity * 100 (``ResourceUsageToResourceThreshold``);
* :func:`deviation_thresholds` — with ``useDeviationThresholds`` the
  thresholds are the average usage minus / plus the given spans, clamped to
  [0, 100];
* :func:`evict_pods_from_source_nodes` — ``evictPodsFromSourceNodes`` /
  ``evictPods``: the capacity the destination nodes can take (their capacity
  capped at the target threshold, minus their usage, summed); source nodes in
  the order given; on each, the pods the evictor's filter accepts, lowest
  priority (then QoS) first — with actual usage, the heaviest pod first among
  equals — are evicted while ``continue_eviction`` holds, skipping pods that
  tolerate no destination's NoSchedule taints, pods in excluded namespaces and
  pods the preEvictionFilter refuses; each eviction takes the pod's usage off
  its node and off the available capacity.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from emulator.api.taints import node_taints
from emulator.api.types import Obj
from emulator.descheduler import utils
from emulator.descheduler.api import Namespaces
from emulator.descheduler.evictions import (
    EvictionError,
    EvictionLimitError,
    EvictionNodeLimitError,
    EvictionTotalLimitError,
)
from emulator.descheduler.framework import Handle

log = logging.getLogger(__name__)

BASIC = ("cpu", "memory", "pods")


class UsageUnavailable(Exception):
    """Actual usage was asked for and a node has none (upstream: the plugin returns an error status)."""


@dataclass
class UsageTable:
    """Nodes x resources: ``capacity`` and ``usage`` (float64, the units above), and each node's running pods."""

    nodes: list[Obj]
    resources: list[str]
    capacity: np.ndarray
    usage: np.ndarray
    pods: list[list[Obj]]
    pod_usage: Callable[[Obj], dict[str, float] | None]

    def column(self, resource: str) -> int:
        return self.resources.index(resource)


def resource_names(thresholds: Sequence[str]) -> list[str]:
    """``uniquifyResourceNames``: cpu, memory, pods and every resource a threshold names."""
    return list(dict.fromkeys([*BASIC, *thresholds]))


def usage_table(handle: Handle, nodes: Sequence[Obj], resources: list[str], *, actual: bool) -> UsageTable:
    snapshot = handle.snapshot
    n, r = len(nodes), len(resources)
    capacity = np.zeros((n, r))
    usage = np.zeros((n, r))
    col = {name: j for j, name in enumerate(resources)}
    pods_per_node: list[list[Obj]] = []
    node_usage = snapshot.node_usage() if actual else {}
    pod_usage_map = snapshot.pod_usage() if actual else {}
    for i, node in enumerate(nodes):
        name = node["metadata"]["name"]
        for res, amount in snapshot.allocatable(node).items():
            j = col.get(res)
            if j is not None:
                capacity[i, j] = amount
        pods = snapshot.active_pods_on(name)
        pods_per_node.append(pods)
        row = usage[i]
        row[col["pods"]] = len(pods)
        if actual:
            measured = node_usage.get(name)
            if measured is None:
                raise UsageUnavailable(f"unable to find node usage of {name} in metrics.k8s.io")
            row[col["cpu"]] = measured.get("cpu", 0)
            row[col["memory"]] = measured.get("memory", 0)
            for pod in pods:  # extended resources are not measured: their requests stand in
                for res, amount in utils.requests_of(pod).items():
                    if res not in ("cpu", "memory") and res in col:
                        row[col[res]] += amount
        else:
            for res, amount in snapshot.requested(name).items():
                j = col.get(res)
                if j is not None and res != "pods":
                    row[j] += amount

    def pod_usage(pod: Obj) -> dict[str, float] | None:
        requested = {k: float(v) for k, v in utils.requests_of(pod).items()}
        requested["pods"] = 1.0
        if not actual:
            return requested
        meta = pod["metadata"]
        measured = pod_usage_map.get((meta.get("namespace") or "", meta["name"]))
        if measured is None:
            return None  # upstream: "unable to get pod usage" -> the pod is skipped
        requested["cpu"] = float(measured.get("cpu", 0))
        requested["memory"] = float(measured.get("memory", 0))
        return requested

    return UsageTable(list(nodes), resources, capacity, usage, pods_per_node, pod_usage)


def percentages(table: UsageTable) -> np.ndarray:
    """Usage as a percentage of capacity (0 where the capacity is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(table.capacity > 0, table.usage / np.where(table.capacity > 0, table.capacity, 1) * 100, 0.0)
    return pct


def threshold_vector(table: UsageTable, thresholds: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """(column indices, percentages) of the resources ``thresholds`` names."""
    cols = np.array([table.column(res) for res in thresholds], dtype=int)
    return cols, np.array(list(thresholds.values()), dtype=float)


def deviation_thresholds(pct: np.ndarray, cols: np.ndarray, low_span: np.ndarray,
                         high_span: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``assessNodesUsagesAndRelativeThresholds``: average usage -/+ the spans, clamped to [0, 100]."""
    average = pct[:, cols].mean(axis=0) if len(pct) else np.zeros(len(cols))
    return np.clip(average - low_span, 0, 100), np.clip(average + high_span, 0, 100)


def below(pct: np.ndarray, cols: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """``isNodeBelowThreshold``: every thresholded resource at or under its threshold."""
    return np.all(pct[:, cols] <= threshold, axis=1)


def above(pct: np.ndarray, cols: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """``isNodeAboveThreshold``: some thresholded resource over its threshold."""
    return np.any(pct[:, cols] > threshold, axis=1)


def capped_capacity(table: UsageTable, thresholds: dict[str, float] | np.ndarray | None) -> np.ndarray:
    """``capNodeCapacitiesToThreshold``: ``int(threshold% * capacity)`` per thresholded resource, else capacity."""
    capped = table.capacity.copy()
    if thresholds is None:
        return capped
    if isinstance(thresholds, dict):
        for res, pct in thresholds.items():
            j = table.column(res)
            capped[:, j] = np.floor(pct * 0.01 * table.capacity[:, j])
    return capped


def sort_by_usage(indices: np.ndarray, table: UsageTable, *, ascending: bool) -> list[int]:
    """``sortNodesByUsage``: by the plain sum of a node's usage values (cpu in millicores), stable."""
    totals = table.usage[indices].sum(axis=1)
    order = np.argsort(totals if ascending else -totals, kind="stable")
    return [int(i) for i in indices[order]]


def tolerates_some_destination(pod: Obj, destination_taints: list[tuple[tuple[str, str, str], ...]]) -> bool:
    """``PodToleratesTaints``: the pod tolerates every NoSchedule taint of at least one destination node."""
    return any(utils.tolerates_taints(pod, taints) for taints in destination_taints)


# (node usage, node capacity capped at the target, destinations' room), per resource of the table.
ContinueEviction = Callable[[list[float], list[float], list[float]], bool]


def evict_pods_from_source_nodes(handle: Handle, table: UsageTable, sources: Sequence[int], destinations: Sequence[int],
                                 *, available_capacity: np.ndarray, continue_eviction: ContinueEviction,
                                 strategy: str, evictable_namespaces: Namespaces | None = None,
                                 max_per_node: int | None = None, actual: bool = False) -> int:
    """Evict from ``sources`` (table row indices, in order) towards ``destinations``; returns evictions made.

    ``available_capacity`` is each node's capacity capped at the target threshold (rows of the table).
    """
    evictor, snapshot = handle.evictor, handle.snapshot
    dest = np.asarray(destinations, dtype=int)
    # Per-eviction bookkeeping in plain floats: numpy's per-call overhead dwarfs a 4-element update.
    available = ((available_capacity[dest] - table.usage[dest]).sum(axis=0) if len(dest) else
                 np.zeros(len(table.resources))).tolist()
    destination_taints = [node_taints(table.nodes[i]) for i in destinations]
    # A destination without NoSchedule taints takes any pod: then no pod needs its tolerations checked.
    open_destination = any(all(t[2] not in utils.NO_SCHEDULE_EFFECTS for t in taints) for taints in destination_taints)
    excluded = set(evictable_namespaces.exclude) if evictable_namespaces is not None else set()
    evicted = 0
    resources = list(table.resources)
    usages: dict[str | None, dict[str, float] | None] = {}

    def heaviest_first(pod: Obj) -> float:
        u = usages.setdefault(utils.pod_key(pod), table.pod_usage(pod))
        return -(u or {}).get("cpu", 0.0)

    for i in sources:
        node_usage = table.usage[i].tolist()
        node_cap = available_capacity[i].tolist()
        # upstream checks this after listing the removable pods; asking first skips filtering the pods of
        # nodes that will lose none (the filters have no side effects, so the outcome is the same).
        if not continue_eviction(node_usage, node_cap, available):
            continue
        if actual:  # the usage tiebreak changes pass by pass
            removable = utils.sort_pods_low_to_high([p for p in table.pods[i] if evictor.filter(p)], heaviest_first)
        else:
            # The node's pods in eviction order, kept across passes; the filter is asked lazily, for the pods
            # reached before the node is under its target (a stable sort: the order of upstream's filtered list).
            removable = snapshot.active_pods_low_to_high(table.nodes[i]["metadata"]["name"])
        count = 0
        try:
            for pod in removable:
                if max_per_node is not None and count >= max_per_node:
                    break
                if not evictor.filter(pod):
                    continue
                if not open_destination and not tolerates_some_destination(pod, destination_taints):
                    continue
                if (pod["metadata"].get("namespace") or "") in excluded or not evictor.pre_eviction_filter(pod):
                    continue
                key = utils.pod_key(pod) if actual else None
                pod_usage = usages[key] if key in usages else table.pod_usage(pod)
                if pod_usage is None:
                    log.debug("descheduler: no usage for pod %s; not evicting it", utils.pod_key(pod))
                    continue
                try:
                    evictor.evict(pod, strategy)
                except EvictionTotalLimitError:
                    return evicted
                except EvictionNodeLimitError:
                    break
                except (EvictionLimitError, EvictionError):
                    continue
                count += 1
                evicted += 1
                for j, res in enumerate(resources):
                    amount = pod_usage.get(res, 0.0)
                    node_usage[j] -= amount
                    available[j] -= amount
                if not continue_eviction(node_usage, node_cap, available):
                    break
        finally:
            if count:  # the node's usage after its evictions, written back once (a numpy row per eviction is slow)
                table.usage[i] = node_usage
    return evicted
