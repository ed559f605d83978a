"""What KEDA's ScaledObject and ScaledJob loops share (kedacore/keda ``pkg/scaling/scale_handler.go``,
``pkg/scaling/cache/scalers_cache.go``, ``apis/keda/v1alpha1/condition_types.go``).

:class:`ScalableController` is the part of the operator both reconcilers are built on. One
work queue carries two kinds of keys, as upstream's reconciler and its per-object scale-loop
goroutines share one process: ``ns/name`` (reconcile: on create, on a generation or
annotation change, on delete) and ``poll/ns/name`` (the scale loop, every ``pollingInterval``
of cluster time, default 30 s, the first at once). A lock per object keeps its reconcile and
its poll apart (both write its status, read from the store, not the cache).

The **scalers cache** (:class:`Built`, upstream's ``ScalersCache``) holds an object's scalers
for one generation. It is dropped, and built again — resolving TriggerAuthentications and
Secrets afresh — when:

* the object's generation changes (``GetScalersCache``);
* a poll saw a scaler fail (``checkScalers`` → ``ClearScalersCache``): the next poll builds
  them again, so a fixed password or address is picked up;
* a TriggerAuthentication, ClusterTriggerAuthentication or Secret the scalers were built
  from changes or goes (kemu watches the three and rebuilds at once, where upstream waits for
  the next scaler error).

:meth:`ScalableController.read` reads one metric of one trigger and records KEDA's series
(:mod:`emulator.keda.prommetrics`); a failure is a ``KEDAScalerFailed`` event, never a crash.
"""

from __future__ import annotations

import abc
import contextlib
import copy
import logging
import math
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from emulator.api import errors, kinds
from emulator.api import keda as k
from emulator.api.kinds import CLUSTERTRIGGERAUTHENTICATION, POD, TRIGGERAUTHENTICATION
from emulator.api.quantity import QuantityError, parse_quantity
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.controllers.runtime import Controller, ControllerContext, EventRecorder, ensure_indexers, object_of
from emulator.controllers.runtime.events import EVENT_NORMAL, EVENT_WARNING
from emulator.informers import ResourceEventHandlerFuncs
from emulator.informers.indexer import NAMESPACE_INDEX, namespace_index_func
from emulator.keda import auth
from emulator.keda import prommetrics as pm
from emulator.keda.scalers import Scaler, ScalerConfig, ScalerError, build_scaler
from emulator.metricsapi.client import MetricsUnavailable
from emulator.metricsapi.resource import ResourceMetricsReader

log = logging.getLogger(__name__)

POLL = "poll/"
MANAGED_BY = "keda-operator"


def set_condition(obj: Obj, ctype: str, status: str, reason: str, message: str, *, now: float) -> bool:
    """Set one condition (KEDA's ``Conditions.Set*Condition``); whether anything changed."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    for c in conditions:
        if c.get("type") == ctype:
            if (c.get("status"), c.get("reason"), c.get("message")) == (status, reason, message):
                return False
            c.update(status=status, reason=reason, message=message)
            return True
    conditions.append({"type": ctype, "status": status, "reason": reason, "message": message})
    return True


def initial_conditions(obj: Obj) -> None:
    """``GetInitializedConditions``: Ready/Active/Fallback/Paused start Unknown."""
    if not (obj.get("status") or {}).get("conditions"):
        obj.setdefault("status", {})["conditions"] = [
            {"type": t, "status": "Unknown", "reason": "", "message": ""}
            for t in ("Ready", "Active", "Fallback", "Paused")]


def set_active(obj: Obj, active: bool, now: float) -> None:
    if active:
        set_condition(obj, "Active", "True", "ScalerActive", "Scaling is performed because triggers are active",
                      now=now)
    else:
        set_condition(obj, "Active", "False", "ScalerNotActive",
                      "Scaling is not performed because triggers are not active", now=now)


def target_value(target: Obj) -> float:
    """A MetricTarget's AverageValue (or Value) as a float."""
    raw = target.get("averageValue") if target.get("type") == "AverageValue" else target.get("value")
    try:
        return parse_quantity(raw).milli_value() / 1000.0 if raw is not None else 0.0
    except QuantityError:
        return math.nan


@dataclass
class Built:
    """An object's scalers, built for one generation, and what their authentication read."""

    generation: int
    scalers: list[tuple[int, Obj, Scaler, list[Obj]]]  # (trigger index, trigger, scaler, its metric specs)
    auth_types: list[str]
    deps: set[tuple[str, str, str]] = field(default_factory=set)  # (resource, namespace, name) read

    def close(self) -> None:
        for _, _, scaler, _ in self.scalers:
            try:
                scaler.close()
            except Exception:  # closing must never stop a reconcile
                log.debug("closing a scaler failed", exc_info=True)


@dataclass
class Env:
    """What scalers read besides their source: the embedded Redis, the cluster clock, pods."""

    redis: Any
    now: Any
    controller: Any

    def list_pods(self, namespace: str, selector: LabelSelector) -> list[Obj]:
        pods = self.controller.pod_informer.indexer.by_index(NAMESPACE_INDEX, namespace)
        return [p for p in pods if selector.matches((p.get("metadata") or {}).get("labels") or {})]

    def pod_resource_usage(self, namespace: str, name: str, resource: str, container: str
                           ) -> tuple[list[float], list[float]]:
        """Usage (cores / bytes) and requests of the ScaledObject's target's pods (metrics.k8s.io)."""
        if self.controller.kind_name != "ScaledObject":  # upstream's cpu/memory scalers need a scale target
            raise ScalerError("cpu and memory triggers need a ScaledObject's scale target")
        so = self.controller.informer.indexer.get_by_key(f"{namespace}/{name}")
        if so is None:
            return [], []
        api_version, kind_name, target_name = k.target_ref(so)
        target = self.controller.core.get(kinds.by_api_version_kind(api_version, kind_name), namespace, target_name)
        selector = LabelSelector.from_dict((target.get("spec") or {}).get("selector") or {})
        pods = self.list_pods(namespace, selector)
        reader = ResourceMetricsReader(self.controller.core.store, self.now, lambda _ns, _sel: pods)
        try:
            info, _ = reader.resource_metric(resource, namespace, selector, container)
        except MetricsUnavailable as e:
            raise ScalerError(str(e)) from None
        usage, requests = [], []
        for pod in pods:
            metric = info.get(pod["metadata"]["name"])
            if metric is None:
                continue
            usage.append(metric.value / 1000.0)
            total = 0.0
            for c in (pod.get("spec") or {}).get("containers") or []:
                if container and c.get("name") != container:
                    continue
                raw = ((c.get("resources") or {}).get("requests") or {}).get(resource)
                with contextlib.suppress(QuantityError):
                    total += parse_quantity(raw).milli_value() / 1000.0 if raw is not None else 0.0
            requests.append(total)
        return usage, requests


@dataclass
class PollStats:
    """Per-scaler read durations (wall seconds) and poll lateness (cluster seconds), for the benchmark."""

    reads: dict[str, deque[float]] = field(default_factory=lambda: defaultdict(lambda: deque(maxlen=100_000)))
    lateness: deque[float] = field(default_factory=lambda: deque(maxlen=100_000))
    polls: int = 0


@dataclass
class Reading:
    """One metric of one trigger as a poll read it: its value and activity, or the error."""

    metric: str
    value: float = 0.0
    active: bool = False
    error: str = ""


class ScalableController(Controller, abc.ABC):
    """The reconcile / poll machinery of a KEDA kind (see the module docstring); subclasses reconcile and poll."""

    kind_name = ""  # "ScaledObject" / "ScaledJob"
    loop_type = ""  # the keda_* series' "type" label: "scaledobject" / "scaledjob"

    def __init__(self, name: str, ctx: ControllerContext, kind: kinds.Kind, *, workers: int) -> None:
        super().__init__(name, ctx, workers=workers)
        self.informer = self.watch(ctx.informers.informer_for(kind))
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        ensure_indexers(self.pod_informer, {NAMESPACE_INDEX: namespace_index_func})
        self.informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self.enqueue(obj), update=self._updated, delete=self._deleted))
        for auth_kind in (TRIGGERAUTHENTICATION, CLUSTERTRIGGERAUTHENTICATION, kinds.by_resource("secrets")):
            self.watch(ctx.informers.informer_for(auth_kind)).add_event_handler(ResourceEventHandlerFuncs(
                add=lambda obj, initial, r=auth_kind.resource: None if initial else self._auth_changed(r, obj),
                update=lambda _old, new, r=auth_kind.resource: self._auth_changed(r, new),
                delete=lambda obj, r=auth_kind.resource: self._auth_changed(r, obj)))
        if ctx.recorder is not None:  # upstream's events come from the component "keda-operator"
            self.recorder = EventRecorder(ctx.core, MANAGED_BY, clock=ctx.clock, host=ctx.recorder.host)
        self.env = Env(ctx.core.store.redis, ctx.clock.now, self)
        self.built: dict[str, Built] = {}
        self.stale: set[str] = set()  # keys whose scalers are built again at their next use
        self.due: dict[str, float] = {}  # poll key -> cluster time it is due
        self.stats = PollStats()
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def start(self) -> ScalableController:
        if self.recorder is not None and self.recorder is not self.ctx.recorder:
            self.recorder.start()
        super().start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        if self.recorder is not None and self.recorder is not self.ctx.recorder:
            self.recorder.stop()
        for key in list(self.built):
            self.stop_loop(key)

    def event(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        super().event({"apiVersion": k.API_VERSION, "kind": self.kind_name, **obj}, event_type, reason, message)

    # ------------------------------------------------------------------ handlers
    def _updated(self, old: Obj, new: Obj) -> None:
        om, nm = old.get("metadata") or {}, new.get("metadata") or {}
        # GenerationChangedPredicate + annotation changes (pause): status writes do not reconcile.
        if om.get("generation") != nm.get("generation") or om.get("annotations") != nm.get("annotations"):
            self.enqueue(new)

    def _deleted(self, obj: Any) -> None:
        scalable = object_of(obj)
        if scalable is not None:
            self.enqueue(scalable)

    def _auth_changed(self, resource: str, obj: Any) -> None:
        """A (Cluster)TriggerAuthentication or Secret changed: objects whose scalers read it build them again."""
        changed = object_of(obj)
        if changed is None:
            return
        meta = changed.get("metadata") or {}
        dep = (resource, meta.get("namespace") or "", meta.get("name") or "")
        for key, built in list(self.built.items()):
            if dep in built.deps:
                self.stale.add(key)
                self.enqueue_key(key)

    # ------------------------------------------------------------------ reconcile and poll
    def reconcile(self, key: str) -> float | None:
        # An object's reconcile and its poll never run at once: both write its status.
        obj_key = key[len(POLL):] if key.startswith(POLL) else key
        with self._locks_lock:
            lock = self._locks.setdefault(obj_key, threading.Lock())
        with lock:
            if key.startswith(POLL):
                return self.poll(obj_key)
            return self.reconcile_object(obj_key)

    @abc.abstractmethod
    def reconcile_object(self, key: str) -> float | None:
        ...

    @abc.abstractmethod
    def poll_object(self, obj: Obj, built: Built, now: float) -> bool:
        """One poll of ``obj`` (a copy: its status is written afterwards); whether a scaler failed."""
        ...

    @abc.abstractmethod
    def build_failed(self, obj: Obj, error: str, now: float) -> None:
        """The scalers could not be built (a missing TriggerAuthentication, a bad trigger)."""
        ...

    def latest(self, key: str) -> Obj | None:
        """The stored object (not the cache: the last status write may not have reached it yet)."""
        ns, _, name = key.partition("/")
        try:
            return self.core.get(self.informer.kind, ns, name)
        except errors.StatusError as e:
            if e.code == 404:
                return None
            raise

    def forget(self, key: str) -> None:
        """The object is gone: its loop, scalers and lock."""
        self.stop_loop(key)
        self.stale.discard(key)
        with self._locks_lock:
            self._locks.pop(key, None)

    def stop_loop(self, key: str) -> None:
        built = self.built.pop(key, None)
        if built is not None:
            built.close()
        self.due.pop(POLL + key, None)

    def start_loop(self, obj: Obj, key: str, now: float) -> None:
        """Start the scale loop if it does not run: the first poll at once."""
        if POLL + key not in self.due:
            self.event(obj, EVENT_NORMAL, "KEDAScalersStarted", "Started scalers watch")
            self.due[POLL + key] = now
            self.enqueue_key(POLL + key)

    def build(self, key: str, obj: Obj) -> Built:
        """The object's scalers: cached per generation unless stale; a :class:`ScalerError` when they cannot be."""
        generation = int(obj["metadata"].get("generation") or 0)
        built = self.built.get(key)
        if built is not None and built.generation == generation and key not in self.stale:
            return built
        self.stale.discard(key)
        if built is not None:
            built.close()
            self.built.pop(key, None)
        ns, name = obj["metadata"].get("namespace") or "default", obj["metadata"]["name"]
        fresh = Built(generation, [], [])
        try:
            for i, trigger in enumerate(k.triggers(obj)):
                params, used = auth.resolve(self.core, trigger, ns, fresh.deps)
                if used and used not in fresh.auth_types:
                    fresh.auth_types.append(used)
                config = ScalerConfig(str(trigger.get("type") or ""), i, dict(trigger.get("metadata") or {}),
                                      params, str(trigger.get("metricType") or ""), ns, name, self.env)
                scaler = build_scaler(config)
                fresh.scalers.append((i, trigger, scaler, scaler.metric_specs()))
        except ScalerError:
            fresh.close()
            raise
        self.built[key] = fresh
        return fresh

    def write_status(self, obj: Obj, before: Obj) -> None:
        if obj.get("status") == before:
            return
        try:
            self.core.update(self.informer.kind, obj, subresource="status")
        except errors.StatusError as e:
            if e.code == 409:  # a newer object: write this status onto it
                latest = self.core.get(self.informer.kind, obj["metadata"].get("namespace"), obj["metadata"]["name"])
                latest["status"] = obj["status"]
                self.core.update(self.informer.kind, latest, subresource="status")
            elif e.code != 404:
                raise

    def poll(self, key: str) -> float | None:
        poll_key = POLL + key
        due = self.due.get(poll_key)
        cached = self.latest(key) if due is not None else None
        if due is None or cached is None:
            self.due.pop(poll_key, None)
            return None  # the loop was stopped (deleted, paused, broken): no requeue
        now = self.clock.now()
        ns, name = key.split("/", 1)
        lateness = max(0.0, now - due)
        self.stats.lateness.append(lateness)
        self.stats.polls += 1
        pm.SCALE_LOOP_LATENCY.labels(ns, self.loop_type, name).set(lateness)
        interval = float(k.polling_interval(cached))
        obj = copy.deepcopy(cached)
        before = copy.deepcopy(obj.get("status") or {})
        try:
            try:
                built = self.build(key, obj)
            except ScalerError as e:
                self.build_failed(obj, str(e), now)
            else:
                if self.poll_object(obj, built, now):
                    self.stale.add(key)  # checkScalers' ClearScalersCache: the next poll builds them again
        finally:
            self.write_status(obj, before)
            self.due[poll_key] = now + interval
        return interval

    def read(self, obj: Obj, index: int, trigger: Obj, scaler: Scaler, metric: str) -> Reading:
        """One metric of one trigger, with KEDA's series for it; a failure is a ``KEDAScalerFailed`` event."""
        meta = obj["metadata"]
        kind = str(trigger.get("type"))
        labels = (meta.get("namespace") or "default", metric, meta["name"], f"{kind}Scaler", str(index),
                  self.loop_type)
        started = time.perf_counter()
        try:
            values, active = scaler.metrics_and_activity(metric)
        except (ScalerError, errors.StatusError) as e:
            self.stats.reads[kind].append(time.perf_counter() - started)
            message = e.message if isinstance(e, errors.StatusError) else str(e)
            pm.SCALER_ERRORS.labels(*labels).inc()
            self.event(obj, EVENT_WARNING, "KEDAScalerFailed", message)
            return Reading(metric, error=message)
        took = time.perf_counter() - started
        self.stats.reads[kind].append(took)
        value = values[0] if values else 0.0
        pm.SCALER_METRICS_LATENCY.labels(*labels).set(took)
        pm.SCALER_METRICS_VALUE.labels(*labels).set(value)
        pm.SCALER_ACTIVE.labels(*labels).set(1 if active else 0)
        pm.SCALER_ERRORS.labels(*labels)  # RecordScalerError(nil): the series exists at 0
        return Reading(metric, value, active)
