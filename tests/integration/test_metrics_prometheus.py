"""The ``--prometheus-url`` path: kemu's rules run on the real Prometheus, and agree with kemu's own series.

A kubelet shard (real Redis, ManualClock at wall time) runs pods of load target ``web``; its
process exports their ``http_requests_per_second`` (emulator.kubelet.load's collector) and the
load driver's ``kemu_loadgen_http_requests_per_second{target}`` gauge, both on the default
registry, served over HTTP. Debian's ``prometheus`` binary scrapes that endpoint every second.
The adapter built with the Prometheus URL sends the rendered rule queries there (httpx); its
answers must be the ones the adapter over kemu's own series gives, which are rate / ready pods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import start_http_server

from emulator import loadtargets
from emulator.api import errors
from emulator.api.kinds import POD
from emulator.api.quantity import format_millis
from emulator.clock import ManualClock
from emulator.metricsapi.adapter import MetricsAdapter
from emulator.server.core import ServerCore
from emulator.store.store import Store
from loadgen import metrics as loadgen_metrics
from tests import builders as b
from tests.prometheus import free_port, running_prometheus
from tests.shards import metrics_shard, wall_clock_core
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

WINDOW = 15.0
RATE, PODS = 90.0, 3


@pytest.fixture
def exporter() -> Iterator[str]:
    """This process's default registry over HTTP, as a kemu process serves /metrics."""
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1")
    yield f"127.0.0.1:{port}"
    server.shutdown()
    thread.join(10)


@pytest.fixture
def prometheus(exporter: str, tmp_path: Path) -> Iterator[str]:
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "scrape_configs": [{"job_name": "kemu", "static_configs": [{"targets": [exporter]}]}]}
    with running_prometheus(config, tmp_path) as url:
        yield url


@pytest.fixture
def loaded(redis_url: str) -> Iterator[tuple[ServerCore, ManualClock]]:
    """PODS ready pods of target web, RATE requests/s offered, one whole metrics window published."""
    core, clock = wall_clock_core(redis_url)
    with metrics_shard(core, clock, WINDOW) as shard:
        loadtargets.set_rate(core.store.redis, core.store.config.prefix, "web", RATE)
        loadgen_metrics.HTTP_REQUESTS_PER_SECOND.labels("web").set(RATE)  # what kemu run's load phase exports
        pods = []
        for i in range(PODS):
            pod = b.pod(f"web-{i}", containers=[b.container(cpu="200m", lim_cpu="1")], node="n-00000",
                        labels={"app": "web"})
            pod["metadata"]["annotations"] = {"kemu.io/startup-delay": "0s", "kemu.io/load-target": "web",
                                              "kemu.io/cost-per-request": "5m"}
            pods.append(pod)
        core.create_many(POD, pods)
        for _ in range(int(2 * WINDOW) + 1):
            assert shard.sync(10)
            clock.advance(1.0)
            shard.tick()
        yield core, clock


def test_prometheus_answers_what_the_own_series_answer(loaded: tuple[ServerCore, ManualClock],
                                                       prometheus: str) -> None:
    core, clock = loaded

    def scraped() -> bool:
        r = httpx.get(f"{prometheus}/api/v1/query", params={"query": "count(http_requests_per_second)"}, timeout=5)
        result = r.json()["data"]["result"]
        return bool(result) and float(result[0]["value"][1]) == PODS

    wait_for(scraped, 30, "the pods' series in Prometheus", interval=0.2)
    via_prometheus = MetricsAdapter.build(core.store, prometheus_url=prometheus)
    own = MetricsAdapter.build(core.store, now=clock.now)
    path = ["namespaces", "default", "pods", "*", "http_requests_per_second"]

    def values(adapter: MetricsAdapter) -> dict[str, str]:
        return {i["describedObject"]["name"]: i["value"] for i in adapter.serve_custom(path, {})["items"]}

    expected = {f"web-{i}": format_millis(round(RATE / PODS * 1000)) for i in range(PODS)}
    assert values(own) == expected
    assert values(via_prometheus) == expected
    external = via_prometheus.serve_external(["namespaces", "default", "http_requests_per_second"],
                                             {"labelSelector": "target=web"})
    assert [(i["metricLabels"], i["value"]) for i in external["items"]] == [({"target": "web"}, "90")]
    # Discovery asks Prometheus's /api/v1/series which series the rules find.
    assert "pods/http_requests_per_second" in {r["name"] for r in via_prometheus.custom_resource_list()["resources"]}


@pytest.mark.parametrize(("call", "code"), [
    (lambda a: a.serve_external(["namespaces", "default", "http_requests_per_second"], {}), 404),
    (lambda a: a.serve_custom(["namespaces", "default", "pods", "*", "http_requests_per_second"], {}), 404),
    (lambda a: a._query('sum(kemu_loadgen_http_requests_per_second{target="web"})'), 503),
], ids=["external-unknown-without-discovery", "custom-unknown-without-discovery", "query"])
def test_an_unreachable_prometheus_is_never_a_500(redis_url: str, call: Callable[[MetricsAdapter], object],
                                                  code: int) -> None:
    """Discovery that cannot reach Prometheus finds no metric (404); a query that cannot is 503."""
    adapter = MetricsAdapter.build(Store.connect(redis_url), prometheus_url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(errors.StatusError) as err:
        call(adapter)
    assert err.value.code == code
