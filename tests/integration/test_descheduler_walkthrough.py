"""The taint walkthrough completed, RemoveDuplicates, and load-aware LowNodeUtilization, end to end with the
real scheduler and ``kubectl``.

An API server process, the controller manager (ReplicaSet, Deployment, disruption), the real scheduler
(default profile), a stand-in kubelet that runs what is bound and finishes graceful deletions, and then the
Descheduler in a controller manager of its own, every second on the cluster clock (the system clock here).
The user's side is ``kubectl`` only: apply, taint, cordon, get. A watch records the Ready count after every
pod event, so "the budget was never broken" is checked over the whole run, not only at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from emulator.apiserver import kubeconfig
from emulator.apiserver.process import ApiServerProcess
from emulator.apiserver.settings import ServerSettings
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.kubelet.usage import write_snapshot
from emulator.scheduler.scheduler import SchedulerOptions
from emulator.scheduler_host import HostSettings, SchedulerHost
from emulator.server.core import ServerCore
from emulator.store.store import Store
from tests import builders as b
from tests.kubelet_standin import ReadyMonitor, StandInKubelet, is_ready
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
TOKEN = "descheduler-walkthrough"


class Cluster:
    def __init__(self, core: ServerCore, env: dict[str, str], tmp_path: Path) -> None:
        self.core = core
        self.env = env
        self.tmp_path = tmp_path
        self.managers: list[ControllerManager] = []

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        r = subprocess.run([KUBECTL, *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=90,
                           check=False)
        assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stdout}{r.stderr}"
        return r.stdout

    def apply(self, *objects: dict) -> None:
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects))

    def pods(self, app: str) -> list[dict]:
        return json.loads(self.kubectl("get", "pods", "-l", f"app={app}", "-o", "json"))["items"]

    def live(self, app: str) -> list[dict]:
        return [p for p in self.pods(app) if not p["metadata"].get("deletionTimestamp")]

    def placement(self, app: str) -> Counter[str]:
        return Counter(p["spec"].get("nodeName") for p in self.live(app))

    def ready(self, app: str) -> int:
        return sum(1 for p in self.live(app) if is_ready(p))

    def start_descheduler(self, policy: dict, interval: float = 1.0) -> ControllerManager:
        m = ControllerManager(self.core, ManagerConfig(
            leader_elect=False, controllers=("descheduler",), identity="descheduler",
            options={"descheduler_policy": policy, "descheduling_interval": interval})).start()
        self.managers.append(m)
        assert m.wait_active(30)
        return m


@pytest.fixture
def cluster(redis_url: str, tmp_path: Path) -> Iterator[Cluster]:
    core = ServerCore(Store.connect(redis_url))
    core.bootstrap()
    server = ApiServerProcess(ServerSettings(redis_url=redis_url, port=0, token=TOKEN),
                              log_path=tmp_path / "apiserver.log")
    server.start()
    env = {**os.environ, "HOME": str(tmp_path),
           "KUBECONFIG": str(kubeconfig.write(tmp_path / "kubeconfig", server.url, TOKEN))}
    c = Cluster(core, env, tmp_path)
    controllers = ControllerManager(core, ManagerConfig(leader_elect=False, identity="kcm",
                                                        controllers=("replicaset", "deployment", "disruption")))
    controllers.start()
    scheduler = SchedulerHost(HostSettings(redis_url), [SchedulerOptions()])
    kubelet = StandInKubelet(core, ready_when=lambda p: bool(p["spec"].get("nodeName"))).start()
    try:
        for name in ("node-a", "node-b", "node-c"):
            node = b.sched_node(name, "4", "16Gi", labels={"kubernetes.io/hostname": name})
            node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
            c.apply(node)
        scheduler.start(sync_timeout=30)
        assert controllers.wait_active(30)
        yield c
    finally:
        for m in c.managers:
            m.stop()
        kubelet.stop()
        scheduler.stop()
        controllers.stop()
        server.stop()


def deployment(name: str, replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                         {"name": "web", "image": "nginx:1.27",
                          "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}


def budget(name: str, **spec: Any) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": f"{name}-pdb",
            "namespace": "default"}, "spec": {"selector": {"matchLabels": {"app": name}}, **spec}}


def policy(*plugins: tuple[str, str]) -> dict:
    enabled: dict[str, list[str]] = {}
    for point, plugin in plugins:
        enabled.setdefault(point, []).append(plugin)
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "profiles": [{"name": "walkthrough", "plugins": {p: {"enabled": v} for p, v in enabled.items()}}]}


def eventually(what: str, check: Callable[[], bool], timeout: float = 90) -> None:
    wait_for(check, timeout, what)


def test_tainted_node_is_emptied_and_the_pods_run_elsewhere(cluster: Cluster) -> None:
    cluster.apply(deployment("web-frontend", 3), budget("web-frontend", minAvailable=2))
    eventually("3 ready replicas", lambda: cluster.ready("web-frontend") == 3)
    monitor = ReadyMonitor(cluster.core, "app=web-frontend")
    try:
        cluster.start_descheduler(policy(("deschedule", "RemovePodsViolatingNodeTaints"),
                                         ("balance", "RemoveDuplicates")))
        victim = cluster.live("web-frontend")[0]["spec"]["nodeName"]
        on_victim = {p["metadata"]["name"] for p in cluster.live("web-frontend") if p["spec"]["nodeName"] == victim}
        cluster.kubectl("taint", "nodes", victim, "dedicated=maintenance:NoSchedule")

        eventually(f"no web-frontend pod left on {victim} and 3 ready again",
                   lambda: victim not in cluster.placement("web-frontend") and cluster.ready("web-frontend") == 3)
        assert not on_victim & {p["metadata"]["name"] for p in cluster.live("web-frontend")}

        def evicted_events() -> set[str]:
            events = json.loads(cluster.kubectl("get", "events", "-o", "json"))["items"]
            return {e["involvedObject"]["name"] for e in events if e["reason"] == "RemovePodsViolatingNodeTaints"}

        eventually("an eviction Event for each pod that was on the tainted node",
                   lambda: on_victim <= evicted_events())
        # The budget (minAvailable 2) held the whole time.
        assert monitor.min_after(3) is not None and monitor.min_after(3) >= 2
    finally:
        monitor.stop()


def test_remove_duplicates_spreads_pods_piled_on_one_node(cluster: Cluster) -> None:
    cluster.kubectl("cordon", "node-b")
    cluster.kubectl("cordon", "node-c")
    cluster.apply(deployment("piled", 6), budget("piled", maxUnavailable=1))
    eventually("6 ready replicas on node-a", lambda: cluster.ready("piled") == 6
               and cluster.placement("piled") == Counter({"node-a": 6}))
    cluster.kubectl("uncordon", "node-b")
    cluster.kubectl("uncordon", "node-c")
    monitor = ReadyMonitor(cluster.core, "app=piled")
    try:
        cluster.start_descheduler(policy(("balance", "RemoveDuplicates")))
        # upstream: upperAvg = ceil(6 / 3 target nodes) = 2, so node-a keeps 2 and 4 pods move, one
        # disruption at a time (maxUnavailable 1).
        eventually("the replicas spread two per node",
                   lambda: cluster.placement("piled") == Counter({"node-a": 2, "node-b": 2, "node-c": 2})
                   and cluster.ready("piled") == 6, timeout=120)
        assert monitor.min_after(6) is not None and monitor.min_after(6) >= 5
    finally:
        monitor.stop()


def test_load_aware_descheduling_moves_the_heaviest_pod_to_a_cool_node(cluster: Cluster) -> None:
    """LowNodeUtilization on actual usage (metrics.k8s.io, as the kubelets publish it): node-a measures 90 %
    of its 4 cpu; its heaviest pod is evicted, the ReplicaSet replaces it, and the scheduler puts the
    replacement on a node that is not node-a."""
    cluster.kubectl("cordon", "node-b")
    cluster.kubectl("cordon", "node-c")
    cluster.apply(deployment("busy", 4), budget("busy", maxUnavailable=1))
    eventually("4 ready replicas on node-a", lambda: cluster.ready("busy") == 4
               and cluster.placement("busy") == Counter({"node-a": 4}))
    cluster.kubectl("uncordon", "node-b")
    cluster.kubectl("uncordon", "node-c")
    names = sorted(p["metadata"]["name"] for p in cluster.live("busy"))
    millicores = dict(zip(names, (1600, 900, 700, 400), strict=True))  # node-a: 3.6 of 4 cpu
    store = cluster.core.store
    pipe = store.redis.pipeline()
    write_snapshot(pipe, store.config.prefix, timestamp=cluster.core.clock.now(), window=15.0,
                   nodes={"node-a": (3_600_000_000, 1 << 30), "node-b": (200_000_000, 1 << 30),
                          "node-c": (200_000_000, 1 << 30)},
                   pods={("default", n): [("web", m * 1_000_000, 64 << 20)] for n, m in millicores.items()})
    pipe.execute()
    heaviest = names[0]
    policy = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [{
        "name": "load-aware", "pluginConfig": [{"name": "LowNodeUtilization", "args": {
            "thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 60},
            "metricsUtilization": {"source": "KubernetesMetrics"}}}],
        "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}
    # One loop (the next is an hour of cluster time away): the usage written above does not follow the pods.
    manager = cluster.start_descheduler(policy, interval=3600)
    controller = manager.controllers()["descheduler"]
    eventually("the first loop", lambda: controller.descheduler.loops >= 1)
    # 90 % > 60 %: the 1.6-cpu pod goes (3.6 -> 2.0, under 2.4 = 60 % of 4): one eviction, the heaviest.
    assert [e.name for e in controller.last.evicted] == [heaviest]
    eventually("4 ready replicas again, one of them off node-a",
               lambda: cluster.ready("busy") == 4 and cluster.placement("busy")["node-a"] == 3)
    assert heaviest not in {p["metadata"]["name"] for p in cluster.live("busy")}
