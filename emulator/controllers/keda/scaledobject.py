"""The KEDA operator's ScaledObject reconciler and scale loop (kedacore/keda ``controllers/keda`` + ``pkg/scaling``).

Two kinds of work share one queue, as upstream's reconciler and per-object scale-loop
goroutines share one process:

* **Reconcile** (key ``ns/name``; on create, on a spec (generation) or annotation change,
  on delete) — ``scaledobject_controller.go reconcileScaledObject``: check the scale
  target (``ScaledObjectCheckFailed`` when it has no scale subresource or does not
  exist), build the scalers (:mod:`emulator.keda.scalers`; an unknown trigger type or a
  missing TriggerAuthentication is ``Ready=False`` with the error as a
  ``ScaledObjectCheckFailed`` event), and own the HPA ``keda-hpa-<name>`` (or
  ``advanced.horizontalPodAutoscalerConfig.name``; its ``behavior`` passed through) with
  one External metric per trigger, ``minReplicas = max(minReplicaCount, 1)``. While the
  ``autoscaling.keda.sh/paused`` / ``paused-replicas`` annotation is set the HPA is
  deleted, the loop stops, the target is held at the paused count and ``Paused=True``.
* **Poll** (key ``poll/ns/name``, every ``pollingInterval`` of cluster time, default 30 s)
  — ``scale_handler.go checkScalers`` + ``executor/scale_scaledobjects.go RequestScale``:
  read every trigger's metrics and activity; count failures per metric in
  ``status.health``; once a metric failed more than ``fallback.failureThreshold`` times in a
  row it reads ``fallback.replicas * target`` (``fallback.go doFallback``); the values are
  left for ``external.metrics.k8s.io`` (:mod:`emulator.keda.metricstore`). Then KEDA's own
  activation: active with 0 replicas (or the idle count) → ``max(minReplicaCount, 1)``
  (``KEDAScaleTargetActivated``); inactive past ``cooldownPeriod`` (default 300 s) since
  ``status.lastActiveTime`` with ``minReplicaCount`` 0 → 0 or ``idleReplicaCount``
  (``KEDAScaleTargetDeactivated``); inactive in fallback → ``fallback.replicas``. Between
  1 and max the HPA scales. Conditions Ready / Active / Fallback / Paused carry upstream's
  reasons; a failing scaler is ``KEDAScalerFailed`` and ``Ready=False``, never a crash.

Metrics: :mod:`emulator.keda.prommetrics`. ``poll_latency`` / ``lateness`` keep per-scaler
read durations and poll lateness (cluster seconds) for the benchmark.
"""

from __future__ import annotations

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
from emulator.api.kinds import HORIZONTALPODAUTOSCALER, POD, SCALEDOBJECT
from emulator.api.quantity import QuantityError, parse_quantity
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339, rfc3339
from emulator.controllers.runtime import (
    EVENT_NORMAL,
    EVENT_WARNING,
    Controller,
    ControllerContext,
    EventRecorder,
    ensure_indexers,
    object_of,
)
from emulator.informers import ResourceEventHandlerFuncs
from emulator.informers.indexer import NAMESPACE_INDEX, namespace_index_func
from emulator.keda import auth, metricstore
from emulator.keda import prommetrics as pm
from emulator.keda.scalers import Scaler, ScalerConfig, ScalerError, build_scaler
from emulator.metricsapi.client import MetricsUnavailable
from emulator.metricsapi.resource import ResourceMetricsReader

log = logging.getLogger(__name__)

POLL = "poll/"
DEFAULT_WORKERS = 2
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


@dataclass
class Built:
    """A ScaledObject's scalers, built for one generation."""

    generation: int
    scalers: list[tuple[int, Obj, Scaler, list[Obj]]]  # (trigger index, trigger, scaler, its metric specs)
    auth_types: list[str]

    def close(self) -> None:
        for _, _, scaler, _ in self.scalers:
            try:
                scaler.close()
            except Exception:  # closing must never stop a reconcile
                log.debug("closing a scaler failed", exc_info=True)


@dataclass
class _Env:
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
        if self.controller.so_informer is None:  # a ScaledJob: upstream's cpu/memory scalers need a scale target
            raise ScalerError("cpu and memory triggers need a ScaledObject's scale target")
        so = self.controller.so_informer.indexer.get_by_key(f"{namespace}/{name}")
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


class ScaledObjectController(Controller):
    """KEDA's ScaledObject reconciler and scale loops; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("keda-operator", ctx, workers=workers or int(ctx.option("keda_workers", DEFAULT_WORKERS)))
        self.so_informer = self.watch(ctx.informers.informer_for(SCALEDOBJECT))
        self.hpa_informer = self.watch(ctx.informers.informer_for(HORIZONTALPODAUTOSCALER))
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        ensure_indexers(self.pod_informer, {NAMESPACE_INDEX: namespace_index_func})
        self.so_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self.enqueue(obj), update=self._updated, delete=self._deleted))
        self.hpa_informer.add_event_handler(ResourceEventHandlerFuncs(delete=self._hpa_deleted))
        if ctx.recorder is not None:  # upstream's events come from the component "keda-operator"
            self.recorder = EventRecorder(ctx.core, MANAGED_BY, clock=ctx.clock, host=ctx.recorder.host)
        self.env = _Env(ctx.core.store.redis, ctx.clock.now, self)
        self.built: dict[str, Built] = {}
        self.due: dict[str, float] = {}  # poll key -> cluster time it is due
        self.stats = PollStats()
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def start(self) -> ScaledObjectController:
        if self.recorder is not None and self.recorder is not self.ctx.recorder:
            self.recorder.start()
        super().start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        if self.recorder is not None and self.recorder is not self.ctx.recorder:
            self.recorder.stop()
        for key in list(self.built):
            self._stop(key)

    def event(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        super().event({"apiVersion": k.API_VERSION, "kind": "ScaledObject", **obj}, event_type, reason, message)

    # ------------------------------------------------------------------ handlers
    def _updated(self, old: Obj, new: Obj) -> None:
        om, nm = old.get("metadata") or {}, new.get("metadata") or {}
        # GenerationChangedPredicate + annotation changes (pause): status writes do not reconcile.
        if om.get("generation") != nm.get("generation") or om.get("annotations") != nm.get("annotations"):
            self.enqueue(new)

    def _deleted(self, obj: Any) -> None:
        so = object_of(obj)
        if so is not None:
            self.enqueue(so)

    def _hpa_deleted(self, obj: Any) -> None:
        hpa = object_of(obj)
        owner = ((hpa or {}).get("metadata") or {}).get("labels", {}).get(k.OWNER_LABEL)
        if hpa is not None and owner:
            self.enqueue_key(f"{hpa['metadata'].get('namespace')}/{owner}")

    # ------------------------------------------------------------------ reconcile
    def reconcile(self, key: str) -> float | None:
        # A ScaledObject's reconcile and its poll never run at once: both write its status.
        so_key = key[len(POLL):] if key.startswith(POLL) else key
        with self._locks_lock:
            lock = self._locks.setdefault(so_key, threading.Lock())
        with lock:
            if key.startswith(POLL):
                return self.poll(so_key)
            return self.reconcile_scaled_object(key)

    def _latest(self, key: str) -> Obj | None:
        """The stored object (not the cache: the last status write may not have reached it yet)."""
        ns, _, name = key.partition("/")
        try:
            return self.core.get(SCALEDOBJECT, ns, name)
        except errors.StatusError as e:
            if e.code == 404:
                return None
            raise

    def _stop(self, key: str) -> None:
        built = self.built.pop(key, None)
        if built is not None:
            built.close()
        self.due.pop(POLL + key, None)

    def reconcile_scaled_object(self, key: str) -> float | None:
        ns, _, name = key.partition("/")
        cached = self._latest(key) if self.so_informer.indexer.get_by_key(key) is not None else None
        if cached is None or cached["metadata"].get("deletionTimestamp"):
            built = self.built.get(key)
            if built is not None:
                metricstore.forget(self.core.store.redis, self.core.store.config.prefix, ns, name,
                                   [s["external"]["metric"]["name"] for _, _, _, specs in built.scalers
                                    for s in specs if s["type"] == "External"])
            self._stop(key)
            pm.forget(ns, name)
            with self._locks_lock:
                self._locks.pop(key, None)
            return None  # the HPA goes with its owner (garbage collector)
        now = self.clock.now()
        so = copy.deepcopy(cached)
        before = copy.deepcopy(so.get("status") or {})
        initial_conditions(so)
        status = so["status"]
        api_version, kind_name, target_name = k.target_ref(so)
        status["scaleTargetKind"] = k.gvk_string(api_version, kind_name)
        status["hpaName"] = k.hpa_name(so)
        status["triggersTypes"] = ",".join(str(t.get("type", "")) for t in k.triggers(so))

        try:
            target_kind = kinds.by_api_version_kind(api_version, kind_name)
            if "scale" not in target_kind.subresources:
                raise errors.bad_request(f"{status['scaleTargetKind']} has no scale subresource")
            target = self.core.get(target_kind, ns, target_name)
        except errors.StatusError as e:
            self._stop(key)
            self._fail(so, "ScaledObjectCheckFailed", "ScaledObject doesn't have correct scaleTargetRef specification",
                       e.message, now)
            self._write_status(so, before)
            return None
        group, _, version = api_version.rpartition("/")
        status["scaleTargetGVKR"] = {"group": group, "version": version, "kind": kind_name,
                                     "resource": target_kind.plural}
        if status.get("originalReplicaCount") is None:
            status["originalReplicaCount"] = int((target.get("spec") or {}).get("replicas") or 0)

        if k.paused(so):
            return self._paused(key, so, before, target_kind, target, now=now)
        if status.get("pausedReplicaCount") is not None or \
                next((c for c in status["conditions"] if c["type"] == "Paused"), {}).get("status") == "True":
            status.pop("pausedReplicaCount", None)
            set_condition(so, "Paused", "False", "ScaledObjectUnpaused", "pause annotation removed for ScaledObject",
                          now=now)
        pm.SCALED_OBJECT_PAUSED.labels(ns, name).set(0)

        try:
            built = self._build(key, so)
        except ScalerError as e:
            self._stop(key)
            self._fail(so, "ScaledObjectCheckFailed", "Failed to ensure HPA is correctly created for ScaledObject",
                       str(e), now)
            self._write_status(so, before)
            return None
        status["authenticationsTypes"] = ",".join(built.auth_types) if built.auth_types else None
        if status["authenticationsTypes"] is None:
            status.pop("authenticationsTypes")
        status["externalMetricNames"] = [s["external"]["metric"]["name"] for _, _, _, specs in built.scalers
                                         for s in specs if s["type"] == "External"]
        resource_names = [s.get("resource", s.get("containerResource", {})).get("name")
                          for _, _, _, specs in built.scalers for s in specs if s["type"] != "External"]
        if resource_names:
            status["resourceMetricNames"] = resource_names
        try:
            self._ensure_hpa(so, built)
        except errors.StatusError as e:
            self._fail(so, "ScaledObjectCheckFailed", "Failed to ensure HPA is correctly created for ScaledObject",
                       e.message, now)
            self._write_status(so, before)
            raise
        ready = next((c for c in status["conditions"] if c["type"] == "Ready"), {})
        if ready.get("status") != "True" and ready.get("reason") != "TriggerError":
            set_condition(so, "Ready", "True", "ScaledObjectReady",
                          "ScaledObject is defined correctly and is ready for scaling", now=now)
        self._write_status(so, before)
        if POLL + key not in self.due:  # start the scale loop: first poll at once
            self.event(so, EVENT_NORMAL, "KEDAScalersStarted", "Started scalers watch")
            self.due[POLL + key] = now
            self.enqueue_key(POLL + key)
        return None

    def _fail(self, so: Obj, reason: str, condition_message: str, error: str, now: float) -> None:
        set_condition(so, "Ready", "False", reason, condition_message, now=now)
        self.event(so, EVENT_WARNING, reason, error)
        meta = so["metadata"]
        pm.SCALED_OBJECT_ERRORS.labels(meta.get("namespace", ""), meta["name"]).inc()

    def _build(self, key: str, so: Obj) -> Built:
        generation = int(so["metadata"].get("generation") or 0)
        built = self.built.get(key)
        if built is not None and built.generation == generation:
            return built
        if built is not None:
            built.close()
            self.built.pop(key, None)
        ns, name = so["metadata"].get("namespace") or "default", so["metadata"]["name"]
        scalers: list[tuple[int, Obj, Scaler, list[Obj]]] = []
        auth_types: list[str] = []
        try:
            for i, trigger in enumerate(k.triggers(so)):
                params, used = auth.resolve(self.core, trigger, ns)
                if used and used not in auth_types:
                    auth_types.append(used)
                config = ScalerConfig(str(trigger.get("type") or ""), i, dict(trigger.get("metadata") or {}),
                                      params, str(trigger.get("metricType") or ""), ns, name, self.env)
                scaler = build_scaler(config)
                scalers.append((i, trigger, scaler, scaler.metric_specs()))
        except ScalerError:
            Built(generation, scalers, auth_types).close()
            raise
        built = self.built[key] = Built(generation, scalers, auth_types)
        return built

    def _ensure_hpa(self, so: Obj, built: Built) -> None:
        """``createAndDeployNewHPA`` / ``updateHPAIfNeeded``."""
        meta = so["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        api_version, kind_name, target_name = k.target_ref(so)
        hpa_name = k.hpa_name(so)
        config = k.hpa_config(so)
        spec: Obj = {"scaleTargetRef": {"apiVersion": api_version, "kind": kind_name, "name": target_name},
                     "minReplicas": k.hpa_min_replicas(so), "maxReplicas": k.hpa_max_replicas(so),
                     "metrics": [s for _, _, _, specs in built.scalers for s in specs]}
        if config.get("behavior"):
            spec["behavior"] = config["behavior"]
        labels = {"app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/name": hpa_name,
                  "app.kubernetes.io/part-of": name, k.OWNER_LABEL: name}
        owner = {"apiVersion": k.API_VERSION, "kind": "ScaledObject", "name": name, "uid": meta.get("uid"),
                 "controller": True, "blockOwnerDeletion": True}
        existing = self.hpa_informer.indexer.get_by_key(f"{ns}/{hpa_name}")
        if existing is None:
            try:
                existing = self.core.get(HORIZONTALPODAUTOSCALER, ns, hpa_name)
            except errors.StatusError as e:
                if e.code != 404:
                    raise
        fresh = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                 "metadata": {"name": hpa_name, "namespace": ns, "labels": labels, "ownerReferences": [owner]},
                 "spec": spec}
        if existing is None:
            self.core.create(HORIZONTALPODAUTOSCALER, fresh)
            return
        current = existing.get("spec") or {}
        if all(current.get(f) == spec.get(f) for f in ("scaleTargetRef", "minReplicas", "maxReplicas", "metrics",
                                                          "behavior")):
            return
        updated = copy.deepcopy(existing)
        updated["spec"] = {**current, **spec}
        if "behavior" not in spec:
            updated["spec"].pop("behavior", None)
        try:
            self.core.update(HORIZONTALPODAUTOSCALER, updated)
        except errors.StatusError as e:
            if e.code != 404:
                raise
            self.core.create(HORIZONTALPODAUTOSCALER, fresh)  # the cache still had one deleted (paused)

    def _delete_hpa(self, so: Obj) -> None:
        ns = so["metadata"].get("namespace") or "default"
        try:
            self.core.delete(HORIZONTALPODAUTOSCALER, ns, k.hpa_name(so))
        except errors.StatusError as e:
            if e.code != 404:
                raise

    def _paused(self, key: str, so: Obj, before: Obj, target_kind: kinds.Kind, target: Obj, *, now: float) -> None:
        """Paused: no HPA, no loop, the target held at ``paused-replicas`` when given."""
        ns, name = so["metadata"].get("namespace") or "default", so["metadata"]["name"]
        self._stop(key)
        self._delete_hpa(so)
        count = k.paused_replicas(so)
        if count is not None:
            so["status"]["pausedReplicaCount"] = count
            if int((target.get("spec") or {}).get("replicas") or 0) != count:
                self._scale(target_kind, target, count)
        set_condition(so, "Paused", "True", "ScaledObjectPaused", "ScaledObject is paused", now=now)
        pm.SCALED_OBJECT_PAUSED.labels(ns, name).set(1)
        self._write_status(so, before)

    def _write_status(self, so: Obj, before: Obj) -> None:
        if so.get("status") == before:
            return
        try:
            self.core.update(SCALEDOBJECT, so, subresource="status")
        except errors.StatusError as e:
            if e.code == 409:  # a newer object: its own reconcile or poll writes again
                latest = self.core.get(SCALEDOBJECT, so["metadata"].get("namespace"), so["metadata"]["name"])
                latest["status"] = so["status"]
                self.core.update(SCALEDOBJECT, latest, subresource="status")
            elif e.code != 404:
                raise

    def _scale(self, kind: kinds.Kind, target: Obj, replicas: int) -> None:
        """PUT ``.../scale`` (``updateScaleOnScaleTarget``), re-reading once on a conflict."""
        for attempt in range(3):
            new = {**target, "spec": {**(target.get("spec") or {}), "replicas": replicas}}
            try:
                self.core.update(kind, new)
                return
            except errors.StatusError as e:
                if e.code != 409 or attempt == 2:
                    raise
                meta = target["metadata"]
                target = self.core.get(kind, meta.get("namespace"), meta["name"])

    # ------------------------------------------------------------------ the scale loop
    def poll(self, key: str) -> float | None:
        poll_key = POLL + key
        due = self.due.get(poll_key)
        built = self.built.get(key)
        cached = self._latest(key) if due is not None and built is not None else None
        if due is None or built is None or cached is None:
            self.due.pop(poll_key, None)
            return None  # the loop was stopped (deleted, paused, broken): no requeue
        now = self.clock.now()
        ns, name = key.split("/", 1)
        lateness = max(0.0, now - due)
        self.stats.lateness.append(lateness)
        self.stats.polls += 1
        pm.SCALE_LOOP_LATENCY.labels(ns, "scaledobject", name).set(lateness)
        interval = float(k.polling_interval(cached))
        so = copy.deepcopy(cached)
        before = copy.deepcopy(so.get("status") or {})
        try:
            self.check_scalers(so, built, now)
        finally:
            self._write_status(so, before)
            self.due[poll_key] = now + interval
        return interval

    def check_scalers(self, so: Obj, built: Built, now: float) -> None:
        meta = so["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        status = so.setdefault("status", {})
        health: dict[str, Obj] = status.setdefault("health", {})
        fb = k.fallback(so)
        active_triggers: list[str] = []
        errors_seen: list[str] = []
        values: dict[str, float] = {}
        missing: list[str] = []
        in_fallback = False
        for index, trigger, scaler, specs in built.scalers:
            kind = str(trigger.get("type"))
            for spec in specs:
                external = spec.get("external")
                metric = external["metric"]["name"] if external else f"s{index}-{kind}"
                labels = (ns, metric, name, f"{kind}Scaler", str(index), "scaledobject")
                started = time.perf_counter()
                try:
                    metric_values, active = scaler.metrics_and_activity(metric)
                except (ScalerError, errors.StatusError) as e:
                    took = time.perf_counter() - started
                    self.stats.reads[kind].append(took)
                    message = e.message if isinstance(e, errors.StatusError) else str(e)
                    errors_seen.append(message)
                    pm.SCALER_ERRORS.labels(*labels).inc()
                    self.event(so, EVENT_WARNING, "KEDAScalerFailed", message)
                    entry = health.setdefault(metric, {"numberOfFailures": 0})
                    entry["numberOfFailures"] = int(entry.get("numberOfFailures") or 0) + 1
                    entry["status"] = "Failing"
                    if external is None:
                        continue
                    if fb is not None and entry["numberOfFailures"] > int(fb.get("failureThreshold") or 0) \
                            and (trigger.get("metricType") or "AverageValue") == "AverageValue":
                        in_fallback = True
                        target = _target_value(external["target"])
                        values[metric] = float(fb.get("replicas") or 0) * target
                    else:
                        missing.append(metric)
                    continue
                took = time.perf_counter() - started
                self.stats.reads[kind].append(took)
                pm.SCALER_METRICS_LATENCY.labels(*labels).set(took)
                value = metric_values[0] if metric_values else 0.0
                pm.SCALER_METRICS_VALUE.labels(*labels).set(value)
                pm.SCALER_ACTIVE.labels(*labels).set(1 if active else 0)
                pm.SCALER_ERRORS.labels(*labels)  # RecordScalerError(nil): the series exists at 0
                health[metric] = {"numberOfFailures": 0, "status": "Happy"}
                if external is not None:
                    values[metric] = value
                if active:
                    active_triggers.append(kind)
        if not health:
            status.pop("health", None)
        metricstore.write(self.core.store.redis, self.core.store.config.prefix, ns, name, values=values,
                          missing=missing, now=now)
        if errors_seen:
            pm.SCALED_OBJECT_ERRORS.labels(ns, name).inc()
            total = sum(len(specs) for _, _, _, specs in built.scalers)
            if len(errors_seen) >= total:
                set_condition(so, "Ready", "False", "TriggerError",
                              "Triggers defined in ScaledObject are not working correctly", now=now)
            else:
                set_condition(so, "Ready", "False", "PartialTriggerError",
                              "Some triggers defined in ScaledObject are not working correctly", now=now)
        else:
            set_condition(so, "Ready", "True", "ScaledObjectReady",
                          "ScaledObject is defined correctly and is ready for scaling", now=now)
        if in_fallback:
            set_condition(so, "Fallback", "True", "FallbackExists",
                          "At least one trigger is falling back on this scaled object", now=now)
        else:
            set_condition(so, "Fallback", "False", "NoFallbackFound",
                          "No fallbacks are active on this scaled object", now=now)
        self.request_scale(so, active_triggers, in_fallback, now)

    def request_scale(self, so: Obj, active_triggers: list[str], in_fallback: bool, now: float) -> None:
        """``RequestScale``: KEDA's own 0 <-> 1 (or idle) activation; the HPA scales in between."""
        api_version, kind_name, target_name = k.target_ref(so)
        ns = so["metadata"].get("namespace") or "default"
        status = so["status"]
        try:
            target_kind = kinds.by_api_version_kind(api_version, kind_name)
            target = self.core.get(target_kind, ns, target_name)
        except errors.StatusError as e:
            self.event(so, EVENT_WARNING, "KEDAScaleTargetActivationFailed", e.message)
            return
        current = int((target.get("spec") or {}).get("replicas") or 0)
        min_count = k.min_replica_count(so) or 0
        idle = k.idle_replica_count(so)
        is_active = bool(active_triggers)
        reference = f"{kind_name} {ns}/{target_name}"
        if is_active:
            if current == 0 or (idle is not None and current < min_count):
                new = max(min_count, 1)
                self._scale(target_kind, target, new)
                self.event(so, EVENT_NORMAL, "KEDAScaleTargetActivated",
                           f"Scaled {reference} from {current} to {new}, triggered by {';'.join(active_triggers)}")
            status["lastActiveTime"] = rfc3339(now)
        elif in_fallback and fb_replicas(so) and current != fb_replicas(so) and current == 0:
            self._scale(target_kind, target, fb_replicas(so))
        elif (idle is not None and current > idle) or (current > 0 and min_count == 0):
            last = status.get("lastActiveTime")
            cooldown = k.cooldown_period(so)
            if last is None or parse_rfc3339(last) + cooldown < now:
                new = idle if idle is not None else 0
                self._scale(target_kind, target, new)
                self.event(so, EVENT_NORMAL, "KEDAScaleTargetDeactivated",
                           f"Deactivated {reference} from {current} to {new}")
        elif current < min_count and idle is None:
            self._scale(target_kind, target, min_count)
        if is_active:
            set_condition(so, "Active", "True", "ScalerActive", "Scaling is performed because triggers are active",
                          now=now)
        else:
            set_condition(so, "Active", "False", "ScalerNotActive",
                          "Scaling is not performed because triggers are not active", now=now)


def fb_replicas(so: Obj) -> int:
    fb = k.fallback(so)
    return int(fb.get("replicas") or 0) if fb else 0


def _target_value(target: Obj) -> float:
    raw = target.get("averageValue") if target.get("type") == "AverageValue" else target.get("value")
    try:
        return parse_quantity(raw).milli_value() / 1000.0 if raw is not None else 0.0
    except QuantityError:
        return math.nan


def new_controller(ctx: ControllerContext) -> ScaledObjectController:
    return ScaledObjectController(ctx)
