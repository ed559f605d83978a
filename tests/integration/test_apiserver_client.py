"""The official ``kubernetes`` Python client against kemu's API server.

Typed calls (list, create, patch, delete) and ``watch.Watch().stream()``, including a watch that
resumes from its last resourceVersion after the API server process is stopped and started again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from emulator.api.kinds import DEPLOYMENT, POD
from emulator.apiserver import kubeconfig
from emulator.apiserver.process import ApiServerProcess
from emulator.apiserver.settings import ServerSettings
from emulator.server.core import ServerCore
from emulator.store.store import Store
from tests import builders as b

pytestmark = pytest.mark.integration

TOKEN = "python-client-token"


def start_server(redis_url: str, port: int) -> ApiServerProcess:
    proc = ApiServerProcess(ServerSettings(redis_url=redis_url, port=port, token=TOKEN, require_token=True))
    proc.start()
    return proc


@pytest.fixture
def core(redis_url: str) -> ServerCore:
    c = ServerCore(Store.connect(redis_url))
    c.bootstrap()
    return c


@pytest.fixture
def server(redis_url: str, core: ServerCore) -> Iterator[ApiServerProcess]:
    proc = start_server(redis_url, 0)
    yield proc
    proc.stop()


@pytest.fixture
def api(server: ApiServerProcess, tmp_path: Path) -> Iterator[client.ApiClient]:
    path = kubeconfig.write(tmp_path / "kubeconfig", server.url, TOKEN)
    api_client = config.new_client_from_config(config_file=str(path))
    yield api_client
    api_client.close()


def pod_body(name: str, **labels: str) -> dict[str, Any]:
    return b.pod(name, labels=labels)


def test_list_create_patch_delete(api: client.ApiClient, core: ServerCore) -> None:
    v1 = client.CoreV1Api(api)
    created = v1.create_namespaced_pod("default", pod_body("web-0", app="web"))
    assert created.metadata.name == "web-0" and created.status.qos_class == "BestEffort"
    v1.create_namespaced_pod("default", pod_body("db-0", app="db"))

    listed = v1.list_namespaced_pod("default", label_selector="app=web")
    assert [p.metadata.name for p in listed.items] == ["web-0"]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)
    assert {p.metadata.name for p in v1.list_pod_for_all_namespaces().items} == {"web-0", "db-0"}

    # A dict body goes as a strategic merge patch.
    patched = v1.patch_namespaced_pod("web-0", "default", {"metadata": {"labels": {"tier": "frontend"}}})
    assert patched.metadata.labels == {"app": "web", "tier": "frontend"}
    assert core.get(POD, "default", "web-0")["metadata"]["labels"]["tier"] == "frontend"

    with pytest.raises(ApiException) as exc:
        v1.create_namespaced_pod("default", pod_body("web-0"))
    assert exc.value.status == 409 and "AlreadyExists" in exc.value.body

    v1.delete_namespaced_pod("web-0", "default")
    assert [p["metadata"]["name"] for p in core.list(POD).items] == ["db-0"]
    with pytest.raises(ApiException) as exc:
        v1.read_namespaced_pod("web-0", "default")
    assert exc.value.status == 404


def test_apps_client_and_scale(api: client.ApiClient, core: ServerCore) -> None:
    apps = client.AppsV1Api(api)
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}}
    apps.create_namespaced_deployment("default", deploy)
    scale = apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 6}})
    assert scale.spec.replicas == 6
    assert core.get(DEPLOYMENT, "default", "web")["spec"]["replicas"] == 6
    assert apps.read_namespaced_deployment_scale("web", "default").status.selector == "app=web"


def test_a_wrong_token_is_refused(server: ApiServerProcess, tmp_path: Path) -> None:
    path = kubeconfig.write(tmp_path / "kubeconfig", server.url, "not-the-token")
    with config.new_client_from_config(config_file=str(path)) as stranger, pytest.raises(ApiException) as exc:
        client.CoreV1Api(stranger).list_namespace()
    assert exc.value.status == 401


def collect(stream: Iterator[dict[str, Any]], n: int, timeout: float = 20.0) -> list[tuple[str, str]]:
    """Take ``n`` (type, name) events from a watch stream in a thread, failing after ``timeout``."""
    out: list[tuple[str, str]] = []
    done = threading.Event()

    def run() -> None:
        for event in stream:
            out.append((event["type"], event["object"].metadata.name))
            if len(out) >= n:
                break
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(timeout), f"only {out} arrived"
    return out


def test_watch_resumes_from_its_last_resource_version_after_a_restart(
        redis_url: str, core: ServerCore, server: ApiServerProcess, tmp_path: Path) -> None:
    path = kubeconfig.write(tmp_path / "kubeconfig", server.url, TOKEN)
    api_client = config.new_client_from_config(config_file=str(path))
    v1 = client.CoreV1Api(api_client)
    since = core.store.current_rv()
    core.create(POD, pod_body("a"))
    core.create(POD, pod_body("b"))

    w = watch.Watch()
    # timeout_seconds makes the client return when the stream ends instead of reconnecting at once.
    first = w.stream(v1.list_namespaced_pod, "default", resource_version=str(since), timeout_seconds=60)
    assert collect(first, 2) == [("ADDED", "a"), ("ADDED", "b")]
    seen_rv = w.resource_version
    assert seen_rv == core.get(POD, "default", "b")["metadata"]["resourceVersion"]

    # Stop the API server: the open stream ends cleanly (the server drains its watches).
    server.stop()
    assert list(first) == []
    core.create(POD, pod_body("c"))  # written while no API server runs
    core.delete(POD, "default", "a")
    restarted = start_server(redis_url, int(server.url.rsplit(":", 1)[1]))
    try:
        resumed = w.stream(v1.list_namespaced_pod, "default", resource_version=w.resource_version,
                           timeout_seconds=60)
        # Exactly what happened after the last event seen: no replay of a and b, nothing lost.
        assert collect(resumed, 2) == [("ADDED", "c"), ("DELETED", "a")]
        w.stop()
    finally:
        restarted.stop()
        api_client.close()


def test_watch_too_old_resource_version_is_410(api: client.ApiClient, redis_url: str) -> None:
    from emulator.api.kinds import CONFIGMAP
    from emulator.store.store import StoreConfig

    small = ServerCore(Store.connect(redis_url, StoreConfig(stream_cap=10)))
    for i in range(60):
        small.create(CONFIGMAP, {"metadata": {"name": f"cm{i}", "namespace": "default"}})
    stream = watch.Watch().stream(client.CoreV1Api(api).list_namespaced_config_map, "default", resource_version="1",
                                  timeout_seconds=5)
    with pytest.raises(ApiException) as exc:
        next(stream)
    assert exc.value.status == 410
