"""Load-driven pods on a real kubelet shard (real Redis, ManualClock): share = rate / ready pods.

A load target's request rate is split equally among its ready pods cluster-wide; each pod's
container demands ``base + share * cost-per-request`` millicores and serves ``share``
requests/s, and its latency is ``base latency / (1 - demand / limit)``. Every expected value
below is worked out from those rules, then read back through what the shard published
(``metrics.k8s.io`` usage and kemu's own ``http_requests_per_second`` series).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from emulator import loadtargets
from emulator.api.kinds import POD
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.kubelet import usage
from emulator.kubelet.shard import KubeletShard
from emulator.server.core import ServerCore
from tests import builders as b
from tests.shards import metrics_shard

pytestmark = pytest.mark.integration

WINDOW = 15.0
BASE_MILLIS, COST_MILLIS, LIMIT_MILLIS = 100.0, 10.0, 1000.0
BASE_LATENCY = 0.02


@pytest.fixture
def shard(env: tuple[ServerCore, ManualClock]) -> Iterator[KubeletShard]:
    core, clock = env
    with metrics_shard(core, clock, WINDOW) as s:
        yield s


def web_pod(name: str, target: str = "web") -> Obj:
    container = b.container(cpu="200m", lim_cpu=f"{LIMIT_MILLIS:g}m")
    body = b.pod(name, containers=[container], node="n-00000", labels={"app": target})
    body["metadata"]["annotations"] = {
        "kemu.io/startup-delay": "0s", "kemu.io/cpu": f"{BASE_MILLIS:g}m", "kemu.io/load-target": target,
        "kemu.io/cost-per-request": f"{COST_MILLIS:g}m", "kemu.io/request-latency": f"{BASE_LATENCY * 1000:g}ms"}
    return body


def step(shard: KubeletShard, clock: ManualClock, seconds: float = 1.0) -> None:
    assert shard.sync(10), "informers did not catch up"
    clock.advance(seconds)
    shard.tick()


def settle(shard: KubeletShard, clock: ManualClock) -> None:
    """Two whole metrics windows: the last one saw only the current set of ready pods."""
    for _ in range(int(2 * WINDOW) + 1):
        step(shard, clock)


def observed(core: ServerCore, now: float) -> dict[str, tuple[float, float, float]]:
    """pod -> (cpu millicores, requests/s, latency s), as published."""
    cpu = {m["metadata"]["name"]: int(m["containers"][0]["usage"]["cpu"][:-1]) / 1e6
           for m in usage.pod_metrics(core.store.redis, core.store.config.prefix, "default", now=now)}
    app = {pod: series for _, pod, _, _, series in usage.pod_series(core.store.redis, core.store.config.prefix,
                                                                      "default", now=now)}
    return {name: (cpu[name], app[name][usage.REQUESTS_SERIES], app[name][usage.LATENCY_SERIES]) for name in app}


def expected(rate: float, ready: int) -> tuple[float, float, float]:
    share = rate / ready
    demand = BASE_MILLIS + share * COST_MILLIS
    return demand, share, BASE_LATENCY / (1 - demand / LIMIT_MILLIS)


@pytest.mark.parametrize(("rate", "before", "after"), [(60.0, 2, 4), (40.0, 1, 4), (0.0, 2, 3)],
                         ids=["60rps-2-to-4", "40rps-1-to-4", "no-load"])
def test_scale_out_lowers_each_pods_share(env: tuple[ServerCore, ManualClock], shard: KubeletShard,
                                          rate: float, before: int, after: int) -> None:
    core, clock = env
    prefix = core.store.config.prefix
    loadtargets.set_rate(core.store.redis, prefix, "web", rate)
    core.create_many(POD, [web_pod(f"web-{i}") for i in range(before)])
    settle(shard, clock)
    got = observed(core, clock.now())
    assert sorted(got) == [f"web-{i}" for i in range(before)]
    for cpu, rps, latency in got.values():
        assert (cpu, rps, latency) == pytest.approx(expected(rate, before), rel=0.01)

    core.create_many(POD, [web_pod(f"web-{i}") for i in range(before, after)])  # scale out
    settle(shard, clock)
    got = observed(core, clock.now())
    assert len(got) == after
    for cpu, rps, latency in got.values():
        assert (cpu, rps, latency) == pytest.approx(expected(rate, after), rel=0.01)
    total = sum(rps for _, rps, _ in got.values())
    assert total == pytest.approx(rate, rel=0.01)  # the load is conserved, only spread thinner


def test_ready_pods_on_other_shards_count(env: tuple[ServerCore, ManualClock], shard: KubeletShard) -> None:
    """The share divides by the target's ready pods everywhere: another shard's published count counts."""
    core, clock = env
    prefix = core.store.config.prefix
    loadtargets.set_rate(core.store.redis, prefix, "web", 90.0)
    core.create_many(POD, [web_pod("web-0"), web_pod("web-1"), web_pod("other-0", target="api")])
    step(shard, clock)
    # Shard 1 (elsewhere) hosts 4 ready pods of web: it publishes them through the same exchange.
    loadtargets.exchange(core.store.redis, prefix, 1, {"web": 4}, clock.now() + 2 * WINDOW)
    settle(shard, clock)
    got = observed(core, clock.now())
    assert got["web-0"] == pytest.approx(expected(90.0, 2 + 4), rel=0.01)
    assert got["other-0"][1] == 0.0  # target "api" has no rate set: no requests, base CPU only
    assert got["other-0"][0] == pytest.approx(BASE_MILLIS, rel=0.01)
    # Once shard 1's count is older than READY_MAX_AGE (it stopped publishing), only ours count.
    for _ in range(int(loadtargets.READY_MAX_AGE)):
        step(shard, clock)
    settle(shard, clock)
    assert observed(core, clock.now())["web-1"] == pytest.approx(expected(90.0, 2), rel=0.01)


def serving(shard: KubeletShard) -> list[float]:
    """Requests/s each pod of the shard served in its last tick (pods that served none left out)."""
    table = shard.model.load
    return [float(r) for r in table.rate[table.p_target >= 0] if r > 0]


def start_more(core: ServerCore, delay: str) -> None:
    pods = [web_pod(f"late-{i}") for i in range(2)]
    for pod in pods:
        pod["metadata"]["annotations"]["kemu.io/startup-delay"] = delay
    core.create_many(POD, pods)


def run_one_briefly(core: ServerCore) -> None:
    pod = web_pod("brief")
    pod["metadata"]["annotations"]["kemu.io/duration"] = "3s"  # exits after 3 s, restarts after its back-off
    core.create(POD, pod)


def delete_two(core: ServerCore) -> None:
    for name in ("web-0", "web-1"):
        core.delete(POD, "default", name, grace_period_seconds=0)


@pytest.mark.parametrize(("change", "counts"), [
    (lambda core: start_more(core, "0s"), {5}),
    (lambda core: start_more(core, "4s"), {3, 5}),
    (run_one_briefly, {3, 4}),
    (delete_two, {1}),
], ids=["becoming-ready", "becoming-ready-later", "becoming-unready", "deleted"])
def test_served_requests_sum_to_the_rate_every_tick(env: tuple[ServerCore, ManualClock], shard: KubeletShard,
                                                    change: Callable[[ServerCore], None], counts: set[int]) -> None:
    """A Service spreads its rate over the endpoints ready *now*: in the very tick a pod becomes
    ready, stops or goes, the requests the ready pods serve add up to the rate (share = rate / ready)."""
    core, clock = env
    rate = 90.0
    loadtargets.set_rate(core.store.redis, core.store.config.prefix, "web", rate)
    core.create_many(POD, [web_pod(f"web-{i}") for i in range(3)])
    for _ in range(60):  # image pulls, then the containers start
        step(shard, clock)
        if len(serving(shard)) == 3:
            break
    assert serving(shard) == pytest.approx([rate / 3] * 3)
    change(core)
    seen = set()
    for _ in range(20):
        step(shard, clock)
        served = serving(shard)
        seen.add(len(served))
        assert sum(served) == pytest.approx(rate), f"{len(served)} pods serving {served}"
        assert served == pytest.approx([rate / len(served)] * len(served))  # an equal share each
    assert seen == counts, f"ready pods went through {sorted(seen)}"
