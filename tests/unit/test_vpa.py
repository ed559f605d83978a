"""The VPA's pure parts against upstream's formulas (kubernetes/autoscaler vertical-pod-autoscaler).

Expected values are computed here from the documented formulas — bucket
boundaries ``first * (ratio**n - 1) / (ratio - 1)``, the 15 % margin, the
confidence multipliers ``(1 + m/confidence)**e``, the pod minimum, proportional
limits, the update-priority and eviction-tolerance rules — never read back
from the implementation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from emulator.api import vpa
from emulator.controllers.vpa import updater
from emulator.controllers.vpa.estimator import recommend
from emulator.controllers.vpa.histogram import ExponentialOptions, HistogramBank
from emulator.controllers.vpa.model import DAY, Samples, UsageModel

T0 = 1_700_000_000.0
MIB = 1024 * 1024


def bucket_end(value: float, first: float, ratio: float = 1.05) -> float:
    """The end of the exponential bucket holding ``value``: what Percentile returns for a one-bucket histogram."""
    n = math.floor(math.log(value * (ratio - 1) / first + 1) / math.log(ratio))
    return first * (ratio ** (n + 1) - 1) / (ratio - 1)


# ------------------------------------------------------------------------------------- histograms
def test_bucket_count_follows_the_exponential_scheme() -> None:
    opts = ExponentialOptions(1000.0, 0.001, 1.05, 1e-4)
    # ceil(log_1.05(1000 * 0.05 / 0.001 + 1)) + 1
    assert opts.num_buckets == math.ceil(math.log(50001) / math.log(1.05)) + 1
    starts = opts.bucket_starts()
    assert starts[0] == 0.0
    assert starts[3] == pytest.approx(0.001 * (1.05**3 - 1) / 0.05)


@pytest.mark.parametrize(("values", "weights", "p", "expected_value"), [
    ([0.3], [1.0], 0.9, 0.3),
    ([0.1, 0.2, 0.4, 0.8], [1.0, 1.0, 1.0, 1.0], 0.5, 0.2),  # 2 of 4 weight reached at 0.2's bucket
    ([0.1, 0.2, 0.4, 0.8], [1.0, 1.0, 1.0, 1.0], 0.9, 0.8),
    ([0.1, 0.8], [9.0, 1.0], 0.9, 0.1),  # weights, not counts
], ids=["one-sample", "median", "p90", "weighted"])
def test_percentile_is_the_end_of_the_bucket_reaching_the_threshold(values: list[float], weights: list[float],
                                                                    p: float, expected_value: float) -> None:
    bank = HistogramBank(ExponentialOptions(1000.0, 0.001, 1.05, 1e-4), DAY)
    bank.add(np.zeros(len(values), dtype=np.int64), np.array(values), np.array(weights), np.full(len(values), T0))
    assert bank.percentiles(np.array([0]), p)[0] == pytest.approx(bucket_end(expected_value, 0.001))


def test_a_sample_one_half_life_newer_weighs_twice_as_much() -> None:
    bank = HistogramBank(ExponentialOptions(1000.0, 0.001, 1.05, 1e-4), DAY)
    rows = np.zeros(2, dtype=np.int64)
    bank.add(rows, np.array([0.1, 0.8]), np.array([1.0, 1.0]), np.array([T0, T0 + DAY]))
    # weights 1 : 2 -> the 0.8 bucket holds 2/3 of the weight: p50 lands there, p30 does not.
    assert bank.percentiles(np.array([0]), 0.5)[0] == pytest.approx(bucket_end(0.8, 0.001))
    assert bank.percentiles(np.array([0]), 0.3)[0] == pytest.approx(bucket_end(0.1, 0.001))


def test_empty_rows_have_percentile_zero() -> None:
    bank = HistogramBank(ExponentialOptions(1000.0, 0.001, 1.05, 1e-4), DAY)
    assert bank.percentiles(np.array([0, 1]), 0.9).tolist() == [0.0, 0.0]


# ------------------------------------------------------------------------------------- the model
def _feed(model: UsageModel, pod: str, t: float, cpu: float, mem: float, request: float = 0.5) -> None:
    s = model.slot((pod, "app"), model.row(("ns/vpa", "app")))
    model.add_samples(Samples(np.array([s]), np.array([t]), np.array([cpu]), np.array([mem]), np.array([request])))


def test_memory_keeps_one_peak_per_aggregation_interval() -> None:
    model = UsageModel()
    _feed(model, "p", T0, 0.1, 100 * MIB)
    _feed(model, "p", T0 + 60, 0.1, 300 * MIB)  # same 24 h interval: replaces the 100Mi peak
    _feed(model, "p", T0 + 120, 0.1, 200 * MIB)  # lower than the peak: ignored
    row = model.row(("ns/vpa", "app"))
    assert model.memory.totals[row] == pytest.approx(model.memory.weights[row].sum())
    # Exactly one peak (weight 1 decayed to the window's end) remains, at 300Mi.
    assert np.count_nonzero(model.memory.weights[row] > 1e-4) == 1
    assert model.memory.percentiles(np.array([row]), 1.0)[0] == pytest.approx(bucket_end(300 * MIB, 1e7))
    _feed(model, "p", T0 + DAY + 60, 0.1, 50 * MIB)  # the next interval: a second peak
    assert np.count_nonzero(model.memory.weights[row] > 1e-4) == 2


def test_out_of_order_cpu_samples_are_dropped() -> None:
    model = UsageModel()
    _feed(model, "p", T0 + 60, 0.2, MIB)
    _feed(model, "p", T0, 0.9, MIB)
    assert model.sample_count[model.row(("ns/vpa", "app"))] == 1


def test_an_oom_adds_a_peak_of_the_bumped_request() -> None:
    model = UsageModel()
    _feed(model, "p", T0, 0.1, 100 * MIB)
    assert model.record_oom(("p", "app"), T0 + 30, 400 * MIB)
    row = model.row(("ns/vpa", "app"))
    # max(400Mi + 100Mi, 400Mi * 1.2) = 500Mi replaces the 100Mi peak of this interval.
    assert model.memory.percentiles(np.array([row]), 1.0)[0] == pytest.approx(bucket_end(500 * MIB, 1e7))


# ------------------------------------------------------------------------------------- the estimator
def _steady(cpu: float, mem: float, minutes: int) -> UsageModel:
    model = UsageModel()
    for m in range(minutes):
        _feed(model, "p", T0 + 60 * m, cpu, mem)
    return model


def _amount(x: float) -> int:
    return int(x)  # resourceAmountFromFloat truncates


@pytest.mark.parametrize(("cpu", "mem", "minutes"), [
    (0.3, 200 * MIB, 5),
    (1.7, 900 * MIB, 1441),
], ids=["5-minutes-of-history", "a-day-of-history"])
def test_recommendation_follows_upstream_estimators(cpu: float, mem: float, minutes: int) -> None:
    model = _steady(cpu, mem, minutes)
    rec = recommend(model, model.rows_of("ns/vpa"))["app"]
    conf = min((minutes - 1) / 1440, minutes / 1440)  # lifespan in days vs samples per 1,440

    def margin(base: int) -> int:
        return base + _amount(base * 0.15)

    cpu_base = margin(_amount(bucket_end(cpu, 0.001) * 1000))
    mem_base = margin(_amount(bucket_end(mem, 1e7)))
    assert rec.target["cpu"] == max(cpu_base, 25)
    assert rec.target["memory"] == max(mem_base, 250 * MIB)
    assert rec.upper["cpu"] == max(_amount(cpu_base * (1 + 1 / conf)), 25)
    assert rec.lower["cpu"] == max(_amount(cpu_base * (1 + 0.001 / conf) ** -2), 25)
    assert rec.upper["memory"] == max(_amount(mem_base * (1 + 1 / conf)), 250 * MIB)


def test_no_history_means_no_upper_bound_and_a_floor_lower_bound() -> None:
    model = _steady(0.3, 200 * MIB, 1)  # one sample: confidence 0
    rec = recommend(model, model.rows_of("ns/vpa"))["app"]
    assert rec.upper["cpu"] == vpa.MAX_AMOUNT
    assert rec.lower["cpu"] == 25  # 0, raised to the pod minimum


def test_the_pod_minimum_is_shared_among_containers() -> None:
    model = UsageModel()
    for name in ("a", "b"):
        s = model.slot(("p", name), model.row(("ns/vpa", name)))
        model.add_samples(Samples(np.array([s]), np.array([T0]), np.array([0.0001]), np.array([MIB]),
                                  np.array([0.1])))
    recs = recommend(model, model.rows_of("ns/vpa"))
    assert recs["a"].target["cpu"] == 12  # int(25 * 1/2)
    assert recs["b"].target["memory"] == 125 * MIB


# ------------------------------------------------------------------------------------- policy and admission
def _vpa(target: dict[str, str], *, policies: list[dict] | None = None, lower: dict[str, str] | None = None,
         upper: dict[str, str] | None = None, mode: str = "Auto") -> dict:
    rec = {"containerName": "app", "target": target, "lowerBound": lower or target, "upperBound": upper or target}
    return {"metadata": {"name": "web-vpa", "namespace": "default"},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "updatePolicy": {"updateMode": mode},
                     "resourcePolicy": {"containerPolicies": policies or []}},
            "status": {"recommendation": {"containerRecommendations": [rec]}}}


def _pod(requests: dict[str, str] | None, limits: dict[str, str] | None = None) -> dict:
    res: dict = {}
    if requests is not None:
        res["requests"] = dict(requests)
    if limits is not None:
        res["limits"] = dict(limits)
    return {"metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": "x", "resources": res}]}}


@pytest.mark.parametrize(("requests", "limits", "policies", "want_requests", "want_limits"), [
    ({"cpu": "100m", "memory": "100Mi"}, {"cpu": "200m", "memory": "300Mi"}, [],
     {"cpu": "250m", "memory": "500Mi"}, {"cpu": "500m", "memory": "1500Mi"}),  # limit/request ratio kept
    ({"cpu": "100m"}, {"cpu": "100m"}, [], {"cpu": "250m", "memory": "500Mi"}, {"cpu": "250m"}),  # equal: = request
    ({"cpu": "100m"}, {"cpu": "300m"}, [{"containerName": "*", "controlledValues": "RequestsOnly"}],
     {"cpu": "250m", "memory": "500Mi"}, {"cpu": "300m"}),
    ({"cpu": "100m"}, None, [{"containerName": "app", "controlledResources": ["cpu"]}],
     {"cpu": "250m"}, None),
    ({"cpu": "100m"}, None, [{"containerName": "app", "mode": "Off"}], {"cpu": "100m"}, None),
], ids=["proportional-limits", "limit-equal-request", "requests-only", "cpu-only", "container-off"])
def test_admission_sets_requests_and_keeps_limits_in_proportion(requests: dict, limits: dict | None,
                                                                 policies: list, want_requests: dict,
                                                                 want_limits: dict | None) -> None:
    pod = _pod(requests, limits)
    vpa.apply_to_pod(_vpa({"cpu": "250m", "memory": "500Mi"}, policies=policies), pod)
    res = pod["spec"]["containers"][0]["resources"]
    assert res.get("requests") == want_requests
    assert res.get("limits") == want_limits


def test_admission_annotates_what_it_changed() -> None:
    pod = _pod({"cpu": "100m"}, {"cpu": "200m"})
    vpa.apply_to_pod(_vpa({"cpu": "250m"}), pod)
    notes = pod["metadata"]["annotations"]
    assert notes["vpaUpdates"] == "Pod resources updated by web-vpa: container 0: cpu request, cpu limit"
    assert notes["vpaObservedContainers"] == "app"


@pytest.mark.parametrize(("values", "policy", "want"), [
    ({"cpu": 30, "memory": 10 * MIB}, {"minAllowed": {"cpu": "50m"}}, {"cpu": 50, "memory": 10 * MIB}),
    ({"cpu": 3000, "memory": 10 * MIB}, {"maxAllowed": {"cpu": "1", "memory": "5Mi"}},
     {"cpu": 1000, "memory": 5 * MIB}),
    ({"cpu": 30, "memory": 10 * MIB}, {"controlledResources": ["memory"]}, {"memory": 10 * MIB}),
], ids=["min-allowed", "max-allowed", "controlled-resources"])
def test_cap_to_policy(values: dict[str, int], policy: dict, want: dict[str, int]) -> None:
    assert vpa.cap_to_policy(values, policy) == want


# ------------------------------------------------------------------------------------- updater
@pytest.mark.parametrize(("request_cpu", "lower", "target", "upper", "started_ago", "update"), [
    ("100m", "200m", "250m", "400m", 60, True),  # below the lower bound: now
    ("900m", "200m", "250m", "400m", 60, True),  # above the upper bound: now
    ("230m", "200m", "250m", "400m", 60, False),  # inside, young pod: wait
    ("230m", "200m", "250m", "400m", 13 * 3600, False),  # inside, old, but |230-250|/230 < 10 %
    ("300m", "200m", "250m", "400m", 13 * 3600, True),  # inside, old, |300-250|/300 >= 10 %
], ids=["below-lower", "above-upper", "young-in-range", "old-small-diff", "old-big-diff"])
def test_update_priority_rules(request_cpu: str, lower: str, target: str, upper: str, started_ago: float,
                               update: bool) -> None:
    from emulator.clock import rfc3339
    obj = _vpa({"cpu": target}, lower={"cpu": lower}, upper={"cpu": upper})
    pod = _pod({"cpu": request_cpu})
    pod["status"] = {"phase": "Running", "startTime": rfc3339(T0 - started_ago)}
    assert (updater.wants_update(obj, pod, T0) is not None) is update


def test_scale_ups_go_first_then_larger_differences() -> None:
    obj = _vpa({"cpu": "250m"}, lower={"cpu": "200m"}, upper={"cpu": "400m"})
    up = updater.update_priority(obj, _pod({"cpu": "100m"}))
    down_far = updater.update_priority(obj, _pod({"cpu": "2"}))
    down_near = updater.update_priority(obj, _pod({"cpu": "500m"}))
    assert up.scale_up and not down_far.scale_up
    assert up.resource_diff == pytest.approx(abs(100 - 250) / 100)
    assert down_far.resource_diff == pytest.approx(abs(2000 - 250) / 2000)
    order = sorted([down_near, up, down_far], key=lambda p: p.sort_key(), reverse=True)
    assert order == [up, down_far, down_near]


@pytest.mark.parametrize(("configured", "running", "min_replicas", "want"), [
    (1, 1, 2, 0),  # fewer replicas than --min-replicas: never
    (2, 2, 2, 1),  # ceil(2 * 0.5) = 1 required, 1 tolerated
    (4, 4, 2, 2),
    (4, 3, 2, 1),  # one already missing counts against the tolerance
    (3, 3, 2, 1),  # ceil(1.5) = 2 required
    (10, 10, 2, 5),
], ids=["below-min", "two", "four", "four-one-down", "three", "ten"])
def test_eviction_tolerance(configured: int, running: int, min_replicas: int, want: int) -> None:
    assert updater.eviction_budget(configured, running, min_replicas) == want


def test_tiny_tolerance_still_lets_one_pod_go_when_all_run() -> None:
    assert updater.eviction_budget(3, 3, 2, tolerance=0.1) == 1  # ceil(2.7) = 3 required, 0 tolerated
    assert updater.eviction_budget(3, 2, 2, tolerance=0.1) == 0


def test_the_model_grows_past_its_first_capacity() -> None:
    model = UsageModel()
    n = 3 * model.cpu.capacity + 1
    for i in range(n):
        s = model.slot((f"p{i}", "app"), model.row((f"ns/vpa-{i}", "app")))
        model.add_samples(Samples(np.array([s]), np.array([T0]), np.array([0.3]), np.array([MIB]), np.array([0.1])))
    assert model.cpu.totals.shape[0] == model.cpu.weights.shape[0] >= n
    assert recommend(model, model.rows_of(f"ns/vpa-{n - 1}"))["app"].target["cpu"] == \
        int(bucket_end(0.3, 0.001) * 1000) + int(int(bucket_end(0.3, 0.001) * 1000) * 0.15)
