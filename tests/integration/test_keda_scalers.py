"""KEDA's scalers through their one interface, against real sources: Redis lists and streams, a real Prometheus.

Every case builds a scaler with :func:`emulator.keda.scalers.build_scaler` from trigger
metadata, then asks it for its metric spec and for metrics and activity, as the operator
does. Expected values follow the upstream scalers' rules (``pkg/scalers/<type>_scaler.go``):
the value is the source's reading, active means above the activation threshold, and the
target is the trigger's AverageValue.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from prometheus_client import REGISTRY, Gauge, start_http_server

from emulator.api.kinds import POD
from emulator.api.selectors import LabelSelector
from emulator.clock import ManualClock
from emulator.keda.scalers import ScalerConfig, ScalerError, build_scaler
from emulator.server.core import ServerCore
from loadgen.queues import QueuePusher
from tests import builders as b
from tests.prometheus import free_port, running_prometheus
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

Obj = dict[str, Any]


@dataclass
class Env:
    """The scalers' view of the cluster: the embedded Redis, the cluster clock, pods from the API."""

    core: ServerCore
    clock: ManualClock

    @property
    def redis(self) -> Any:
        return self.core.store.redis

    def now(self) -> float:
        return self.clock.now()

    def list_pods(self, namespace: str, selector: LabelSelector) -> list[Obj]:
        return list(self.core.list(POD, namespace, label_selector=selector).items)


def scaler(env: Env, kind: str, metadata: dict[str, str], **config: Any) -> Any:
    return build_scaler(ScalerConfig(kind, config.pop("index", 0), metadata, env=env, scalable_name="so", **config))


@pytest.fixture
def env(core: ServerCore, clock: ManualClock) -> Env:
    return Env(core, clock)


REDIS_CASES = [
    ("list", "rpush", 25, {}, 25.0, True),
    ("set", "sadd", 7, {}, 7.0, True),
    ("hash", "hset", 3, {}, 3.0, True),
    ("zset", "zadd", 4, {}, 4.0, True),
    ("missing-key", None, 0, {}, 0.0, False),
    ("below-activation", "rpush", 5, {"activationListLength": "5"}, 5.0, False),
    ("above-activation", "rpush", 6, {"activationListLength": "5"}, 6.0, True),
]


@pytest.mark.parametrize(("case", "writer", "count", "extra", "value", "active"), REDIS_CASES,
                         ids=[c[0] for c in REDIS_CASES])
def test_redis_scaler_reads_the_keys_length(env: Env, case: str, writer: str | None, count: int,
                                            extra: dict[str, str], value: float, active: bool) -> None:
    key = f"redis-scaler-{case}"
    r = env.redis
    r.delete(key)
    for i in range(count):
        if writer == "hset":
            r.hset(key, f"f{i}", i)
        elif writer == "zadd":
            r.zadd(key, {f"m{i}": i})
        elif writer is not None:
            getattr(r, writer)(key, f"item-{i}")
    s = scaler(env, "redis", {"listName": key, "listLength": "10", **extra}, index=2)
    assert s.metric_specs() == [{"type": "External", "external": {
        "metric": {"name": f"s2-redis-{key}", "selector": {"matchLabels": {"scaledobject.keda.sh/name": "so"}}},
        "target": {"type": "AverageValue", "averageValue": "10"}}}]
    assert s.metrics_and_activity(f"s2-redis-{key}") == ([value], active)


def test_redis_scaler_address_and_database_index(env: Env) -> None:
    kwargs = env.redis.connection_pool.connection_kwargs
    other = redis_lib.Redis(host=kwargs["host"], port=kwargs["port"], db=3)
    other.delete("dbq")
    other.rpush("dbq", *range(12))
    s = scaler(env, "redis", {"listName": "dbq", "address": f"{kwargs['host']}:{kwargs['port']}",
                              "databaseIndex": "3"})
    assert s.metrics_and_activity("s0-redis-dbq") == ([12.0], True)
    assert env.redis.llen("dbq") == 0  # not the embedded Redis's db 0
    by_host = scaler(env, "redis", {"listName": "dbq", "host": kwargs["host"], "port": str(kwargs["port"]),
                                    "databaseIndex": "3"})
    assert by_host.metrics_and_activity("s0-redis-dbq") == ([12.0], True)
    other.delete("dbq")


@pytest.mark.parametrize(("password", "works"), [("s3cret", True), ("wrong", False)], ids=["right", "wrong"])
def test_redis_scaler_username_and_password_from_authentication(env: Env, password: str, works: bool) -> None:
    # An ACL user on the real Redis: the TriggerAuthentication's parameters must reach the connection.
    env.redis.execute_command("ACL", "SETUSER", "keda-scaler", "on", ">s3cret", "~*", "+@all")
    env.redis.delete("authq")
    env.redis.rpush("authq", "a", "b")
    kwargs = env.redis.connection_pool.connection_kwargs
    s = build_scaler(ScalerConfig("redis", 0, {"listName": "authq", "address": f"{kwargs['host']}:{kwargs['port']}"},
                                  {"username": "keda-scaler", "password": password}, env=env, scalable_name="so"))
    if works:
        assert s.metrics_and_activity("s0-redis-authq") == ([2.0], True)
    else:
        with pytest.raises(ScalerError, match=r"(?i)invalid username-password pair|auth"):
            s.metrics_and_activity("s0-redis-authq")


def test_unreachable_redis_is_a_scaler_error(env: Env) -> None:
    s = scaler(env, "redis", {"listName": "q", "address": "127.0.0.1:1"})
    with pytest.raises(ScalerError, match=r"redis: .*127\.0\.0\.1:1"):
        s.metrics_and_activity("s0-redis-q")


STREAM_CASES = [
    ("pending", {"consumerGroup": "g", "pendingEntriesCount": "2"}, 3.0, True),
    ("length", {"streamLength": "4"}, 5.0, True),
    ("pending-below-activation", {"consumerGroup": "g", "pendingEntriesCount": "2", "activationLagCount": "3"},
     3.0, False),
]


@pytest.mark.parametrize(("case", "metadata", "value", "active"), STREAM_CASES, ids=[c[0] for c in STREAM_CASES])
def test_redis_streams_scaler(env: Env, case: str, metadata: dict[str, str], value: float, active: bool) -> None:
    r, stream = env.redis, f"stream-{case}"
    r.delete(stream)
    for i in range(5):
        r.xadd(stream, {"n": i})
    r.xgroup_create(stream, "g", id="0")
    r.xreadgroup("g", "c1", {stream: ">"}, count=3)  # 3 delivered, not acknowledged: pending
    s = scaler(env, "redis-streams", {"stream": stream, **metadata})
    assert s.metric_specs()[0]["external"]["metric"]["name"] == f"s0-redis-streams-{stream}"
    assert s.metrics_and_activity("") == ([value], active)


def test_redis_streams_needs_a_consumer_group(env: Env) -> None:
    with pytest.raises(ScalerError, match='missing required parameter "consumerGroup"'):
        scaler(env, "redis-streams", {"stream": "s", "pendingEntriesCount": "5"})


def test_kubernetes_workload_counts_live_pods(env: Env) -> None:
    for i, phase in enumerate(["Running", "Pending", "Succeeded", "Running"]):
        pod = b.pod(f"w-{i}", labels={"app": "w"})
        env.core.create(POD, pod)
        stored = env.core.get(POD, "default", f"w-{i}")
        env.core.update_status(POD, {**stored, "status": {"phase": phase}})
    env.core.create(POD, b.pod("other", labels={"app": "other"}))
    s = scaler(env, "kubernetes-workload", {"podSelector": "app=w", "value": "2"})
    assert s.metric_specs()[0]["external"]["target"] == {"type": "AverageValue", "averageValue": "2"}
    assert s.metrics_and_activity("") == ([3.0], True)  # Succeeded does not count


CRON_CASES = [
    # (now in the zone, start, end) -> inside the window?
    ("inside", "2026-03-02 09:30", "0 9 * * *", "0 17 * * *", True),
    ("before", "2026-03-02 08:59", "0 9 * * *", "0 17 * * *", False),
    ("after", "2026-03-02 17:00", "0 9 * * *", "0 17 * * *", False),
    ("weekday-only-on-sunday", "2026-03-01 10:00", "0 9 * * 1-5", "0 17 * * 1-5", False),
    ("every-15-min-outside", "2026-03-02 10:10", "*/15 * * * *", "5,20,35,50 * * * *", False),
    ("every-15-min-inside-list", "2026-03-02 10:16", "*/15 * * * *", "5,20,35,50 * * * *", True),
    ("every-15-min-inside", "2026-03-02 10:17", "*/15 * * * *", "20-21 * * * *", True),
]


@pytest.mark.parametrize(("case", "now", "start", "end", "inside"), CRON_CASES, ids=[c[0] for c in CRON_CASES])
def test_cron_scaler_window(env: Env, case: str, now: str, start: str, end: str, inside: bool) -> None:
    zone = "Europe/Berlin"
    from zoneinfo import ZoneInfo

    at = dt.datetime.strptime(now, "%Y-%m-%d %H:%M").replace(tzinfo=ZoneInfo(zone)).timestamp()
    env.clock.advance(at - env.clock.now())
    s = scaler(env, "cron", {"timezone": zone, "start": start, "end": end, "desiredReplicas": "7"})
    assert s.metric_specs()[0]["external"]["target"] == {"type": "AverageValue", "averageValue": "1"}
    assert s.metrics_and_activity("") == (([7.0], True) if inside else ([1.0], False))


BAD_METADATA = [
    ("redis", {}, 'error parsing redis metadata: missing required parameter "listName"'),
    ("redis", {"listName": "q", "listLength": "ten"}, 'unable to parse "listLength"'),
    ("cron", {"timezone": "Mars/Olympus", "start": "0 9 * * *", "end": "0 17 * * *", "desiredReplicas": "1"},
     "unable to load timezone"),
    ("cron", {"timezone": "UTC", "start": "0 9 * *", "end": "0 17 * * *", "desiredReplicas": "1"},
     "expected exactly 5 fields"),
    ("kubernetes-workload", {"podSelector": "app=w", "value": "0"}, "value must be a float greater than 0"),
    ("cpu", {"value": "50"}, "no type given in neither trigger.metadata.type or trigger.metricType"),
    ("kafka", {}, "no scaler found for type: kafka"),
]


@pytest.mark.parametrize(("kind", "metadata", "message"), BAD_METADATA,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_METADATA)])
def test_bad_metadata_is_a_scaler_error(env: Env, kind: str, metadata: dict[str, str], message: str) -> None:
    with pytest.raises(ScalerError, match=message.replace("(", r"\(").replace(")", r"\)")):
        scaler(env, kind, metadata)


def test_cpu_scaler_is_a_resource_metric(env: Env) -> None:
    s = scaler(env, "cpu", {"value": "60"}, metric_type="Utilization")
    assert s.metric_specs() == [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": 60}}}]
    m = scaler(env, "memory", {"value": "512Mi", "containerName": "app"}, metric_type="AverageValue")
    assert m.metric_specs() == [{"type": "ContainerResource", "containerResource": {
        "name": "memory", "container": "app", "target": {"type": "AverageValue", "averageValue": "536870912"}}}]


@pytest.fixture
def prometheus_over_kemu(tmp_path: Path) -> Iterator[tuple[str, Gauge]]:
    """A real Prometheus scraping this process's registry (where kemu's series live) every second."""
    gauge = Gauge("kemu_test_keda_backlog", "Backlog a prometheus trigger scales on", ["queue"])
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=REGISTRY)
    config = {"global": {"scrape_interval": "1s"}, "scrape_configs": [
        {"job_name": "kemu", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}]}
    try:
        with running_prometheus(config, tmp_path) as url:
            yield url, gauge
    finally:
        server.shutdown()
        thread.join(5)
        REGISTRY.unregister(gauge)


def test_prometheus_scaler_follows_a_query_over_kemus_series(env: Env,
                                                             prometheus_over_kemu: tuple[str, Gauge]) -> None:
    url, gauge = prometheus_over_kemu
    gauge.labels("jobs").set(42)
    gauge.labels("other").set(5)
    s = scaler(env, "prometheus", {"serverAddress": url, "query": 'sum(kemu_test_keda_backlog{queue="jobs"})',
                                   "threshold": "10", "activationThreshold": "3"})
    assert s.metric_specs()[0]["external"]["metric"]["name"] == "s0-prometheus"
    assert s.metric_specs()[0]["external"]["target"] == {"type": "AverageValue", "averageValue": "10"}
    wait_for(lambda: s.metrics_and_activity("s0-prometheus") == ([42.0], True), 30, "the scraped backlog")
    gauge.labels("jobs").set(2)
    wait_for(lambda: s.metrics_and_activity("s0-prometheus") == ([2.0], False), 30, "below activation")
    both = scaler(env, "prometheus", {"serverAddress": url, "query": "kemu_test_keda_backlog", "threshold": "1"})
    with pytest.raises(ScalerError, match="returned multiple elements"):
        both.metrics_and_activity("s0-prometheus")
    empty = scaler(env, "prometheus", {"serverAddress": url, "query": "kemu_no_such_series", "threshold": "1",
                                       "ignoreNullValues": "false"})
    with pytest.raises(ScalerError, match="target may be lost, the result is empty"):
        empty.metrics_and_activity("s0-prometheus")
    ignored = scaler(env, "prometheus", {"serverAddress": url, "query": "kemu_no_such_series", "threshold": "1"})
    assert ignored.metrics_and_activity("s0-prometheus") == ([0.0], False)


def test_push_phase_items_carry_fractions(env: Env) -> None:
    env.redis.delete("pushq")
    pusher = QueuePusher(env.redis)
    pushed = [pusher.push("pushq", rate) for rate in (2.5, 2.5, 0.4, 0.4, 0.4)]
    assert pushed == [2, 3, 0, 0, 1]  # 2.5 -> 2 (+0.5), 3.0 -> 3, 0.4, 0.8, 1.2 -> 1
    assert [i.decode() for i in env.redis.lrange("pushq", 0, -1)] == [f"pushq-{i}" for i in range(6)]
