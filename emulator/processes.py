"""Process records: every process a ``kemu up`` starts, written down so none outlives its cluster.

In Kubernetes a pod's containers live in cgroups the container runtime owns:
when the pod goes, the runtime kills everything in them, whatever the
processes did (upstream ``pkg/kubelet/cm`` and the runtime's sandbox). kemu's
parts are plain processes (redis-server, the API server and its workers, a
local Ray instance's daemons), so ``kemu up`` keeps a record of each in
``$KEMU_HOME/processes/<name>.json`` from the moment it is spawned, and
``kemu down`` / a failed ``kemu up`` stop what is recorded even when the
``kemu up`` process that started them is gone.

* **A record names one process incarnation**: its pid *and* its start time
  (field 22 of ``/proc/<pid>/stat``, clock ticks since boot). A pid the kernel
  has since given to another process has another start time, so a stale record
  never leads to a stranger being signalled.
* **A part started again keeps its name**: ``kemu up``'s supervisor
  (:mod:`emulator.supervisor`) rewrites the record with the new pid and counts
  the restart (``restarts``), which ``kemu status`` and ``/readyz`` report.
* **Stopping is SIGTERM, wait, SIGKILL.** A recorded process that leads its own
  process group (``pgid == pid``: redis-server, the API server) is signalled as
  a group, which reaches what it forked (the API server's workers). When such a
  leader is already dead but members of its group live on, the group id cannot
  have been reused while they hold it, and each member is further checked to
  carry this cluster's ``KEMU_HOME`` in its environment before it is signalled.
* **Where a start stands**: :meth:`ProcessTable.note_starting` records which
  part of the cluster is being started and its log, so whoever gives up
  waiting can say which part was not ready and show its last log lines.

Linux reads ``/proc``; elsewhere a record's start time is unknown (0) and
liveness falls back to ``kill(pid, 0)``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, replace
from pathlib import Path

__all__ = ["ProcessRecord", "ProcessTable", "StillRunning", "Stopped", "activate", "active", "log_tail", "pid_alive",
           "proc_stat"]

_STARTING = "starting.json"
_PROC = Path("/proc")


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` a record needs."""

    state: str  # R, S, D, Z (zombie: exited, not yet reaped), T ...
    pgid: int
    start: int  # clock ticks after boot: with the pid, names one process incarnation


def proc_stat(pid: int) -> ProcStat | None:
    """``/proc/<pid>/stat`` of a process, or None if there is no such process (or no ``/proc``)."""
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces and parentheses.
    fields = raw[raw.rindex(b")") + 2:].split()
    return ProcStat(state=fields[0].decode(), pgid=int(fields[2]), start=int(fields[19]))


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists (a zombie counts; another user's process counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class ProcessRecord:
    name: str  # unique in its table: "kemu-up", "redis-server", "apiserver", "ray-raylet" ...
    pid: int
    start: int  # see ProcStat.start; 0 where /proc is missing
    pgid: int  # the process group it was in when recorded
    part: str  # the part of the cluster it belongs to, as messages name it
    log: str | None = None
    restarts: int = 0  # how often the supervisor (emulator.supervisor) started it again after it died

    @property
    def leads_group(self) -> bool:
        return self.pgid == self.pid

    def state(self) -> str:
        """``running``, ``zombie`` (exited, its parent has not reaped it yet) or ``exited``."""
        if not _PROC.is_dir():
            return "running" if pid_alive(self.pid) else "exited"
        st = proc_stat(self.pid)
        if st is None or st.start != self.start:
            return "exited"  # gone, or the pid now names another process
        return "zombie" if st.state in ("Z", "X") else "running"

    def running(self) -> bool:
        return self.state() == "running"


class StillRunning(RuntimeError):
    """A recorded process survived SIGKILL (stuck in uninterruptible sleep): its record is kept."""


@dataclass(frozen=True)
class Stopped:
    """What :meth:`ProcessTable.stop` did to one process."""

    name: str
    pid: int
    part: str
    how: str  # "SIGTERM", "SIGKILL" (did not exit in time) or "exited" (was already gone)


class ProcessTable:
    """The records of one ``KEMU_HOME`` (see the module docstring)."""

    def __init__(self, home: Path) -> None:
        self.home = home.resolve()
        self.dir = self.home / "processes"

    # -------------------------------------------------------------------------------- records

    def record(self, name: str, pid: int, *, part: str, log: Path | str | None = None,
               restarts: int | None = None) -> ProcessRecord:
        """Write the record of ``pid`` (just spawned) under ``name``, replacing an older one (whose restart
        count it keeps unless ``restarts`` is given: a part started again keeps its name)."""
        if restarts is None:
            old = self.get(name)
            restarts = old.restarts if old is not None else 0
        st = proc_stat(pid)
        if st is not None:
            start, pgid = st.start, st.pgid
        else:  # no /proc (start time unknown), or the process is already gone
            start, pgid = 0, -1
            with contextlib.suppress(ProcessLookupError):
                pgid = os.getpgid(pid)
        rec = ProcessRecord(name, pid, start, pgid, part, str(log) if log is not None else None, restarts)
        self._write(f"{name}.json", asdict(rec))
        return rec

    def count_restart(self, name: str) -> ProcessRecord | None:
        """One more restart of ``name`` (its record now names the new process)."""
        rec = self.get(name)
        if rec is None:
            return None
        rec = replace(rec, restarts=rec.restarts + 1)
        self._write(f"{name}.json", asdict(rec))
        return rec

    def get(self, name: str) -> ProcessRecord | None:
        try:
            return ProcessRecord(**json.loads((self.dir / f"{name}.json").read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def records(self) -> list[ProcessRecord]:
        """Every record, oldest first."""
        found = []
        for path in self.dir.glob("*.json"):
            try:
                mtime = path.stat().st_mtime_ns
            except OSError:
                continue  # forgotten meanwhile
            if path.name != _STARTING and (rec := self.get(path.stem)) is not None:
                found.append((mtime, rec.name, rec))
        return [rec for _mtime, _name, rec in sorted(found, key=lambda f: (f[0], f[1]))]

    def forget(self, name: str) -> None:
        (self.dir / f"{name}.json").unlink(missing_ok=True)

    def forget_exited(self) -> None:
        for rec in self.records():
            if rec.state() == "exited":
                self.forget(rec.name)

    # ---------------------------------------------------------------------------------- start

    def note_starting(self, part: str, log: Path | str | None) -> None:
        """``part`` is being started now (its log, if it has its own)."""
        self._write(_STARTING, {"part": part, "log": str(log) if log is not None else None})

    def starting(self) -> tuple[str, str | None] | None:
        """The part being started and its log, or None once the cluster is ready (or never started)."""
        try:
            data = json.loads((self.dir / _STARTING).read_text())
            return str(data["part"]), data.get("log")
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def note_ready(self) -> None:
        (self.dir / _STARTING).unlink(missing_ok=True)

    # ----------------------------------------------------------------------------------- stop

    def stop(self, names: Collection[str] | None = None, *, exclude: Collection[str] = (),
             timeout: float = 10.0) -> list[Stopped]:
        """SIGTERM the recorded processes (``names``, default all but ``exclude``), wait up to ``timeout``,
        SIGKILL what is left; forget their records. What was done to each, oldest record first."""
        recs = [r for r in self.records() if (names is None or r.name in names) and r.name not in exclude]
        done: dict[str, str] = {}
        targets: dict[str, list[tuple[int, int]]] = {}  # record name -> (pid, start) to see gone
        for rec in recs:
            procs = self._processes_of(rec)
            if not procs:
                done[rec.name] = "exited"
                continue
            targets[rec.name] = procs
            self._signal(rec, procs, signal.SIGTERM)
            done[rec.name] = "SIGTERM"
        if not self._wait_gone(targets, timeout):
            for rec in recs:
                procs = [p for p in targets.get(rec.name, []) if _same(*p)]
                if procs:
                    self._signal(rec, procs, signal.SIGKILL)
                    done[rec.name] = "SIGKILL"
            if not self._wait_gone(targets, 5.0):  # SIGKILL cannot be ignored: only a D-state straggler is left
                left = [f"{name} (pid {p})" for name, ps in targets.items() for p, s in ps if _same(p, s)]
                raise StillRunning(f"still alive after SIGKILL: {', '.join(left)}")
        for rec in recs:
            self.forget(rec.name)
        return [Stopped(r.name, r.pid, r.part, done[r.name]) for r in recs]

    def _processes_of(self, rec: ProcessRecord) -> list[tuple[int, int]]:
        """The live (pid, start) pairs the record stands for: the process, and its group's members if it
        led one."""
        procs = []
        if rec.running():
            procs.append((rec.pid, rec.start))
        if rec.leads_group:
            procs += [(pid, start) for pid, start in _group_members(rec.pgid)
                      if pid != rec.pid and (rec.running() or self._carries_home(pid))]
        return procs

    def _signal(self, rec: ProcessRecord, procs: list[tuple[int, int]], sig: signal.Signals) -> None:
        if rec.leads_group and rec.running():
            with contextlib.suppress(ProcessLookupError):  # no such group: signal the processes one by one
                os.killpg(rec.pid, sig)  # the group id is the live leader's pid: it cannot be anyone else's
                return
        for pid, start in procs:
            if _same(pid, start):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)

    def _carries_home(self, pid: int) -> bool:
        """Whether ``pid``'s environment names this table's ``KEMU_HOME`` (every child of ``kemu up`` does)."""
        try:
            env = (_PROC / str(pid) / "environ").read_bytes()
        except OSError:
            return False
        return f"KEMU_HOME={self.home}".encode() in env.split(b"\0")

    @staticmethod
    def _wait_gone(targets: dict[str, list[tuple[int, int]]], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if not any(_same(pid, start) for procs in targets.values() for pid, start in procs):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)  # other processes' exits: nothing this process can block on

    def _write(self, filename: str, data: dict[str, object]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".{filename}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data))
        tmp.replace(self.dir / filename)  # readers never see half a record


def _same(pid: int, start: int) -> bool:
    """Whether ``pid`` still names the live process that started at ``start``."""
    if not _PROC.is_dir():
        return pid_alive(pid)
    st = proc_stat(pid)
    return st is not None and st.start == start and st.state not in ("Z", "X")


def _group_members(pgid: int) -> list[tuple[int, int]]:
    """(pid, start) of the live processes in process group ``pgid``."""
    if not _PROC.is_dir():
        return []
    out = []
    for entry in os.listdir(_PROC):
        if entry.isdigit() and (st := proc_stat(int(entry))) is not None and st.pgid == pgid \
                and st.state not in ("Z", "X"):
            out.append((int(entry), st.start))
    return out


def log_tail(path: Path | str | None, lines: int = 8) -> list[str]:
    """The last ``lines`` non-empty lines of a log file (none if it is missing)."""
    if path is None:
        return []
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


# The table this process records into: set by ``kemu up`` (a process supervises at most one cluster), read
# where processes are started deep inside a runner (``actors.launcher.init_ray``'s local Ray instance).
_active: ProcessTable | None = None


def activate(table: ProcessTable | None) -> None:
    global _active
    _active = table


def active() -> ProcessTable | None:
    return _active
