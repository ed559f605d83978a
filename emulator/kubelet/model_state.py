"""Row states and records the kubelet model shares with its helpers.

:mod:`emulator.kubelet.model` keeps one row per container in numpy arrays;
these are the codes of a row's state and last termination reason, the events
and report a tick returns, and the per-pod record. They live apart so the
model's status rendering (:mod:`emulator.kubelet.model_status`) and eviction
round (:mod:`emulator.kubelet.model_eviction`) can use them without importing
the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from emulator.kubelet.cgroups import OOM_KILLED_REASON
from emulator.kubelet.profiles import PodBehaviour

# Container states (rows).
FREE = 0
WAITING = 1  # created, not started yet (ContainerCreating)
RUNNING = 2
BACKOFF = 3  # exited, will restart at start_at (CrashLoopBackOff while start_at > finished_at)
TERMINATED = 4  # exited, will not restart

# Last termination reasons.
_REASONS = ("Completed", "Error", OOM_KILLED_REASON)
COMPLETED, ERROR, OOM_KILLED = 0, 1, 2


@dataclass(frozen=True, slots=True)
class KubeletEvent:
    """Something to record: ``reason``/``message``/``type`` follow upstream Events where one exists."""

    time: float
    reason: str
    message: str
    node: str
    pod_uid: str | None = None
    container: str | None = None
    type: str = "Normal"
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass
class TickReport:
    events: list[KubeletEvent] = field(default_factory=list)
    changed_pods: set[str] = field(default_factory=set)
    changed_nodes: set[str] = field(default_factory=set)


@dataclass
class PodRecord:
    uid: str
    name: str
    namespace: str
    node: int
    rows: list[int]
    restart_policy: str
    qos: str
    added_at: float
    row: int = 0  # pod row in the p_* arrays
    phase: str = "Pending"
    reason: str | None = None
    message: str | None = None
    behaviour: PodBehaviour | None = None
