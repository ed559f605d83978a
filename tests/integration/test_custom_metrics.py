"""custom.metrics.k8s.io and external.metrics.k8s.io through the real API server and the real kubectl.

A kubelet shard (real Redis, ManualClock) runs pods attached to load target ``web``; the API
server process serves what the shard published through kemu's default prometheus-adapter rules.
Expected values follow from the load rules (share = rate / ready pods) and the quantity
format (a value v is ``v * 1000`` milli-units, printed canonically: 30 -> "30", 12.5 -> "12500m").
The MetricsClient the autoscalers use must read the very numbers kubectl printed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator import loadtargets
from emulator.api.kinds import POD
from emulator.api.quantity import format_millis, parse_quantity
from emulator.api.selectors import parse_label_selector
from emulator.api.types import Obj
from emulator.apiserver.process import ApiServerProcess
from emulator.cli import main as kemu
from emulator.clock import ManualClock
from emulator.kubelet.shard import KubeletShard
from emulator.metricsapi.adapter import MetricsAdapter
from emulator.metricsapi.client import MetricsUnavailable, ObjectReference
from emulator.metricsapi.custom import CustomMetricsClient, metrics_client
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis
from emulator.store.store import Store
from tests import builders as b
from tests.integration.test_apiserver_kubectl import TOKEN, Kubectl
from tests.kubectl_env import running_api
from tests.shards import metrics_shard, wall_clock_core

pytestmark = pytest.mark.integration

WINDOW = 15.0
CUSTOM = "/apis/custom.metrics.k8s.io/v1beta2"
EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1"


@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis) -> Iterator[ApiServerProcess]:
    with running_api(redis_server.url, token=TOKEN) as proc:
        yield proc


@pytest.fixture
def cluster(redis_url: str, server: ApiServerProcess) -> Iterator[tuple[ServerCore, ManualClock, KubeletShard]]:
    # Cluster time starts at the wall clock, so the API server (on wall time) finds the samples fresh.
    core, clock = wall_clock_core(redis_url)
    with metrics_shard(core, clock, WINDOW) as shard:
        yield core, clock, shard


@pytest.fixture
def kubectl(tmp_path: Path, server: ApiServerProcess) -> Kubectl:
    return Kubectl(tmp_path, server.url)


def web_pod(name: str) -> Obj:
    body = b.pod(name, containers=[b.container(cpu="200m", lim_cpu="1")], node="n-00000", labels={"app": "web"})
    body["metadata"]["annotations"] = {"kemu.io/startup-delay": "0s", "kemu.io/cpu": "100m",
                                       "kemu.io/load-target": "web", "kemu.io/cost-per-request": "10m"}
    return body


def run(shard: KubeletShard, clock: ManualClock, seconds: float) -> None:
    for _ in range(int(seconds)):
        assert shard.sync(10), "informers did not catch up"
        clock.advance(1.0)
        shard.tick()


def raw(kubectl: Kubectl, path: str) -> Obj:
    return json.loads(kubectl("get", "--raw", path).stdout)


def raw_error(kubectl: Kubectl, path: str) -> str:
    r = kubectl("get", "--raw", path, ok=False)
    assert r.returncode != 0
    return r.stderr


@pytest.mark.parametrize(("rate", "pods"), [(60.0, 2), (50.0, 4), (25.0, 2)], ids=["60rps-2pods", "50rps-4pods",
                                                                                  "25rps-2pods"])
def test_pods_metric_through_kubectl_and_the_metrics_client(
        cluster: tuple[ServerCore, ManualClock, KubeletShard], kubectl: Kubectl, rate: float, pods: int) -> None:
    core, clock, shard = cluster
    loadtargets.set_rate(core.store.redis, core.store.config.prefix, "web", rate)
    core.create_many(POD, [web_pod(f"web-{i}") for i in range(pods)])
    run(shard, clock, 2 * WINDOW + 1)

    listed = raw(kubectl, f"{CUSTOM}/namespaces/default/pods/*/http_requests_per_second")
    assert listed["kind"] == "MetricValueList" and listed["apiVersion"] == "custom.metrics.k8s.io/v1beta2"
    share_milli = round(rate / pods * 1000)  # each ready pod's share, in milli-requests/s
    assert {i["describedObject"]["name"]: i["value"] for i in listed["items"]} == {
        f"web-{i}": format_millis(share_milli) for i in range(pods)}
    item = listed["items"][0]
    assert item["describedObject"] == {"kind": "Pod", "namespace": "default", "name": "web-0", "apiVersion": "v1"}
    assert item["metric"] == {"name": "http_requests_per_second"} and item["windowSeconds"] == WINDOW

    # The autoscalers' seam reads what kubectl printed: same values (MilliValue) and timestamps.
    client = CustomMetricsClient(MetricsAdapter.build(core.store, now=clock.now))
    info, _ = client.pod_metric("http_requests_per_second", "default", parse_label_selector("app=web"))
    assert {name: m.value for name, m in info.items()} == {
        i["describedObject"]["name"]: parse_quantity(i["value"]).milli_value() for i in listed["items"]}
    assert {m.window for m in info.values()} == {WINDOW}

    one = raw(kubectl, f"{CUSTOM}/namespaces/default/pods/web-0/http_requests_per_second")
    assert [i["value"] for i in one["items"]] == [format_millis(share_milli)]
    # The namespace's metric sums its pods' (the rule groups by the namespace label): the whole rate.
    namespace = raw(kubectl, f"{CUSTOM}/namespaces/default/metrics/http_requests_per_second")
    assert [i["value"] for i in namespace["items"]] == [format_millis(round(rate * 1000))]
    value, _ = client.object_metric("http_requests_per_second", "default", ObjectReference("Namespace", "default"))
    assert value == round(rate * 1000)
    # A label selector that picks no pod: an empty list (the HPA then reports no metrics).
    assert raw(kubectl, f"{CUSTOM}/namespaces/default/pods/*/http_requests_per_second?labelSelector=app%3Dnone"
               )["items"] == []
    with pytest.raises(MetricsUnavailable, match="no metrics returned from custom metrics API"):
        client.pod_metric("http_requests_per_second", "default", parse_label_selector("app=none"))


def test_external_metric_follows_the_load_targets(cluster: tuple[ServerCore, ManualClock, KubeletShard],
                                                  kubectl: Kubectl) -> None:
    core, _, _ = cluster
    prefix = core.store.config.prefix
    loadtargets.set_rate(core.store.redis, prefix, "web", 120.0)
    loadtargets.set_rate(core.store.redis, prefix, "api", 12.5)
    loadtargets.set_queue_depth(core.store.redis, prefix, "jobs", 40)
    picked = raw(kubectl, f"{EXTERNAL}/namespaces/default/http_requests_per_second?labelSelector=target%3Dweb")
    assert picked["kind"] == "ExternalMetricValueList"
    assert [(i["metricName"], i["metricLabels"], i["value"]) for i in picked["items"]] == [
        ("http_requests_per_second", {"target": "web"}, "120")]
    api = raw(kubectl, f"{EXTERNAL}/namespaces/default/http_requests_per_second?labelSelector=target%3Dapi")
    assert [i["value"] for i in api["items"]] == ["12500m"]
    # Without a selector: one series, the sum over every target.
    assert [i["value"] for i in raw(kubectl, f"{EXTERNAL}/namespaces/default/http_requests_per_second")["items"]] \
        == [format_millis(round((120.0 + 12.5) * 1000))]
    queue = raw(kubectl, f"{EXTERNAL}/namespaces/prod/queue_depth?labelSelector=queue%3Djobs")
    assert [(i["metricLabels"], i["value"]) for i in queue["items"]] == [({"queue": "jobs"}, "40")]
    client = CustomMetricsClient(MetricsAdapter.build(core.store))
    values, _ = client.external_metric("http_requests_per_second", "default", parse_label_selector("target=api"))
    assert values == [12500]


@pytest.mark.parametrize("path", [
    f"{CUSTOM}/namespaces/default/pods/*/no_such_metric",
    f"{CUSTOM}/namespaces/default/widgets/*/http_requests_per_second",
    f"{CUSTOM}/namespaces/default/pods/web-9/http_requests_per_second",
    f"{CUSTOM}/namespaces/default/pods",
    f"{CUSTOM}/nodes/*/http_requests_per_second",
    f"{EXTERNAL}/namespaces/default/no_such_metric",
    f"{EXTERNAL}/namespaces/default/http_requests_per_second/extra",
], ids=["unknown-metric", "unknown-resource", "pod-without-metric", "short-path", "metric-not-for-nodes",
        "unknown-external", "long-external-path"])
def test_bad_names_are_404_status(cluster: tuple[ServerCore, ManualClock, KubeletShard], kubectl: Kubectl,
                                  path: str) -> None:
    err = raw_error(kubectl, path)
    assert "NotFound" in err or "could not find" in err, err


@pytest.mark.parametrize(("path", "code"), [
    (f"{CUSTOM}/namespaces/default/pods/*/no_such_metric", 404),
    (f"{CUSTOM}/namespaces/default/widgets/*/http_requests_per_second", 404),
    (f"{CUSTOM}/namespaces/default/pods/*/http_requests_per_second?labelSelector=a%20in", 400),
    (f"{EXTERNAL}/namespaces/default/queue_depth?labelSelector=queue%3E1", 400),
    (f"{EXTERNAL}/namespaces/default/no_such_metric", 404),
], ids=["unknown-metric", "unknown-resource", "bad-selector", "gt-in-metric-selector", "unknown-external"])
def test_errors_are_status_objects(cluster: tuple[ServerCore, ManualClock, KubeletShard], server: ApiServerProcess,
                                   path: str, code: int) -> None:
    import httpx

    r = httpx.get(server.url + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert r.status_code == code
    body = r.json()
    assert body["kind"] == "Status" and body["code"] == code and body["status"] == "Failure"


def test_discovery_lists_the_metrics(cluster: tuple[ServerCore, ManualClock, KubeletShard], kubectl: Kubectl) -> None:
    custom = raw(kubectl, CUSTOM)
    assert {"pods/http_requests_per_second", "namespaces/http_requests_per_second",
            "pods/http_request_duration_seconds"} <= {r["name"] for r in custom["resources"]}
    external = raw(kubectl, EXTERNAL)
    assert {r["name"] for r in external["resources"]} == {"http_requests_per_second", "queue_depth"}
    groups = {g["name"] for g in raw(kubectl, "/apis")["groups"]}
    assert {"custom.metrics.k8s.io", "external.metrics.k8s.io", "metrics.k8s.io"} <= groups
    kubectl("api-resources")  # kubectl's own discovery copes with the groups


@pytest.mark.parametrize(("args", "want"), [
    (["set", "web", "120"], {"targets": {"web": 120.0}, "queues": {}}),
    (["set", "web", "0.5"], {"targets": {"web": 0.5}, "queues": {}}),
    (["set-queue", "jobs", "40"], {"targets": {}, "queues": {"jobs": 40.0}}),
], ids=["rate", "fractional-rate", "queue"])
def test_kemu_load_set_round_trips(redis_url: str, capsys: pytest.CaptureFixture[str], args: list[str],
                                   want: Obj) -> None:
    assert kemu(["load", "--redis-url", redis_url, *args]) == 0
    capsys.readouterr()
    assert kemu(["load", "--redis-url", redis_url, "get", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == want
    store = Store.connect(redis_url)
    assert loadtargets.rates(store.redis, store.config.prefix) == want["targets"]


@pytest.mark.parametrize("args", [["set", "Web_Target", "1"], ["set", "web", "-3"], ["set", "web", "nan"]],
                         ids=["bad-name", "negative", "nan"])
def test_kemu_load_set_refuses_bad_input(redis_url: str, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    assert kemu(["load", "--redis-url", redis_url, *args]) == 1
    assert capsys.readouterr().err.startswith("kemu: error: ")


def test_metrics_client_failures_are_metrics_unavailable(cluster: tuple[ServerCore, ManualClock, KubeletShard]) -> None:
    """What the HPA turns into ScalingActive=False: never an exception of another type."""
    core, clock, _ = cluster
    client = metrics_client(core.store, clock.now)
    everyone = parse_label_selector("")
    with pytest.raises(MetricsUnavailable, match="no resource metrics reader"):
        client.resource_metric("cpu", "default", everyone)
    with pytest.raises(MetricsUnavailable, match="could not find the metric nope for pods"):
        client.pod_metric("nope", "default", everyone)
    with pytest.raises(MetricsUnavailable, match=r"could not find the metric http_requests_per_second for "
                                                 r"deployments\.apps"):
        client.object_metric("http_requests_per_second", "default", ObjectReference("Deployment", "web", "apps/v1"))
    with pytest.raises(MetricsUnavailable, match="no resource for kind Widget"):
        client.object_metric("http_requests_per_second", "default", ObjectReference("Widget", "w", "example.com/v1"))
    with pytest.raises(MetricsUnavailable, match="no metrics returned from external metrics API"):
        client.external_metric("queue_depth", "default", parse_label_selector("queue=none"))

    class Resources:
        def resource_metric(self, resource: str, namespace: str, selector: Any, container: str = "") -> Any:
            return {"p": None}, 1.0

    assert metrics_client(core.store, clock.now, resources=Resources()).resource_metric(
        "cpu", "default", everyone) == ({"p": None}, 1.0)
