"""The status manager's comparison and merge rules (pkg/kubelet/status/status_manager.go), table-driven.

``isPodStatusByKubeletEqual``: for every condition the kubelet owns or shares that the intended
status carries, the stored one must match on status, reason and message (times do not count);
conditions only the stored status has do not count; every other field must be equal.
``mergePodStatus``: the stored conditions the kubelet does not own are kept (first), then the
kubelet's own conditions from the intended status; every other field is the intended one.
"""

from __future__ import annotations

import pytest
import redis

from emulator.api import errors
from emulator.api.types import Obj
from emulator.kubelet.status_reconcile import kubelet_equal, merge_status, store_unreachable


def cond(ctype: str, status: str = "True", *, reason: str | None = None, message: str | None = None,
         at: str = "2026-01-01T00:00:00Z") -> Obj:
    out: Obj = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": at}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def status(*conditions: Obj, phase: str = "Running", **fields: object) -> Obj:
    return {"phase": phase, "conditions": list(conditions), "hostIP": "10.0.0.1", **fields}


INTENDED = status(cond("Ready"), cond("ContainersReady"), cond("PodScheduled"))


@pytest.mark.parametrize(("stored", "equal"), [
    (INTENDED, True),
    # A transition time differs: not a difference for the kubelet (only status, reason, message count).
    (status(cond("Ready", at="2020-01-01T00:00:00Z"), cond("ContainersReady"), cond("PodScheduled")), True),
    # A condition someone else added (a readiness gate) does not count.
    (status(cond("Ready"), cond("ContainersReady"), cond("PodScheduled"), cond("example.com/gate", "False")), True),
    (status(cond("Ready", "False"), cond("ContainersReady"), cond("PodScheduled")), False),
    (status(cond("Ready", reason="X"), cond("ContainersReady"), cond("PodScheduled")), False),
    (status(cond("ContainersReady"), cond("PodScheduled")), False),  # the kubelet's Ready is missing
    (status(cond("Ready"), cond("ContainersReady"), cond("PodScheduled"), phase="Pending"), False),
    (status(cond("Ready"), cond("ContainersReady"), cond("PodScheduled"), podIP="10.1.0.5"), False),  # extra field
    ({**INTENDED, "hostIP": "10.0.0.2"}, False),
], ids=["same", "transition-time-only", "foreign-condition", "ready-false", "ready-reason", "ready-missing",
        "stale-phase", "extra-field", "other-host-ip"])
def test_kubelet_equal_is_upstreams_isPodStatusByKubeletEqual(stored: Obj, equal: bool) -> None:
    assert kubelet_equal(stored, INTENDED) is equal


@pytest.mark.parametrize(("stored", "conditions"), [
    (status(cond("Ready", "False")), ["Ready", "ContainersReady", "PodScheduled"]),
    # Foreign conditions stay, ahead of the kubelet's (mergePodStatus appends the kubelet's after them).
    (status(cond("Ready", "False"), cond("DisruptionTarget", reason="DeletionByTaintManager"),
            cond("example.com/gate", "False")),
     ["DisruptionTarget", "example.com/gate", "Ready", "ContainersReady", "PodScheduled"]),
], ids=["only-kubelet-conditions", "foreign-conditions-kept"])
def test_merge_status_keeps_what_the_kubelet_does_not_own(stored: Obj, conditions: list[str]) -> None:
    merged = merge_status(stored, INTENDED)
    assert [c["type"] for c in merged["conditions"]] == conditions
    assert {k: v for k, v in merged.items() if k != "conditions"} == {k: v for k, v in INTENDED.items()
                                                                      if k != "conditions"}
    by_type = {c["type"]: c for c in merged["conditions"]}
    assert by_type["Ready"]["status"] == "True"  # the kubelet's own condition wins
    for foreign in ("DisruptionTarget", "example.com/gate"):
        if foreign in by_type:
            assert by_type[foreign] == next(c for c in stored["conditions"] if c["type"] == foreign)


@pytest.mark.parametrize(("exc", "unreachable"), [
    (redis.ConnectionError("Connection refused"), True),
    (redis.TimeoutError("Timeout reading from socket"), True),
    (ConnectionResetError(104, "Connection reset by peer"), True),
    (errors.StatusError(503, "ServiceUnavailable", "the store is unreachable"), True),
    (errors.StatusError(409, "Conflict", "the object has been modified"), False),
    (errors.StatusError(422, "Invalid", "bad status"), False),
    (ValueError("a bug"), False),
], ids=["refused", "timeout", "reset", "503", "409", "422", "bug"])
def test_store_unreachable(exc: Exception, unreachable: bool) -> None:
    assert store_unreachable(exc) is unreachable
