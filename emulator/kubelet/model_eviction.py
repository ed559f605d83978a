"""The kubelet model's eviction round: its arrays as the eviction manager's inputs, and the evictions applied.

Upstream ``pkg/kubelet/eviction/eviction_manager.go`` ``synchronize`` reads
node and pod stats from the summary API, ranks pods and kills one; here the
stats are bincounts over the model's container rows, the ranking is
:class:`emulator.kubelet.eviction.EvictionManager`'s, and an evicted pod's
containers stop at once (phase ``Failed``, reason ``Evicted``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from emulator.api.quantity import parse_quantity, to_int
from emulator.kubelet import eviction as ev
from emulator.kubelet.cgroups import OOM_KILLED_EXIT_CODE
from emulator.kubelet.model_state import ERROR, FREE, RUNNING, TERMINATED, KubeletEvent, PodRecord, TickReport

if TYPE_CHECKING:
    from emulator.kubelet.model import KubeletModel


# Node events the kubelet records when a pressure condition flips (nodestatus setters).
_CONDITION_EVENT = {
    ev.MEMORY_PRESSURE: {True: "NodeHasInsufficientMemory", False: "NodeHasSufficientMemory"},
    ev.DISK_PRESSURE: {True: "NodeHasDiskPressure", False: "NodeHasNoDiskPressure"},
    ev.PID_PRESSURE: {True: "NodeHasInsufficientPID", False: "NodeHasSufficientPID"},
}


def evict_round(model: KubeletModel, now: float, node_memory: np.ndarray, pids: np.ndarray,
                report: TickReport) -> None:
    """One eviction manager round over the model's nodes (called on the manager's monitoring period)."""
    n_pods = len(model.p_active)
    live = model.state != FREE
    pod_of = model.c_pod
    mem = np.bincount(pod_of, weights=np.where(live, model.cgroups.memory_current, 0.0), minlength=n_pods)
    disk = np.bincount(pod_of, weights=model.disk_usage, minlength=n_pods)
    pid_use = np.bincount(pod_of, weights=pids, minlength=n_pods)
    mem_req = np.bincount(pod_of, weights=np.where(live, model.memory_request, 0.0), minlength=n_pods)
    disk_req = np.bincount(pod_of, weights=np.where(live, model.disk_request, 0.0), minlength=n_pods)
    stats = ev.PodStats(model.p_node, model.p_active, model.p_critical, model.p_priority, mem, mem_req, disk,
                        disk_req, pid_use)
    n_nodes = len(model._node_names)
    node_disk = np.bincount(model.cgroups.node, weights=model.disk_usage, minlength=n_nodes)
    node_pids = np.bincount(model.cgroups.node, weights=pids, minlength=n_nodes)
    signals = {
        ev.MEMORY_AVAILABLE: (np.maximum(model.n_memory - model.n_system_memory - node_memory, 0.0), model.n_memory),
        ev.NODEFS_AVAILABLE: (np.maximum(model.n_disk - model.n_system_disk - node_disk, 0.0), model.n_disk),
        ev.PID_AVAILABLE: (model.n_pid_max - model.n_system_pids - node_pids, model.n_pid_max),
    }
    local = ev.LocalStorage(pod_of, model.state == RUNNING, model.disk_usage, model.disk_limit, model.p_disk_limit,
                            model._c_name, model._c_limit_text, model._p_disk_limit_text)
    result = model.eviction.synchronize(now, signals, stats, node_active=model.n_active, local_storage=local,
                                       details=lambda pod_row, resource: _details(model, pod_row, resource))
    for change in result.conditions:
        node = model._node_names[change.node]
        report.changed_nodes.add(node)
        report.events.append(KubeletEvent(now, _CONDITION_EVENT[change.type][change.status],
                                          f"Node {node} status is now: "
                                          f"{_CONDITION_EVENT[change.type][change.status]}", node))
    for node_idx, resource in result.thresholds_met:
        report.events.append(KubeletEvent(now, "EvictionThresholdMet", f"Attempting to reclaim {resource}",
                                          model._node_names[node_idx], type="Warning"))
    for eviction in result.evictions:
        record = model._pod_rows[eviction.pod]
        if record is None:
            continue
        _evict_pod(model, record, eviction, now, report)


def _details(model: KubeletModel, pod_row: int, resource: str) -> list[ev.ContainerUsage]:
    record = model._pod_rows[pod_row]
    if record is None:
        return []
    usage = model.cgroups.memory_current if resource == "memory" else model.disk_usage
    result = []
    for row in record.rows:
        text = model._c_requests[row].get(resource)
        result.append(ev.ContainerUsage(model._c_name[row], int(usage[row]), to_int(text) if text is not None else 0,
                                        str(parse_quantity(text)) if text is not None else "0"))
    return result


def _evict_pod(model: KubeletModel, record: PodRecord, eviction: ev.Eviction, now: float, report: TickReport) -> None:
    rows = np.array(record.rows, dtype=np.int64)
    alive = rows[(model.state[rows] == RUNNING)]
    model.finished_at[alive] = now
    model.last_exit_code[alive] = OOM_KILLED_EXIT_CODE  # killed with SIGKILL after the 1 s hard-eviction grace
    model.last_reason[alive] = ERROR
    model.has_exited[alive] = True
    model.state[rows] = TERMINATED
    model.start_at[rows] = np.inf
    model.cgroups.memory_current[rows] = 0.0
    model.disk_usage[rows] = 0.0
    p_row = record.row
    model.p_active[p_row] = False
    record.phase = "Failed"
    record.reason = ev.EVICTED_REASON
    record.message = eviction.message
    report.changed_pods.add(record.uid)
    report.events.append(KubeletEvent(now, ev.EVICTED_REASON, eviction.message, model._node_names[record.node],
                                      record.uid, None, "Warning", dict(eviction.annotations)))
