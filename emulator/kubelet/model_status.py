"""Pod status from the kubelet model's arrays: phases and container statuses.

Upstream ``pkg/kubelet/kubelet_pods.go``: ``getPhase`` (a pod's phase from
its containers' states and restart policy) and
``convertToAPIContainerStatuses`` (state, lastState, restartCount, ready).
Here both read the model's row arrays; phases of many changed pods at once
are counted with bincounts instead of a Python loop per pod.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from emulator.clock import rfc3339
from emulator.kubelet import eviction as ev
from emulator.kubelet.model_state import (
    _REASONS,
    BACKOFF,
    FREE,
    RUNNING,
    TERMINATED,
    WAITING,
    PodRecord,
    TickReport,
)
from emulator.kubelet.restarts import ALWAYS, CRASH_LOOP_BACK_OFF, NEVER, ContainerPhase, back_off_message, pod_phase

if TYPE_CHECKING:
    from emulator.kubelet.model import KubeletModel


def update_phases(model: KubeletModel, report: TickReport) -> None:
    """Phases of the changed pods: ``pod_phase``'s rules, counted for all pods at once.

    Small batches take the per-pod path; large ones (start-up, crash
    storms) count container states per pod with bincounts instead of
    looping in Python.
    """
    if len(report.changed_pods) < 64:
        for uid in report.changed_pods:
            record = model._pods[uid]
            if record.reason != ev.EVICTED_REASON:
                record.phase = pod_phase(record.restart_policy, [_phase_input(model, r) for r in record.rows])
        _retire_finished(model, report)
        return
    n = len(model.p_active)
    state = model.state
    live = state != FREE
    pending_state = (state == WAITING) | (state == BACKOFF)
    terminated = state == TERMINATED

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(model.c_pod, weights=mask & live, minlength=n)

    waiting = count(pending_state & ~model.has_exited)
    running = count(state == RUNNING)
    stopped = count(terminated | (pending_state & model.has_exited))
    succeeded = count(terminated & (model.last_exit_code == 0))
    policy = model.p_policy
    phase = np.where(
        waiting > 0, 0,
        np.where(running > 0, 1,
                 np.where(stopped == 0, 0,
                          np.where(policy == ALWAYS, 1,
                                   np.where(stopped == succeeded, 2, np.where(policy == NEVER, 3, 1))))))
    names = ("Pending", "Running", "Succeeded", "Failed")
    for uid in report.changed_pods:
        record = model._pods[uid]
        if record.reason != ev.EVICTED_REASON:
            record.phase = names[phase[record.row]]
    _retire_finished(model, report)


def _retire_finished(model: KubeletModel, report: TickReport) -> None:
    # Pods in a terminal phase are no longer "active pods": the eviction manager never ranks them.
    for uid in report.changed_pods:
        record = model._pods[uid]
        if record.phase in ("Succeeded", "Failed"):
            model.p_active[record.row] = False


def _phase_input(model: KubeletModel, row: int) -> ContainerPhase:
    state = int(model.state[row])
    if state == RUNNING:
        return ContainerPhase("running")
    if state == TERMINATED:
        return ContainerPhase("terminated", int(model.last_exit_code[row]), True)
    return ContainerPhase("waiting", 0, bool(model.has_exited[row]))


def pod_status(model: KubeletModel, uid: str) -> dict[str, Any]:
    """``status`` fields the kubelet owns: phase, reason/message, qosClass and containerStatuses."""
    record = model._pods[uid]
    status: dict[str, Any] = {"phase": record.phase, "qosClass": record.qos}
    if record.reason:
        status["reason"] = record.reason
        status["message"] = record.message
    status["containerStatuses"] = [_container_status(model, record, row) for row in record.rows]
    return status


def _container_status(model: KubeletModel, record: PodRecord, row: int) -> dict[str, Any]:
    name = model._c_name[row]
    state = int(model.state[row])
    running = state == RUNNING
    out: dict[str, Any] = {"name": name, "image": model._c_image[row], "imageID": "",
                           "restartCount": int(model.restarts[row]), "ready": running, "started": running}
    terminated = _terminated(model, row) if model.has_exited[row] else None
    if running:
        out["state"] = {"running": {"startedAt": rfc3339(float(model.started_at[row]))}}
        if terminated:
            out["lastState"] = {"terminated": terminated}
    elif state == TERMINATED and terminated:
        out["state"] = {"terminated": terminated}
    elif state == BACKOFF and model.start_at[row] > model.finished_at[row]:
        message = back_off_message(model.backoff.current(row) or model.config.backoff_initial, name, record.name,
                                   record.namespace, record.uid)
        out["state"] = {"waiting": {"reason": CRASH_LOOP_BACK_OFF, "message": message}}
        out["lastState"] = {"terminated": terminated}
    elif state == BACKOFF:
        out["state"] = {"terminated": terminated}
    else:
        out["state"] = {"waiting": {"reason": "ContainerCreating"}}
    out.setdefault("lastState", {})
    return out


def _terminated(model: KubeletModel, row: int) -> dict[str, Any]:
    return {"exitCode": int(model.last_exit_code[row]), "reason": _REASONS[int(model.last_reason[row])],
            "startedAt": rfc3339(float(model.started_at[row])),
            "finishedAt": rfc3339(float(model.finished_at[row]))}
