"""Supervision of the processes ``kemu up`` starts, as the kubelet restarts a static pod's containers.

The kubelet runs the control plane of a kubeadm cluster as static pods with
``restartPolicy: Always``: a container that exits is started again, first at
once, then after a back-off that doubles from 10 s to 5 min
(``CrashLoopBackOff``; upstream ``pkg/kubelet/kuberuntime/kuberuntime_manager.go``
``doBackOff`` over client-go ``util/flowcontrol/backoff.go``). ``kemu up`` does
the same for its own processes - the embedded redis-server, the API server,
the controller managers (Ray restarts nothing of these; Ray actors are Ray's):

* :class:`CrashLoopBackOff` is that state machine. The first restart is
  immediate; each further one waits ``delay`` after the exit, and the delay
  doubles up to ``cap``; a part that has not needed a restart for ``2 * cap``
  starts over from an immediate restart (flowcontrol's ``hasExpired``).
  **kemu's constants are shorter than upstream's**: 1 s doubling to 60 s (not
  10 s to 5 min), so a part killed once is back within a second or two and
  one that crash-loops is retried every minute rather than every five.
* :class:`Supervisor` is the loop: every ``period`` it asks each :class:`Part`
  whether its process exited (which reaps it: no ``<defunct>`` is left), waits
  out the back-off, starts the part again (on the same port: Redis replays its
  AOF, so clients reconnect to the same URL), and updates the part's process
  record (:mod:`emulator.processes`: the new pid and ``restarts`` + 1).

**The records are the API** other processes use (``kemu status``, the API
server's ``/readyz``, chaos phases): :func:`part_records` lists the supervised
processes with their state and restart count, :func:`kill_part` SIGKILLs one
by name (checking the record's start time, so a reused pid is never hit).
Inside the ``kemu up`` process, :meth:`Supervisor.parts` says the same with the
back-off detail.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from emulator.processes import ProcessRecord, ProcessTable, proc_stat

if TYPE_CHECKING:
    from emulator.apiserver.process import ApiServerProcess
    from emulator.store.redis_server import EmbeddedRedis

__all__ = ["ApiServerPart", "CrashLoopBackOff", "Part", "PartStatus", "RedisPart", "Supervisor", "describe_exit",
           "kill_part", "part_records"]

log = logging.getLogger(__name__)

# kemu's CrashLoopBackOff constants (upstream: 10 s doubling to 300 s; see the module docstring).
INITIAL_DELAY = 1.0
MAX_DELAY = 60.0


class CrashLoopBackOff:
    """When a part that exited may start again (client-go ``flowcontrol.Backoff`` as the kubelet uses it).

    ``delay(now)`` is how long after its exit a part must wait; ``restarted(now)`` is called when it is
    started again (upstream ``Next``): the first restart is free, then ``initial``, doubling to ``cap``.
    An entry not updated for ``2 * cap`` has expired and the next restart is free again.
    """

    def __init__(self, initial: float = INITIAL_DELAY, cap: float = MAX_DELAY) -> None:
        self.initial = initial
        self.cap = cap
        self.backoff = 0.0
        self.last_update: float | None = None

    def _expired(self, now: float) -> bool:
        return self.last_update is None or now - self.last_update > 2 * self.cap

    def delay(self, now: float) -> float:
        """Seconds after its exit a part must wait before it is started again (upstream IsInBackOffSince)."""
        return 0.0 if self._expired(now) else self.backoff

    def restarted(self, now: float) -> None:
        """The part is being started again now (upstream Next)."""
        self.backoff = self.initial if self._expired(now) else min(self.backoff * 2, self.cap)
        self.last_update = now


class Part(Protocol):
    """One supervised process."""

    name: str  # its process record's name ("redis-server", "apiserver", "controller-manager-0")
    part: str  # how messages name the part ("Redis", "the API server" ...)

    def pid(self) -> int | None:
        """The pid of its current process, None when there is none."""
        ...

    def exit_status(self) -> int | None:
        """None while the process runs; else its (reaped) exit status, as ``Popen.returncode``."""
        ...

    def restart(self) -> int:
        """Start the part again, wait until it is ready; the new pid. Raises if it could not start."""
        ...


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name}"
        return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


@dataclass(frozen=True)
class PartStatus:
    """A supervised part as :meth:`Supervisor.parts` reports it."""

    name: str
    part: str
    state: str  # "running", "back-off" (exited, waiting to restart) or "restarting" (being started again)
    pid: int | None
    restarts: int
    last_exit: str | None = None  # how its last process ended ("killed by SIGKILL")
    restart_in: float | None = None  # seconds until the next start, in back-off


@dataclass
class _Supervised:
    part: Part
    backoff: CrashLoopBackOff
    state: str = "running"
    restarts: int = 0
    exited_at: float = 0.0
    last_exit: str | None = None


class Supervisor:
    """Restarts the :class:`Part` s whose process exits (see the module docstring).

    ``records``: the table whose records follow the restarts. ``clock``: monotonic seconds (tests pass a
    manual clock and call :meth:`tick` themselves instead of :meth:`start`).
    """

    def __init__(self, parts: Sequence[Part], records: ProcessTable | None = None, *, period: float = 0.1,
                 clock: Callable[[], float] = time.monotonic,
                 backoff: Callable[[], CrashLoopBackOff] = CrashLoopBackOff) -> None:
        self.records = records
        self.period = period
        self.clock = clock
        self._parts = {p.name: _Supervised(p, backoff()) for p in parts}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Supervisor:
        self._thread = threading.Thread(target=self._run, name="kemu-supervisor", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop supervising (before the parts are stopped, so none is started again meanwhile)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.tick()
            except Exception:  # one part's trouble never ends the supervision of the others
                log.exception("supervisor tick failed")

    def tick(self) -> None:
        """Look at every part once: note exits, start again those whose back-off has passed."""
        for s in list(self._parts.values()):
            if self._stop.is_set():
                return
            now = self.clock()
            if s.state == "running":
                code = s.part.exit_status()
                if code is None:
                    continue
                with self._lock:
                    s.state, s.exited_at, s.last_exit = "back-off", now, describe_exit(code)
                log.warning("%s (%s) %s; restarting it", s.part.name, s.part.part, s.last_exit)
            if s.state == "back-off" and now >= s.exited_at + s.backoff.delay(now):
                self._restart(s, now)

    def _restart(self, s: _Supervised, now: float) -> None:
        with self._lock:
            s.state = "restarting"
        s.backoff.restarted(now)
        try:
            pid = s.part.restart()
        except Exception as e:
            log.warning("%s (%s) did not start again: %s; next attempt after %.1f s", s.part.name, s.part.part, e,
                        s.backoff.delay(self.clock()))
            with self._lock:
                s.state, s.exited_at, s.last_exit = "back-off", self.clock(), f"failed to restart: {e}"
            return
        with self._lock:
            s.state = "running"
            s.restarts += 1
        if self.records is not None:
            self.records.count_restart(s.part.name)
        log.warning("%s (%s) started again (pid %d, restart %d)", s.part.name, s.part.part, pid, s.restarts)

    def parts(self) -> list[PartStatus]:
        """Every supervised part's state, pid and restart count."""
        now = self.clock()
        out = []
        with self._lock:
            for s in self._parts.values():
                restart_in = None
                if s.state == "back-off":
                    restart_in = max(0.0, s.exited_at + s.backoff.delay(now) - now)
                out.append(PartStatus(s.part.name, s.part.part, s.state,
                                      s.part.pid() if s.state == "running" else None, s.restarts, s.last_exit,
                                      restart_in))
        return out

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> int:
        """Send ``sig`` to the part ``name``'s process (a fault, for chaos); its pid."""
        s = self._parts.get(name)
        pid = s.part.pid() if s is not None else None
        if pid is None:
            raise LookupError(f"no running supervised part named {name!r}; parts: {', '.join(self._parts)}")
        os.kill(pid, sig)
        return pid


# ------------------------------------------------------------ the parts of a local cluster


class RedisPart:
    """The embedded redis-server as a supervised part: restarted on the same port, it replays its AOF."""

    name = "redis-server"
    part = "Redis"

    def __init__(self, redis: EmbeddedRedis) -> None:
        self.redis = redis

    def pid(self) -> int | None:
        return self.redis.pid

    def exit_status(self) -> int | None:
        return self.redis.exit_status()

    def restart(self) -> int:
        self.redis.start()
        return self.redis.pid or 0


class ApiServerPart:
    """The API server process (its workers are the API server's own to restart) as a supervised part."""

    name = "apiserver"
    part = "the API server"

    def __init__(self, api: ApiServerProcess) -> None:
        self.api = api

    def pid(self) -> int | None:
        proc = self.api.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def exit_status(self) -> int | None:
        return self.api.exit_status()

    def restart(self) -> int:
        self.api.restart()
        assert self.api.proc is not None
        return self.api.proc.pid


# ------------------------------------------------------------ from other processes: the records


def part_records(home: Path) -> list[tuple[ProcessRecord, str]]:
    """The processes of the cluster in ``home`` (``$KEMU_HOME``) with their state (``running``, ``zombie``,
    ``exited``: see :meth:`ProcessRecord.state`); each record carries its ``restarts``."""
    return [(rec, rec.state()) for rec in ProcessTable(home).records()]


def kill_part(home: Path, name: str, sig: signal.Signals = signal.SIGKILL) -> int:
    """Send ``sig`` to the recorded process ``name`` of the cluster in ``home`` (only to the process the
    record names: its start time is checked); its pid. LookupError if there is no such live process."""
    rec = ProcessTable(home).get(name)
    if rec is None or not rec.running():
        raise LookupError(f"no running process recorded as {name!r} in {home}")
    st = proc_stat(rec.pid)
    if st is not None and st.start != rec.start:
        raise LookupError(f"{name}'s recorded pid {rec.pid} now names another process")
    os.kill(rec.pid, sig)
    return rec.pid
