"""KEDA with the real kubectl against kemu's API server: apply, tables, short names, the webhook, the metrics API.

The operator runs on a ManualClock; its first poll happens at once, so after ``kubectl
apply`` the ScaledObject is Ready and Active (items wait on its list), KEDA has scaled the
Deployment 0 -> 1, and ``external.metrics.k8s.io`` serves the list's length under KEDA's name
``s0-redis-<list>`` for the selector ``scaledobject.keda.sh/name=<so>`` (what the HPA asks).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.api.kinds import DEPLOYMENT
from emulator.apiserver import kubeconfig
from emulator.apiserver.process import ApiServerProcess
from emulator.apiserver.settings import ServerSettings
from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.server.core import ServerCore
from emulator.store.store import Store
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
TOKEN = "keda-test-token"
LIST = "kubectl-jobs"

MANIFEST = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: worker
spec:
  replicas: 0
  selector:
    matchLabels: {{app: worker}}
  template:
    metadata:
      labels: {{app: worker}}
    spec:
      containers:
      - name: worker
        image: worker:1
---
apiVersion: keda.sh/v1alpha1
kind: TriggerAuthentication
metadata:
  name: redis-auth
spec:
  secretTargetRef: []
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: worker
spec:
  scaleTargetRef:
    name: worker
  minReplicaCount: 0
  maxReplicaCount: 5
  triggers:
  - type: redis
    metadata:
      listName: {LIST}
      listLength: "10"
    authenticationRef:
      name: redis-auth
"""

SECOND = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: second
spec:
  scaleTargetRef:
    name: worker
  triggers:
  - type: cron
    metadata: {timezone: UTC, start: "0 9 * * *", end: "0 17 * * *", desiredReplicas: "2"}
"""


@pytest.fixture
def kubectl_env(redis_url: str, tmp_path: Path) -> Iterator[tuple[ServerCore, dict[str, str]]]:
    store = Store.connect(redis_url)
    clock = ManualClock(time.time() - 3600)
    core = ServerCore(store, clock)
    core.bootstrap()
    server = ApiServerProcess(ServerSettings(redis_url=redis_url, port=0, token=TOKEN),
                              log_path=tmp_path / "apiserver.log")
    server.start()
    manager = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=("keda-operator",)), clock=clock)
    manager.start()
    env = {**os.environ, "HOME": str(tmp_path),
           "KUBECONFIG": str(kubeconfig.write(tmp_path / "kubeconfig", server.url, TOKEN))}
    try:
        assert manager.wait_active(30)
        yield core, env
    finally:
        manager.stop()
        server.stop()
        store.close()


def kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KUBECTL, *args], env=env, input=stdin, capture_output=True, text=True, timeout=90,
                          check=False)


def test_kubectl_scaled_object_round_trip(kubectl_env: tuple[ServerCore, dict[str, str]]) -> None:
    core, env = kubectl_env
    core.store.redis.delete(LIST)
    core.store.redis.rpush(LIST, *range(37))
    applied = kubectl(env, "apply", "-f", "-", stdin=MANIFEST)
    assert applied.returncode == 0, applied.stderr
    assert "scaledobject.keda.sh/worker created" in applied.stdout
    wait_for(lambda: core.get(DEPLOYMENT, "default", "worker")["spec"].get("replicas") == 1, 20, "0 -> 1")

    def table() -> list[str]:
        out = kubectl(env, "get", "so")
        assert out.returncode == 0, out.stderr
        return out.stdout.split("\n")
    wait_for(lambda: "True" in table()[1], 20, "READY True in the table")
    header, row = table()[0].split(), table()[1].split()
    assert header == ["NAME", "SCALETARGETKIND", "SCALETARGETNAME", "MIN", "MAX", "READY", "ACTIVE", "FALLBACK",
                      "PAUSED", "TRIGGERS", "AUTHENTICATIONS", "AGE"]
    assert row[:11] == ["worker", "apps/v1.Deployment", "worker", "0", "5", "True", "True", "False", "Unknown",
                        "redis", "TriggerAuthentication/redis-auth"]
    assert kubectl(env, "get", "ta", "-o", "name").stdout.split() == ["triggerauthentication.keda.sh/redis-auth"]
    assert kubectl(env, "get", "scaledobjects.keda.sh", "-o", "name").stdout.split() == [
        "scaledobject.keda.sh/worker"]

    raw = kubectl(env, "get", "--raw", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/"
                  f"s0-redis-{LIST}?labelSelector=scaledobject.keda.sh%2Fname%3Dworker")
    assert raw.returncode == 0, raw.stderr
    assert [i["value"] for i in json.loads(raw.stdout)["items"]] == ["37"]

    denied = kubectl(env, "apply", "-f", "-", stdin=SECOND)
    assert denied.returncode != 0
    assert ('admission webhook "vscaledobject.kb.io" denied the request: the workload \'worker\' of type '
            "'apps/v1.Deployment' is already managed by the ScaledObject 'worker'") in denied.stderr
    assert kubectl(env, "get", "so", "-o", "name").stdout.split() == ["scaledobject.keda.sh/worker"]
