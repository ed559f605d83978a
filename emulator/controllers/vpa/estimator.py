"""From aggregated usage to a recommendation: the VPA recommender's estimators.

Upstream: kubernetes/autoscaler ``vertical-pod-autoscaler/pkg/recommender/logic``
(``recommender.go``, ``estimator.go``). Per container: a percentile of the
decaying histogram (target 90th, lower bound 50th, upper bound 95th, for CPU
and memory alike), plus a 15 % safety margin; the bounds are then widened by
the confidence in the history — ``confidence = min(history in days, samples /
1440)`` — the upper bound times ``(1 + 1/confidence)``, the lower bound times
``(1 + 0.001/confidence)**-2`` (no history: upper unbounded, lower 0); and every
value is at least the pod minimum (25 millicores, 250 MiB) divided among the
pod's containers. Amounts are integers, millicores and bytes, capped at 1e14
(``MaxResourceAmount``) and truncated as ``resourceAmountFromFloat`` does.
Everything is vectorised over the aggregates of a pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emulator.api.vpa import MAX_AMOUNT
from emulator.controllers.vpa.model import DAY, UsageModel

SAFETY_MARGIN = 0.15  # --recommendation-margin-fraction
POD_MIN_CPU_MILLICORES = 25.0  # --pod-recommendation-min-cpu-millicores
POD_MIN_MEMORY_MB = 250.0  # --pod-recommendation-min-memory-mb
TARGET, LOWER, UPPER = 0.9, 0.5, 0.95  # --target-*-percentile, --recommendation-{lower,upper}-bound-*-percentile
UPPER_CONFIDENCE = (1.0, 1.0)  # (multiplier, exponent)
LOWER_CONFIDENCE = (0.001, -2.0)


@dataclass(frozen=True, slots=True)
class Recommendation:
    """Per resource (``cpu`` millicores, ``memory`` bytes): target, lower and upper bound."""

    target: dict[str, int]
    lower: dict[str, int]
    upper: dict[str, int]


def _amounts(values: np.ndarray) -> np.ndarray:
    """``resourceAmountFromFloat``: negative → 0, above the ceiling → the ceiling, else truncated."""
    v = np.where(np.isnan(values), 0.0, values)
    return np.where(v > MAX_AMOUNT, MAX_AMOUNT, np.maximum(v, 0.0)).astype(np.int64)


def confidence(model: UsageModel, rows: np.ndarray) -> np.ndarray:
    """``getConfidence``: min(lifespan in days, samples / (60 * 24))."""
    lifespan = (model.last_sample[rows] - model.first_sample[rows]) / DAY
    return np.minimum(lifespan, model.sample_count[rows] / (60 * 24))


def _scaled(amounts: np.ndarray, factor: np.ndarray | float) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return _amounts(amounts.astype(np.float64) * factor)


def estimate(model: UsageModel, rows: np.ndarray, containers_per_pod: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """``target``/``lower``/``upper`` → ``cpu``/``memory`` → amounts, one per row.

    ``containers_per_pod`` (per row) divides the pod minimum among the pod's containers.
    """
    conf = confidence(model, rows)
    with np.errstate(divide="ignore"):
        upper_factor = np.power(1.0 + UPPER_CONFIDENCE[0] / conf, UPPER_CONFIDENCE[1])
        lower_factor = np.power(1.0 + LOWER_CONFIDENCE[0] / conf, LOWER_CONFIDENCE[1])
    fraction = 1.0 / np.maximum(containers_per_pod, 1)
    # ScaleResource(CPUAmountFromCores(...), fraction): both truncate.
    minimum = {"cpu": _amounts(_amounts(np.full(len(rows), POD_MIN_CPU_MILLICORES)) * fraction),
               "memory": _amounts(_amounts(np.full(len(rows), POD_MIN_MEMORY_MB * 1024 * 1024)) * fraction)}
    out: dict[str, dict[str, np.ndarray]] = {"target": {}, "lower": {}, "upper": {}}
    for resource, bank, unit in (("cpu", model.cpu, 1000.0), ("memory", model.memory, 1.0)):
        for name, p, factor in (("target", TARGET, None), ("lower", LOWER, lower_factor),
                                ("upper", UPPER, upper_factor)):
            base = _amounts(bank.percentiles(rows, p) * unit)  # CPUAmountFromCores / MemoryAmountFromBytes
            value = base + _scaled(base, SAFETY_MARGIN)  # WithMargin
            if factor is not None:
                value = _scaled(value, factor)  # WithConfidenceMultiplier
            out[name][resource] = np.maximum(value, minimum[resource])  # WithMinResource
    return out


def recommend_all(model: UsageModel, groups: dict[str, dict[str, int]]) -> dict[str, dict[str, Recommendation]]:
    """``GetRecommendedPodResources`` for many VPAs at once: VPA key → container → recommendation."""
    keys = [(k, n) for k, rows in groups.items() for n in sorted(rows)]
    if not keys:
        return {}
    rows = np.array([groups[k][n] for k, n in keys], dtype=np.int64)
    per_pod = np.array([len(groups[k]) for k, _ in keys])
    est = estimate(model, rows, per_pod)
    cols = {k: {r: est[k][r].tolist() for r in ("cpu", "memory")} for k in ("target", "lower", "upper")}
    out: dict[str, dict[str, Recommendation]] = {}
    for i, (key, name) in enumerate(keys):
        out.setdefault(key, {})[name] = Recommendation(
            *({r: cols[k][r][i] for r in ("cpu", "memory")} for k in ("target", "lower", "upper")))
    return out


def recommend(model: UsageModel, rows: dict[str, int]) -> dict[str, Recommendation]:
    """``GetRecommendedPodResources`` for one VPA's aggregates (container name → row)."""
    return recommend_all(model, {"": rows}).get("", {})
