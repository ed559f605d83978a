"""Nothing stays dead: ``kemu up --detach`` restarts a part that is ``kill -9``-ed while pods are being created.

One detached cluster (no Ray: API server with two workers, one controller manager process, an in-process
scheduler, Node objects without kubelets) is shared by the tests; a thread creates pods through the API with
the official client all along. Each test kills one part twice:

* the first kill is restarted at once (CrashLoopBackOff's first restart is free): the part is back - its
  record names a new running process with one more restart, and ``kemu status`` exits 0 - within the
  5 s the issue asks (the measured time is printed; the assertion's deadline is generous);
* the second kill comes inside the back-off (1 s): meanwhile ``kemu status`` exits 1 naming the part, and
  afterwards 0 again.

Then every create that was answered 201 exists with its uid, and every pod gets bound (the scheduler's
informers re-listed / re-watched through the outage: none is stuck in its queue).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from emulator import cli
from emulator.processes import ProcessRecord, ProcessTable
from emulator.supervisor import kill_part
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

NAMESPACE = "default"
BACK_WITHIN = 5.0  # what the issue asks; the assertions wait up to DEADLINE and print the time measured
DEADLINE = 30.0


class Load:
    """A thread creating pods through the API; remembers the uid of every create answered 201."""

    def __init__(self, api: k8s.CoreV1Api) -> None:
        self.api = api
        self.acked: dict[str, str] = {}  # pod name -> uid
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            name = f"load-{i:05d}"
            i += 1
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {"containers": [{"name": "c", "image": "busybox",
                                             "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}
            try:
                created = self.api.create_namespaced_pod(NAMESPACE, body, _request_timeout=10)
                self.acked[name] = created.metadata.uid
            except (ApiException, OSError, Exception):  # 503 while Redis restarts, refused while a worker does
                self.failed += 1
            self._stop.wait(0.05)  # paced: at most 20 creates/s, leaving the 2 cores to the cluster

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


class Cluster:
    def __init__(self, home: Path, api: k8s.CoreV1Api, load: Load) -> None:
        self.home = home
        self.table = ProcessTable(home)
        self.api = api
        self.load = load

    def record(self, name: str) -> ProcessRecord:
        rec = self.table.get(name)
        assert rec is not None, f"no record {name}: {[r.name for r in self.table.records()]}"
        return rec

    def pods(self) -> dict[str, dict[str, Any]]:
        """The namespace's pods by name (plain JSON: thousands of them, decoded fast)."""
        raw = self.api.list_namespaced_pod(NAMESPACE, _preload_content=False)
        return {p["metadata"]["name"]: p for p in json.loads(raw.data)["items"]}

    def readyz(self) -> str:
        data = self.api.api_client.call_api("/readyz", "GET", query_params=[("verbose", "")],
                                             auth_settings=["BearerToken"], _preload_content=False).data
        return str(data.decode())

    def status(self) -> tuple[int, str]:
        """``kemu status`` in this process (no interpreter start: it answers within the back-off window)."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli.main(["status"])
        return code, out.getvalue()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    home = (tmp_path_factory.mktemp("supervise") / "home").resolve()
    config = home.parent / "kemu.yaml"
    # No kubelets keep the Nodes' leases fresh: without the node lifecycle controller they stay schedulable.
    config.write_text("controller_manager:\n  controllers: ['*', '-nodelifecycle']\n")
    env = {**os.environ, "KEMU_HOME": str(home)}
    env.pop("KEMU_REDIS_URL", None)
    mp = pytest.MonkeyPatch()
    mp.setenv("KEMU_HOME", str(home))
    mp.delenv("KEMU_REDIS_URL", raising=False)
    up = subprocess.run([sys.executable, "-m", "emulator.cli", "up", "--detach", "--config", str(config),
                         "--api-port", str(_free_port()), "--api-workers", "2", "--schedulers", "1"],
                        env=env, capture_output=True, text=True, timeout=120, check=False)
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        api_client = k8s_config.new_client_from_config(config_file=str(home / "kubeconfig"))
        api = k8s.CoreV1Api(api_client)
        for i in range(4):
            api.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}"},
                             "status": {"capacity": {"cpu": "1000", "memory": "1000Gi", "pods": "100000"},
                                        "allocatable": {"cpu": "1000", "memory": "1000Gi", "pods": "100000"}}})
        load = Load(api).start()
        try:
            yield Cluster(home, api, load)
        finally:
            load.stop()
            api_client.close()
    finally:
        down = subprocess.run([sys.executable, "-m", "emulator.cli", "down"], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
        mp.undo()
        assert down.returncode == 0, down.stderr


def _back(cluster: Cluster, name: str, old_pid: int, restarts: int) -> bool:
    rec = cluster.table.get(name)
    return (rec is not None and rec.pid != old_pid and rec.restarts == restarts and rec.running()
            and cluster.status()[0] == 0)


@pytest.mark.parametrize("name", ["redis-server", "apiserver-worker-0", "controller-manager-0", "apiserver"],
                         ids=["redis-server", "apiserver-worker", "controller-manager", "apiserver"])
def test_a_killed_part_is_back_within_seconds_and_no_acknowledged_create_is_lost(cluster: Cluster,
                                                                                 name: str) -> None:
    wait_for(lambda: cluster.status()[0] == 0, DEADLINE, "the cluster to be healthy before the kill")
    before = cluster.record(name)
    acked = len(cluster.load.acked)

    # First kill: restarted at once.
    killed_at = time.monotonic()
    kill_part(cluster.home, name)
    wait_for(lambda: _back(cluster, name, before.pid, before.restarts + 1), DEADLINE,
             f"{name} to be back after kill -9")
    first = time.monotonic() - killed_at
    wait_for(lambda: len(cluster.load.acked) > acked + 5, DEADLINE, "creates to be acknowledged again")

    # Second kill, inside the back-off: kemu status says so, then recovers.
    again = cluster.record(name)
    killed_at = time.monotonic()
    kill_part(cluster.home, name)
    wait_for(lambda: not again.running(), DEADLINE, f"{name} (pid {again.pid}) to be dead")
    code, out = cluster.status()
    assert code == 1, out
    assert f"{name} is down" in out, out
    wait_for(lambda: _back(cluster, name, again.pid, again.restarts + 1), DEADLINE,
             f"{name} to be back after its second kill -9")
    second = time.monotonic() - killed_at
    # /readyz lists every part with its restarts (upstream's verbose form).
    rec = cluster.record(name)
    assert f"[+]process/{name} (pid {rec.pid}, {rec.restarts} restart(s)) ok" in cluster.readyz(), cluster.readyz()
    print(f"\n{name}: back {first:.2f} s after kill -9 (restarted at once), {second:.2f} s after a second "
          f"kill -9 (1 s back-off); asked: within {BACK_WITHIN:g} s")
    if name.startswith("controller-manager"):
        # The restarted manager keeps its identity: it renews its Lease at once instead of waiting it out.
        lease = k8s.CoordinationV1Api(cluster.api.api_client)
        renewed = wait_for(lambda: _renewed_after(lease, time.time() - second), DEADLINE,
                           "the restarted controller manager to renew its Lease")
        assert renewed

    # The load goes on, and nothing it was told was created is missing.
    acked = len(cluster.load.acked)
    wait_for(lambda: len(cluster.load.acked) > acked + 5, DEADLINE, "creates to be acknowledged again")
    snapshot = dict(cluster.load.acked)
    pods = cluster.pods()
    lost = sorted(n for n, uid in snapshot.items() if n not in pods or pods[n]["metadata"]["uid"] != uid)
    assert lost == [], f"{len(lost)} acknowledged creates lost: {lost[:10]}"
    # No pod stuck: the scheduler binds every pod created so far.
    names = set(pods)
    wait_for(lambda: all(p["spec"].get("nodeName") for n, p in cluster.pods().items() if n in names), DEADLINE,
             "every pod to be bound")
    # The killed processes were reaped by their supervisor: not left <defunct>.
    assert before.state() == "exited" and again.state() == "exited", (before, again)


def _renewed_after(api: k8s.CoordinationV1Api, since: float) -> bool:
    spec = api.read_namespaced_lease("kube-controller-manager", "kube-system").spec
    return spec.renew_time is not None and spec.renew_time.timestamp() >= since - 1.0
