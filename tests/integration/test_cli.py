"""The ``kemu`` command line as a user runs it: real processes, real Redis."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture
def kemu_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "KEMU_HOME": str(tmp_path / "home")}
    env.pop("KEMU_REDIS_URL", None)
    yield env
    # Never leave a detached cluster behind, whatever the test did.
    subprocess.run([sys.executable, "-m", "emulator.cli", "down"], env=env, capture_output=True, timeout=60,
                   check=False)


def kemu(env: dict[str, str], *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emulator.cli", *args], env=env, capture_output=True, text=True,
                          check=False, timeout=timeout)


def test_detached_cluster_lifecycle(kemu_env: dict[str, str]) -> None:
    up = kemu(kemu_env, "up", "--detach")
    assert up.returncode == 0, up.stderr
    assert "kemu cluster up in the background" in up.stdout

    again = kemu(kemu_env, "up", "--detach")
    assert again.returncode == 1
    assert "already running" in again.stderr

    status = kemu(kemu_env, "status", "-o", "json")
    assert status.returncode == 0, status.stderr
    assert '"namespaces": 4' in status.stdout  # the bootstrap objects are there
    assert '"priorityclasses.scheduling.k8s.io": 2' in status.stdout

    down = kemu(kemu_env, "down")
    assert down.returncode == 0 and "stopped" in down.stdout
    after = kemu(kemu_env, "status")
    assert after.returncode == 1 and "no kemu cluster is running" in after.stdout


def test_detached_cluster_keeps_its_data_across_restarts(kemu_env: dict[str, str]) -> None:
    # No controller managers: their Lease renewals would move the resourceVersion on their own.
    assert kemu(kemu_env, "up", "--detach", "--controller-managers", "0").returncode == 0
    status = kemu(kemu_env, "status", "-o", "json")
    assert kemu(kemu_env, "down").returncode == 0
    assert kemu(kemu_env, "up", "--detach", "--controller-managers", "0").returncode == 0
    again = kemu(kemu_env, "status", "-o", "json")
    rv = lambda out: int(out.split('"resourceVersion":')[1].split(",")[0])  # noqa: E731
    assert rv(again.stdout) == rv(status.stdout)  # nothing was re-created: same objects, same version


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("redis_port: [1\n", "is not valid YAML"),
        ("no_such_key: 1\n", "unknown configuration key 'no_such_key'"),
        ("node_shards: many\n", "configuration key 'node_shards': cannot use 'many' as int"),
        ("- a list\n", "must hold a mapping"),
    ],
    ids=["not-yaml", "unknown-key", "wrong-type", "not-a-mapping"],
)
def test_bad_config_file_is_one_clear_line(kemu_env: dict[str, str], tmp_path: Path, config: str,
                                           message: str) -> None:
    path = tmp_path / "kemu.yaml"
    path.write_text(config)
    result = kemu(kemu_env, "up", "--config", str(path))
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_unreachable_redis_is_a_clear_error(kemu_env: dict[str, str], tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "kemu.yaml"
    cfg.write_text("redis_timeout: 0.5\n")
    result = kemu(kemu_env, "up", "--config", str(cfg), "--redis-url", f"redis://127.0.0.1:{port}/0")
    assert result.returncode == 1
    assert f"cannot reach Redis at redis://127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


def test_busy_redis_port_is_a_clear_error(kemu_env: dict[str, str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = kemu(kemu_env, "up", "--redis-port", str(port))
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_run_scenario_prints_summary_and_writes_json(kemu_env: dict[str, str], tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text("name: tiny\nseed: 7\ncluster: {nodes: 5}\n"
                        "workload: {namespaces: 2, pods: 300, batch: 50, cpu: [100m, 1], memory: [64Mi]}\n")
    out = tmp_path / "summary.json"
    result = kemu(kemu_env, "run", str(scenario), "--output", str(out))
    assert result.returncode == 0, result.stderr
    assert "pods created  300 of 300" in result.stdout
    assert "300 ADDED events, 0 duplicates, 0 out of order" in result.stdout
    import json

    summary = json.loads(out.read_text())
    assert summary["watch"]["complete"] is True
    assert summary["list"]["items"] == 300


def test_bad_scenario_names_the_field(kemu_env: dict[str, str], tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("name: bad\nworkload: {pods: many}\n")
    result = kemu(kemu_env, "run", str(scenario))
    assert result.returncode == 1
    assert "workload.pods: expected an integer >= 0, got 'many'" in result.stderr
