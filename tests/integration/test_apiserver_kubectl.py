"""The real ``kubectl`` (/usr/bin/kubectl, 1.32) against kemu's API server.

One API server process serves the module; every test gets an emptied Redis with the bootstrap
objects, its own kubeconfig (with the server's bearer token) and its own ``$HOME`` (kubectl's
discovery cache), and checks what kubectl printed *and* what the store holds.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from emulator.api.kinds import CONFIGMAP, DEPLOYMENT, EVENT, LIMITRANGE, NODE, PDB, POD, PRIORITYCLASS
from emulator.apiserver import kubeconfig
from emulator.apiserver.process import ApiServerProcess
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis
from emulator.store.store import Store
from tests import builders as b
from tests import kubectl_env
from tests.kubectl_env import KUBECTL, running_api

pytestmark = pytest.mark.integration

TOKEN = "kubectl-test-token"

MANIFEST = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high-priority
value: 1000000
globalDefault: false
preemptionPolicy: PreemptLowerPriority
description: "Web pods that may preempt batch work"
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web-pdb
spec:
  minAvailable: 2
  selector:
    matchLabels:
      app: web-frontend
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-frontend
  labels:
    app: web-frontend
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web-frontend
  template:
    metadata:
      labels:
        app: web-frontend
    spec:
      priorityClassName: high-priority
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: DoNotSchedule
        labelSelector:
          matchLabels:
            app: web-frontend
      containers:
      - name: web
        image: nginx:1.27
        resources:
          requests:
            cpu: 100m
            memory: 128Mi
---
apiVersion: v1
kind: LimitRange
metadata:
  name: mem-limit-range
spec:
  limits:
  - type: Container
    default:
      memory: 512Mi
    defaultRequest:
      memory: 256Mi
"""


@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis) -> Iterator[ApiServerProcess]:
    with running_api(redis_server.url, token=TOKEN) as proc:
        yield proc


@pytest.fixture
def core(redis_url: str, server: ApiServerProcess) -> ServerCore:
    c = ServerCore(Store.connect(redis_url))
    c.bootstrap()
    return c


class Kubectl(kubectl_env.Kubectl):
    """kubectl for the API server at ``server_url``, with this module's token."""

    def __init__(self, home: Path, server_url: str) -> None:
        super().__init__(home, kubeconfig.write(home / "kubeconfig", server_url, TOKEN))


@pytest.fixture
def kubectl(tmp_path: Path, server: ApiServerProcess, core: ServerCore) -> Kubectl:
    return Kubectl(tmp_path, server.url)


def lines_of(out: str) -> dict[str, list[str]]:
    """Table output as {first cell: cells}."""
    rows = [line.split() for line in out.strip().splitlines()]
    return {r[0]: r for r in rows if r}


def ready_node(name: str, zone: str = "zone-a") -> dict:
    node = b.node(name, labels={"topology.kubernetes.io/zone": zone})
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    node["status"]["nodeInfo"] = {"kubeletVersion": "v1.32.0-kemu"}
    return node


# ---------------------------------------------------------------- apply
def test_apply_multi_document_file(kubectl: Kubectl, core: ServerCore, tmp_path: Path) -> None:
    manifest = tmp_path / "web.yaml"
    manifest.write_text(MANIFEST)
    first = kubectl("apply", "-f", str(manifest))  # no --validate=false: the server validates fields
    assert first.stdout.splitlines() == [
        "priorityclass.scheduling.k8s.io/high-priority created",
        "poddisruptionbudget.policy/web-pdb created",
        "deployment.apps/web-frontend created",
        "limitrange/mem-limit-range created",
    ]
    pc = core.get(PRIORITYCLASS, None, "high-priority")
    assert (pc["value"], pc["globalDefault"], pc["preemptionPolicy"]) == (1000000, False, "PreemptLowerPriority")
    assert core.get(PDB, "default", "web-pdb")["spec"]["minAvailable"] == 2
    spread = core.get(DEPLOYMENT, "default", "web-frontend")["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread[0]["maxSkew"] == 1 and spread[0]["whenUnsatisfiable"] == "DoNotSchedule"
    limits = core.get(LIMITRANGE, "default", "mem-limit-range")["spec"]["limits"][0]
    assert (limits["default"], limits["defaultRequest"]) == ({"memory": "512Mi"}, {"memory": "256Mi"})

    again = kubectl("apply", "-f", str(manifest)).stdout.splitlines()
    assert "priorityclass.scheduling.k8s.io/high-priority unchanged" in again
    assert "deployment.apps/web-frontend unchanged" in again
    assert "limitrange/mem-limit-range unchanged" in again
    # kubectl itself always sends a patch for a PDB: policy/v1 declares spec.selector patchStrategy
    # "replace", so its client-side three-way diff is never empty. A real cluster prints
    # "configured" here too; what matters is that nothing changed.
    assert "poddisruptionbudget.policy/web-pdb configured" in again
    assert core.get(PDB, "default", "web-pdb")["metadata"]["generation"] == 1

    manifest.write_text(MANIFEST.replace("replicas: 3", "replicas: 5"))
    changed = kubectl("apply", "-f", str(manifest)).stdout.splitlines()
    assert "deployment.apps/web-frontend configured" in changed
    assert "priorityclass.scheduling.k8s.io/high-priority unchanged" in changed
    deploy = core.get(DEPLOYMENT, "default", "web-frontend")
    assert deploy["spec"]["replicas"] == 5 and deploy["metadata"]["generation"] == 2


def test_apply_server_side(kubectl: Kubectl, core: ServerCore, tmp_path: Path) -> None:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n")
    assert kubectl("apply", "--server-side", "-f", str(manifest)).stdout.strip() == \
        "configmap/settings serverside-applied"
    rv = core.get(CONFIGMAP, "default", "settings")["metadata"]["resourceVersion"]
    kubectl("apply", "--server-side", "-f", str(manifest))  # a no-op apply writes nothing
    stored = core.get(CONFIGMAP, "default", "settings")
    assert stored["metadata"]["resourceVersion"] == rv
    assert [(m["manager"], m["operation"]) for m in stored["metadata"]["managedFields"]] == [("kubectl", "Apply")]
    # Another manager wanting another value conflicts, unless it forces.
    manifest.write_text(manifest.read_text().replace("fast", "safe"))
    conflict = kubectl("apply", "--server-side", "--field-manager", "other", "-f", str(manifest), ok=False)
    assert conflict.returncode != 0 and "conflict" in conflict.stderr.lower()
    assert core.get(CONFIGMAP, "default", "settings")["data"] == {"mode": "fast"}
    kubectl("apply", "--server-side", "--field-manager", "other", "--force-conflicts", "-f", str(manifest))
    assert core.get(CONFIGMAP, "default", "settings")["data"] == {"mode": "safe"}


# ---------------------------------------------------------------- get, watch
def test_get_nodes_and_pods_wide(kubectl: Kubectl, core: ServerCore) -> None:
    core.create(NODE, ready_node("node-1"))
    core.create(POD, b.pod("web-1", node="node-1"))
    core.create(POD, b.pod("web-2"))
    nodes = lines_of(kubectl("get", "nodes").stdout)
    assert nodes["NAME"] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes["node-1"][1:3] == ["Ready", "<none>"] and nodes["node-1"][4] == "v1.32.0-kemu"
    pods = lines_of(kubectl("get", "pods", "-o", "wide").stdout)
    assert pods["NAME"] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE",
                            "READINESS", "GATES"]
    assert pods["web-1"][6] == "node-1" and pods["web-2"][6] == "<none>"
    on_node = kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName=node-1", "-o", "name").stdout
    assert on_node.split() == ["pod/web-1"]


def test_get_pods_watch_sees_create_update_delete_in_order(kubectl: Kubectl, core: ServerCore) -> None:
    core.create(POD, b.pod("watched"))
    proc = kubectl.popen("get", "pods", "-w", "--output-watch-events")
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()

    def next_event(deadline: float) -> list[str]:
        while True:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic())).split()
            if line and line[0] != "EVENT":
                return line

    try:
        deadline = time.monotonic() + 20
        assert next_event(deadline)[:2] == ["ADDED", "watched"]  # from kubectl's initial list
        pod = core.get(POD, "default", "watched")
        core.update(POD, {**pod, "metadata": {**pod["metadata"], "labels": {"tier": "web"}}})
        assert next_event(deadline)[:2] == ["MODIFIED", "watched"]
        core.delete(POD, "default", "watched")
        assert next_event(deadline)[:2] == ["DELETED", "watched"]
    finally:
        proc.terminate()
        proc.wait(10)


# ---------------------------------------------------------------- edits
def test_label_annotate_taint_cordon(kubectl: Kubectl, core: ServerCore) -> None:
    core.create(NODE, ready_node("node-1"))
    assert kubectl("label", "node", "node-1", "disk=ssd").stdout.strip() == "node/node-1 labeled"
    assert kubectl("annotate", "node", "node-1", "owner=team-a").stdout.strip() == "node/node-1 annotated"
    node = core.get(NODE, None, "node-1")
    assert node["metadata"]["labels"]["disk"] == "ssd" and node["metadata"]["annotations"]["owner"] == "team-a"

    assert kubectl("taint", "nodes", "node-1", "dedicated=maintenance:NoSchedule").stdout.strip() == \
        "node/node-1 tainted"
    taints = core.get(NODE, None, "node-1")["spec"]["taints"]
    assert taints == [{"key": "dedicated", "value": "maintenance", "effect": "NoSchedule"}]
    assert kubectl("taint", "nodes", "node-1", "dedicated-").stdout.strip() == "node/node-1 untainted"
    assert not core.get(NODE, None, "node-1")["spec"].get("taints")

    assert kubectl("cordon", "node-1").stdout.strip() == "node/node-1 cordoned"
    assert core.get(NODE, None, "node-1")["spec"]["unschedulable"] is True
    assert lines_of(kubectl("get", "nodes").stdout)["node-1"][1] == "Ready,SchedulingDisabled"
    assert kubectl("uncordon", "node-1").stdout.strip() == "node/node-1 uncordoned"
    assert not core.get(NODE, None, "node-1")["spec"].get("unschedulable")


def test_scale_deployment(kubectl: Kubectl, core: ServerCore, tmp_path: Path) -> None:
    manifest = tmp_path / "web.yaml"
    manifest.write_text(MANIFEST)
    kubectl("apply", "-f", str(manifest))
    out = kubectl("scale", "deployment", "web-frontend", "--replicas=10").stdout.strip()
    assert out == "deployment.apps/web-frontend scaled"
    assert core.get(DEPLOYMENT, "default", "web-frontend")["spec"]["replicas"] == 10
    assert lines_of(kubectl("get", "deployments").stdout)["web-frontend"][1] == "0/10"


def test_describe_pod_shows_its_events(kubectl: Kubectl, core: ServerCore) -> None:
    pod = core.create(POD, b.pod("described"))
    for i, (reason, message) in enumerate([("Scheduled", "Successfully assigned default/described to node-1"),
                                           ("Pulled", "Container image already present on machine")]):
        core.create(EVENT, {"metadata": {"name": f"described.{i}", "namespace": "default"},
                            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "described",
                                               "uid": pod["metadata"]["uid"], "apiVersion": "v1"},
                            "reason": reason, "message": message, "type": "Normal",
                            "source": {"component": "kemu-scheduler"}, "count": 1,
                            "firstTimestamp": pod["metadata"]["creationTimestamp"],
                            "lastTimestamp": pod["metadata"]["creationTimestamp"]})
    out = kubectl("describe", "pod", "described").stdout
    assert re.search(r"^Name:\s+described$", out, re.M) and re.search(r"^QoS Class:\s+BestEffort$", out, re.M)
    events = out.split("Events:", 1)[1]
    assert "Scheduled" in events and "Successfully assigned default/described to node-1" in events
    assert "Pulled" in events and "kemu-scheduler" in events


def test_delete_and_wait_for_delete(kubectl: Kubectl, core: ServerCore) -> None:
    core.create(POD, b.pod("doomed"))
    core.create(POD, b.pod("waited-for"))
    assert kubectl("delete", "pod", "doomed").stdout.strip() == 'pod "doomed" deleted'
    assert [p["metadata"]["name"] for p in core.list(POD).items] == ["waited-for"]

    # -v=6 logs each request: once kubectl's watch is open, the deletion must end the wait.
    waiter = subprocess.Popen([KUBECTL, "wait", "--for=delete", "pod/waited-for", "--timeout=30s", "-v=6"],
                              env=kubectl.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [log.put(line) for line in waiter.stderr or ()], daemon=True).start()
    try:
        deadline = time.monotonic() + 20
        while "watch=true" not in (line := log.get(timeout=max(0.01, deadline - time.monotonic()))):
            assert "error" not in line.lower(), line
        core.delete(POD, "default", "waited-for")
        out, _ = waiter.communicate(timeout=20)
        assert waiter.returncode == 0
        assert out.strip() == "pod/waited-for condition met"
    finally:
        if waiter.poll() is None:
            waiter.kill()
    assert core.list(POD).items == []


def test_api_resources(kubectl: Kubectl) -> None:
    rows = [line.split() for line in kubectl("api-resources").stdout.splitlines()[1:]]
    assert ["pods", "po", "v1", "true", "Pod"] in rows
    assert ["deployments", "deploy", "apps/v1", "true", "Deployment"] in rows
    assert ["priorityclasses", "pc", "scheduling.k8s.io/v1", "false", "PriorityClass"] in rows
    assert ["leases", "coordination.k8s.io/v1", "true", "Lease"] in rows
    assert ["pods", "metrics.k8s.io/v1beta1", "true", "PodMetrics"] in rows  # the aggregated metrics API


def test_errors_reach_kubectl_as_upstream_messages(kubectl: Kubectl, core: ServerCore) -> None:
    missing = kubectl("get", "pod", "nope", ok=False)
    assert missing.returncode == 1
    assert 'Error from server (NotFound): pods "nope" not found' in missing.stderr
    bad = orjson.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Bad_Name"},
                        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}).decode()
    invalid = kubectl("create", "-f", "-", ok=False, stdin=bad)
    assert invalid.returncode == 1 and 'The Pod "Bad_Name" is invalid' in invalid.stderr
    assert core.list(POD).items == []



def test_top_nodes_and_pods_read_the_kubelets_usage(kubectl: Kubectl, core: ServerCore) -> None:
    from emulator.kubelet import usage

    core.create(NODE, ready_node("n1"))
    core.create(POD, b.pod("p", node="n1"))
    pipe = core.store.redis.pipeline(transaction=False)
    usage.write_snapshot(pipe, core.store.config.prefix, timestamp=time.time(), window=15.0,
                         nodes={"n1": (250_000_000, 512 * 2**20)},
                         pods={("default", "p"): [("app", 100_000_000, 64 * 2**20)]})
    pipe.execute()
    nodes = kubectl("top", "nodes").stdout.split("\n")[1].split()
    assert nodes[:2] == ["n1", "250m"] and nodes[3] == "512Mi"
    pods = kubectl("top", "pods").stdout.split("\n")[1].split()
    assert pods == ["p", "100m", "64Mi"]
    assert "metrics.k8s.io" in kubectl("api-versions").stdout
    refused = kubectl("delete", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/n1", ok=False)
    assert refused.returncode != 0 and "read-only" in refused.stderr
