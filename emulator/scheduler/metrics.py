"""The scheduler's Prometheus metrics: upstream names, buckets and labels, plus kemu's own.

Upstream ``pkg/scheduler/metrics/metrics.go`` defines the names, help texts,
buckets and labels copied here (``scheduler_schedule_attempts_total{result,
profile}``, ``scheduler_pod_scheduling_sli_duration_seconds{attempts}``...).
kemu adds one label to every metric, ``scheduler`` -- the name of the
scheduler *instance* (``kemu-scheduler-0``...) -- because several competing
schedulers may live in one process (tests, ``kemu up``), and the Omega-style
questions kemu is built for ("which replica conflicts most?") need it; a
query written for upstream (``sum by (result)``) works unchanged.

kemu's own metrics: ``scheduler_bind_conflicts_total{scheduler}`` (binds the
store refused with 409 because the node lost its room or the pod was taken),
``scheduler_assumed_forgotten_total{scheduler,reason}`` (assumed pods dropped
again: ``bind_failed``, ``expired``), ``scheduler_cache_staleness_seconds{scheduler}``
(how old the newest informer event was when the cache applied it) and
``scheduler_cache_size{scheduler,type}`` (upstream's
``scheduler_scheduler_cache_size`` under a sane name).

Gauges that describe state (pending pods per queue, cache size) are not
updated on the hot path: a custom collector reads every live scheduler's
queue and cache when Prometheus scrapes (:func:`register_state_source`).

Everything lives in prometheus-client's default registry, created once per
process at import, as prometheus-client intends; ``serve`` in
:mod:`emulator.metrics` exposes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from emulator.collectors import SourceCollector

__all__ = [
    "ASSUMED_FORGOTTEN",
    "BIND_CONFLICTS",
    "EXTENSION_POINT_DURATION",
    "PLUGIN_EXECUTION_DURATION",
    "POD_SCHEDULING_ATTEMPTS",
    "POD_SCHEDULING_SLI_DURATION",
    "PREEMPTION_ATTEMPTS",
    "PREEMPTION_VICTIMS",
    "QUEUE_INCOMING_PODS",
    "SCHEDULE_ATTEMPTS",
    "SCHEDULING_ATTEMPT_DURATION",
    "StateSource",
    "attempts_label",
    "exponential_buckets",
    "preinitialise",
    "register_state_source",
]


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """component-base ``ExponentialBuckets``: ``count`` upper bounds from ``start``, each ``factor`` times the last."""
    return tuple(start * factor**i for i in range(count))


SCHEDULE_ATTEMPTS = Counter(
    "scheduler_schedule_attempts_total",
    "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, "
    "while 'error' means an internal scheduler problem.",
    ["result", "profile", "scheduler"])

SCHEDULING_ATTEMPT_DURATION = Histogram(
    "scheduler_scheduling_attempt_duration_seconds",
    "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
    ["result", "profile", "scheduler"], buckets=exponential_buckets(0.001, 2, 15))

POD_SCHEDULING_SLI_DURATION = Histogram(
    "scheduler_pod_scheduling_sli_duration_seconds",
    "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve "
    "multiple scheduling attempts.",
    ["attempts", "scheduler"], buckets=exponential_buckets(0.01, 2, 20))

POD_SCHEDULING_ATTEMPTS = Histogram(
    "scheduler_pod_scheduling_attempts", "Number of attempts to successfully schedule a pod.",
    ["scheduler"], buckets=exponential_buckets(1, 2, 5))

EXTENSION_POINT_DURATION = Histogram(
    "scheduler_framework_extension_point_duration_seconds",
    "Latency for running all plugins of a specific extension point.",
    ["extension_point", "status", "profile", "scheduler"], buckets=exponential_buckets(0.0001, 2, 12))

PLUGIN_EXECUTION_DURATION = Histogram(
    "scheduler_plugin_execution_duration_seconds", "Duration for running a plugin at a specific extension point.",
    ["plugin", "extension_point", "status", "scheduler"], buckets=exponential_buckets(0.00001, 1.5, 20))

QUEUE_INCOMING_PODS = Counter(
    "scheduler_queue_incoming_pods_total", "Number of pods added to scheduling queues by event and queue type.",
    ["queue", "event", "scheduler"])

PREEMPTION_ATTEMPTS = Counter(
    "scheduler_preemption_attempts_total", "Total preemption attempts in the cluster till now", ["scheduler"])

PREEMPTION_VICTIMS = Histogram(
    "scheduler_preemption_victims", "Number of selected preemption victims", ["scheduler"],
    buckets=exponential_buckets(1, 2, 7))

BIND_CONFLICTS = Counter(
    "scheduler_bind_conflicts_total",
    "Binds the store refused with 409 Conflict (the node no longer had room, or the pod was already bound): "
    "the optimistic-concurrency losses of competing schedulers.", ["scheduler"])

ASSUMED_FORGOTTEN = Counter(
    "scheduler_assumed_forgotten_total",
    "Pods assumed onto a node in the scheduler cache and then dropped again (bind failed, or the assumption "
    "expired without the informer confirming it).", ["scheduler", "reason"])

def preinitialise(scheduler: str, profiles: list[str]) -> None:
    """Zero series for a new scheduler, so dashboards show 0 (not "no data") for what has not happened yet.

    Upstream pre-creates nothing, but its results are few and fixed; kemu creates the series
    dashboards query: attempts and their latency by result and profile, conflicts, forgets,
    preemption attempts and victims.
    """
    for profile in profiles:
        for result in ("scheduled", "unschedulable", "error"):
            SCHEDULE_ATTEMPTS.labels(result, profile, scheduler)
            SCHEDULING_ATTEMPT_DURATION.labels(result, profile, scheduler)
    BIND_CONFLICTS.labels(scheduler)
    for reason in ("bind_failed", "expired"):
        ASSUMED_FORGOTTEN.labels(scheduler, reason)
    PREEMPTION_ATTEMPTS.labels(scheduler)
    PREEMPTION_VICTIMS.labels(scheduler)


def attempts_label(attempts: int) -> str:
    """upstream ``getAttemptsLabel``: the attempt count, with 15 and more folded into ``"15+"``."""
    return "15+" if attempts >= 15 else str(attempts)


class StateSource(Protocol):
    """Something that can report its current gauges (a scheduler): name -> label tuple -> value."""

    @property
    def name(self) -> str: ...

    def state_gauges(self) -> Mapping[str, Mapping[tuple[str, ...], float]]: ...


# (metric name, help, label names besides "scheduler")
_STATE_GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "scheduler_pending_pods": (
        "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means "
        "number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler "
        "attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never "
        "attempted to schedule because they are gated.", ("queue",)),
    "scheduler_cache_size": ("Number of nodes, pods, and assumed (bound) pods in the scheduler cache.", ("type",)),
    "scheduler_cache_staleness_seconds": (
        "Age of the newest informer event the scheduler cache applied, when it applied it: how far the scheduler's "
        "view of the cluster lags behind its informers.", ()),
    "scheduler_cache_pending_events": (
        "Informer events received but not yet applied to the scheduler cache's snapshot.", ()),
    # GPU sharing (the FGD paper's measures), from the cache's per-device view; absent without GPU nodes.
    "kemu_gpu_allocation_ratio": ("Allocated milli-GPU over the cluster's GPU capacity.", ()),
    "kemu_gpu_fragmented_gpus": (
        "GPUs (in GPU units) the target workload - the task types of the pods in the cache - cannot use: the sum "
        "over nodes of F_n(M), Weng et al. USENIX ATC '23.", ()),
    "kemu_gpu_fragmentation_ratio": (
        "Fragmented GPUs as a fraction of the cluster's GPUs (of=\"cluster\") or of its idle GPUs "
        "(of=\"idle\").", ("of",)),
    "kemu_gpu_model_allocation_ratio": ("Allocated over capacity per GPU model (node label "
                                        "alibabacloud.com/gpu-card-model).", ("model",)),
}


class _StateCollector(SourceCollector):
    """Reads the gauges of every live scheduler at scrape time (no cost on the scheduling path)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        sources = self.sources()
        families = {name: GaugeMetricFamily(name, text, labels=[*labels, "scheduler"])
                    for name, (text, labels) in _STATE_GAUGES.items()}
        for source in sources:
            for name, values in source.state_gauges().items():
                family = families.get(name)
                if family is None:
                    continue
                for labels, value in values.items():
                    family.add_metric([*labels, source.name], value)
        yield from families.values()

    def describe(self) -> Iterator[GaugeMetricFamily]:
        for name, (text, labels) in _STATE_GAUGES.items():
            yield GaugeMetricFamily(name, text, labels=[*labels, "scheduler"])


_STATE = _StateCollector()
REGISTRY.register(_STATE)


def register_state_source(source: StateSource) -> Callable[[], None]:
    """Report ``source``'s gauges on every scrape until the returned function is called (or it is collected)."""
    _STATE.add(source)
    return lambda: _STATE.remove(source)
