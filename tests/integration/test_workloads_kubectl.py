"""Services, Secrets, StatefulSets, Jobs and CronJobs as kubectl and the official Python client see them.

An API server process serves kubectl and the ``kubernetes`` client; the controllers run in
the test process on a manual cluster clock. Where pods must really run to completion (a
Job's), a kubelet shard runs them on the same clock with kemu's behaviour profiles, and
the test binds pending pods itself (it plays the scheduler).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from emulator.api.kinds import JOB, NODE, POD
from emulator.apiserver import kubeconfig
from emulator.apiserver.process import ApiServerProcess
from emulator.apiserver.settings import ServerSettings
from emulator.clock import ManualClock, parse_rfc3339
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.kubelet.profiles import ProfileLibrary
from emulator.kubelet.shard import KubeletShard, kubelet_shard_config
from emulator.server.core import ServerCore
from emulator.server.services import kubernetes_service_ip
from emulator.store.store import Store
from tests.kubelet_standin import StandInKubelet, is_ready
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
TOKEN = "workloads-test-token"
MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"
CONTROLLERS = ("replicaset", "deployment", "job", "cronjob", "statefulset", "endpointslice", "endpoints",
               "garbagecollector")


@dataclass
class Cluster:
    core: ServerCore
    clock: ManualClock
    env: dict[str, str]
    url: str
    api: k8s.ApiClient


@pytest.fixture
def cluster(redis_url: str, tmp_path: Path) -> Iterator[Cluster]:
    clock = ManualClock(time.time())
    core = ServerCore(Store.connect(redis_url), clock=clock)
    core.bootstrap()
    server = ApiServerProcess(ServerSettings(redis_url=redis_url, port=0, token=TOKEN),
                              log_path=tmp_path / "apiserver.log")
    server.start()
    manager = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=CONTROLLERS), clock=clock)
    manager.start()
    path = kubeconfig.write(tmp_path / "kubeconfig", server.url, TOKEN)
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(path)}
    api = k8s_config.new_client_from_config(str(path))
    try:
        assert manager.wait_active(30)
        yield Cluster(core, clock, env, server.url, api)
    finally:
        api.close()
        manager.stop()
        server.stop()


def kubectl(c: Cluster, *args: str, stdin: str | None = None) -> str:
    r = subprocess.run([KUBECTL, *args], env=c.env, input=stdin, capture_output=True, text=True, timeout=90,
                       check=False)
    assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stdout}{r.stderr}"
    return r.stdout


def rows(output: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in output.strip().splitlines()]


def test_cluster_info_and_the_kubernetes_service(cluster: Cluster) -> None:
    out = kubectl(cluster, "cluster-info")
    assert f"Kubernetes control plane is running at {cluster.url}" in out
    svc = rows(kubectl(cluster, "get", "service", "kubernetes"))
    assert svc[0] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert svc[1][:5] == ["kubernetes", "ClusterIP", kubernetes_service_ip(), "<none>", "443/TCP"]
    port = cluster.url.rsplit(":", 1)[1]
    (slice_,) = k8s.DiscoveryV1Api(cluster.api).list_namespaced_endpoint_slice(
        "default", label_selector="kubernetes.io/service-name=kubernetes").items
    assert slice_.endpoints[0].addresses == ["127.0.0.1"] and slice_.ports[0].port == int(port)
    assert rows(kubectl(cluster, "get", "endpoints", "kubernetes"))[1][1] == f"127.0.0.1:{port}"


def test_typed_creates_and_their_tables(cluster: Cluster) -> None:
    """kubectl's typed creates send protobuf; the objects must come back whole, and print as upstream."""
    kubectl(cluster, "create", "secret", "generic", "creds", "--from-literal=user=admin", "--from-literal=pw=x")
    kubectl(cluster, "create", "serviceaccount", "robot")
    kubectl(cluster, "create", "service", "nodeport", "edge", "--tcp=80:8080")
    kubectl(cluster, "create", "deployment", "web", "--image=nginx:1.27", "--replicas=2")
    kubectl(cluster, "expose", "deployment", "web", "--port=80", "--target-port=8080")
    kubectl(cluster, "create", "cronjob", "nightly", "--image=busybox:1.36", "--schedule=0 3 * * *", "--", "true")
    v1 = k8s.CoreV1Api(cluster.api)
    assert v1.read_namespaced_secret("creds", "default").data == {"user": "YWRtaW4=", "pw": "eA=="}
    web = v1.read_namespaced_service("web", "default")
    assert web.spec.selector == {"app": "web"} and web.spec.ports[0].target_port == 8080
    edge = v1.read_namespaced_service("edge", "default")
    node_port = edge.spec.ports[0].node_port
    assert 30000 <= node_port <= 32767
    assert rows(kubectl(cluster, "get", "secret", "creds"))[1][:3] == ["creds", "Opaque", "2"]
    assert rows(kubectl(cluster, "get", "sa", "robot"))[0] == ["NAME", "SECRETS", "AGE"]
    assert rows(kubectl(cluster, "get", "svc", "edge"))[1][4] == f"80:{node_port}/TCP"
    cron = rows(kubectl(cluster, "get", "cj", "nightly"))
    assert cron[0] == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"]
    assert cron[1][:6] == ["nightly", "0 3 * * *", "<none>", "False", "0", "<none>"]


THREE_OBJECTS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data: {LOG_LEVEL: info}
---
apiVersion: v1
kind: Secret
metadata: {name: app-secret}
type: Opaque
stringData: {DB_PASSWORD: s3cret}
---
apiVersion: v1
kind: Service
metadata: {name: app}
spec:
  selector: {app: app}
  ports: [{name: http, port: 80, targetPort: http}]
"""


def test_a_file_with_a_config_map_a_secret_and_a_service_creates(cluster: Cluster) -> None:
    out = kubectl(cluster, "create", "-f", "-", stdin=THREE_OBJECTS)
    assert out.split("\n")[:3] == ["configmap/app-config created", "secret/app-secret created", "service/app created"]
    password = kubectl(cluster, "get", "secret", "app-secret", "-o", "jsonpath={.data.DB_PASSWORD}")
    assert base64.b64decode(password) == b"s3cret"  # stringData was written into data
    svc = k8s.CoreV1Api(cluster.api).read_namespaced_service("app", "default")
    assert svc.spec.ports[0].target_port == "http" and svc.spec.cluster_ip != "None"


def test_kubectl_create_job_completes_with_the_default_profile(cluster: Cluster, tmp_path: Path) -> None:
    """No annotation: the Job's pod follows the ``batch`` profile, runs for its seeded duration and exits 0."""
    core, clock = cluster.core, cluster.clock
    shard = KubeletShard(core, 0, 1, kubelet_shard_config({}, [{"name": "pool", "count": 1}]), clock)
    shard.start(timeout=30)
    try:
        assert shard.sync(10)
        shard.tick()  # registers the pool's node
        (node,) = shard.nodes()
        kubectl(cluster, "create", "job", "hello", "--image=busybox:1.36", "--", "sh", "-c", "echo hi")
        waited = 0.0

        def finished() -> bool:
            nonlocal waited
            for pod in core.list(POD, "default").items:
                if not pod["spec"].get("nodeName"):
                    core.bind("default", pod["metadata"]["name"], node)  # the test plays the scheduler
            assert shard.sync(10)
            clock.advance(5)
            waited += 5
            shard.tick()
            assert waited < 600, "the job did not finish within 10 cluster minutes"
            return any(c["type"] == "Complete" and c["status"] == "True"
                       for c in (core.get(JOB, "default", "hello").get("status") or {}).get("conditions") or [])
        wait_for(finished, 120, "job hello Complete")
        kubectl(cluster, "wait", "--for=condition=complete", "job/hello", "--timeout=30s")
        table = rows(kubectl(cluster, "get", "jobs"))
        assert table[0] == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
        assert table[1][:3] == ["hello", "Complete", "1/1"]
        (pod,) = core.list(POD, "default", label_selector="job-name=hello").items
        assert pod["status"]["phase"] == "Succeeded"
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert terminated["exitCode"] == 0
        ran = parse_rfc3339(terminated["finishedAt"]) - parse_rfc3339(terminated["startedAt"])
        behaviour = ProfileLibrary.load().resolve(pod, seed=shard.config.model.seed)
        assert behaviour.profile == "batch"
        # The profile's own duration (batch.yaml: uniform(1m, 5m)), to the 5 s tick the test steps in.
        assert abs(ran - behaviour.containers[0].duration) <= 5 + 1
        assert 60 <= behaviour.containers[0].duration <= 300
    finally:
        shard.stop()


def test_stateful_set_through_the_python_client(cluster: Cluster) -> None:
    core = cluster.core
    kubelet = StandInKubelet(core, nodes=1)
    apps = k8s.AppsV1Api(cluster.api)
    body = k8s.V1StatefulSet(
        metadata=k8s.V1ObjectMeta(name="db"),
        spec=k8s.V1StatefulSetSpec(
            service_name="db", replicas=3, selector=k8s.V1LabelSelector(match_labels={"app": "db"}),
            template=k8s.V1PodTemplateSpec(metadata=k8s.V1ObjectMeta(labels={"app": "db"}), spec=k8s.V1PodSpec(
                containers=[k8s.V1Container(name="db", image="postgres:16")]))))
    apps.create_namespaced_stateful_set("default", body)
    created: list[str] = []
    for n in range(3):
        wait_for(lambda n=n: f"db-{n}" in {p["metadata"]["name"] for p in core.list(POD, "default").items}, 20,
                 f"db-{n}")
        names = sorted(p["metadata"]["name"] for p in core.list(POD, "default").items)
        assert names == [f"db-{i}" for i in range(n + 1)]
        created.append(names[-1])
        kubelet.step()
        wait_for(lambda n=n: is_ready(core.get(POD, "default", f"db-{n}")), 10, f"db-{n} ready")
    sts = wait_for(lambda: (s := apps.read_namespaced_stateful_set("db", "default")).status.ready_replicas == 3 and s,
                   20, "three ready replicas")
    assert created == ["db-0", "db-1", "db-2"] and sts.status.current_revision == sts.status.update_revision
    out = kubectl(cluster, "rollout", "status", "statefulset/db", "--timeout=30s")
    assert "partitioned roll out complete" in out or "roll out complete" in out
    assert rows(kubectl(cluster, "get", "sts", "db"))[1][:2] == ["db", "3/3"]
    assert core.list(NODE).items

    # A rolling update and its undo, through the ControllerRevisions kubectl reads.
    kubelet.start()
    try:
        kubectl(cluster, "set", "image", "statefulset/db", "db=postgres:17")
        kubectl(cluster, "rollout", "status", "statefulset/db", "--timeout=60s")
        history = rows(kubectl(cluster, "rollout", "history", "statefulset/db"))
        assert [r[0] for r in history[2:]] == ["1", "2"]
        assert kubectl(cluster, "rollout", "undo", "statefulset/db").strip() == "statefulset.apps/db rolled back"
        kubectl(cluster, "rollout", "status", "statefulset/db", "--timeout=60s")
        # (read from the store: the stand-in kubelet's container statuses lack the imageID the client insists on)
        images = {c["image"] for p in core.list(POD, "default").items for c in p["spec"]["containers"]}
        assert images == {"postgres:16"}
    finally:
        kubelet.stop()


def test_manifest_corpus_applies_and_reapplies_unchanged(cluster: Cluster) -> None:
    files = sorted(MANIFESTS.glob("*.yaml"))
    assert len(files) >= 4
    for path in files:
        out = kubectl(cluster, "apply", "-f", str(path))
        assert out.strip() and all(line.endswith(" created") for line in out.strip().splitlines()), out
    for path in files:
        out = kubectl(cluster, "apply", "-f", str(path))
        assert all(line.endswith(" unchanged") for line in out.strip().splitlines()), out
