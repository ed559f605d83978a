"""The drain and taint walkthroughs, end to end, as a user runs them.

A whole detached cluster (``kemu up --nodes 3 --schedulers 1``: kubelet shards
on Ray, a scheduler, the controller manager, the API server) driven only with
the real ``kubectl``. Nothing in the test stands in for a component.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import wait_for

pytestmark = pytest.mark.integration

KUBECTL = "/usr/bin/kubectl"


class Cluster:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def kubectl(self, *args: str, timeout: float = 120) -> str:
        r = subprocess.run([KUBECTL, *args], env=self.env, capture_output=True, text=True, timeout=timeout,
                           check=False)
        assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
        return r.stdout

    def pods(self) -> list[dict]:
        return json.loads(self.kubectl("get", "pods", "-l", "app=web-frontend", "-o", "json"))["items"]


def ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    env = {**os.environ, "KEMU_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    env.pop("KEMU_REDIS_URL", None)
    up = subprocess.run([sys.executable, "-m", "actors.cli", "up", "--nodes", "3", "--schedulers", "1",
                         "--api-port", "0", "--detach"], env=env, capture_output=True, text=True, timeout=180,
                        check=False)
    try:
        assert up.returncode == 0, up.stderr
        env["KUBECONFIG"] = str(tmp_path / "home" / "kubeconfig")
        c = Cluster(env)
        wait_for(lambda: c.kubectl("get", "nodes", "--no-headers").count(" Ready ") == 3, 60, "3 Ready nodes",
                 interval=0.2)
        yield c
    finally:
        subprocess.run([sys.executable, "-m", "actors.cli", "down"], env=env, capture_output=True, timeout=90,
                       check=False)


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web-frontend}
spec:
  replicas: 3
  selector: {matchLabels: {app: web-frontend}}
  template:
    metadata: {labels: {app: web-frontend}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        resources: {requests: {cpu: 100m, memory: 64Mi}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web-pdb}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web-frontend}}
"""


def test_drain_respects_the_budget_and_replacements_land_elsewhere(cluster: Cluster, tmp_path: Path) -> None:
    manifest = tmp_path / "web.yaml"
    manifest.write_text(DEPLOYMENT)
    cluster.kubectl("apply", "-f", str(manifest))
    wait_for(lambda: sum(ready(p) for p in cluster.pods()) == 3, 60, "3 ready replicas", interval=0.2)
    victim = cluster.pods()[0]["spec"]["nodeName"]
    on_victim = {p["metadata"]["name"] for p in cluster.pods() if p["spec"]["nodeName"] == victim}

    out = cluster.kubectl("drain", victim, "--ignore-daemonsets", "--timeout=90s", timeout=120)
    assert f"node/{victim} drained" in out
    for name in on_victim:
        assert f"pod/{name} evicted" in out

    wait_for(lambda: sum(ready(p) for p in cluster.pods()) == 3, 60, "3 ready replicas again", interval=0.2)
    live = [p for p in cluster.pods() if not p["metadata"].get("deletionTimestamp")]
    assert all(p["spec"]["nodeName"] != victim for p in live)
    assert json.loads(cluster.kubectl("get", "node", victim, "-o", "json"))["spec"]["unschedulable"] is True
    pdb = json.loads(cluster.kubectl("get", "pdb", "web-pdb", "-o", "json"))["status"]
    assert pdb["currentHealthy"] >= 2


def test_taints_steer_new_pods_and_removing_them_moves_nothing(cluster: Cluster, tmp_path: Path) -> None:
    manifest = tmp_path / "web.yaml"
    manifest.write_text(DEPLOYMENT.split("---", maxsplit=1)[0])
    cluster.kubectl("apply", "-f", str(manifest))
    wait_for(lambda: sum(ready(p) for p in cluster.pods()) == 3, 60, "3 ready replicas", interval=0.2)
    nodes = sorted(cluster.kubectl("get", "nodes", "-o", "name").split())
    tainted, free = nodes[:2], nodes[2].split("/")[1]
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in cluster.pods()}
    for node in tainted:
        cluster.kubectl("taint", "nodes", node.split("/")[1], "dedicated=maintenance:NoSchedule")

    cluster.kubectl("scale", "deployment", "web-frontend", "--replicas=10")
    wait_for(lambda: sum(ready(p) for p in cluster.pods()) == 10, 60, "10 ready replicas", interval=0.2)
    after = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in cluster.pods()}
    new = {name: node for name, node in after.items() if name not in before}
    assert len(new) == 7 and set(new.values()) == {free}
    assert {name: after[name] for name in before} == before  # the old pods stayed where they were

    for node in tainted:
        cluster.kubectl("taint", "nodes", node.split("/")[1], "dedicated-")
    assert not json.loads(cluster.kubectl("get", node, "-o", "json"))["spec"].get("taints")
    # Removing taints does not move anything by itself: that is the Descheduler's job.
    assert {p["metadata"]["name"]: p["spec"]["nodeName"] for p in cluster.pods()} == after
