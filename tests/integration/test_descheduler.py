"""The Descheduler against a real Redis: the controller in the controller manager on a ManualClock,
evictions through the eviction API with the real disruption controller keeping the budget, actual usage
from the kubelets' metrics.k8s.io snapshot, and the one-shot ``kemu deschedule`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from emulator.api.kinds import EVENT, NODE, PDB, POD, REPLICASET
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager
from emulator.descheduler.api import load_policy
from emulator.descheduler.descheduler import Descheduler, snapshot_from_store
from emulator.kubelet.usage import write_snapshot
from emulator.server.core import ServerCore
from tests import builders as b
from tests.kubelet_standin import running_ready_status
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

MAINT = b.taint("dedicated", "maintenance")
LABELS = {"app": "web"}


def taint_policy(**top: Any) -> dict:
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", **top,
            "profiles": [{"name": "default",
                          "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}}}]}


def running_pod(core: ServerCore, name: str, node: str, cpu: str = "100m", labels: dict | None = None) -> Obj:
    body = b.owned_by(b.req_pod(name, cpu, node=node), "ReplicaSet", "web-rs")
    body["metadata"]["labels"] = dict(labels or LABELS)
    pod = core.create(POD, body)
    return core.update_status(POD, {**pod, "status": running_ready_status(pod, core.clock.now())})


def nodes(core: ServerCore, *names: str, tainted: tuple[str, ...] = ()) -> None:
    for name in names:
        core.create(NODE, b.sched_node(name, "4", "16Gi", taints=[MAINT] if name in tainted else None))


def evicted(core: ServerCore) -> set[str]:
    return {p["metadata"]["name"] for p in core.list(POD, "default").items if p["metadata"].get("deletionTimestamp")}


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def manager(start_manager: Callable[..., ControllerManager]) -> Callable[..., ControllerManager]:
    """The conftest's ``start_manager`` (controllers and their options), under this module's name."""
    return start_manager


def test_taint_evictions_spend_the_budget_and_never_break_it(core: ServerCore, clock: ManualClock, manager) -> None:
    nodes(core, "n1", "n2", "n3", tainted=("n1",))
    for i in range(3):
        running_pod(core, f"web-{i}", "n1")
    core.create(PDB, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"name": "web-pdb", "namespace": "default"},
                      "spec": {"minAvailable": 2, "selector": {"matchLabels": LABELS}}})
    manager("disruption")
    wait_for(lambda: (core.get(PDB, "default", "web-pdb").get("status") or {}).get("disruptionsAllowed") == 1, 20,
             "the disruption controller to allow one disruption")
    before = sample("descheduler_pods_evicted_total", result="success", strategy="RemovePodsViolatingNodeTaints",
                    profile="default", namespace="default", node="n1")

    m = manager("descheduler", descheduler_policy=taint_policy(evictionFailureEventNotification=True),
                descheduling_interval=60)
    controller = m.controllers()["descheduler"]
    wait_for(lambda: controller.descheduler.loops >= 1, 20, "the first descheduling loop")
    # One pod may go (disruptionsAllowed 1); the eviction API answers 429 for the other two.
    assert len(evicted(core)) == 1
    victim = next(iter(evicted(core)))
    pod = core.get(POD, "default", victim)
    assert any(c["type"] == "DisruptionTarget" and c["reason"] == "EvictionByEvictionAPI"
               for c in pod["status"]["conditions"])
    assert len(controller.last.failed) == 2
    assert all("error when evicting pod (ignoring)" in msg and "disruption budget" in msg
               for _, msg in controller.last.failed)
    assert sample("descheduler_pods_evicted_total", result="success", strategy="RemovePodsViolatingNodeTaints",
                  profile="default", namespace="default", node="n1") == before + 1
    wait_for(lambda: any(e["involvedObject"]["name"] == victim for e in core.list(EVENT, "default").items
                         if e["reason"] == "RemovePodsViolatingNodeTaints"), 20, "the eviction Event")
    event = next(e for e in core.list(EVENT, "default").items if e["reason"] == "RemovePodsViolatingNodeTaints")
    assert event["message"] == "pod eviction from n1 node by sigs.k8s.io/descheduler" and event["type"] == "Normal"
    # evictionFailureEventNotification: the refused evictions are Warning events on their pods.
    wait_for(lambda: len([e for e in core.list(EVENT, "default").items if e["reason"] == "EvictionFailed"]) == 2, 20,
             "two EvictionFailed events")
    failed = [e for e in core.list(EVENT, "default").items if e["reason"] == "EvictionFailed"]
    assert all(e["type"] == "Warning" and e["message"].startswith(
        "pod eviction from n1 node by sigs.k8s.io/descheduler failed: error when evicting pod (ignoring)")
        for e in failed)

    # The kubelet finishes the deletion; the budget is spent (2 healthy, 2 desired), so the next loop,
    # one interval later on the cluster clock, evicts nothing.
    core.delete(POD, "default", victim, grace_period_seconds=0)
    wait_for(lambda: (core.get(PDB, "default", "web-pdb").get("status") or {}).get("currentHealthy") == 2, 20,
             "the budget to see two healthy pods")
    clock.advance(60)
    wait_for(lambda: controller.descheduler.loops >= 2, 20, "the second loop, one interval later")
    assert evicted(core) == set() and len(core.list(POD, "default").items) == 2
    assert len(controller.last.failed) == 2


def test_limits_hold_through_the_real_eviction_api(core: ServerCore, clock: ManualClock) -> None:
    nodes(core, "n1", "n2", "n3", tainted=("n1", "n2"))
    for i in range(4):
        running_pod(core, f"a-{i}", "n1")
        running_pod(core, f"b-{i}", "n2")
    d = Descheduler(load_policy(taint_policy(maxNoOfPodsToEvictPerNode=3, maxNoOfPodsToEvictTotal=5)), clock,
                    core=core)
    result = d.run_once(snapshot_from_store(core, clock))
    assert [e.node for e in result.evicted] == ["n1"] * 3 + ["n2"] * 2
    assert len(evicted(core)) == 5
    # A new loop starts its counters afresh; pods already being deleted are not evictable again.
    result = d.run_once(snapshot_from_store(core, clock))
    assert [e.node for e in result.evicted] == ["n1", "n2", "n2"]


def test_load_aware_low_node_utilization_reads_metrics_k8s_io(core: ServerCore, clock: ManualClock) -> None:
    nodes(core, "hot", "cool", "idle")
    for i in range(4):
        running_pod(core, f"hot-{i}", "hot", cpu="100m")
        running_pod(core, f"cool-{i}", "cool", cpu="100m")
    per_pod = {"hot-0": 400, "hot-1": 1600, "hot-2": 900, "hot-3": 700}  # millicores
    store = core.store
    pipe = store.redis.pipeline()
    write_snapshot(pipe, store.config.prefix, timestamp=clock.now(), window=15.0,
                   nodes={"hot": (3_600_000_000, 1 << 30), "cool": (400_000_000, 1 << 30), "idle": (0, 1 << 30)},
                   pods={("default", name): [("app", per_pod.get(name, 100) * 1_000_000, 1 << 20)]
                         for name in [f"hot-{i}" for i in range(4)] + [f"cool-{i}" for i in range(4)]})
    pipe.execute()
    policy = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [{
        "name": "load-aware", "pluginConfig": [{"name": "LowNodeUtilization", "args": {
            "thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 60},
            "metricsUtilization": {"source": "KubernetesMetrics"}}}],
        "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}
    result = Descheduler(load_policy(policy), clock, core=core).run_once(snapshot_from_store(core, clock))
    # hot measures 3.6 of 4 cpu (90 % > 60): the 1.6-cpu pod goes first and brings it to 2.0 (< 2.4): done.
    assert [e.name for e in result.evicted] == ["hot-1"] and evicted(core) == {"hot-1"}


def run_cli(redis_url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KEMU_HOME": str(tmp_path / "home"), "PYTHONPATH": os.getcwd()}
    env.pop("KEMU_REDIS_URL", None)
    return subprocess.run([sys.executable, "-m", "emulator.cli", "deschedule", "--redis-url", redis_url, *args],
                          capture_output=True, text=True, timeout=60, env=env, check=False)


def test_kemu_deschedule_once_with_and_without_dry_run(core: ServerCore, redis_url: str, tmp_path: Path) -> None:
    nodes(core, "n1", "n2", tainted=("n1",))
    running_pod(core, "web-0", "n1")
    running_pod(core, "web-1", "n2")
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump(taint_policy()))

    dry = run_cli(redis_url, tmp_path, "--policy", str(policy_file), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "pod/web-0 evicted (RemovePodsViolatingNodeTaints, node n1) (dry run)" in dry.stdout
    assert evicted(core) == set()

    real = run_cli(redis_url, tmp_path, "--policy", str(policy_file))
    assert real.returncode == 0, real.stderr
    assert "pod/web-0 evicted (RemovePodsViolatingNodeTaints, node n1)" in real.stdout
    assert evicted(core) == {"web-0"}

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"profiles": [{"name": "p", "plugins": {"balance": {"enabled": ["Nope"]}}}]}))
    out = run_cli(redis_url, tmp_path, "--policy", str(bad))
    assert out.returncode == 1
    assert "profiles[0].plugins.balance.enabled[0]: Not found" in out.stderr


def test_kemu_up_with_a_descheduler_policy_runs_the_controller(tmp_path: Path) -> None:
    """``kemu up --detach --descheduler-policy FILE``: the detached cluster's controller manager deschedules;
    ``kemu deschedule`` finds that cluster by itself.

    The pod is a real ReplicaSet's, placed by the cluster's scheduler: the detached cluster runs every
    controller, and its garbage collector deletes a pod whose owner does not exist.
    """
    from emulator.store.store import Store

    env = {**os.environ, "KEMU_HOME": str(tmp_path / "home"), "PYTHONPATH": os.getcwd()}
    env.pop("KEMU_REDIS_URL", None)
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump(taint_policy()))

    def kemu(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "emulator.cli", *args], env=env, capture_output=True, text=True,
                              timeout=120, check=False)

    up = kemu("up", "--detach", "--api-port", "0", "--schedulers", "1", "--descheduler-policy", str(policy_file),
              "--descheduling-interval", "1")
    try:
        assert up.returncode == 0, up.stderr
        state = json.loads((tmp_path / "home" / "cluster.json").read_text())  # what `kemu status` reads
        core = ServerCore(Store.connect(state["redis_url"]))
        nodes(core, "n1", "n2", tainted=("n1",))
        rs = b.replica_set("web-rs", LABELS)
        rs["spec"]["replicas"] = 1
        core.create(REPLICASET, rs)
        pod = wait_for(lambda: next((p["metadata"]["name"] for p in core.list(POD, "default").items
                                     if p["spec"].get("nodeName")), None), 60, "the scheduler to place web-rs's pod")
        dry = kemu("deschedule", "--policy", str(policy_file), "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "0 pods evicted (dry run) over 2 nodes" in dry.stdout
        n2 = core.get(NODE, None, "n2")
        core.update(NODE, {**n2, "spec": {**n2["spec"], "taints": [MAINT]}})
        wait_for(lambda: evicted(core) == {pod}, 60, f"the detached cluster's descheduler to evict {pod}")
    finally:
        down = kemu("down")
        assert down.returncode == 0, down.stderr
