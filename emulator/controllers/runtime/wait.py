"""Waiting on the cluster clock: kemu's counterpart of apimachinery ``pkg/util/wait``.

Every delay a controller asks for (back-off, ``add_after``, expectations expiry,
lease renewals) is cluster time from the injected clock. With a
:class:`~emulator.clock.SystemClock` the waits are converted to wall time by its
speed; with any other clock (a test's ``ManualClock``) they poll it every few
milliseconds, so a test moves time and the waiter follows.
"""

from __future__ import annotations

import threading

from emulator.clock import Clock

# How often a wait polls a clock that cannot say how fast it runs (a test's ManualClock).
POLL_SECONDS = 0.005


def wall_delay(clock: Clock, cluster_seconds: float) -> float | None:
    """Wall seconds for ``cluster_seconds`` on ``clock``, or None if the clock's pace is unknown (poll it)."""
    speed = getattr(clock, "speed", None)
    if isinstance(speed, int | float) and speed > 0:
        return max(0.0, cluster_seconds / speed)
    return None


def wait_until(clock: Clock, deadline: float, stop: threading.Event) -> bool:
    """Block until cluster time reaches ``deadline`` (True) or ``stop`` is set (False)."""
    while True:
        if stop.is_set():
            return False
        remaining = deadline - clock.now()
        if remaining <= 0:
            return True
        wall = wall_delay(clock, remaining)
        if stop.wait(POLL_SECONDS if wall is None else min(wall, 1.0)):
            return False


def wait_for(clock: Clock, cluster_seconds: float, stop: threading.Event) -> bool:
    """Wait ``cluster_seconds`` of cluster time from now; False if ``stop`` was set first.

    A delay worked out from an earlier read of the clock (``deadline - now``, or a period since an
    attempt began) goes to :func:`wait_until` with the absolute time instead: a clock stepped
    between that read and this call (a test's ManualClock, from another thread) would make the wait
    end late by the step.
    """
    return wait_until(clock, clock.now() + cluster_seconds, stop)
