"""restartPolicy, CrashLoopBackOff and the pod phase, as the kubelet decides them.

When a container exits the kubelet decides, from the pod's ``restartPolicy``,
whether to start it again (``Always``: yes; ``OnFailure``: if the exit code
is not 0; ``Never``: no), and when, from a per-container back-off
(``k8s.io/client-go/util/flowcontrol.Backoff`` as used by
``kuberuntime_manager.go doBackOff``, initial 10 s and max 300 s from
``pkg/kubelet/kubelet.go``):

* On exit at ``finishedAt``: if the container has no back-off entry, or the
  entry is *expired* (``finishedAt - lastUpdate > 2 x 300 s``: the previous
  start was more than 10 minutes before this exit), it restarts at once.
  Otherwise it waits (``Waiting``, reason ``CrashLoopBackOff``) until
  ``finishedAt + backoff``.
* On each restart the entry moves on (``Backoff.Next``): a missing or expired
  entry starts at 10 s, otherwise it doubles, capped at 300 s;
  ``lastUpdate`` becomes the restart time.

So a container that keeps crashing restarts immediately the first time,
then after 10 s, 20 s, 40 s, ... 300 s, 300 s; one that ran for more than ten
minutes before crashing starts over. (``kubectl`` shows exactly this; the
``ReduceDefaultCrashLoopBackOffDecay`` / ``KubeletCrashLoopBackOffMax``
feature gates, off by default, are not modelled.)

The state is a pair of arrays (one row per container), so the "who is due to
start" check each tick is one comparison over all containers; the exits
themselves are rare events handled per row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from emulator.api.gotime import go_duration

__all__ = [
    "ALWAYS",
    "CRASH_LOOP_BACK_OFF",
    "INITIAL_BACKOFF",
    "MAX_BACKOFF",
    "NEVER",
    "ON_FAILURE",
    "RESET_AFTER",
    "BackOff",
    "ContainerPhase",
    "back_off_message",
    "pod_phase",
    "restart_policy_code",
    "should_restart",
]

INITIAL_BACKOFF = 10.0  # pkg/kubelet/kubelet.go backOffPeriod
MAX_BACKOFF = 300.0  # MaxContainerBackOff
RESET_AFTER = 2 * MAX_BACKOFF  # flowcontrol hasExpired: stable after twice the maximum

ALWAYS = 0
ON_FAILURE = 1
NEVER = 2
_POLICY_CODES = {"Always": ALWAYS, "OnFailure": ON_FAILURE, "Never": NEVER}

CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"


def restart_policy_code(policy: str | None) -> int:
    """``spec.restartPolicy`` as a code; the apiserver defaults a missing one to Always."""
    return _POLICY_CODES.get(policy or "Always", ALWAYS)


def should_restart(policy: np.ndarray | int, exit_code: np.ndarray | int) -> np.ndarray:
    """Whether exited containers are started again (``ShouldContainerBeRestarted`` for exited ones)."""
    policy = np.asarray(policy)
    exit_code = np.asarray(exit_code)
    return (policy == ALWAYS) | ((policy == ON_FAILURE) & (exit_code != 0))


class BackOff:
    """Per-row back-off entries: ``backoff`` seconds (0 = no entry) and ``last_update`` times."""

    def __init__(self, capacity: int = 1024, initial: float = INITIAL_BACKOFF, maximum: float = MAX_BACKOFF) -> None:
        self.initial = initial
        self.maximum = maximum
        self.backoff = np.zeros(capacity)
        self.last_update = np.zeros(capacity)

    def grow(self, capacity: int) -> None:
        extra = capacity - len(self.backoff)
        if extra > 0:
            self.backoff = np.concatenate([self.backoff, np.zeros(extra)])
            self.last_update = np.concatenate([self.last_update, np.zeros(extra)])

    def _live(self, rows: np.ndarray | int, finished_at: np.ndarray | float) -> np.ndarray:
        # An entry exists and has not expired relative to the exit (hasExpired).
        return (self.backoff[rows] > 0) & ~(np.asarray(finished_at) - self.last_update[rows] > 2 * self.maximum)

    def restart_at(self, rows: np.ndarray | int, finished_at: np.ndarray | float) -> np.ndarray:
        """When exited containers may start again (``IsInBackOffSince`` turns false)."""
        finished_at = np.asarray(finished_at, dtype=np.float64)
        return np.where(self._live(rows, finished_at), finished_at + self.backoff[rows], finished_at)

    def next(self, rows: np.ndarray | int, finished_at: np.ndarray | float, now: np.ndarray | float) -> None:
        """Record a restart at ``now`` of containers that exited at ``finished_at`` (``Backoff.Next``)."""
        live = self._live(rows, finished_at)
        self.backoff[rows] = np.where(live, np.minimum(self.backoff[rows] * 2, self.maximum), self.initial)
        self.last_update[rows] = now

    def current(self, row: int) -> float:
        """The back-off now in force for a row (``Backoff.Get``), seconds."""
        return float(self.backoff[row])

    def reset(self, rows: np.ndarray | int) -> None:
        self.backoff[rows] = 0.0
        self.last_update[rows] = 0.0


def back_off_message(backoff: float, container: str, pod_name: str, namespace: str, uid: str) -> str:
    """The Waiting message of a container in CrashLoopBackOff (``doBackOff``; ``format.Pod`` is name_ns(uid))."""
    return f"back-off {go_duration(backoff)} restarting failed container={container} pod={pod_name}_{namespace}({uid})"


@dataclass(frozen=True)
class ContainerPhase:
    """What :func:`pod_phase` needs of one container's status."""

    state: str  # "waiting" | "running" | "terminated"
    exit_code: int = 0
    has_last_termination: bool = False


def pod_phase(restart_policy: str | None, containers: Iterable[ContainerPhase]) -> str:
    """The pod phase from its containers' states (``getPhase`` in ``kubelet_pods.go``, no init containers).

    Waiting containers that never ran keep the pod Pending; once all have run,
    a pod with a running container is Running; when all have stopped, Always
    (and OnFailure with failures) will restart them, so the pod stays Running,
    otherwise it is Succeeded if every container exited 0, else Failed.
    """
    waiting = running = stopped = succeeded = 0
    for c in containers:
        if c.state == "running":
            running += 1
        elif c.state == "terminated":
            stopped += 1
            succeeded += c.exit_code == 0
        elif c.has_last_termination:
            stopped += 1  # waiting to restart after an exit
        else:
            waiting += 1
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if not stopped:
        return "Pending"
    policy = restart_policy or "Always"
    if policy == "Always":
        return "Running"
    if stopped == succeeded:
        return "Succeeded"
    if policy == "Never":
        return "Failed"
    return "Running"  # OnFailure: failed containers are restarting
