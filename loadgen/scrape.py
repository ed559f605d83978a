"""Scheduler counters read from their ``/metrics``, for runs that did not start the schedulers.

A run that brings its own cluster asks the scheduler runners for their
counters directly; a run attached to a cluster someone else started
(docker-compose) cannot - but every scheduler registered its ``/metrics``
for Prometheus (:mod:`emulator.metrics`), so the run reads the same numbers
there: attempts by result, bind conflicts, preemption attempts, and attempt
latency quantiles interpolated from the histogram buckets the way
Prometheus's ``histogram_quantile`` does (linearly within the bucket that
holds the rank). Counters are totals since each scheduler started.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import httpx
import redis
from prometheus_client.parser import text_string_to_metric_families

from emulator.metrics import discover


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """``histogram_quantile`` over cumulative ``(upper bound, count)`` pairs; None without observations."""
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] == 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if math.isinf(upper):
                return lower  # in the +Inf bucket: the highest finite bound, as Prometheus answers
            return lower + (upper - lower) * (rank - below) / (count - below) if count > below else upper
        lower, below = upper, count
    return lower


def scheduler_stats(client: redis.Redis, prefix: str = "kemu:", timeout: float = 5.0) -> list[dict[str, Any]]:
    """Per scheduler replica: attempts, scheduled, unschedulable, errors, conflicts, preemptions, attempt quantiles."""
    rows: dict[str, dict[str, Any]] = defaultdict(lambda: {"attempts": 0, "scheduled": 0, "unschedulable": 0,
                                                           "errors": 0, "conflicts": 0, "preemptions": 0})
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for target in discover(client, prefix):
        if target["labels"].get("component") != "scheduler":
            continue
        for address in target["targets"]:
            try:
                text = httpx.get(f"http://{address}/metrics", timeout=timeout).text
            except httpx.HTTPError:
                continue  # a scheduler that went away: the others still count
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    name = s.labels.get("scheduler")
                    if name is None:
                        continue
                    if s.name == "scheduler_schedule_attempts_total":
                        result = s.labels.get("result", "")
                        rows[name]["attempts"] += s.value
                        key = {"scheduled": "scheduled", "unschedulable": "unschedulable"}.get(result, "errors")
                        rows[name][key] += s.value
                    elif s.name == "scheduler_bind_conflicts_total":
                        rows[name]["conflicts"] += s.value
                    elif s.name == "scheduler_preemption_attempts_total":
                        rows[name]["preemptions"] += s.value
                    elif (s.name == "scheduler_scheduling_attempt_duration_seconds_bucket"
                          and s.labels.get("result") == "scheduled"):
                        buckets[name][float(s.labels["le"])] += s.value
    out = []
    for name in sorted(rows):
        row = {"name": name, **{k: int(v) for k, v in rows[name].items()}}
        for q in (50, 90, 99):
            v = histogram_quantile(q / 100, list(buckets[name].items()))
            row[f"attempt_p{q}_ms"] = None if v is None else round(v * 1000, 2)
        row["conflictFraction"] = round(row["conflicts"] / max(1, row["scheduled"] + row["conflicts"]), 4)
        out.append(row)
    return out
