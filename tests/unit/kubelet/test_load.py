"""Load-driven behaviour in the kubelet model: profile fields, shares, CPU and latency, vectorised.

Rules (emulator.kubelet.load): a ready pod of a target serves ``share`` requests/s; each of its
containers demands ``cpu curve + share * cost-per-request`` millicores; latency is
``base / (1 - min(demand / limit, 0.95))`` (the request when there is no limit). Values below are
worked out from those rules.
"""

from __future__ import annotations

import pytest

from emulator.clock import ManualClock
from emulator.kubelet.model import KubeletModel
from emulator.kubelet.profiles import DEFAULT_REQUEST_LATENCY, ProfileError, ProfileLibrary

T0 = 1_700_000_000.0


def make_pod(name: str, annotations: dict[str, str], *, cpu_limit: str | None = "1", cpu_request: str = "200m",
             node: str = "n1") -> dict:
    resources: dict = {"requests": {"cpu": cpu_request}}
    if cpu_limit:
        resources["limits"] = {"cpu": cpu_limit}
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "annotations": {"kemu.io/startup-delay": "0s", **annotations}},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "x", "resources": resources}]}}


WEB = {"kemu.io/load-target": "web", "kemu.io/cpu": "100m", "kemu.io/cost-per-request": "10m"}


@pytest.fixture(scope="module")
def library() -> ProfileLibrary:
    return ProfileLibrary.load()


@pytest.mark.parametrize(("annotations", "target", "cost", "latency"), [
    (WEB, "web", 10.0, DEFAULT_REQUEST_LATENCY),
    ({**WEB, "kemu.io/request-latency": "50ms"}, "web", 10.0, 0.05),
    ({"kemu.io/cost-per-request": "0.5"}, "", 500.0, DEFAULT_REQUEST_LATENCY),
    ({"kemu.io/load-target": "api.v1", "kemu.io/cost-per-request.app": "2m"}, "api.v1", 2.0,
     DEFAULT_REQUEST_LATENCY),
    ({}, "", 0.0, DEFAULT_REQUEST_LATENCY),
], ids=["target-and-cost", "latency", "cost-without-target", "per-container-cost", "none"])
def test_load_fields_resolve(library: ProfileLibrary, annotations: dict[str, str], target: str, cost: float,
                             latency: float) -> None:
    behaviour = library.resolve(make_pod("p", annotations), seed=0)
    assert behaviour.load_target == target
    assert behaviour.request_latency == pytest.approx(latency)
    assert behaviour.containers[0].cost_per_request == pytest.approx(cost)


def test_web_profile_costs_cpu_per_request(library: ProfileLibrary) -> None:
    behaviour = library.resolve(make_pod("p", {"kemu.io/profile": "web", "kemu.io/load-target": "web"}), seed=0)
    assert behaviour.containers[0].cost_per_request > 0


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("kemu.io/load-target", "Web_Frontend", "lowercase DNS subdomain"),
    ("kemu.io/load-target.app", "web", "pod-wide"),
    ("kemu.io/cost-per-request", "lots", "not a quantity"),
    ("kemu.io/request-latency", "soon", "not a duration"),
], ids=["bad-target", "per-container-target", "bad-cost", "bad-latency"])
def test_bad_load_annotations_name_the_annotation(library: ProfileLibrary, key: str, value: str,
                                                  expected: str) -> None:
    with pytest.raises(ProfileError, match=expected) as err:
        library.resolve(make_pod("p", {key: value}), seed=0)
    assert key in str(err.value)


def run(model: KubeletModel, clock: ManualClock, seconds: int) -> None:
    for _ in range(seconds):
        clock.advance(1.0)
        model.tick(clock.now())


@pytest.mark.parametrize(("rate", "pods", "limit", "cpu_request"), [
    (60.0, 2, "1", "200m"), (60.0, 3, "1", "200m"), (300.0, 2, "1", "200m"), (40.0, 4, None, "500m"),
], ids=["60rps-2pods", "60rps-3pods", "saturated", "no-limit-uses-request"])
def test_share_cpu_and_latency(rate: float, pods: int, limit: str | None, cpu_request: str) -> None:
    clock = ManualClock(T0)
    model = KubeletModel()
    model.add_node("n1", cpu="64", memory="64Gi")
    for i in range(pods):
        model.add_pod(make_pod(f"w{i}", WEB, cpu_limit=limit, cpu_request=cpu_request), clock.now())
    model.add_pod(make_pod("other", {"kemu.io/cpu": "100m", "kemu.io/cost-per-request": "10m"}), clock.now())
    run(model, clock, 2)
    assert model.load_ready_counts() == {"web": pods}
    share = rate / pods
    model.set_load_shares({"web": share})  # what the shard computes from the cluster-wide ready count
    model.take_load_window()
    run(model, clock, 10)

    demand = 100.0 + share * 10.0
    capacity = float(limit) * 1000 if limit else float(cpu_request.rstrip("m"))
    granted = min(demand, capacity)  # CFS quota caps usage at the limit; no limit: the node has room
    rho = min(demand / capacity, 0.95)
    window = model.take_load_window()
    for i in range(pods):
        cpu = model.pod_usage(f"uid-w{i}")["app"]["cpu"]
        assert cpu == pytest.approx(granted if limit else demand, rel=0.01)
        served, latency = window[f"uid-w{i}"]
        assert served == pytest.approx(share)
        assert latency == pytest.approx(DEFAULT_REQUEST_LATENCY / (1 - rho))
    # A pod with a cost but no target serves nothing: base CPU only, and no app series.
    assert model.pod_usage("uid-other")["app"]["cpu"] == pytest.approx(100.0)
    assert "uid-other" not in window


def test_only_ready_pods_serve_and_removed_pods_stop_counting() -> None:
    clock = ManualClock(T0)
    model = KubeletModel()
    model.add_node("n1", cpu="8", memory="8Gi")
    model.add_pod(make_pod("ready", WEB), clock.now())
    model.add_pod(make_pod("slow", {**WEB, "kemu.io/startup-delay": "30s"}), clock.now())
    run(model, clock, 2)
    assert model.load_ready_counts() == {"web": 1}  # "slow" is still starting: not an endpoint yet
    model.set_load_shares({"web": 50.0})
    model.take_load_window()  # a fresh window from here
    run(model, clock, 2)
    window = model.take_load_window()
    assert window["uid-ready"][0] == pytest.approx(50.0) and window["uid-slow"][0] == 0.0
    assert model.pod_usage("uid-slow")["app"]["cpu"] == 0.0
    run(model, clock, 30)
    assert model.load_ready_counts() == {"web": 2}
    model.remove_pod("uid-ready")
    model.remove_pod("uid-slow")
    assert model.load_ready_counts() == {"web": 0}  # still published, so other shards see the drop
    assert not model.load.active
