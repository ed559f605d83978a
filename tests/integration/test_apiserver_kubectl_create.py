"""``kubectl create <kind> ...``: the real kubectl's typed clients send protobuf bodies.

kubectl 1.32 builds these objects with client-go's typed clientsets, which POST
``application/vnd.kubernetes.protobuf`` (kubernetes#125314) with no JSON fallback. Each test
checks that the request really was protobuf (``-v=8`` prints the headers), that kemu stored
exactly the fields asked for, and that the stored object is the one the same command's JSON
(``--dry-run=client -o json`` piped to ``kubectl create -f -``) gives. The API server, the
per-test store and kubectl come from :mod:`tests.integration.test_apiserver_kubectl`.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest

from emulator.api.kinds import CONFIGMAP, DEPLOYMENT, NAMESPACE, PDB, PRIORITYCLASS
from emulator.server.core import ServerCore
from tests.integration import test_apiserver_kubectl as base
from tests.integration.test_apiserver_kubectl import Kubectl

pytestmark = pytest.mark.integration

# The fixtures of test_apiserver_kubectl: one API server for the module, an emptied store and a
# kubectl with its own kubeconfig and $HOME per test.
server, core, kubectl = base.server, base.core, base.kubectl

PROTOBUF_REQUEST = "Content-Type: application/vnd.kubernetes.protobuf"


def create(kubectl: Kubectl, *args: str) -> str:
    """``kubectl create ARGS``, asserting that the body went as protobuf; returns kubectl's output."""
    r = kubectl("-v=8", "create", *args)
    assert PROTOBUF_REQUEST in r.stderr, "kubectl did not send protobuf: this test would prove nothing"
    return r.stdout.strip()


def get(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    return orjson.loads(kubectl("get", *args, "-o", "json").stdout)


def server_identity_dropped(obj: dict[str, Any]) -> dict[str, Any]:
    """The object minus what the server assigns per write (uid, times, resourceVersion)."""
    meta = {k: v for k, v in obj["metadata"].items()
            if k not in ("uid", "creationTimestamp", "resourceVersion", "managedFields")}
    return {**obj, "metadata": meta}


def json_twin(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    """What the same ``kubectl create`` stores when its object is sent as JSON (server-side dry run)."""
    body = kubectl("create", *args, "--dry-run=client", "-o", "json").stdout
    assert orjson.loads(body)["kind"]  # kubectl built the object client-side
    return orjson.loads(kubectl("create", "-f", "-", "--dry-run=server", "-o", "json", stdin=body).stdout)


def test_create_namespace(kubectl: Kubectl, core: ServerCore) -> None:
    assert create(kubectl, "namespace", "team-a") == "namespace/team-a created"
    ns = get(kubectl, "namespace", "team-a")
    assert ns["metadata"]["name"] == "team-a"
    assert "labels" not in ns["metadata"] and "annotations" not in ns["metadata"]
    assert ns["spec"] == {"finalizers": ["kubernetes"]} and ns["status"] == {"phase": "Active"}
    assert core.get(NAMESPACE, None, "team-a")["metadata"]["uid"] == ns["metadata"]["uid"]
    assert server_identity_dropped(ns) == server_identity_dropped(json_twin(kubectl, "namespace", "team-a"))


def test_create_configmap_from_literals_and_a_binary_file(kubectl: Kubectl, core: ServerCore,
                                                          tmp_path: Path) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)))  # not UTF-8: kubectl puts it in binaryData
    args = ("configmap", "settings", "--from-literal=mode=fast", "--from-literal=empty=", f"--from-file=blob={blob}")
    assert create(kubectl, *args) == "configmap/settings created"
    cm = get(kubectl, "configmap", "settings")
    assert cm["data"] == {"mode": "fast", "empty": ""}
    assert cm["binaryData"] == {"blob": base64.b64encode(bytes(range(256))).decode()}
    assert "immutable" not in cm and "labels" not in cm["metadata"]
    assert core.get(CONFIGMAP, "default", "settings")["data"] == {"mode": "fast", "empty": ""}
    assert server_identity_dropped(cm) == server_identity_dropped(json_twin(kubectl, *args))


def test_create_deployment_with_image_replicas_and_port(kubectl: Kubectl, core: ServerCore) -> None:
    args = ("deployment", "web", "--image=nginx:1.27", "--replicas=3", "--port=8080")
    assert create(kubectl, *args) == "deployment.apps/web created"
    spec = get(kubectl, "deployment", "web")["spec"]
    assert spec["replicas"] == 3
    assert spec["selector"] == {"matchLabels": {"app": "web"}}
    assert spec["template"]["metadata"]["labels"] == {"app": "web"}
    [container] = spec["template"]["spec"]["containers"]
    assert (container["name"], container["image"]) == ("nginx", "nginx:1.27")
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert container["resources"] == {} and "command" not in container and "env" not in container
    # The same command's JSON gives the same object, status (which controllers write) aside.
    stored = core.get(DEPLOYMENT, "default", "web")
    twin = json_twin(kubectl, *args)
    assert server_identity_dropped(stored)["spec"] == server_identity_dropped(twin)["spec"]
    assert server_identity_dropped(stored)["metadata"] == server_identity_dropped(twin)["metadata"]


def test_create_deployment_with_zero_replicas_and_a_command(kubectl: Kubectl, core: ServerCore) -> None:
    # replicas is a pointer: 0 must arrive as 0, not as "unset" (which defaults to 1).
    assert create(kubectl, "deployment", "idle", "--image=busybox", "--replicas=0", "--", "sleep", "3600") == \
        "deployment.apps/idle created"
    spec = core.get(DEPLOYMENT, "default", "idle")["spec"]
    assert spec["replicas"] == 0
    assert spec["template"]["spec"]["containers"][0]["command"] == ["sleep", "3600"]


def test_create_priorityclass(kubectl: Kubectl, core: ServerCore) -> None:
    args = ("priorityclass", "high", "--value=1000", "--description=web tier", "--preemption-policy=Never")
    assert create(kubectl, *args) == "priorityclass.scheduling.k8s.io/high created"
    pc = get(kubectl, "priorityclass", "high")
    assert (pc["value"], pc["description"], pc["preemptionPolicy"]) == (1000, "web tier", "Never")
    assert pc["globalDefault"] is False  # kemu's default, as for JSON (below): the flag was not set
    assert server_identity_dropped(pc) == server_identity_dropped(json_twin(kubectl, *args))
    # value has no omitempty: 0 is a value, and globalDefault true arrives.
    assert create(kubectl, "priorityclass", "floor", "--value=0", "--global-default") == \
        "priorityclass.scheduling.k8s.io/floor created"
    floor = core.get(PRIORITYCLASS, None, "floor")
    assert (floor["value"], floor["globalDefault"]) == (0, True)


def test_create_poddisruptionbudget(kubectl: Kubectl, core: ServerCore) -> None:
    args = ("poddisruptionbudget", "web-pdb", "--selector=app=web,tier in (a,b)", "--min-available=50%")
    assert create(kubectl, *args) == "poddisruptionbudget.policy/web-pdb created"
    pdb = get(kubectl, "poddisruptionbudget", "web-pdb")
    assert pdb["spec"] == {"minAvailable": "50%", "selector": {
        "matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}}
    assert server_identity_dropped(pdb)["spec"] == server_identity_dropped(json_twin(kubectl, *args))["spec"]
    # An integer maxUnavailable stays an integer (IntOrString).
    assert create(kubectl, "pdb", "db-pdb", "--selector=app=db", "--max-unavailable=1") == \
        "poddisruptionbudget.policy/db-pdb created"
    assert core.get(PDB, "default", "db-pdb")["spec"] == {"maxUnavailable": 1,
                                                         "selector": {"matchLabels": {"app": "db"}}}
