"""The ``kemu`` command line as a user runs it: real processes, real Redis."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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


def kemu(env: dict[str, str], *args: str, timeout: float = 90,
         module: str = "emulator.cli") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], env=env, capture_output=True, text=True,
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
    # Through the `kemu` entry point (actors.cli): kubelet shards and the scheduler run as Ray actors.
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text("name: tiny\nseed: 7\n"
                        "cluster: {nodes: 20, node_cpu: '8', node_memory: 32Gi, kubelet_shards: 1}\n"
                        "schedulers: {count: 1}\n"
                        "driver: {batch: 50}\nnamespaces: 2\nsettle_timeout: 30\n"
                        "priorities: [{name: hi, value: 100, weight: 1}, {name: lo, value: 0}]\n"
                        "templates: {default: {cpu: [100m, 500m], memory: [64Mi, 256Mi], profile: [default, web]}}\n"
                        "phases: [{pods: {count: 200, rate: 400, arrival: poisson}}]\n")
    out = tmp_path / "summary.json"
    result = kemu(kemu_env, "run", str(scenario), "--output", str(out), module="actors.cli")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "200 of 200 created" in result.stdout
    assert "scheduled 200, running 200, pending 0" in result.stdout
    assert "200 ADDED, 0 duplicates, 0 out of order" in result.stdout
    assert "result        OK" in result.stdout

    summary = json.loads(out.read_text())
    assert summary["ok"] is True and summary["watch"]["complete"] is True
    assert summary["cluster"]["nodesReady"] == 20 and summary["cluster"]["kubeletShards"] == 1
    pods = summary["pods"]
    assert (pods["created"], pods["scheduled"], pods["running"], pods["unscheduled"]) == (200, 200, 200, 0)
    assert summary["scheduling"]["podsPerSecond"] > 0
    for q in ("p50", "p90", "p99"):
        assert math.isfinite(summary["scheduling"]["sliLatencyMs"][q])
    assert 0 < summary["podStartupMs"]["p50"] <= summary["podStartupMs"]["p99"]
    assert [s["scheduled"] for s in summary["schedulers"]] == [200]
    assert summary["list"]["items"] == 200


def test_run_without_nodes_passes_only_if_pending_pods_are_expected(kemu_env: dict[str, str],
                                                                    tmp_path: Path) -> None:
    # No nodes: no kubelets, no schedulers (and no Ray); every pod stays Pending.
    expected = tmp_path / "expected.yaml"
    expected.write_text("name: pending\ncluster: {nodes: 0}\ndriver: {batch: 10}\nexpect_pending: 40\n"
                        "phases: [{pods: {count: 40}}]\n")
    ok = kemu(kemu_env, "run", str(expected), "--output", str(tmp_path / "ok.json"), module="loadgen.cli")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "scheduled 0, running 0, pending 40" in ok.stdout

    unexpected = tmp_path / "unexpected.yaml"
    unexpected.write_text("name: pending\ncluster: {nodes: 0}\ndriver: {batch: 10}\nphases: [{pods: {count: 40}}]\n")
    bad = kemu(kemu_env, "run", str(unexpected), "--output", str(tmp_path / "bad.json"), module="loadgen.cli")
    assert bad.returncode == 2
    assert "NOT OK (40 unscheduled" in bad.stdout


def test_http_driver_from_several_processes_creates_and_deletes_in_order(kemu_env: dict[str, str],
                                                                         tmp_path: Path) -> None:
    # The HTTP API as any client, from two driver processes; every pod created once, the churned ones
    # deleted (after their create: a pod's actions go to one process), the rest left Pending (no nodes).
    scenario = tmp_path / "http.yaml"
    scenario.write_text("name: http\ncluster: {nodes: 0}\nnamespaces: 3\n"
                        "driver: {kind: http, processes: 2, batch: 20, concurrency: 4}\n"
                        "phases: [{name: ramp, pods: {count: 120, rate: 400}},\n"
                        "         {name: churn, churn: {rate: 100, duration: 0.2}},\n"
                        "         {name: dep, deployments: {count: 1, replicas: 3, scale_to: 5, scale_after: 0.1}}]\n"
                        "expect_pending: 105\n")
    out = tmp_path / "summary.json"
    result = kemu(kemu_env, "run", str(scenario), "--output", str(out), module="loadgen.cli")
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(out.read_text())
    assert summary["driver"] == {"kind": "http", "processes": 2, "batch": 20, "maxBacklog": 2000}
    assert summary["actions"] == {"create-deployment": {"done": 1, "failed": 0},
                                  "create-pod": {"done": 120, "failed": 0},
                                  "delete-pod": {"done": 20, "failed": 0},
                                  "scale-deployment": {"done": 1, "failed": 0}}
    # 120 - 20 deleted (unbound pods go at once) + the Deployment's 5 replicas.
    assert summary["pods"]["live"] == 105 and summary["watch"]["complete"]
    assert (tmp_path / "report.html").exists()


def test_run_attaches_to_a_running_cluster(kemu_env: dict[str, str], tmp_path: Path) -> None:
    assert kemu(kemu_env, "up", "--detach", "--controller-managers", "0").returncode == 0
    state = json.loads((Path(kemu_env["KEMU_HOME"]) / "cluster.json").read_text())
    scenario = tmp_path / "attach.yaml"
    scenario.write_text("name: attach\ncontrollers: false\nexpect_pending: 30\nphases: [{pods: {count: 30}}]\n")
    out = tmp_path / "summary.json"
    result = kemu(kemu_env, "run", str(scenario), "--attach", "--redis-url", state["redis_url"], "--output", str(out),
                  module="loadgen.cli")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "on an attached cluster" in result.stdout
    status = kemu(kemu_env, "status", "-o", "json")
    assert '"pods": 30' in status.stdout  # the pods are in the running cluster, not a private one

    missing = kemu(kemu_env, "run", str(scenario), "--attach", module="loadgen.cli")
    assert missing.returncode == 1 and "--redis-url" in missing.stderr


def test_bad_scenario_names_the_field(kemu_env: dict[str, str], tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("name: bad\nphases: [{pods: {count: many}}]\n")
    result = kemu(kemu_env, "run", str(scenario), module="loadgen.cli")
    assert result.returncode == 1
    assert "phases[0].pods.count: expected an integer >= 0, got 'many'" in result.stderr


def run_edited_scenario(env: dict[str, str], tmp_path: Path, name: str, edit: Callable[[dict[str, Any]], None]
                        ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``kemu run`` (the `kemu` entry point: kubelet shards as Ray actors) of loadgen/scenarios/``name`` as
    ``edit`` changes it; the summary's path and the finished process, which must have passed."""
    import yaml

    repo = Path(__file__).resolve().parents[2]
    data = yaml.safe_load((repo / "loadgen/scenarios" / name).read_text())
    edit(data)
    scenario = tmp_path / name
    scenario.write_text(yaml.safe_dump(data))
    out = tmp_path / "summary.json"
    result = kemu(env, "run", str(scenario), "--output", str(out), module="actors.cli", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return out, result


def test_run_autoscaling_scenario_reports_replicas_vs_load(kemu_env: dict[str, str], tmp_path: Path) -> None:
    # loadgen/scenarios/autoscaling.yaml with its load phases cut to 40 s (20 s before each step). Through the
    # `kemu` entry point: the HPAs need pods that run, and kubelet shards run as Ray actors.
    def cut(data: dict[str, Any]) -> None:
        for phase in data["phases"]:
            phase["load"].update(duration=40, period=20)

    out, result = run_edited_scenario(kemu_env, tmp_path, "autoscaling.yaml", cut)
    assert "autoscaling   autoscaling/web-rps → Deployment/web-rps (Pods)" in result.stdout
    assert "autoscaling   autoscaling/api → Deployment/api (VPA Auto)" in result.stdout

    section = json.loads(out.read_text())["autoscaling"]
    hpas, vpas = section["hpas"], section["vpas"]
    assert sorted(hpas) == ["autoscaling/web-cpu", "autoscaling/web-rps", "autoscaling/worker"]
    for key, hpa in hpas.items():
        series = hpa["series"]
        assert {len(v) for v in series.values()} == {hpa["samples"]} and hpa["samples"] >= 20, key
        # The load is known from the load phases' first point on (a sample may come before it).
        known = [x is not None for x in series["load"]]
        assert known[-1] and known.index(True) <= 2 and all(known[known.index(True):]), key
        assert series["clusterTime"][-1] > series["time"][-1]  # clock speed 10
    assert hpas["autoscaling/web-rps"]["loadTarget"] == "rps-web"
    assert hpas["autoscaling/worker"]["loadTarget"] == "queue jobs"
    # Upstream's formula at the high step: ceil(1000 / 100) pods for the custom metric, ceil(200 / 20) workers.
    for key, (load, per_pod) in {"autoscaling/web-rps": (1000, 100), "autoscaling/worker": (200, 20)}.items():
        assert hpas[key]["load"]["max"] == load
        assert hpas[key]["replicas"]["max"] == min(math.ceil(load / per_pod), hpas[key]["maxReplicas"]), key
    assert vpas["autoscaling/api"]["recommended"] is True and vpas["autoscaling/api"]["mode"] == "Auto"
    html = (tmp_path / "report.html").read_text()
    assert "Replicas vs load over time" in html


def test_run_keda_queue_scenario_drains_the_lists(kemu_env: dict[str, str], tmp_path: Path) -> None:
    # loadgen/scenarios/keda-queue.yaml with its first orders burst and the reports batch only: the orders
    # workers go 0 -> N -> 0 (KEDA's cooldown), the ScaledJob's Jobs drain `reports`, and nothing is left.
    def cut(data: dict[str, Any]) -> None:
        data["phases"] = [p for p in data["phases"] if p["name"] in ("orders-burst-1", "reports-batch")]

    out, result = run_edited_scenario(kemu_env, tmp_path, "keda-queue.yaml", cut)
    assert "keda          keda-queue/orders → Deployment/orders-worker (lists orders)" in result.stdout

    section = json.loads(out.read_text())["keda"]
    assert section["drained"] is True
    queues = section["queues"]
    assert queues["orders"]["pushed"] > 0 and queues["reports"]["pushed"] == 60 * 4  # 60 items/s, 4 points
    for name, q in queues.items():  # every item consumed exactly once by the queue workers
        assert q["consumed"] == q["pushed"] and q["left"] == 0, name
    orders = section["scaledObjects"]["keda-queue/orders"]
    assert orders["activations"] >= 1 and orders["replicas"]["final"] == 0
    # KEDA's 0 -> 1, then the HPA's ceil(depth / listLength 20), bounded by maxReplicaCount 10 (the depth the
    # HPA read between two samples may be higher than any sample: no tighter bound from the series).
    assert 1 <= orders["replicas"]["max"] <= 10
    first = orders["scaleFromZero"]["episodes"][0]
    assert first["pushedAt"] < first["readyAt"] and first["clusterSeconds"] > 0
    assert section["scaledObjects"]["keda-queue/emails"]["activations"] == 0  # nothing pushed onto emails
    reports = section["scaledJobs"]["keda-queue/reports"]
    # Each Job's pod consumes at most 2 items/s for 20 s: 40 items, so at least ceil(pushed / 40) Jobs ran.
    assert reports["jobsCreated"] >= math.ceil(queues["reports"]["pushed"] / 40)
    html = (tmp_path / "report.html").read_text()
    assert "Queue depth vs replicas over time (KEDA)" in html
