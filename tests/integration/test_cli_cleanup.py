"""No process outlives its cluster: every failure path of ``kemu up`` stops what it started, and ``kemu down``
stops what is recorded even when ``kemu up`` itself was killed.

After each path, no process whose environment carries the test's KEMU_HOME is alive and the API port is
free. A part that never becomes ready is made deterministic with ``KEMU_TEST_HANG_PART`` (the start holds
before that part until a signal ends it)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.cluster import TEST_HANG_ENV
from emulator.processes import ProcessTable
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def kemu_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "KEMU_HOME": str((tmp_path / "home").resolve())}
    env.pop("KEMU_REDIS_URL", None)
    env.pop(TEST_HANG_ENV, None)
    yield env
    subprocess.run([sys.executable, "-m", "emulator.cli", "down"], env=env, capture_output=True, timeout=60,
                   check=False)


@pytest.fixture
def api_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kemu(env: dict[str, str], *args: str, module: str = "emulator.cli",
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], env=env, capture_output=True, text=True,
                          check=False, timeout=timeout)


def spawn(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    # A session of its own, as a terminal gives a command: killpg reaches it as Ctrl-C would.
    return subprocess.Popen([sys.executable, "-m", "emulator.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def processes_of(home: str) -> list[str]:
    """``pid command`` of every live process whose environment carries ``KEMU_HOME=home``."""
    needle = f"KEMU_HOME={home}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if needle in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append(f"{entry} {command}")
        except OSError:
            continue  # gone meanwhile, or a zombie
    return found


def port_free(port: int) -> bool:
    """Whether a server can listen on ``port`` again, as the next ``kemu up`` would (SO_REUSEADDR, like every
    server: the closed connections of the last one may linger in TIME_WAIT)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            return False
        return True


def assert_nothing_left(env: dict[str, str], port: int) -> None:
    # Nothing to wait for when the cleanup is right: the deadline only keeps a wrong one from hanging.
    wait_for(lambda: not processes_of(env["KEMU_HOME"]), 20, "every process of the cluster to be gone")
    assert port_free(port)


def starting(env: dict[str, str]) -> str | None:
    now = ProcessTable(Path(env["KEMU_HOME"])).starting()
    return now[0] if now else None


def test_readiness_timeout_stops_every_part_and_names_the_one_not_ready(kemu_env: dict[str, str],
                                                                       api_port: int) -> None:
    env = {**kemu_env, TEST_HANG_ENV: "schedulers"}  # the schedulers never get ready, however long the wait
    up = kemu(env, "up", "--detach", "--timeout", "5", "--api-port", str(api_port), "--schedulers", "1")
    assert up.returncode == 1
    # Which part was still starting after 5 s depends on the machine's load (usually the schedulers): the
    # message names the one `kemu up` itself says it was starting when it was stopped.
    named = re.search(r"the cluster was not ready after 5 s: (.+) (?:was|were) not ready \(stopped every part",
                      up.stderr)
    assert named, up.stderr
    log = (Path(kemu_env["KEMU_HOME"]) / "cluster.log").read_text()
    assert f"kemu: interrupted (SIGTERM) while {named.group(1)} w" in log, log
    assert "last lines of" in up.stderr and "Traceback" not in up.stderr
    assert_nothing_left(kemu_env, api_port)


def test_a_part_exiting_during_start_stops_the_others(kemu_env: dict[str, str], api_port: int) -> None:
    env = {**kemu_env, TEST_HANG_ENV: "schedulers"}
    up = spawn(env, "up", "--detach", "--api-port", str(api_port), "--schedulers", "1")
    table = ProcessTable(Path(kemu_env["KEMU_HOME"]))
    wait_for(lambda: starting(kemu_env) == "schedulers", 60, "the start to reach the schedulers")
    api = table.get("apiserver")
    assert api is not None and api.running()
    os.kill(api.pid, signal.SIGKILL)
    _out, err = up.communicate(timeout=60)
    assert up.returncode == 1
    assert f"the API server (pid {api.pid}) exited with code -9 while the schedulers were starting" in err, err
    assert "Traceback" not in err
    assert_nothing_left(kemu_env, api_port)


def test_ctrl_c_during_start_stops_every_part(kemu_env: dict[str, str], api_port: int) -> None:
    env = {**kemu_env, TEST_HANG_ENV: "schedulers"}
    up = spawn(env, "up", "--api-port", str(api_port), "--schedulers", "1")  # in the foreground
    wait_for(lambda: starting(kemu_env) == "schedulers", 60, "the start to reach the schedulers")
    os.killpg(up.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    _out, err = up.communicate(timeout=60)
    assert up.returncode == 128 + signal.SIGINT
    assert "interrupted (SIGINT) while the schedulers were starting" in err, err
    assert "Traceback" not in err
    assert_nothing_left(kemu_env, api_port)


def test_a_config_error_found_late_stops_the_parts_already_up(kemu_env: dict[str, str], api_port: int) -> None:
    # Nodes need the kubelet runner only the `kemu` entry point brings: found after Redis, the controllers
    # and the API server are up.
    up = kemu(kemu_env, "up", "--api-port", str(api_port), "--nodes", "2")
    assert up.returncode == 1
    assert "kemu: error: the kubelet shards did not start: kubelet shards run as Ray actors" in up.stderr
    assert "Traceback" not in up.stderr
    assert (Path(kemu_env["KEMU_HOME"]) / "apiserver.log").exists()  # the API server had been started
    assert_nothing_left(kemu_env, api_port)


def test_down_after_kill_9_of_kemu_up_stops_what_it_left(kemu_env: dict[str, str], api_port: int) -> None:
    # Through the `kemu` entry point: a local Ray instance with one kubelet shard that has no nodes
    # (ready once started and synced), so Ray's processes are recorded and stopped too.
    up = kemu(kemu_env, "up", "--detach", "--api-port", str(api_port), "--nodes", "0", "--kubelet-shards", "1",
              "--controller-managers", "0", module="actors.cli")
    assert up.returncode == 0, up.stderr
    table = ProcessTable(Path(kemu_env["KEMU_HOME"]))
    names = {r.name for r in table.records()}
    assert {"kemu-up", "redis-server", "apiserver", "ray-raylet", "ray-gcs_server"} <= names, names
    supervisor = table.get("kemu-up")
    assert supervisor is not None
    os.kill(supervisor.pid, signal.SIGKILL)
    wait_for(lambda: supervisor.state() == "exited", 20, "kemu up to be gone")

    status = kemu(kemu_env, "status")
    assert status.returncode == 1 and "no kemu cluster is running" in status.stdout
    lines = {line.split()[0]: line.split() for line in status.stdout.splitlines()[1:] if " pid " in line}
    assert lines["kemu-up"][3] == "exited" and lines["apiserver"][3] == "running", status.stdout

    down = kemu(kemu_env, "down")
    assert down.returncode == 0, down.stderr
    assert "stopped apiserver (pid" in down.stdout, down.stdout
    assert_nothing_left(kemu_env, api_port)
    assert table.records() == []
    assert kemu(kemu_env, "down").stdout.strip() == "no kemu cluster is running"
