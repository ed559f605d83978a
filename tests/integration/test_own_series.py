"""kemu's own series and the PromQL subset evaluated over them (real Redis).

The series are written the way the kubelet shards and ``kemu load`` write them
(``usage.write_snapshot``, ``loadtargets``); expected results are the PromQL
semantics of each query, computed here from the written values.
"""

from __future__ import annotations

import pytest
import redis

from emulator import loadtargets
from emulator.kubelet import usage
from emulator.metricsapi.series import OwnSeries

pytestmark = pytest.mark.integration

NOW = 1_700_000_000.0
RPS = {("default", "web-0"): 10.0, ("default", "web-1"): 30.0, ("prod", "web-0"): 5.0}


@pytest.fixture
def own(redis_url: str) -> OwnSeries:
    client = redis.Redis.from_url(redis_url)
    pipe = client.pipeline(transaction=False)
    usage.write_snapshot(pipe, "kemu:", timestamp=NOW, window=15.0, nodes={}, pods={},
                         app={key: {usage.REQUESTS_SERIES: v, usage.LATENCY_SERIES: v / 1000} for key, v in
                              RPS.items()})
    pipe.execute()
    loadtargets.set_rate(client, "kemu:", "web", 45.0)
    loadtargets.set_rate(client, "kemu:", "api", 5.0)
    loadtargets.set_queue_depth(client, "kemu:", "jobs", 7.0)
    return OwnSeries(client, "kemu:", lambda: NOW + 1)


def by(samples: list, label: str) -> dict[str, float]:
    return {s.labels.get(label, ""): s.value for s in samples}


@pytest.mark.parametrize(("query", "label", "expected"), [
    ('http_requests_per_second{namespace="default"}', "pod", {"web-0": 10.0, "web-1": 30.0}),
    ('sum(http_requests_per_second{namespace="default"}) by (namespace)', "namespace", {"default": 40.0}),
    ("sum(http_requests_per_second) by (namespace)", "namespace", {"default": 40.0, "prod": 5.0}),
    ('avg(http_requests_per_second{pod=~"web-0"}) by (pod)', "pod", {"web-0": 7.5}),
    ("max by (namespace) (http_requests_per_second)", "namespace", {"default": 30.0, "prod": 5.0}),
    ('count(http_requests_per_second{namespace!="prod"})', "", {"": 2.0}),
    ('http_request_duration_seconds{namespace="default",pod="web-1"}', "pod", {"web-1": 0.03}),
    ('sum(kemu_loadgen_http_requests_per_second{target=~"web|api"}) by (target)', "target", {"web": 45.0,
                                                                                              "api": 5.0}),
    ("sum(kemu_loadgen_http_requests_per_second)", "", {"": 50.0}),
    ('kemu_loadgen_queue_depth{queue="jobs"}', "queue", {"jobs": 7.0}),
    ('{__name__=~"kemu_loadgen_.*",target="api"}', "target", {"api": 5.0}),
], ids=["selector", "sum-by-namespace", "sum-all-namespaces", "avg-regex", "max-by-before", "count",
        "latency", "external-by-target", "external-sum", "queue", "name-regex"])
def test_queries(own: OwnSeries, query: str, label: str, expected: dict[str, float]) -> None:
    assert by(own.query(query), label) == pytest.approx(expected)


def test_pod_samples_carry_their_window_and_stale_ones_are_dropped(own: OwnSeries) -> None:
    (sample,) = own.query('http_requests_per_second{namespace="prod"}')
    assert (sample.timestamp, sample.window) == (NOW, 15.0)
    later = OwnSeries(own.client, own.prefix, lambda: NOW + usage.MAX_AGE_WINDOWS * 15.0 + 1)
    assert later.query("http_requests_per_second") == []  # as metrics-server drops a silent node's pods
    assert by(later.query("kemu_loadgen_queue_depth"), "queue") == {"jobs": 7.0}  # set values hold until changed
