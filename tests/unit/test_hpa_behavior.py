"""HPA scaling behaviour against upstream's rules (pkg/controller/podautoscaler/horizontal.go).

Timelines replay recommendations at given cluster seconds; every expected count is derived
in the test from the rule: the highest recommendation of the last 300 s on a scale-down,
max(2 * current, 4) without ``behavior``, and with it Pods/Percent policies over their
period counted from the replicas the period started with, ``selectPolicy`` picking the
largest (Max) or smallest (Min) change, then min/max.
"""

from __future__ import annotations

import math

import pytest

from emulator.api.kinds import HORIZONTALPODAUTOSCALER
from emulator.api.types import Obj
from emulator.controllers.podautoscaler import behavior as bh
from emulator.server.defaults import apply_defaults

KEY = "default/web"


def defaulted_behavior(behavior: Obj) -> Obj:
    """A behavior as the API server stores it (upstream SetDefaults_HorizontalPodAutoscalerBehavior)."""
    hpa: Obj = {"spec": {"maxReplicas": 100, "behavior": behavior}}
    apply_defaults(HORIZONTALPODAUTOSCALER, hpa)
    return hpa["spec"]["behavior"]


def test_default_stabilization_keeps_the_highest_recommendation_of_the_last_300_seconds() -> None:
    history = bh.ScaleHistory()
    history.record_initial(KEY, 10, 0.0)
    steps = [(60.0, 5), (200.0, 6), (301.0, 4), (600.0, 3)]
    seen: list[tuple[int, str]] = []
    for now, desired in steps:
        replicas, conditions = bh.normalize_desired_replicas(history, bh.NormalizationArg(KEY, 10, desired, 1, 20),
                                                             now)
        seen.append((replicas, conditions[0].reason))
    # t=60: the recommendations of the last 300 s are 10 (t=0) and 5 -> 10; t=200: 10, 5, 6 -> 10;
    # t=301: the t=0 sample has left the window: max(5, 6, 4) = 6; t=600: of the older ones only
    # t=301's 4 is within the window: max(4, 3) = 4.
    assert seen == [(10, "ScaleDownStabilized"), (10, "ScaleDownStabilized"), (max(5, 6, 4), "ScaleDownStabilized"),
                    (max(4, 3), "ScaleDownStabilized")]


@pytest.mark.parametrize(("current", "desired", "minimum", "maximum", "expected", "reason"), [
    (3, 20, 1, 100, max(2 * 3, 4), "ScaleUpLimit"),
    (1, 10, 1, 100, max(2 * 1, 4), "ScaleUpLimit"),
    (3, 5, 1, 100, 5, "DesiredWithinRange"),
    (8, 15, 1, 10, 10, "TooManyReplicas"),
    (4, 1, 2, 10, 2, "TooFewReplicas"),
], ids=["limit-2x", "limit-at-least-4", "within-range", "max", "min"])
def test_scale_up_limit_and_clamping_without_behavior(current: int, desired: int, minimum: int, maximum: int,
                                                      expected: int, reason: str) -> None:
    assert bh.convert_desired_replicas_with_rules(current, desired, minimum, maximum)[:2] == (expected, reason)


def test_percent_policy_limits_a_scale_down_per_period() -> None:
    """Percent 10 % per 60 s: 100 -> 90, nothing more within the minute, then 90 -> 81."""
    behavior = defaulted_behavior({"scaleDown": {"stabilizationWindowSeconds": 0,
                                                 "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}]}})
    history = bh.ScaleHistory()
    history.record_initial(KEY, 100, 0.0)
    replicas, conditions = bh.normalize_with_behaviors(history, bh.NormalizationArg(KEY, 100, 50, 1, 100), behavior,
                                                       0.0)
    assert replicas == int(100 * (1 - 10 / 100)) == 90
    assert (conditions[1].status, conditions[1].reason) == ("True", "ScaleDownLimit")
    history.store_scale_event(behavior, KEY, 100, replicas, 0.0)
    # 30 s later the period still starts at 100 replicas (90 + the 10 removed): the limit is still 90.
    replicas, _ = bh.normalize_with_behaviors(history, bh.NormalizationArg(KEY, 90, 50, 1, 100), behavior, 30.0)
    assert replicas == 90
    # After the period, the next step is 10 % of 90.
    replicas, _ = bh.normalize_with_behaviors(history, bh.NormalizationArg(KEY, 90, 50, 1, 100), behavior, 61.0)
    assert replicas == int(90 * 0.9) == 81


def test_default_scale_up_is_the_max_of_4_pods_and_100_percent_per_15_seconds() -> None:
    behavior = defaulted_behavior({})
    assert behavior["scaleUp"] == {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]}
    history = bh.ScaleHistory()
    history.record_initial(KEY, 2, 0.0)
    replicas, _ = bh.normalize_with_behaviors(history, bh.NormalizationArg(KEY, 2, 40, 1, 100), behavior, 0.0)
    assert replicas == max(2 + 4, math.ceil(2 * 2.0)) == 6
    history.store_scale_event(behavior, KEY, 2, 6, 0.0)
    # 10 s later the period began at 2 replicas: the limit is still 6.
    replicas, conditions = bh.normalize_with_behaviors(history, bh.NormalizationArg(KEY, 6, 40, 1, 100), behavior,
                                                       10.0)
    assert replicas == 6 and conditions[1].reason == "ScaleUpLimit"
    # After 15 s: max(6 + 4, 6 * 2) = 12.
    replicas, _ = bh.normalize_with_behaviors(history, bh.NormalizationArg(KEY, 6, 40, 1, 100), behavior, 16.0)
    assert replicas == max(6 + 4, 6 * 2) == 12


@pytest.mark.parametrize(("rules", "current", "expected"), [
    ({"selectPolicy": "Min", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 60},
                                          {"type": "Percent", "value": 100, "periodSeconds": 60}]},
     10, min(10 + 4, 10 * 2)),
    ({"selectPolicy": "Max", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 60},
                                          {"type": "Percent", "value": 100, "periodSeconds": 60}]},
     10, max(10 + 4, 10 * 2)),
    ({"policies": [{"type": "Percent", "value": 50, "periodSeconds": 60}]}, 3, math.ceil(3 * 1.5)),
    ({"selectPolicy": "Disabled", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 60}]}, 10, 10),
], ids=["min-policy", "max-policy", "percent-rounds-up", "disabled"])
def test_scale_up_policies(rules: Obj, current: int, expected: int) -> None:
    assert bh.scale_up_limit_with_rules(current, [], [], rules, 0.0) == expected


@pytest.mark.parametrize(("rules", "current", "expected"), [
    ({"selectPolicy": "Min", "policies": [{"type": "Pods", "value": 5, "periodSeconds": 60},
                                          {"type": "Percent", "value": 20, "periodSeconds": 60}]},
     100, max(100 - 5, int(100 * 0.8))),  # the smallest change is the highest count
    ({"selectPolicy": "Max", "policies": [{"type": "Pods", "value": 5, "periodSeconds": 60},
                                          {"type": "Percent", "value": 20, "periodSeconds": 60}]},
     100, min(100 - 5, int(100 * 0.8))),
    ({"selectPolicy": "Disabled", "policies": [{"type": "Pods", "value": 5, "periodSeconds": 60}]}, 100, 100),
], ids=["min-policy", "max-policy", "disabled"])
def test_scale_down_policies(rules: Obj, current: int, expected: int) -> None:
    assert bh.scale_down_limit_with_rules(current, [], [], rules, 0.0) == expected


def test_behavior_stabilization_windows() -> None:
    """Down window 300 s keeps the highest recent recommendation; up window 60 s the lowest."""
    behavior = defaulted_behavior({"scaleUp": {"stabilizationWindowSeconds": 60},
                                   "scaleDown": {"stabilizationWindowSeconds": 300}})
    history = bh.ScaleHistory()
    history.record_initial(KEY, 5, 0.0)
    # A scale-up proposal of 9 at t=30: the lowest recommendation of the last 60 s is 5 (t=0) -> stay at 5.
    replicas, conditions = bh.normalize_with_behaviors(history, bh.NormalizationArg(KEY, 5, 9, 1, 100), behavior, 30.0)
    assert replicas == min(5, 9) and conditions[0].reason == "ScaleUpStabilized"
    # At t=61 the t=0 sample left the up window: the lowest of (9) and 9 -> 9.
    replicas, _ = bh.normalize_with_behaviors(history, bh.NormalizationArg(KEY, 5, 9, 1, 100), behavior, 61.0)
    assert replicas == 9
    # Scale-down proposals are held at the highest of the last 300 s (9).
    replicas, conditions = bh.normalize_with_behaviors(history, bh.NormalizationArg(KEY, 9, 2, 1, 100), behavior,
                                                       120.0)
    assert replicas == 9 and conditions[0].reason == "ScaleDownStabilized"


def test_behavior_clamps_to_min_and_max() -> None:
    behavior = defaulted_behavior({"scaleDown": {"stabilizationWindowSeconds": 0}})
    history = bh.ScaleHistory()
    history.record_initial(KEY, 4, 0.0)
    replicas, conditions = bh.normalize_with_behaviors(history, bh.NormalizationArg(KEY, 4, 1, 3, 10), behavior, 1.0)
    assert replicas == 3 and conditions[1].reason == "TooFewReplicas"
    replicas, conditions = bh.normalize_with_behaviors(history, bh.NormalizationArg(KEY, 8, 30, 3, 10), behavior, 2.0)
    assert replicas == 10 and conditions[1].reason == "TooManyReplicas"
