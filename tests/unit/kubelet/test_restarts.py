"""restartPolicy, CrashLoopBackOff timing and the pod phase.

Back-off semantics (client-go flowcontrol.Backoff as the kubelet uses it, 10 s
initial, 300 s max): on exit, restart at once if there is no entry or the last
restart was more than 2 x 300 s before the exit, else after the current
back-off; each restart then doubles the entry (capped), or sets it to 10 s if
missing/expired.
"""

from __future__ import annotations

import numpy as np
import pytest

from emulator.api.gotime import go_duration
from emulator.kubelet.restarts import (
    ALWAYS,
    NEVER,
    ON_FAILURE,
    BackOff,
    ContainerPhase,
    back_off_message,
    pod_phase,
    restart_policy_code,
    should_restart,
)

POLICIES = [
    ("Always", 0, True), ("Always", 1, True), ("Always", 137, True),
    ("OnFailure", 0, False), ("OnFailure", 1, True), ("OnFailure", 137, True),
    ("Never", 0, False), ("Never", 137, False),
    (None, 0, True),  # defaulted to Always
]


@pytest.mark.parametrize(("policy", "code", "restart"), POLICIES, ids=[f"{p}-{c}" for p, c, _ in POLICIES])
def test_should_restart(policy: str | None, code: int, restart: bool) -> None:
    assert bool(should_restart(restart_policy_code(policy), code)) is restart


def test_policy_codes() -> None:
    assert [restart_policy_code(p) for p in ("Always", "OnFailure", "Never")] == [ALWAYS, ON_FAILURE, NEVER]


def crash_loop(run_seconds: float, crashes: int, initial: float = 10.0, maximum: float = 300.0) -> list[float]:
    """Delays between each exit and the following restart for a container that always runs ``run_seconds``."""
    backoff = BackOff(1, initial, maximum)
    t = 0.0
    delays = []
    for _ in range(crashes):
        finished = t + run_seconds
        restart = float(backoff.restart_at(0, finished))
        delays.append(restart - finished)
        backoff.next(0, finished, restart)
        t = restart
    return delays


def expected_delays(crashes: int, initial: float = 10.0, maximum: float = 300.0) -> list[float]:
    # first restart immediate, then initial * 2^k capped
    return [0.0] + [min(initial * 2**k, maximum) for k in range(crashes - 1)]


@pytest.mark.parametrize("run_seconds", [0.0, 5.0, 299.0], ids=["instant-crash", "5s-runs", "299s-runs"])
def test_crash_loop_back_off_doubles_to_five_minutes(run_seconds: float) -> None:
    assert crash_loop(run_seconds, 10) == expected_delays(10)  # 0, 10, 20, 40, 80, 160, 300, 300, ...


def test_back_off_resets_after_ten_minutes_of_running() -> None:
    backoff = BackOff(1)
    t = 0.0
    for _ in range(5):  # build the back-off up to 160 s
        finished = t + 1.0
        t = float(backoff.restart_at(0, finished))
        backoff.next(0, finished, t)
    assert backoff.current(0) == 160.0
    # Runs 601 s > 2 x 300 s since the last restart: restarts at once, back to 10 s.
    finished = t + 601.0
    assert float(backoff.restart_at(0, finished)) == finished
    backoff.next(0, finished, finished)
    assert backoff.current(0) == 10.0
    # Exactly 600 s is not "more than" twice the maximum: the back-off still holds.
    finished2 = finished + 600.0
    assert float(backoff.restart_at(0, finished2)) == finished2 + 10.0


def test_back_off_is_per_row_and_vectorised() -> None:
    backoff = BackOff(3)
    rows = np.array([0, 2])
    backoff.next(rows, np.array([5.0, 5.0]), np.array([5.0, 5.0]))
    assert list(backoff.restart_at(np.array([0, 1, 2]), np.array([10.0, 10.0, 700.0]))) == [20.0, 10.0, 700.0]
    backoff.reset(0)
    assert float(backoff.restart_at(0, 10.0)) == 10.0


GO = [(0, "0s"), (10, "10s"), (80, "1m20s"), (160, "2m40s"), (300, "5m0s"), (3600, "1h0m0s"), (1.5, "1.5s")]


@pytest.mark.parametrize(("seconds", "text"), GO, ids=[t for _, t in GO])
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_back_off_message() -> None:
    assert back_off_message(20, "app", "web-1", "prod", "u-1") == (
        "back-off 20s restarting failed container=app pod=web-1_prod(u-1)")


R, W, T = "running", "waiting", "terminated"
PHASES = [
    ("Always", [(W, 0, False)], "Pending"),
    ("Always", [(R, 0, False), (W, 0, False)], "Pending"),
    ("Always", [(R, 0, False), (W, 0, True)], "Running"),  # one in CrashLoopBackOff
    ("Always", [(W, 0, True)], "Running"),
    ("OnFailure", [(T, 0, True), (T, 0, True)], "Succeeded"),
    ("OnFailure", [(T, 0, True), (W, 0, True)], "Running"),  # the failed one restarts
    ("Never", [(T, 0, True), (T, 1, True)], "Failed"),
    ("Never", [(T, 0, True)], "Succeeded"),
    ("Never", [(T, 137, True), (R, 0, False)], "Running"),
    ("Always", [], "Pending"),
]


@pytest.mark.parametrize(("policy", "states", "phase"), PHASES,
                         ids=["starting", "one-still-creating", "crashlooping-sidecar", "all-crashlooping",
                              "onfailure-succeeded", "onfailure-restarting", "never-failed", "never-succeeded",
                              "never-one-still-running", "no-containers"])
def test_pod_phase(policy: str, states: list[tuple[str, int, bool]], phase: str) -> None:
    assert pod_phase(policy, [ContainerPhase(*s) for s in states]) == phase
