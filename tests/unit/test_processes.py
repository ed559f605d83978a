"""Process records (emulator.processes): a record names one process incarnation, stop is TERM-wait-KILL,
a dead group leader's members are stopped only if they carry the table's KEMU_HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.processes import ProcessTable, log_tail, proc_stat
from tests.waiting import wait_for


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def _exec_done(pid: int, program: str) -> bool:
    """Whether ``pid`` runs ``program`` now (its shell has exec'd it, so its signal dispositions are set)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(program.encode())
    except OSError:
        return False


def test_record_names_one_incarnation_and_stop_terminates_it(tmp_path: Path,
                                                             spawned: list[subprocess.Popen[bytes]]) -> None:
    table = ProcessTable(tmp_path)
    proc = subprocess.Popen(["sleep", "600"])
    spawned.append(proc)
    rec = table.record("sleeper", proc.pid, part="a test part", log=tmp_path / "x.log")
    stat = proc_stat(proc.pid)
    assert stat is not None and (rec.start, rec.pgid) == (stat.start, stat.pgid)
    assert [r.name for r in table.records()] == ["sleeper"] and rec.state() == "running"

    stopped = table.stop(timeout=10)
    assert [(s.name, s.pid, s.how) for s in stopped] == [("sleeper", proc.pid, "SIGTERM")]
    assert proc.wait(10) == -15 and table.records() == []


def test_a_reused_pid_is_never_signalled(tmp_path: Path, spawned: list[subprocess.Popen[bytes]]) -> None:
    # The record says pid P started at another time: P is now someone else, who must be left alone.
    table = ProcessTable(tmp_path)
    proc = subprocess.Popen(["sleep", "600"])
    spawned.append(proc)
    rec = table.record("old", proc.pid, part="a test part")
    path = table.dir / "old.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "start": rec.start - 1}))
    assert table.get("old").state() == "exited"  # type: ignore[union-attr]

    assert [s.how for s in table.stop(timeout=1)] == ["exited"]
    assert proc.poll() is None and table.records() == []


def test_a_process_ignoring_sigterm_gets_sigkill(tmp_path: Path, spawned: list[subprocess.Popen[bytes]]) -> None:
    table = ProcessTable(tmp_path)
    # An ignored signal stays ignored across exec: the sleep ignores SIGTERM.
    proc = subprocess.Popen(["sh", "-c", "trap '' TERM; exec sleep 600"])
    spawned.append(proc)
    wait_for(lambda: _exec_done(proc.pid, "sleep"), 10, "the shell to exec sleep")
    table.record("stubborn", proc.pid, part="a test part")
    assert [s.how for s in table.stop(timeout=0.3)] == ["SIGKILL"]
    assert proc.wait(10) == -9


@pytest.mark.parametrize(("carries_home", "how", "member_survives"),
                         [(True, "SIGTERM", False), (False, "exited", True)],
                         ids=["member-of-this-cluster", "stranger"])
def test_members_of_a_dead_leaders_group(tmp_path: Path, spawned: list[subprocess.Popen[bytes]],
                                         carries_home: bool, how: str, member_survives: bool) -> None:
    # A group leader (an API server) forked a worker, then died: the worker keeps the group id, and is
    # stopped through the leader's record only if its environment names this KEMU_HOME.
    table = ProcessTable(tmp_path)
    env = {**os.environ, "KEMU_HOME": str(table.home)} if carries_home else \
        {k: v for k, v in os.environ.items() if k != "KEMU_HOME"}
    leader = subprocess.Popen([sys.executable, "-c", "import subprocess, sys\n"
                               "p = subprocess.Popen(['sleep', '600'])\nprint(p.pid, flush=True)"],
                              stdout=subprocess.PIPE, env=env, process_group=0)
    table.record("apiserver", leader.pid, part="the API server")
    assert leader.stdout is not None
    member = int(leader.stdout.readline())
    assert leader.wait(10) == 0  # reaped: only the member holds the group now
    member_stat = proc_stat(member)
    assert member_stat is not None and member_stat.pgid == leader.pid
    try:
        assert [s.how for s in table.stop(timeout=10)] == [how]
        if member_survives:
            assert proc_stat(member) is not None
        else:
            wait_for(lambda: proc_stat(member) is None, 10, "the orphaned worker to be gone")
    finally:
        if proc_stat(member) is not None:
            os.kill(member, 9)


def test_starting_marker_and_log_tail(tmp_path: Path) -> None:
    table = ProcessTable(tmp_path)
    assert table.starting() is None
    log = tmp_path / "part.log"
    log.write_text("".join(f"line {i}\n" for i in range(20)) + "\n\n")
    table.note_starting("schedulers", log)
    assert table.starting() == ("schedulers", str(log))
    assert table.records() == []  # the marker is not a record
    table.note_ready()
    assert table.starting() is None
    assert log_tail(log, 3) == ["line 17", "line 18", "line 19"]
    assert log_tail(tmp_path / "missing.log") == []
