"""``kubectl rollout`` against kemu: API server process, Deployment and ReplicaSet controllers, stand-in kubelet.

``rollout status`` watches the Deployment's status and conditions; ``rollout undo`` is
client-side (it reads the ReplicaSets' revision annotations and ``pod-template-hash``
labels and patches the old template back); ``rollout restart`` patches a template
annotation. All three must work unchanged against what the controllers write.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.api.kinds import DEPLOYMENT, REPLICASET
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.server.core import ServerCore
from emulator.store.store import Store
from tests.kubectl_env import serving_api
from tests.kubelet_standin import StandInKubelet

pytestmark = pytest.mark.integration

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
TOKEN = "rollout-test-token"
MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: app
        image: nginx:1.27
"""


@pytest.fixture
def cluster(redis_url: str, tmp_path: Path) -> Iterator[tuple[ServerCore, dict[str, str]]]:
    core = ServerCore(Store.connect(redis_url))
    core.bootstrap()
    with serving_api(redis_url, tmp_path, TOKEN) as (_server, env):
        manager = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=("replicaset", "deployment")))
        manager.start()
        kubelet = StandInKubelet(core, nodes=2).start()
        try:
            assert manager.wait_active(30)
            yield core, env
        finally:
            kubelet.stop()
            manager.stop()


def kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    r = subprocess.run([KUBECTL, *args], env=env, input=stdin, capture_output=True, text=True, timeout=90,
                       check=False)
    assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stdout}{r.stderr}"
    return r.stdout


def image(core: ServerCore) -> str:
    return core.get(DEPLOYMENT, "default", "web")["spec"]["template"]["spec"]["containers"][0]["image"]


def test_rollout_status_undo_and_restart(cluster: tuple[ServerCore, dict[str, str]]) -> None:
    core, env = cluster
    assert kubectl(env, "apply", "-f", "-", stdin=MANIFEST).strip() == "deployment.apps/web created"
    status = kubectl(env, "rollout", "status", "deployment/web", "--timeout=60s")
    assert status.strip().splitlines()[-1] == 'deployment "web" successfully rolled out'

    kubectl(env, "set", "image", "deployment/web", "app=nginx:1.28")
    status = kubectl(env, "rollout", "status", "deployment/web", "--timeout=60s")
    assert 'deployment "web" successfully rolled out' in status
    history = kubectl(env, "rollout", "history", "deployment/web")
    assert [line.split()[0] for line in history.strip().splitlines()[2:]] == ["1", "2"]

    assert kubectl(env, "rollout", "undo", "deployment/web").strip() == "deployment.apps/web rolled back"
    assert image(core) == "nginx:1.27"
    status = kubectl(env, "rollout", "status", "deployment/web", "--timeout=60s")
    assert 'deployment "web" successfully rolled out' in status
    d = core.get(DEPLOYMENT, "default", "web")
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert len(core.list(REPLICASET, "default").items) == 2  # revision 1's ReplicaSet came back as revision 3

    assert kubectl(env, "rollout", "restart", "deployment/web").strip() == "deployment.apps/web restarted"
    status = kubectl(env, "rollout", "status", "deployment/web", "--timeout=60s")
    assert 'deployment "web" successfully rolled out' in status
    template = core.get(DEPLOYMENT, "default", "web")["spec"]["template"]
    assert "kubectl.kubernetes.io/restartedAt" in template["metadata"]["annotations"]
    sets = core.list(REPLICASET, "default").items
    assert len(sets) == 3
    newest = max(sets, key=lambda rs: int(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]))
    assert newest["spec"]["replicas"] == 3 and newest["status"]["availableReplicas"] == 3
    assert "kubectl.kubernetes.io/restartedAt" in newest["spec"]["template"]["metadata"]["annotations"]
    pods = kubectl(env, "get", "pods", "-l", f"pod-template-hash={newest['metadata']['labels']['pod-template-hash']}",
                   "-o", "name")
    assert len(pods.split()) == 3
