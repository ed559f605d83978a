"""``loadgen/scenarios/chaos.yaml`` through the ``kemu`` entry point: faults under load, and nothing lost.

Kubelet shards and schedulers run as Ray actors, so their kills are real ``ray.kill`` of worker processes
that Ray restarts; redis-server and the API server get a real ``kill -9`` and kemu's supervisor restarts
them; the controller manager's leader is crashed without releasing its Lease. The run must
report every fault recovered and every end-of-run invariant holding.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_chaos_scenario_recovers_from_every_fault_and_keeps_every_invariant(tmp_path: Path) -> None:
    env = {**os.environ, "KEMU_HOME": str(tmp_path / "home")}
    env.pop("KEMU_REDIS_URL", None)
    out = tmp_path / "summary.json"
    result = subprocess.run([sys.executable, "-m", "actors.cli", "run", str(REPO / "loadgen/scenarios/chaos.yaml"),
                             "--output", str(out)], env=env, capture_output=True, text=True, timeout=400,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(out.read_text())

    chaos = summary["chaos"]
    assert [(f["kind"], f["target"]) for f in chaos["faults"]] == [
        ("kill-kubelet-shard", "0"), ("kill-scheduler", "0"), ("kill-redis", "redis-server"),
        ("partition-shard", "shard/0"), ("kill-apiserver", "apiserver"), ("kill-controller-manager", "leader"),
        ("stop-kubelet", chaos["faults"][6]["target"])]
    assert chaos["faults"][6]["target"].startswith("node/node-000")
    assert chaos["injected"] == chaos["recovered"] == 7, chaos
    assert all(f["recoverySeconds"] is not None and f["recoverySeconds"] >= 0 for f in chaos["faults"])

    invariants = summary["invariants"]
    assert invariants["holds"], invariants
    assert invariants["acknowledgedWrites"]["checked"] == 400
    assert invariants["noNodeOverCommitted"]["checked"] == 40
    assert invariants["leasesFresh"]["checked"] == 40
    # Every pod created (the scenario's 400 and the Deployment's 20) was seen once, in order, through the faults.
    assert summary["watch"] == {"received": 420, "duplicates": 0, "outOfOrder": 0, "complete": True}
    assert summary["pods"]["createFailures"] == 0 and summary["pods"]["unscheduled"] == 0
    assert "invariants    5 of 5 hold" in result.stdout
    assert "7 faults injected, 7 recovered" in result.stdout
