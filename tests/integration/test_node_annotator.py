"""The node annotator against real Redis: its usage history, and a real kubelet shard on a ManualClock.

Expected windows are worked out here from the definitions (crane's recording rules): ``avg_5m`` the mean of
the samples of the last 5 minutes, ``max_avg_1h`` the largest ``avg_5m`` of the 5-minute buckets started
within the hour, ``max_avg_1d`` of the hour buckets within the day. Utilization is usage / capacity.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
import redis

from emulator.api.kinds import NODE, POD
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.controllers.nodeannotator import PASS_KEY
from emulator.kubelet.shard import KubeletShard
from emulator.loadaware.history import PROMQL, PrometheusSource, RedisHistory
from emulator.loadaware.policy import HOT_VALUE, METRICS, parse_value
from emulator.server.core import ServerCore
from tests.integration.test_kubelet_shard import is_ready, pod, run_until, shards, start_shard, step  # noqa: F401
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

T0 = 1_700_000_000.0 - 1_700_000_000.0 % 86400  # a day boundary, so the buckets below start where we say


@pytest.fixture
def history(redis_url: str) -> Iterator[RedisHistory]:
    client = redis.Redis.from_url(redis_url)
    prefix = "test-la:"
    yield RedisHistory(client, prefix)
    for key in client.scan_iter(match=prefix + "*"):
        client.delete(key)
    client.close()


def record(h: RedisHistory, at: float, names: list[str], cpu: list[float], mem: list[float]) -> dict[str, list]:
    out = h.record(T0 + at, names, np.array(cpu, dtype=float), np.array(mem, dtype=float))
    return {m: [None if np.isnan(v) else round(float(v), 4) for v in out[m]] for m in METRICS}


def test_windows_from_the_history(history: RedisHistory) -> None:
    names = ["a", "b"]
    # Three samples 60 s apart within one 5-minute bucket: avg = mean, the maxima = that avg.
    record(history, 0, names, [0.2, 0.5], [0.1, 0.1])
    record(history, 60, names, [0.4, 0.5], [0.3, 0.1])
    got = record(history, 120, names, [0.6, float("nan")], [0.5, 0.1])
    assert got["cpu_usage_avg_5m"] == [0.4, 0.5]  # b's NaN sample (no fresh usage) is skipped
    assert got["mem_usage_avg_5m"] == [0.3, 0.1]
    assert got["cpu_usage_max_avg_1h"] == [0.4, 0.5]  # the bucket's max avg: 0.2, 0.3, 0.4 -> 0.4
    # 10 minutes later (a new bucket), load has dropped: the 5m avg is only the new sample (older ones > 5m),
    # the 1h max still remembers the first bucket's 0.4 (a's) and 0.5 (b's).
    got = record(history, 720, names, [0.1, 0.1], [0.2, 0.2])
    assert got["cpu_usage_avg_5m"] == [0.1, 0.1]
    assert got["cpu_usage_max_avg_1h"] == [0.4, 0.5]
    assert got["mem_usage_max_avg_1h"] == [0.3, 0.2]
    # Two hours on, the first buckets are out of the hour but still in the day.
    got = record(history, 7200 + 720, names, [0.05, 0.05], [0.05, 0.05])
    assert got["cpu_usage_max_avg_1h"] == [0.05, 0.05]
    assert got["cpu_usage_max_avg_1d"] == [0.4, 0.5]
    # A day and more later everything old is gone.
    got = record(history, 86400 + 7200 + 720, names, [0.3, 0.3], [0.3, 0.3])
    assert got["cpu_usage_max_avg_1d"] == [0.3, 0.3]


def test_history_follows_nodes_added_and_removed(history: RedisHistory) -> None:
    record(history, 0, ["a", "b"], [0.2, 0.8], [0.2, 0.8])
    # "b" went away, "c" came: a keeps its history, c has only its own sample.
    got = record(history, 60, ["a", "c"], [0.4, 0.6], [0.4, 0.6])
    assert got["cpu_usage_avg_5m"] == [0.3, 0.6]
    assert got["cpu_usage_max_avg_1h"] == [0.3, 0.6]


@pytest.fixture
def manager(env: tuple[ServerCore, ManualClock]) -> Iterator[list[ControllerManager]]:
    started: list[ControllerManager] = []
    yield started
    for m in started:
        m.stop()


def annotations(core: ServerCore, node: str) -> dict[str, str]:
    return core.get(NODE, None, node)["metadata"].get("annotations") or {}


def annotator_settle(core: ServerCore, clock: ManualClock, annotator: Any) -> None:
    """Wait until the annotator's caches hold the store's nodes and pods (the pods' bindings are recorded at the
    cluster time they were made) and its pass due at the current cluster time has run."""
    queue = annotator.queue

    def versions(objs: list[Obj]) -> dict[tuple[str, str], str]:
        return {(o["metadata"].get("namespace") or "", o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                for o in objs}

    def settled() -> bool:
        caught_up = (versions(annotator.node_informer.indexer.list()) == versions(core.list(NODE).items)
                     and versions(annotator.pod_informer.indexer.list()) == versions(core.list(POD).items))
        next_pass = queue._waiting_at.get(PASS_KEY)
        return (caught_up and next_pass is not None and next_pass > clock.now() and len(queue) == 0
                and queue.longest_running_processor_seconds() == 0)
    wait_for(settled, 60, "the annotator's caches and its pass due at the current cluster time", interval=0.005)


def annotator_step(shard: KubeletShard, clock: ManualClock, annotator: Any, seconds: float = 5.0) -> None:
    """One step in one order: the annotator is done with the current time; the kubelet shard ticks at the new
    time (its node usage for that time published) and the annotator's caches catch up with it before the clock
    shows the new time, so a pass due then reads that usage; then that pass runs."""
    core = shard.core
    annotator_settle(core, clock, annotator)
    assert shard.sync(10), "informers did not catch up"
    shard.tick(clock.now() + seconds)
    assert shard.sync(10), "informers did not catch up"
    annotator_settle(core, clock, annotator)
    clock.advance(seconds)
    annotator_settle(core, clock, annotator)


def annotator_run_until(shard: KubeletShard, clock: ManualClock, annotator: Any, done: Callable[[], bool],
                        limit: float, seconds: float = 5.0) -> None:
    """Step (as :func:`annotator_step`) until ``done()``; fails after ``limit`` cluster seconds."""
    waited = 0.0
    annotator_settle(shard.core, clock, annotator)
    while not done():
        assert waited < limit, f"condition not met after {limit} cluster seconds"
        annotator_step(shard, clock, annotator, seconds)
        waited += seconds


def test_annotator_writes_kubelet_usage_and_hot_values(env: tuple[ServerCore, ManualClock],
                                                       shards: list[KubeletShard],  # noqa: F811
                                                       manager: list[ControllerManager]) -> None:
    core, clock = env
    shard = start_shard(core, clock, shards, [{"name": "n", "count": 2,
                                                "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
                        metrics_window=15)
    step(shard, clock)
    # 2 of 8 cores and 8 GiB of 32 on n-00000: 0.25 and 0.25; n-00001 idle.
    core.create(POD, pod(core, "busy", node="n-00000", annotations={"kemu.io/cpu": "2", "kemu.io/memory": "8Gi"}))
    run_until(shard, clock, lambda: is_ready(core, "busy"), 10)
    for _ in range(32):  # two full metrics windows since the pod started
        step(shard, clock)
    m = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=("node-annotator",),
                                              options={"node_annotator_period": 30}), clock=clock).start()
    manager.append(m)
    assert m.wait_active(20)
    annotator = m.controllers()["node-annotator"]

    def wait_pass(passes: int) -> None:
        annotator_run_until(shard, clock, annotator, lambda: annotator.passes >= passes, 120)

    wait_pass(1)
    busy, idle = annotations(core, "n-00000"), annotations(core, "n-00001")
    for metric in METRICS:
        value, stamp = parse_value(busy[metric])
        assert value == pytest.approx(0.25, abs=0.01), metric
        assert clock.now() - 30 <= stamp <= clock.now()
        assert parse_value(idle[metric])[0] == pytest.approx(0.0, abs=0.01)
    assert busy[HOT_VALUE].startswith("0,")
    assert annotator.last_written == 2

    # Steady usage: the next pass has nothing due (no window moved 0.005, nothing half-way to stale).
    wait_pass(annotator.passes + 1)
    assert annotator.last_written == 0
    assert annotations(core, "n-00000") == busy

    # Five pods bound to n-00001 now: 1m rule 5 // 2 = 2, 5m rule 5 // 5 = 1, 30m rule 0 -> hot value 3.
    core.create_many(POD, [pod(core, f"burst-{i}", node="n-00001") for i in range(5)])
    done = annotator.passes
    wait_pass(done + 1)
    assert annotations(core, "n-00001")[HOT_VALUE].split(",")[0] == "3"
    assert annotator.last_written == 1  # only the node whose hot value changed
    # Past the minute and past five minutes the rules let go of them.
    annotator_run_until(shard, clock, annotator,
                        lambda: annotations(core, "n-00001")[HOT_VALUE].split(",")[0] == "0", 400)
    assert clock.now() - T0 > 300


class FakePrometheus(BaseHTTPRequestHandler):
    """Prometheus's instant-query API: for nodes a and c (and one not in the cluster), a value per metric that
    says which query it answers (0.1 for the first of PROMQL, 0.2 for the second ...)."""

    asked: list[str]

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)["query"][0]
        self.asked.append(query)
        value = str(0.1 * (list(PROMQL.values()).index(query) + 1))
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"node": n}, "value": [1.7e9, value]} for n in ("a", "c", "not-ours")]}}).encode()
        self.send_response(200 if url.path == "/api/v1/query" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[tuple[str, list[str]]]:
    """A loopback fake Prometheus: its URL and the queries it was asked."""
    handler = type("Handler", (FakePrometheus,), {"asked": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", handler.asked
    server.shutdown()
    server.server_close()


def test_windows_from_a_prometheus_query_api(prometheus: tuple[str, list[str]]) -> None:
    """--prometheus-url: one instant query per window over Prometheus's HTTP API, answers matched by node."""
    url, asked = prometheus
    source = PrometheusSource(url)
    got = source.windows(["a", "b", "c"])
    source.close()
    assert asked == list(PROMQL.values())
    assert "max_over_time(avg_over_time(" in PROMQL["cpu_usage_max_avg_1h"] and "[1h:5m]" in PROMQL[
        "cpu_usage_max_avg_1h"]
    for k, metric in enumerate(METRICS):
        a, b, c = got[metric].tolist()
        assert a == pytest.approx(0.1 * (k + 1)) and c == a and np.isnan(b), metric


def test_kemu_node_annotator_prometheus_url_feeds_the_annotations(env: tuple[ServerCore, ManualClock],
                                                                   manager: list[ControllerManager],
                                                                   prometheus: tuple[str, list[str]]) -> None:
    """``kemu node-annotator --prometheus-url URL``: the standalone annotator (its own Lease) writes the windows
    that Prometheus answers, not the Redis history's."""
    from emulator.annotator_cli import LEASE_NAME, manager_config
    from emulator.cli import build_parser

    core, clock = env
    url, asked = prometheus
    for name in ("a", "b"):
        core.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                           "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}})
    config = manager_config(build_parser().parse_args(["node-annotator", "--prometheus-url", url, "--period", "30"]))
    assert config.lease_name == LEASE_NAME and config.controllers == ("node-annotator",)
    m = ControllerManager(core, config, clock=clock).start()
    manager.append(m)
    assert m.wait_active(20)
    annotator = m.controllers()["node-annotator"]
    wait_for(lambda: annotator.passes >= 1, 20, "the first annotator pass")
    assert asked[:len(PROMQL)] == list(PROMQL.values())
    got = annotations(core, "a")
    for k, metric in enumerate(METRICS):  # the fake answers 0.1 * (index of the query + 1) for node a
        value, stamp = parse_value(got[metric])
        assert value == pytest.approx(0.1 * (k + 1)) and stamp == pytest.approx(clock.now(), abs=1), metric
    assert not any(metric in annotations(core, "b") for metric in METRICS)  # no answer for b: nothing written
