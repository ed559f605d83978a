"""Metrics plumbing: a process serves /metrics and is found through the discovery data in Redis."""

from __future__ import annotations

import httpx
import pytest
import redis
from prometheus_client import CollectorRegistry, Counter

from emulator.metrics import TargetRegistration, discover, serve

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
