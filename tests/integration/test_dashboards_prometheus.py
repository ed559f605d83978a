"""Every panel of every committed Grafana dashboard has data, scraped by the real Prometheus from a real cluster.

A kemu cluster runs in this process (Redis, the API server child process,
the controller manager, one scheduler, 20 nodes in one kubelet shard actor on
a local Ray) with a short workload: 300 small pods over HTTP and the store, a
Deployment, low-priority fillers plus one high-priority pod that must preempt
one of them, a pod whose memory leaks past its limit (OOM kill), an HTTP
watch of pods open throughout, and autoscalers on the Deployment: its pods
serve load target ``web`` (300 requests/s, set as a scenario's load phase
sets it), an HPA scales it on their ``http_requests_per_second`` and CPU, and
a VPA (mode Off, recommender every 10 s of cluster time) recommends for it; a KEDA
ScaledObject scales a Deployment of queue workers from zero on a Redis list with items;
one empty node group runs the Cluster Autoscaler; two tainted GPU nodes (2 T4 devices each)
run a GPU share and a whole-GPU pod, so the GPU dashboard's scheduler and DCGM-style series exist.
Debian's ``prometheus`` binary scrapes it with ``dashboards/prometheus.yml``'s
one http_sd job pointed at this cluster's API server (scrape and discovery
every second). Once every target is up and has
been scraped after the workload, each target expression of each panel in
``dashboards/*.json`` is run through ``/api/v1/query`` (Grafana's variables
substituted as Grafana would: ``$scheduler``/``$profile``/``$hpa``/``$scaledobject`` -> ``.*`` for
"All", ``$__rate_interval`` -> 15s) and must return at least one series; a
failure names the dashboard, the panel and the expression. So a renamed
metric, label or a panel querying something nobody exports fails here.

Every wait polls a condition with a deadline (Prometheus's targets API, the
store's watch); nothing sleeps blindly.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from actors.cli import kubelet_runner
from emulator import dashboards, loadtargets
from emulator.api.errors import StatusError
from emulator.api.gpu import GPU_MODEL_LABEL
from emulator.api.kinds import (
    DEPLOYMENT,
    HORIZONTALPODAUTOSCALER,
    NODE,
    POD,
    PRIORITYCLASS,
    SCALEDOBJECT,
    VERTICALPODAUTOSCALER,
)
from emulator.cluster import LocalCluster
from emulator.config import Config
from emulator.metrics import SD_PATH
from emulator.server.core import ServerCore
from loadgen import metrics
from tests.prometheus import running_prometheus
from tests.waiting import store_writes, wait_for

pytestmark = pytest.mark.integration

NODES = 20
SPEED = 5.0
RATE_INTERVAL = "15s"
COMPONENTS = {"apiserver", "kubelet", "controller-manager"}
GPU_NODES = 2
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_POOL = {"name": "gpu", "count": GPU_NODES, "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"},
            "labels": {GPU_MODEL_LABEL: "T4"}, "taints": [GPU_TAINT]}  # tainted: only the GPU pods land there


@pytest.fixture
def cluster(redis_url: str, local_ray: None, tmp_path: Path) -> Iterator[LocalCluster]:
    cfg = Config(redis_url=redis_url, data_dir=tmp_path / "data", node_shards=4, clock_speed=SPEED, api_port=0,
                 nodes=NODES, node_pools=[GPU_POOL], kubelet_shards=1, schedulers=1,
                 kubelet={"events": "warnings", "metrics_window": 5},
                 controller_manager={"options": {"recommender_interval": 10}},
                 # A node group turns the Cluster Autoscaler on (its panels); its template (2 cpu) fits none of
                 # the workload's pods that lack room (the 4-cpu preemptor), so it stays at size 0.
                 node_groups=[{"name": "spare", "min": 0, "max": 2, "instance_type": "m5.large",
                               "price_per_hour": 0.096}])
    c = LocalCluster(cfg, kubelets=kubelet_runner)
    c.start()
    yield c
    c.stop()


@pytest.fixture
def prometheus(cluster: LocalCluster, tmp_path: Path) -> Iterator[str]:
    """The real Prometheus, configured from dashboards/prometheus.yml but scraping this cluster every second."""
    config = yaml.safe_load((dashboards.DASHBOARDS_DIR / "prometheus.yml").read_text())
    config["global"].update({"scrape_interval": "1s", "evaluation_interval": "1s"})
    (job,) = config["scrape_configs"]
    job["http_sd_configs"] = [{"url": f"{cluster.api_url}{SD_PATH}", "refresh_interval": "1s"}]
    with running_prometheus(config, tmp_path) as url:
        yield url


def small_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


def big_pod(name: str, cpu: str, priority_class: str) -> dict[str, Any]:
    pod = small_pod(name)
    pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": cpu, "memory": "1Gi"}
    pod["spec"]["priorityClassName"] = priority_class
    return pod


def leaking_pod(name: str) -> dict[str, Any]:
    pod = small_pod(name)
    pod["metadata"]["annotations"] = {"kemu.io/memory": "leak(32Mi, 64Mi/s)"}
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"},
                                                 "limits": {"memory": "64Mi"}}
    return pod


def gpu_pod(name: str, resources: dict[str, str]) -> dict[str, Any]:
    pod = small_pod(name)
    pod["spec"]["containers"][0]["resources"]["requests"].update(resources)
    pod["spec"]["containers"][0]["resources"]["limits"] = dict(resources)  # extended: limits equal requests
    pod["spec"]["tolerations"] = [{"key": GPU_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}]
    return pod


GPU_PODS = [gpu_pod("gpu-share", {"alibabacloud.com/gpu-milli": "300"}), gpu_pod("gpu-whole", {"nvidia.com/gpu": "1"})]
LOAD_RATE = 300.0
DEPLOYMENT_BODY = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"},
                                       "annotations": {"kemu.io/load-target": "web", "kemu.io/startup-delay": "0s"}},
                          "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                                                   "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}},
}

HPA_BODY = {
    "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minReplicas": 3,
             "maxReplicas": 6, "metrics": [
                 {"type": "Pods", "pods": {"metric": {"name": "http_requests_per_second"},
                                           "target": {"type": "AverageValue", "averageValue": "100"}}},
                 {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                            "averageUtilization": 80}}}]},
}
VPA_BODY = {
    "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
             "updatePolicy": {"updateMode": "Off"}},
}
QUEUE = "dashboards-queue"
QUEUE_DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "queue", "namespace": "default"},
    "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "queue"}},
             "template": {"metadata": {"labels": {"app": "queue"},
                                       "annotations": {"kemu.io/profile": "queue-worker", "kemu.io/queue": QUEUE,
                                                       "kemu.io/items-per-second": "1",
                                                       "kemu.io/startup-delay": "0s"}},
                          "spec": {"containers": [{"name": "worker", "image": "worker:1",
                                                   "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}},
}
SCALEDOBJECT_BODY = {
    "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "queue", "namespace": "default"},
    "spec": {"scaleTargetRef": {"name": "queue"}, "minReplicaCount": 0, "maxReplicaCount": 3, "pollingInterval": 5,
             "triggers": [{"type": "redis", "metadata": {"listName": QUEUE, "listLength": "10"}}]},
}


class PodWatch:
    """An HTTP watch of pods held open (what kubectl get -w does), read in a thread."""

    def __init__(self, url: str) -> None:
        self.events = 0
        self._client = httpx.Client(base_url=url, timeout=None)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with self._client.stream("GET", "/api/v1/pods", params={"watch": "true"}) as r:
                for line in r.iter_lines():
                    if line:
                        self.events += 1
                    if self._stop.is_set():
                        return
        except httpx.HTTPError:
            return

    def stop(self) -> None:
        self._stop.set()
        self._client.close()


def targets(prom: str) -> list[dict[str, Any]]:
    return httpx.get(f"{prom}/api/v1/targets", params={"state": "active"}, timeout=5).json()["data"]["activeTargets"]


def query(prom: str, expr: str) -> list[dict[str, Any]]:
    body = httpx.get(f"{prom}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert body["status"] == "success", f"{expr}: {body}"
    return body["data"]["result"]


def grafana_expr(expr: str) -> str:
    """What Grafana sends for "All" on every variable and our scrape interval."""
    for var, value in (("$__rate_interval", RATE_INTERVAL), ("$__interval", "2s"), ("$__range", "5m"),
                       ("$scheduler", ".*"), ("$profile", ".*"), ("$hpa", ".*"),
                       ("$scaledobject", ".*")):
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def run_workload(core: ServerCore, http: httpx.Client) -> None:
    wait_for(lambda: sum(
        any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or [])
        for n in core.list(NODE).items) == NODES + GPU_NODES, 60, f"{NODES + GPU_NODES} Ready nodes",
             wake=store_writes(core, POD, block=0.2))
    for name, value in (("low", 100), ("high", 1000)):
        core.create(PRIORITYCLASS, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                    "metadata": {"name": name}, "value": value})
    # Fillers first: one 5-CPU low-priority pod per node leaves ~3 CPUs free on each.
    for r in core.create_many(POD, [big_pod(f"filler-{i:02d}", "5", "low") for i in range(NODES)]):
        assert isinstance(r, dict), r
    # 300 small pods: half over HTTP (request metrics), half through the store in batches.
    for i in range(150):
        assert http.post("/api/v1/namespaces/default/pods", json=small_pod(f"http-{i:03d}")).status_code == 201
    for start in range(0, 150, 50):
        core.create_many(POD, [small_pod(f"store-{i:03d}") for i in range(start, start + 50)])
    # The load phase's two writes: the driver's gauge and the load target the pods serve.
    metrics.HTTP_REQUESTS_PER_SECOND.labels("web").set(LOAD_RATE)
    loadtargets.set_rate(core.store.redis, core.store.config.prefix, "web", LOAD_RATE)
    core.create(DEPLOYMENT, DEPLOYMENT_BODY)
    core.create(HORIZONTALPODAUTOSCALER, HPA_BODY)
    core.create(VERTICALPODAUTOSCALER, VPA_BODY)
    core.create(POD, leaking_pod("leaky"))
    # KEDA: 1,000 items wake the queue workers (0 -> 1) and the HPA it owns takes them to the max.
    core.store.redis.delete(QUEUE)
    core.store.redis.rpush(QUEUE, *range(1000))
    core.create(DEPLOYMENT, QUEUE_DEPLOYMENT)
    core.create(SCALEDOBJECT, SCALEDOBJECT_BODY)
    for pod in GPU_PODS:
        core.create(POD, pod)

    def bound() -> int:
        return sum(1 for p in core.list(POD).items if p["spec"].get("nodeName"))

    wait_for(lambda: bound() >= NODES + 300 + 3 + 1 + len(GPU_PODS), 60, "the workload bound",
             wake=store_writes(core, POD, block=0.2))
    # Now ~1.5 CPUs are free per node: a 4-CPU high-priority pod fits nowhere without preempting a filler.
    assert http.post("/api/v1/namespaces/default/pods", json=big_pod("urgent", "4", "high")).status_code == 201

    def urgent_bound() -> bool:
        return bool(core.get(POD, "default", "urgent")["spec"].get("nodeName"))

    wait_for(urgent_bound, 60, "the preemptor bound", wake=store_writes(core, POD, block=0.2))
    assert http.get("/api/v1/namespaces/default/pods", params={"limit": "100"}).status_code == 200

    # The autoscalers have something to show: both HPA metrics read, a VPA recommendation with bounds.
    def hpa_metrics() -> int:
        status = core.get(HORIZONTALPODAUTOSCALER, "default", "web").get("status") or {}
        return len(status.get("currentMetrics") or [])

    wait_for(lambda: hpa_metrics() == 2, 60, "the HPA's two current metrics", interval=0.2)

    def recommended() -> bool:
        rec = ((core.get(VERTICALPODAUTOSCALER, "default", "web").get("status") or {}).get("recommendation") or {})
        return any("upperBound" in c for c in rec.get("containerRecommendations") or [])

    wait_for(recommended, 60, "the VPA's recommendation with bounds", interval=0.2)

    def keda_hpa_synced() -> bool:
        try:
            status = core.get(HORIZONTALPODAUTOSCALER, "default", "keda-hpa-queue").get("status") or {}
        except StatusError:
            return False
        return int(status.get("currentReplicas") or 0) >= 1

    wait_for(keda_hpa_synced, 60, "the ScaledObject's HPA at 1 or more replicas", interval=0.2)


def test_every_dashboard_panel_has_data(cluster: LocalCluster, prometheus: str) -> None:
    core = cluster.core
    assert core is not None and cluster.api_url is not None
    headers = {"Authorization": f"Bearer {cluster.api_token}"} if cluster.api_token else {}
    watch = PodWatch(cluster.api_url)
    try:
        with httpx.Client(base_url=cluster.api_url, headers=headers, timeout=30) as http:
            run_workload(core, http)

        def all_up() -> bool:
            found = targets(prometheus)
            components = {t["labels"].get("component") for t in found}
            return components >= COMPONENTS and all(t["health"] == "up" for t in found)

        wait_for(all_up, 30, f"targets {sorted(COMPONENTS)} up", interval=0.2)
        after = time.time()

        def scraped_after_workload() -> bool:
            # Three scrapes of every target since the workload ended: rate() has samples to work with.
            return all(_scrape_time(t) > after + 2 for t in targets(prometheus))

        wait_for(scraped_after_workload, 30, "scrapes after the workload", interval=0.2)
        failures = []
        checked = 0
        for dash in dashboards.load():
            for panel in dash["panels"]:
                for target in panel["targets"]:
                    expr = grafana_expr(target["expr"])
                    checked += 1
                    if not query(prometheus, expr):
                        failures.append(f"{dash['title']} / {panel['title']}: {expr}")
        assert not failures, "panels without data:\n" + "\n".join(failures)
        assert checked >= 50
        # The workload really did what the dashboards show.
        preemptions = query(prometheus, "sum(scheduler_preemption_attempts_total)")
        assert float(preemptions[0]["value"][1]) >= 1
        created = query(prometheus, 'sum(apiserver_request_total{verb="POST", resource="pods", code="201"})')
        assert float(created[0]["value"][1]) >= 151
        assert float(query(prometheus, "sum(apiserver_watch_events_total)")[0]["value"][1]) > 0
        running = query(prometheus, 'sum(kemu_cluster_pods{phase=~"Pending|Running"})')
        assert float(running[0]["value"][1]) >= 300
    finally:
        watch.stop()


def _scrape_time(target: dict[str, Any]) -> float:
    """``lastScrape`` (RFC 3339, nanoseconds) as a Unix time; 0 if never scraped."""
    from datetime import datetime

    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$",
                     target.get("lastScrape") or "")
    if match is None or match.group(1).startswith("0001-"):
        return 0.0
    day, frac, tz = match.groups()
    stamp = datetime.fromisoformat(f"{day}{'+00:00' if tz == 'Z' else tz}").timestamp()
    return stamp + float(f"0.{frac or 0}")


def test_prometheus_config_is_one_http_sd_job() -> None:
    config = yaml.safe_load((dashboards.DASHBOARDS_DIR / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["http_sd_configs"][0]["url"].endswith(SD_PATH)
    json.dumps(config)  # plain data
