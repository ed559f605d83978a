"""Metrics plumbing: a process serves /metrics and is found through the discovery data in Redis."""

from __future__ import annotations

import httpx
import pytest
import redis
from prometheus_client import CollectorRegistry, Counter

from emulator.metrics import TargetRegistration, discover, process_instance, serve, serve_and_register
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def test_served_metrics_are_discoverable_and_scrapable(redis_url: str) -> None:
    registry = CollectorRegistry()
    Counter("kemu_test_events", "events seen by the test", registry=registry).inc(3)
    host, port = serve(registry=registry)
    client = redis.Redis.from_url(redis_url)
    reg = TargetRegistration(client, "sched-1", f"{host}:{port}", {"component": "scheduler"}).start()
    try:
        targets = discover(client)
        assert targets == [{"targets": [f"{host}:{port}"], "labels": {"instance": "sched-1",
                                                                      "component": "scheduler"}}]
        body = httpx.get(f"http://{targets[0]['targets'][0]}/metrics").text
        assert "kemu_test_events_total 3.0" in body
    finally:
        reg.stop()
    assert discover(client) == []


def test_expired_targets_drop_out(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    TargetRegistration(client, "gone", "127.0.0.1:1", ttl=10).refresh(now=1000.0)
    TargetRegistration(client, "live", "127.0.0.1:2", ttl=10).refresh(now=1005.0)
    assert [t["labels"]["instance"] for t in discover(client, now=1012.0)] == ["live"]
    assert client.hkeys("kemu:targets") == [b"live"]


def test_load_driver_serves_and_registers_its_metrics(redis_url: str) -> None:
    from loadgen import metrics as loadgen_metrics

    client = redis.Redis.from_url(redis_url)
    endpoint = loadgen_metrics.start(client)
    try:
        loadgen_metrics.PODS_CREATED.inc(5)
        loadgen_metrics.QUEUE_DEPTH.labels("jobs").set(3)
        (target,) = discover(client)
        # Named per process (host and pid): several drivers, in several containers, never collide.
        assert target["labels"] == {"instance": process_instance("loadgen"), "component": "loadgen"}
        body = httpx.get(f"http://{target['targets'][0]}/metrics").text
        assert "kemu_loadgen_pods_created_total" in body and 'kemu_loadgen_queue_depth{queue="jobs"} 3.0' in body
        assert "kemu_loadgen_backlog 0.0" in body
    finally:
        endpoint.stop()
    assert discover(client) == []


def test_each_api_server_worker_is_a_target_of_its_own(redis_url: str) -> None:
    """With several worker processes a scrape of the shared port would reach one at random: each registers."""
    from emulator.apiserver.process import ApiServerProcess
    from emulator.apiserver.settings import ServerSettings
    from emulator.metrics import SD_PATH

    proc = ApiServerProcess(ServerSettings(redis_url=redis_url, port=0, workers=2))
    url = proc.start()
    try:
        client = redis.Redis.from_url(redis_url)
        wait_for(lambda: len(discover(client)) >= 2, 20, "both workers' lifespans to register them", interval=0.05)
        targets = httpx.get(url + SD_PATH).json()
        assert sorted(t["labels"]["component"] for t in targets) == ["apiserver", "apiserver"]
        assert all(t["labels"]["instance"].startswith("apiserver-") for t in targets)
        for _ in range(4):
            httpx.get(url + "/api/v1/namespaces/default/pods")
        total = 0.0
        for t in targets:
            body = httpx.get(f"http://{t['targets'][0]}/metrics").text
            for line in body.splitlines():
                if line.startswith('apiserver_request_total{code="200",group="",resource="pods",subresource="",'
                                   'verb="LIST"}'):
                    total += float(line.rsplit(" ", 1)[1])
        assert total == 4
    finally:
        proc.stop()


def test_one_process_is_one_target_however_many_parts_ask(redis_url: str) -> None:
    # A `kemu run` process hosts controller managers and the load driver: serving the process's
    # registry twice would make Prometheus count each of its series twice.
    client = redis.Redis.from_url(redis_url)
    first = serve_and_register(client, "cm", "controller-manager")
    second = serve_and_register(client, "loadgen", "loadgen")
    assert second.address == first.address
    assert [t["labels"] for t in discover(client)] == [{"instance": "cm", "component": "controller-manager"}]
    first.stop()
    assert len(discover(client)) == 1  # still served for the part that has not stopped
    assert httpx.get(f"http://{second.address}/metrics").status_code == 200
    second.stop()
    assert discover(client) == []
    third = serve_and_register(client, "again", "loadgen")  # a fresh endpoint once all are gone
    try:
        assert [t["labels"]["instance"] for t in discover(client)] == ["again"]
    finally:
        third.stop()
