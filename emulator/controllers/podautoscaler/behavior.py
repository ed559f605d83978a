"""HPA scaling behaviour: stabilization windows, scaling policies, min/max clamping.

A re-implementation of the normalisation half of upstream
``pkg/controller/podautoscaler/horizontal.go``:

* without ``spec.behavior`` (``normalizeDesiredReplicas``): a scale-down is stabilised
  over ``--horizontal-pod-autoscaler-downscale-stabilization`` (300 s: the highest
  recommendation of the window wins, ``stabilizeRecommendation``) and a scale-up is
  limited to ``max(2 * current, 4)`` (``convertDesiredReplicasWithRules``);
* with it (``normalizeDesiredReplicasWithBehaviors``): the recommendation is held
  between the lowest recommendation of the scale-up window and the highest of the
  scale-down window (``stabilizeRecommendationWithBehaviors``), then limited by the
  policies (``Pods``/``Percent`` over ``periodSeconds``, counted from the replicas the
  period started with, so the controller's own recent scale events count;
  ``selectPolicy`` ``Max``/``Min``/``Disabled``) and clamped to min/max
  (``convertDesiredReplicasWithBehaviorRate``, ``calculateScaleUpLimitWithScalingRules``,
  ``calculateScaleDownLimitWithBehaviors``).

Each step also names the reason and message of the ``AbleToScale`` and
``ScalingLimited`` conditions it implies, as upstream sets them. State (recent
recommendations and scale events per HPA) lives in :class:`ScaleHistory`; every
function takes ``now`` (cluster seconds), so tests replay a timeline exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from emulator.api.types import Obj

# kube-controller-manager --horizontal-pod-autoscaler-downscale-stabilization default.
DEFAULT_DOWNSCALE_STABILIZATION = 300.0
# Scale-up limit without behavior (horizontal.go scaleUpLimitFactor / scaleUpLimitMinimum).
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0

MSG_WITHIN_RANGE = "the desired count is within the acceptable range"
MSG_SCALE_UP_LIMIT = "the desired replica count is increasing faster than the maximum scale rate"
MSG_SCALE_DOWN_LIMIT = "the desired replica count is decreasing faster than the maximum scale rate"
MSG_TOO_MANY = "the desired replica count is more than the maximum replica count"
MSG_TOO_FEW = "the desired replica count is less than the minimum replica count"
MSG_UP_STABILIZED = "recent recommendations were lower than current one, applying the lowest recent recommendation"
MSG_DOWN_STABILIZED = ("recent recommendations were higher than current one, applying the highest recent "
                       "recommendation")
MSG_READY = "recommended size matches current size"

_INT32_MAX = 2**31 - 1
_INT32_MIN = -(2**31)


@dataclass(slots=True)
class Recommendation:
    replicas: int
    timestamp: float


@dataclass(slots=True)
class ScaleEvent:
    change: int
    timestamp: float
    outdated: bool = False


@dataclass(frozen=True, slots=True)
class Condition:
    """A condition the normalisation implies: ``(type, status, reason, message)``."""

    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class NormalizationArg:
    """Upstream's ``NormalizationArg``: one HPA's counts for one normalisation."""

    key: str
    current: int
    desired: int
    min_replicas: int
    max_replicas: int


@dataclass
class ScaleHistory:
    """Per-HPA memory of the controller (upstream's ``recommendations``, ``scaleUpEvents``, ``scaleDownEvents``)."""

    recommendations: dict[str, list[Recommendation]] = field(default_factory=dict)
    scale_up_events: dict[str, list[ScaleEvent]] = field(default_factory=dict)
    scale_down_events: dict[str, list[ScaleEvent]] = field(default_factory=dict)

    def forget(self, key: str) -> None:
        self.recommendations.pop(key, None)
        self.scale_up_events.pop(key, None)
        self.scale_down_events.pop(key, None)

    def record_initial(self, key: str, current: int, now: float) -> None:
        """``recordInitialRecommendation``: the first sync remembers the current count."""
        if key not in self.recommendations:
            self.recommendations[key] = [Recommendation(current, now)]

    def store_scale_event(self, behavior: Obj | None, key: str, previous: int, new: int, now: float) -> None:
        """``storeScaleEvent``: remember a rescale (only with behavior), reusing an outdated slot."""
        if behavior is None:
            return
        if new > previous:
            events = self.scale_up_events.setdefault(key, [])
            longest = longest_policy_period(behavior.get("scaleUp") or {})
            change = new - previous
        else:
            events = self.scale_down_events.setdefault(key, [])
            longest = longest_policy_period(behavior.get("scaleDown") or {})
            change = previous - new
        cutoff = now - longest
        for event in events:
            if event.timestamp < cutoff:
                event.outdated = True
        event = ScaleEvent(change, now)
        old = [i for i, e in enumerate(events) if e.outdated]
        if old:
            events[old[-1]] = event
        else:
            events.append(event)


def longest_policy_period(rules: Obj) -> int:
    return max((int(p.get("periodSeconds") or 0) for p in rules.get("policies") or []), default=0)


def replicas_change_per_period(period_seconds: int, events: list[ScaleEvent], now: float) -> int:
    """``getReplicasChangePerPeriod``: replicas added (or removed) by events after ``now - period``."""
    cutoff = now - period_seconds
    return sum(e.change for e in events if e.timestamp > cutoff)


# ----------------------------------------------------------------------------- without spec.behavior


def stabilize_recommendation(history: ScaleHistory, key: str, desired: int, now: float,
                             window: float = DEFAULT_DOWNSCALE_STABILIZATION) -> int:
    """``stabilizeRecommendation``: the highest recommendation of the last ``window`` seconds."""
    recs = history.recommendations.setdefault(key, [])
    best = desired
    old_index = -1
    cutoff = now - window
    for i, rec in enumerate(recs):
        if rec.timestamp < cutoff:
            old_index = i
        elif rec.replicas > best:
            best = rec.replicas
    if old_index >= 0:
        recs[old_index] = Recommendation(desired, now)
    else:
        recs.append(Recommendation(desired, now))
    return best


def scale_up_limit(current: int) -> int:
    """``calculateScaleUpLimit``: ``max(2 * current, 4)``."""
    return int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))


def convert_desired_replicas_with_rules(current: int, desired: int, min_replicas: int,
                                        max_replicas: int) -> tuple[int, str, str]:
    """``convertDesiredReplicasWithRules``: (replicas, ScalingLimited reason, message)."""
    limit = scale_up_limit(current)
    if max_replicas > limit:
        maximum, reason, message = limit, "ScaleUpLimit", MSG_SCALE_UP_LIMIT
    else:
        maximum, reason, message = max_replicas, "TooManyReplicas", MSG_TOO_MANY
    if desired < min_replicas:
        return min_replicas, "TooFewReplicas", MSG_TOO_FEW
    if desired > maximum:
        return maximum, reason, message
    return desired, "DesiredWithinRange", MSG_WITHIN_RANGE


def normalize_desired_replicas(history: ScaleHistory, arg: NormalizationArg, now: float, *,
                               window: float = DEFAULT_DOWNSCALE_STABILIZATION) -> tuple[int, list[Condition]]:
    """``normalizeDesiredReplicas``: stabilise, then clamp; returns the count and the conditions to set."""
    desired = arg.desired
    stabilized = stabilize_recommendation(history, arg.key, desired, now, window)
    conditions = [Condition("AbleToScale", "True", "ScaleDownStabilized", MSG_DOWN_STABILIZED)
                  if stabilized != desired else Condition("AbleToScale", "True", "ReadyForNewScale", MSG_READY)]
    replicas, reason, message = convert_desired_replicas_with_rules(arg.current, stabilized, arg.min_replicas,
                                                                    arg.max_replicas)
    conditions.append(Condition("ScalingLimited", "False" if replicas == stabilized else "True", reason, message))
    return replicas, conditions


# ----------------------------------------------------------------------------- with spec.behavior


def stabilize_with_behaviors(history: ScaleHistory, arg: NormalizationArg, now: float, *, up_window: float,
                             down_window: float) -> tuple[int, str, str]:
    """``stabilizeRecommendationWithBehaviors``: (recommendation, AbleToScale reason, message)."""
    current, desired = arg.current, arg.desired
    recs = history.recommendations.setdefault(arg.key, [])
    up_rec = down_rec = desired
    up_cutoff, down_cutoff = now - up_window, now - down_window
    old_index = -1
    for i, rec in enumerate(recs):
        if rec.timestamp > up_cutoff:
            up_rec = min(rec.replicas, up_rec)
        if rec.timestamp > down_cutoff:
            down_rec = max(rec.replicas, down_rec)
        if rec.timestamp < up_cutoff and rec.timestamp < down_cutoff:
            old_index = i
    # Bring the current count within [lowest recent up-recommendation, highest recent down-recommendation].
    recommendation = min(max(current, up_rec), down_rec)
    if old_index >= 0:
        recs[old_index] = Recommendation(desired, now)
    else:
        recs.append(Recommendation(desired, now))
    if desired >= current:
        return recommendation, "ScaleUpStabilized", MSG_UP_STABILIZED
    return recommendation, "ScaleDownStabilized", MSG_DOWN_STABILIZED


def scale_up_limit_with_rules(current: int, up_events: list[ScaleEvent], down_events: list[ScaleEvent],
                              rules: Obj, now: float) -> int:
    """``calculateScaleUpLimitWithScalingRules``."""
    return _limit_with_rules(current, up_events, down_events, rules, now, scale_up=True)


def scale_down_limit_with_rules(current: int, up_events: list[ScaleEvent], down_events: list[ScaleEvent],
                                rules: Obj, now: float) -> int:
    """``calculateScaleDownLimitWithBehaviors``."""
    return _limit_with_rules(current, up_events, down_events, rules, now, scale_up=False)


def _limit_with_rules(current: int, up_events: list[ScaleEvent], down_events: list[ScaleEvent], rules: Obj,
                      now: float, *, scale_up: bool) -> int:
    """The two upstream twins above: they differ in direction and in how a Percent policy rounds."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    # 'Min' is the smallest change: the lowest count going up, the highest going down.
    pick = min if (select == "Min") == scale_up else max
    result = _INT32_MAX if pick is min else _INT32_MIN
    for policy in rules.get("policies") or []:
        period = int(policy.get("periodSeconds") or 0)
        start = (current - replicas_change_per_period(period, up_events, now)
                 + replicas_change_per_period(period, down_events, now))
        value = int(policy.get("value") or 0)
        if policy.get("type") == "Pods":
            proposed = start + value if scale_up else start - value
        elif scale_up:
            proposed = math.ceil(start * (1 + value / 100))  # rounded up, or a small target could never grow
        else:
            proposed = int(start * (1 - value / 100))  # truncated, as Go's int32(float64) conversion
        result = pick(result, proposed)
    return result


def convert_with_behavior_rate(history: ScaleHistory, arg: NormalizationArg, behavior: Obj,
                               now: float) -> tuple[int, str, str]:
    """``convertDesiredReplicasWithBehaviorRate``: (replicas, ScalingLimited reason, message)."""
    key, current, desired = arg.key, arg.current, arg.desired
    min_replicas, max_replicas = arg.min_replicas, arg.max_replicas
    up_events = history.scale_up_events.get(key, [])
    down_events = history.scale_down_events.get(key, [])
    if desired > current:
        limit = scale_up_limit_with_rules(current, up_events, down_events, behavior.get("scaleUp") or {}, now)
        limit = max(limit, current)  # no further scale-up until old events age out
        if max_replicas > limit:
            maximum, reason, message = limit, "ScaleUpLimit", MSG_SCALE_UP_LIMIT
        else:
            maximum, reason, message = max_replicas, "TooManyReplicas", MSG_TOO_MANY
        if desired > maximum:
            return maximum, reason, message
    elif desired < current:
        limit = scale_down_limit_with_rules(current, up_events, down_events, behavior.get("scaleDown") or {}, now)
        limit = min(limit, current)
        if min_replicas < limit:
            minimum, reason, message = limit, "ScaleDownLimit", MSG_SCALE_DOWN_LIMIT
        else:
            minimum, reason, message = min_replicas, "TooFewReplicas", MSG_TOO_FEW
        if desired < minimum:
            return minimum, reason, message
    return desired, "DesiredWithinRange", MSG_WITHIN_RANGE


def normalize_with_behaviors(history: ScaleHistory, arg: NormalizationArg, behavior: Obj, now: float, *,
                             default_down_window: float = DEFAULT_DOWNSCALE_STABILIZATION
                             ) -> tuple[int, list[Condition]]:
    """``normalizeDesiredReplicasWithBehaviors``; returns the count and the conditions to set.

    A ``scaleDown`` without ``stabilizationWindowSeconds`` takes the controller's
    downscale-stabilization flag (``maybeInitScaleDownStabilizationWindow``).
    """
    up = behavior.get("scaleUp") or {}
    down = behavior.get("scaleDown") or {}
    up_window = float(up.get("stabilizationWindowSeconds") or 0)
    down_seconds = down.get("stabilizationWindowSeconds")
    down_window = float(default_down_window if down_seconds is None else down_seconds)
    stabilized, reason, message = stabilize_with_behaviors(history, arg, now, up_window=up_window,
                                                           down_window=down_window)
    conditions = [Condition("AbleToScale", "True", reason, message) if stabilized != arg.desired
                  else Condition("AbleToScale", "True", "ReadyForNewScale", MSG_READY)]
    replicas, reason, message = convert_with_behavior_rate(
        history, NormalizationArg(arg.key, arg.current, stabilized, arg.min_replicas, arg.max_replicas), behavior, now)
    conditions.append(Condition("ScalingLimited", "False" if replicas == stabilized else "True", reason, message))
    return replicas, conditions
