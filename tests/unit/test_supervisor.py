"""The supervisor's CrashLoopBackOff and restart loop, on a manual clock.

Expected delays come from upstream's rule (client-go ``util/flowcontrol/backoff.go`` as the kubelet's
``doBackOff`` uses it): the first restart is free; each later one waits the current back-off after the exit,
which starts at ``initial`` and doubles up to ``cap``; an entry untouched for more than ``2 * cap`` has
expired, and the next restart is free again.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.processes import ProcessTable
from emulator.supervisor import CrashLoopBackOff, Supervisor, describe_exit
from tests.waiting import wait_for

INITIAL, CAP = 1.0, 60.0


def upstream_delays(exits: int) -> list[float]:
    """Delays of a part that crashes right after each restart: 0, then initial * 2**k capped."""
    return [0.0] + [min(INITIAL * 2 ** k, CAP) for k in range(exits - 1)]


def crash_loop(exit_gaps: list[float]) -> list[float]:
    """The delay before each restart when the part exits ``gap`` seconds after its previous restart."""
    backoff = CrashLoopBackOff(INITIAL, CAP)
    now, delays = 0.0, []
    for gap in exit_gaps:
        exited = now + gap
        delay = backoff.delay(exited)
        delays.append(delay)
        now = exited + delay
        backoff.restarted(now)
    return delays


@pytest.mark.parametrize(("gaps", "expected"), [
    ([0.1] * 10, upstream_delays(10)),
    # Ran for 2 * cap + 1 after its last restart: the entry expired, the restart is free again.
    ([0.1, 0.1, 0.1, 2 * CAP + 1, 0.1], [0.0, INITIAL, 2 * INITIAL, 0.0, INITIAL]),
    # Exactly 2 * cap is not yet expired (upstream: now - lastUpdate > 2 * maxDuration).
    ([0.1, 0.1, 2 * CAP - INITIAL], [0.0, INITIAL, 2 * INITIAL]),
], ids=["crash-loop-doubles-to-the-cap", "expires-after-2x-cap", "not-expired-at-2x-cap"])
def test_crash_loop_back_off(gaps: list[float], expected: list[float]) -> None:
    assert crash_loop(gaps) == expected


class SleepPart:
    """A real child process (``sleep``) as a supervised part."""

    part = "a test part"

    def __init__(self, name: str) -> None:
        self.name = name
        self.proc = self._spawn()
        self.starts = 1

    @staticmethod
    def _spawn() -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])

    def pid(self) -> int | None:
        return self.proc.pid if self.proc.poll() is None else None

    def exit_status(self) -> int | None:
        return self.proc.poll()

    def restart(self) -> int:
        self.proc = self._spawn()
        self.starts += 1
        return self.proc.pid

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


class ManualMonotonic:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def part() -> Iterator[SleepPart]:
    p = SleepPart("sleeper")
    yield p
    p.kill()


def test_supervisor_restarts_at_once_then_after_the_back_off_and_records_restarts(part: SleepPart,
                                                                                   tmp_path: Path) -> None:
    table = ProcessTable(tmp_path)
    table.record(part.name, part.proc.pid, part=part.part)
    clock = ManualMonotonic()
    sup = Supervisor([part], table, clock=clock, backoff=lambda: CrashLoopBackOff(INITIAL, CAP))
    sup.tick()
    assert [(s.state, s.restarts) for s in sup.parts()] == [("running", 0)]

    first = part.pid()
    assert sup.kill(part.name) == first
    wait_for(lambda: part.proc.poll() is not None, 10, "the part to die")
    sup.tick()  # first exit: started again at once, and the exited process was reaped
    [status] = sup.parts()
    assert (status.state, status.restarts, status.last_exit) == ("running", 1, describe_exit(-signal.SIGKILL))
    assert part.starts == 2 and status.pid == part.pid() != first
    table.record(part.name, part.proc.pid, part=part.part)  # as a part's on_spawn does
    assert table.get(part.name).restarts == 1  # type: ignore[union-attr]

    clock.t += 0.5
    part.kill()
    sup.tick()  # second exit within 2 * cap: back-off of INITIAL from the exit
    [status] = sup.parts()
    assert (status.state, status.pid, status.restart_in) == ("back-off", None, INITIAL)
    clock.t += INITIAL / 2
    sup.tick()
    assert part.starts == 2 and sup.parts()[0].restart_in == INITIAL / 2
    clock.t += INITIAL / 2
    sup.tick()
    assert part.starts == 3 and [(s.state, s.restarts) for s in sup.parts()] == [("running", 2)]
    assert table.get(part.name).restarts == 2  # type: ignore[union-attr]


def test_kill_of_an_unknown_part_names_the_parts(part: SleepPart) -> None:
    sup = Supervisor([part])
    with pytest.raises(LookupError, match="sleeper"):
        sup.kill("nope")
