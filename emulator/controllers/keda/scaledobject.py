"""The KEDA operator's ScaledObject reconciler and scale loop (kedacore/keda ``controllers/keda`` + ``pkg/scaling``).

The work queue, the per-object lock, the scalers cache and the poll timing are
:mod:`emulator.controllers.keda.scalehandler`'s; this module is what is a ScaledObject's own:

* **Reconcile** (``scaledobject_controller.go reconcileScaledObject``): check the scale
  target (``ScaledObjectCheckFailed`` when it has no scale subresource or does not exist),
  build the scalers (:mod:`emulator.keda.scalers`; an unknown trigger type or a missing
  TriggerAuthentication is ``Ready=False`` with the error as a ``ScaledObjectCheckFailed``
  event), and own the HPA ``keda-hpa-<name>`` (or ``advanced.horizontalPodAutoscalerConfig.name``;
  its ``behavior`` passed through) with one External metric per trigger — or, with
  ``advanced.scalingModifiers``, the Resource metrics and one External ``composite-metric``
  whose target is ``scalingModifiers.target`` (``hpa.go getScaledObjectMetricSpecs``) —
  and ``minReplicas = max(minReplicaCount, 1)``. While the ``autoscaling.keda.sh/paused`` /
  ``paused-replicas`` annotation is set the HPA is deleted, the loop stops, the target is
  held at the paused count and ``Paused=True``.
* **Poll** (``scale_handler.go checkScalers`` + ``executor/scale_scaledobjects.go
  RequestScale``): read every trigger's metrics and activity; count failures per metric in
  ``status.health``; once a metric failed more than ``fallback.failureThreshold`` times in a
  row it reads ``fallback.replicas * target`` (``fallback.go doFallback``). With
  ``scalingModifiers`` the formula (:mod:`emulator.keda.formula`) combines the trigger values
  by trigger name into ``composite-metric`` (``modifiers/formula.go``; in fallback it reads
  ``fallback.replicas * scalingModifiers.target``), and the object is active when that value
  exceeds ``activationTarget`` (default 0) and no scaler failed. The values are left for
  ``external.metrics.k8s.io`` (:mod:`emulator.keda.metricstore`). Then KEDA's own activation:
  active with 0 replicas (or the idle count) → ``max(minReplicaCount, 1)``
  (``KEDAScaleTargetActivated``); inactive with ``minReplicaCount`` 0 → 0 or
  ``idleReplicaCount`` once ``cooldownPeriod`` (default 300 s) has passed since
  ``status.lastActiveTime`` — or, never active yet, ``initialCooldownPeriod`` (default 0)
  since the object's creation (``scaleToZeroOrIdle``) — (``KEDAScaleTargetDeactivated``);
  inactive in fallback → ``fallback.replicas``; inactive with a failed scaler otherwise → left
  as it is. Between 1 and max the HPA scales.
  Conditions Ready / Active / Fallback / Paused carry upstream's reasons.

Metrics: :mod:`emulator.keda.prommetrics`. ``stats`` keeps per-scaler read durations and poll
lateness (cluster seconds) for the benchmark.
"""

from __future__ import annotations

import copy
from typing import Any

from emulator.api import errors, kinds
from emulator.api import keda as k
from emulator.api.kinds import HORIZONTALPODAUTOSCALER, SCALEDOBJECT
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339, rfc3339
from emulator.controllers.keda.scalehandler import (
    MANAGED_BY,
    Built,
    Reading,
    ScalableController,
    initial_conditions,
    set_active,
    set_condition,
    target_value,
)
from emulator.controllers.runtime import EVENT_NORMAL, EVENT_WARNING, ControllerContext, object_of
from emulator.informers import ResourceEventHandlerFuncs
from emulator.keda import metricstore
from emulator.keda import prommetrics as pm
from emulator.keda.formula import FormulaError, compile_formula
from emulator.keda.scalers import ScalerError

DEFAULT_WORKERS = 2


def hpa_metrics(so: Obj, built: Built) -> list[Obj]:
    """The HPA's metrics: every scaler's specs, or with scalingModifiers (a target > 0) the Resource specs and
    the composite External metric (``getScaledObjectMetricSpecs``)."""
    specs = [s for _, _, _, metric_specs in built.scalers for s in metric_specs]
    modifiers = k.scaling_modifiers(so)
    target = k.modifier_float(modifiers, "target", 0.0) if modifiers else None
    if not modifiers or not target or target <= 0:
        return specs
    metric_type = str(modifiers.get("metricType") or "AverageValue")
    quantity = f"{round(target * 1000)}m" if target * 1000 % 1000 else str(int(target))
    selector = {"matchLabels": {k.OWNER_LABEL: so["metadata"]["name"]}}
    composite = {"type": "External", "external": {
        "metric": {"name": k.COMPOSITE_METRIC_NAME, "selector": selector},
        "target": {"type": metric_type, "averageValue" if metric_type == "AverageValue" else "value": quantity}}}
    return [s for s in specs if s["type"] != "External"] + [composite]


def formula_pairs(built: Built) -> dict[str, str]:
    """Metric name -> the trigger name the formula knows it by (``AddPairTriggerAndMetric``: a trigger's
    second metric is ``<name>01``)."""
    pairs: dict[str, str] = {}
    for _, trigger, _, specs in built.scalers:
        name = str(trigger.get("name") or "")
        for n, spec in enumerate(s for s in specs if s["type"] == "External"):
            if name:
                pairs[spec["external"]["metric"]["name"]] = name if n == 0 else f"{name}{n:02d}"
    return pairs


class ScaledObjectController(ScalableController):
    """KEDA's ScaledObject reconciler and scale loops; see the module docstring."""

    kind_name = "ScaledObject"
    loop_type = "scaledobject"

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("keda-operator", ctx, SCALEDOBJECT,
                         workers=workers or int(ctx.option("keda_workers", DEFAULT_WORKERS)))
        self.hpa_informer = self.watch(ctx.informers.informer_for(HORIZONTALPODAUTOSCALER))
        self.hpa_informer.add_event_handler(ResourceEventHandlerFuncs(delete=self._hpa_deleted))

    def _hpa_deleted(self, obj: Any) -> None:
        hpa = object_of(obj)
        owner = ((hpa or {}).get("metadata") or {}).get("labels", {}).get(k.OWNER_LABEL)
        if hpa is not None and owner:
            self.enqueue_key(f"{hpa['metadata'].get('namespace')}/{owner}")

    # ------------------------------------------------------------------ reconcile
    def reconcile_object(self, key: str) -> float | None:
        ns, _, name = key.partition("/")
        cached = self.latest(key) if self.informer.indexer.get_by_key(key) is not None else None
        if cached is None or cached["metadata"].get("deletionTimestamp"):
            built = self.built.get(key)
            if built is not None:
                metricstore.forget(self.core.store.redis, self.core.store.config.prefix, ns, name,
                                   [s["external"]["metric"]["name"] for _, _, _, specs in built.scalers
                                    for s in specs if s["type"] == "External"] + [k.COMPOSITE_METRIC_NAME])
            self.forget(key)
            pm.forget(ns, name)
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
            self.stop_loop(key)
            self._fail(so, "ScaledObjectCheckFailed", "ScaledObject doesn't have correct scaleTargetRef specification",
                       e.message, now)
            self.write_status(so, before)
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
            built = self.build(key, so)
            self._formula(so)  # validated with the scalers, as upstream's GetScalersCache
        except (ScalerError, FormulaError) as e:
            self.stop_loop(key)
            self._fail(so, "ScaledObjectCheckFailed", "Failed to ensure HPA is correctly created for ScaledObject",
                       str(e), now)
            self.write_status(so, before)
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
        if any(m["type"] == "External" and m["external"]["metric"]["name"] == k.COMPOSITE_METRIC_NAME
               for m in hpa_metrics(so, built)):
            status["compositeScalerName"] = k.COMPOSITE_METRIC_NAME
        else:
            status.pop("compositeScalerName", None)
        try:
            self._ensure_hpa(so, built)
        except errors.StatusError as e:
            self._fail(so, "ScaledObjectCheckFailed", "Failed to ensure HPA is correctly created for ScaledObject",
                       e.message, now)
            self.write_status(so, before)
            raise
        ready = next((c for c in status["conditions"] if c["type"] == "Ready"), {})
        if ready.get("status") != "True" and ready.get("reason") != "TriggerError":
            set_condition(so, "Ready", "True", "ScaledObjectReady",
                          "ScaledObject is defined correctly and is ready for scaling", now=now)
        self.write_status(so, before)
        self.start_loop(so, key, now)
        return None

    @staticmethod
    def _formula(so: Obj) -> Any:
        """The compiled ``scalingModifiers.formula`` (None without one)."""
        modifiers = k.scaling_modifiers(so)
        if not modifiers or not modifiers.get("formula"):
            return None
        return compile_formula(str(modifiers["formula"]), k.formula_trigger_names(so))

    def _fail(self, so: Obj, reason: str, condition_message: str, error: str, now: float) -> None:
        set_condition(so, "Ready", "False", reason, condition_message, now=now)
        self.event(so, EVENT_WARNING, reason, error)
        meta = so["metadata"]
        pm.SCALED_OBJECT_ERRORS.labels(meta.get("namespace", ""), meta["name"]).inc()

    def build_failed(self, obj: Obj, error: str, now: float) -> None:
        self._fail(obj, "ScaledObjectCheckFailed", "Failed to ensure HPA is correctly created for ScaledObject", error,
                   now)
        self.request_scale(obj, [], False, now, failed=True)

    def _ensure_hpa(self, so: Obj, built: Built) -> None:
        """``createAndDeployNewHPA`` / ``updateHPAIfNeeded``."""
        meta = so["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        api_version, kind_name, target_name = k.target_ref(so)
        hpa_name = k.hpa_name(so)
        config = k.hpa_config(so)
        spec: Obj = {"scaleTargetRef": {"apiVersion": api_version, "kind": kind_name, "name": target_name},
                     "minReplicas": k.hpa_min_replicas(so), "maxReplicas": k.hpa_max_replicas(so),
                     "metrics": hpa_metrics(so, built)}
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
        self.stop_loop(key)
        self._delete_hpa(so)
        count = k.paused_replicas(so)
        if count is not None:
            so["status"]["pausedReplicaCount"] = count
            if int((target.get("spec") or {}).get("replicas") or 0) != count:
                self._scale(target_kind, target, count)
        set_condition(so, "Paused", "True", "ScaledObjectPaused", "ScaledObject is paused", now=now)
        pm.SCALED_OBJECT_PAUSED.labels(ns, name).set(1)
        self.write_status(so, before)

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
    def poll_object(self, obj: Obj, built: Built, now: float) -> bool:
        """``checkScalers``: read the triggers, health and fallback, scalingModifiers; then ``RequestScale``."""
        so = obj
        meta = so["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        status = so.setdefault("status", {})
        health: dict[str, Obj] = status.setdefault("health", {})
        fb = k.fallback(so)
        active_triggers: list[str] = []
        failures: list[str] = []
        values: dict[str, float] = {}
        readings: dict[str, Reading] = {}
        missing: list[str] = []
        in_fallback = False
        for index, trigger, scaler, specs in built.scalers:
            kind = str(trigger.get("type"))
            for spec in specs:
                external = spec.get("external")
                reading = self.read(so, index, trigger, scaler, external["metric"]["name"] if external
                                    else f"s{index}-{kind}")
                readings[reading.metric] = reading
                if reading.error:
                    failures.append(reading.error)
                    entry = health.setdefault(reading.metric, {"numberOfFailures": 0})
                    entry["numberOfFailures"] = int(entry.get("numberOfFailures") or 0) + 1
                    entry["status"] = "Failing"
                    if external is None:
                        continue
                    if fb is not None and entry["numberOfFailures"] > int(fb.get("failureThreshold") or 0) \
                            and (trigger.get("metricType") or "AverageValue") == "AverageValue":
                        in_fallback = True
                        values[reading.metric] = float(fb.get("replicas") or 0) * target_value(external["target"])
                    else:
                        missing.append(reading.metric)
                    continue
                health[reading.metric] = {"numberOfFailures": 0, "status": "Happy"}
                if external is not None:
                    values[reading.metric] = reading.value
                if reading.active:
                    active_triggers.append(kind)
        if not health:
            status.pop("health", None)
        if k.scaling_modifiers(so) is not None:
            active_triggers = self._modifiers(so, built, readings, values, missing, in_fallback=in_fallback,
                                              failed=bool(failures))
        metricstore.write(self.core.store.redis, self.core.store.config.prefix, ns, name, values=values,
                          missing=missing, now=now)
        if failures:
            pm.SCALED_OBJECT_ERRORS.labels(ns, name).inc()
            total = sum(len(specs) for _, _, _, specs in built.scalers)
            if len(failures) >= total:
                set_condition(so, "Ready", "False", "TriggerError",
                              "Triggers defined in ScaledObject are not working correctly", now=now)
            else:
                set_condition(so, "Ready", "False", "PartialTriggerError",
                              "Some triggers defined in ScaledObject are not working correctly", now=now)
        else:
            pm.SCALED_OBJECT_ERRORS.labels(ns, name)  # RecordScaledObjectError(nil): the series exists at 0
            set_condition(so, "Ready", "True", "ScaledObjectReady",
                          "ScaledObject is defined correctly and is ready for scaling", now=now)
        if in_fallback:
            set_condition(so, "Fallback", "True", "FallbackExists",
                          "At least one trigger is falling back on this scaled object", now=now)
        else:
            set_condition(so, "Fallback", "False", "NoFallbackFound",
                          "No fallbacks are active on this scaled object", now=now)
        self.request_scale(so, active_triggers, in_fallback, now, failed=bool(failures))
        return bool(failures)

    def _modifiers(self, so: Obj, built: Built, readings: dict[str, Reading], values: dict[str, float],
                   missing: list[str], *, in_fallback: bool, failed: bool) -> list[str]:
        """``HandleScalingModifiers`` + the activity check after it: the composite metric's value goes into
        ``values`` (or ``missing``); the active "triggers" (the composite metric, when above activationTarget)."""
        modifiers = k.scaling_modifiers(so) or {}
        meta = so["metadata"]
        metric = k.COMPOSITE_METRIC_NAME
        value: float | None = None
        if in_fallback:  # fallback.go: fallback.replicas * scalingModifiers.target, one composite metric
            fb = k.fallback(so) or {}
            value = float(fb.get("replicas") or 0) * (k.modifier_float(modifiers, "target", 0.0) or 0.0)
        else:
            try:
                formula = self._formula(so)
                if formula is not None:
                    by_trigger = {trigger: (None if readings[m].error else readings[m].value)
                                  for m, trigger in formula_pairs(built).items() if m in readings}
                    value = formula.evaluate(by_trigger)
            except FormulaError as e:
                self.event(so, EVENT_WARNING, "KEDAScalerFailed", f"error applying custom scalingModifiers.Formula: "
                                                                  f"{e}")
        if value is None:
            missing.append(metric)
            return []
        values[metric] = value
        activation = k.modifier_float(modifiers, "activationTarget", 0.0) or 0.0
        active = not failed and value > activation
        labels = (meta.get("namespace") or "default", metric, meta["name"], metric, "0", self.loop_type)
        pm.SCALER_METRICS_VALUE.labels(*labels).set(value)
        pm.SCALER_ACTIVE.labels(*labels).set(1 if active else 0)
        return [metric] if active else []

    def request_scale(self, so: Obj, active_triggers: list[str], in_fallback: bool, now: float, *,
                      failed: bool = False) -> None:
        """``RequestScale``: KEDA's own 0 <-> 1 (or idle) activation; the HPA scales in between. Inactive with a
        failed scaler, the target stays as it is (no scale-down, no minimum enforced) but for fallback."""
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
        elif failed:
            pass  # isError: fallback pending, or TriggerError without one
        elif (idle is not None and current > idle) or (current > 0 and min_count == 0):
            if cooled_down(so, now):
                new = idle if idle is not None else 0
                self._scale(target_kind, target, new)
                self.event(so, EVENT_NORMAL, "KEDAScaleTargetDeactivated",
                           f"Deactivated {reference} from {current} to {new}")
        elif current < min_count and idle is None:
            self._scale(target_kind, target, min_count)
        set_active(so, is_active, now)


def cooled_down(so: Obj, now: float) -> bool:
    """``scaleToZeroOrIdle``: cooldownPeriod past ``status.lastActiveTime``; never active yet, initialCooldownPeriod
    past the object's creation."""
    last = (so.get("status") or {}).get("lastActiveTime")
    if last is not None:
        return parse_rfc3339(last) + k.cooldown_period(so) < now
    created = (so.get("metadata") or {}).get("creationTimestamp")
    return created is None or parse_rfc3339(created) + k.initial_cooldown_period(so) < now


def fb_replicas(so: Obj) -> int:
    fb = k.fallback(so)
    return int(fb.get("replicas") or 0) if fb else 0


def new_controller(ctx: ControllerContext) -> ScaledObjectController:
    return ScaledObjectController(ctx)
