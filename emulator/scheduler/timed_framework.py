"""The scheduler's framework: the runtime's, timed per extension point and per plugin, plus the waiting-pods handle.

Upstream ``pkg/scheduler/framework/runtime/framework.go`` (the
``metrics.FrameworkExtensionPointDuration`` observed around each
``Run*Plugins``, the ``Handle`` methods over waiting pods) and
``pkg/scheduler/metrics/metric_recorder.go`` (plugin execution durations in
a sampled share of cycles); our own Python.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from emulator.scheduler import metrics
from emulator.scheduler.framework.interface import Code, CycleState, Status
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import NodeToStatus, PodInfo
from emulator.scheduler.waiting_pods import WaitingPod

if TYPE_CHECKING:
    from emulator.scheduler.scheduler import Scheduler

__all__ = ["TimedFramework", "timed_registry"]

_POINT_LABEL = {
    "pre_filter": "PreFilter", "filter": "Filter", "filter_all": "Filter", "post_filter": "PostFilter",
    "pre_score": "PreScore", "score": "Score", "score_all": "Score", "normalize_score": "ScoreExtensionNormalize",
    "reserve": "Reserve", "unreserve": "Unreserve", "permit": "Permit", "pre_bind": "PreBind", "bind": "Bind",
    "post_bind": "PostBind",
}


def _status_label(result: Any) -> str:
    """The status code a plugin call answered, for the ``status`` label."""
    if result is None:
        return "Success"
    if isinstance(result, Status):
        return str(result.code)
    if isinstance(result, tuple) and len(result) == 2 and (result[1] is None or isinstance(result[1], Status)):
        return "Success" if result[1] is None else str(result[1].code)
    return "Success"


class _TimedPlugin:
    """A plugin whose extension-point methods record ``scheduler_plugin_execution_duration_seconds``.

    Only in sampled cycles (``state.record_plugin_metrics``); otherwise the
    call goes straight through. Attributes the plugin does not have stay
    absent, so the runtime discovers the same extension points.
    """

    def __init__(self, plugin: Any, scheduler: str) -> None:
        self._plugin = plugin
        self.name = plugin.name  # read on every cycle: keep it off the __getattr__ path
        self._children: dict[tuple[str, str], Any] = {}
        for method, point in _POINT_LABEL.items():
            fn = getattr(plugin, method, None)
            if callable(fn):
                setattr(self, method, self._wrap(fn, plugin.name, point, scheduler))

    def _wrap(self, fn: Callable[..., Any], name: str, point: str, scheduler: str) -> Callable[..., Any]:
        children = self._children

        def timed(state: CycleState, *args: Any) -> Any:
            if not state.record_plugin_metrics:
                return fn(state, *args)
            start = time.perf_counter()
            result = fn(state, *args)
            label = _status_label(result)
            child = children.get((point, label))
            if child is None:
                child = children[(point, label)] = metrics.PLUGIN_EXECUTION_DURATION.labels(
                    name, point, label, scheduler)
            child.observe(time.perf_counter() - start)
            return result

        return timed

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._plugin, attr)


def timed_registry(registry: Mapping[str, Callable[..., Any]], scheduler: str) -> dict[str, Callable[..., Any]]:
    def timed_factory(factory: Callable[..., Any]) -> Callable[..., Any]:
        return lambda args, handle: _TimedPlugin(factory(args, handle), scheduler)

    return {name: timed_factory(factory) for name, factory in registry.items()}


class TimedFramework(Framework):
    """The runtime's framework, recording ``scheduler_framework_extension_point_duration_seconds`` per point
    and offering the waiting-pods part of upstream's framework handle."""

    def __init__(self, *args: Any, scheduler: Scheduler, **kwargs: Any) -> None:
        # Plugins read cluster objects through ``handle.listers`` while they are constructed, so it comes first.
        self.listers = scheduler.listers
        self.clock = scheduler.clock  # the cluster clock, for plugins reading time-stamped data (LoadAware)
        super().__init__(*args, **kwargs)
        self._scheduler = scheduler
        self._metric_name = scheduler.name
        self._children: dict[tuple[str, str], Any] = {}
        self._pre_filter_seconds = 0.0
        # Which binding-side points have plugins, looked up per pod: skip the empty ones outright.
        self.has = {point: bool(self.plugins_at(point)) for point in ("reserve", "permit", "preBind", "bind",
                                                                      "postBind")}

    def _observe(self, point: str, status: Status | None, seconds: float) -> None:
        label = "Success" if status is None else str(status.code)
        child = self._children.get((point, label))
        if child is None:
            child = self._children[(point, label)] = metrics.EXTENSION_POINT_DURATION.labels(
                point, label, self.profile_name, self._metric_name)
        child.observe(seconds)

    def run_pre_filter_plugins(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Any:
        start = time.perf_counter()
        out = super().run_pre_filter_plugins(state, pod, snapshot)
        self._pre_filter_seconds = time.perf_counter() - start
        self._observe("PreFilter", out[1], self._pre_filter_seconds)
        return out

    def find_nodes_that_fit(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> Any:
        start = time.perf_counter()
        self._pre_filter_seconds = 0.0
        feasible, diagnosis = super().find_nodes_that_fit(state, pod, snapshot)
        status = None if len(feasible) else Status(Code.UNSCHEDULABLE)
        self._observe("Filter", status, time.perf_counter() - start - self._pre_filter_seconds)
        return feasible, diagnosis

    def run_post_filter_plugins(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                                node_to_status: NodeToStatus) -> Any:
        start = time.perf_counter()
        out = super().run_post_filter_plugins(state, pod, snapshot, node_to_status)
        self._observe("PostFilter", out[1], time.perf_counter() - start)
        return out

    def run_pre_score_plugins(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: Any) -> Any:
        start = time.perf_counter()
        out = super().run_pre_score_plugins(state, pod, snapshot, nodes)
        self._observe("PreScore", out, time.perf_counter() - start)
        return out

    def run_score_plugins(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: Any) -> Any:
        start = time.perf_counter()
        out = super().run_score_plugins(state, pod, snapshot, nodes)
        self._observe("Score", None, time.perf_counter() - start)
        return out

    def timed(self, point: str, fn: Callable[[], Any]) -> Any:
        """Run one binding-side extension point (Reserve, Permit, PreBind, Bind, PostBind) and record it."""
        start = time.perf_counter()
        out = fn()
        self._observe(point, out if isinstance(out, Status) else None, time.perf_counter() - start)
        return out

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        """upstream ``Handle.GetWaitingPod``."""
        return self._scheduler.get_waiting_pod(uid)

    def iterate_over_waiting_pods(self, fn: Callable[[WaitingPod], None]) -> None:
        """upstream ``Handle.IterateOverWaitingPods``."""
        for waiting in self._scheduler.waiting_pods():
            fn(waiting)

    def reject_waiting_pod(self, uid: str) -> bool:
        waiting = self._scheduler.get_waiting_pod(uid)
        if waiting is None:
            return False
        waiting.reject("", "removed")
        return True
