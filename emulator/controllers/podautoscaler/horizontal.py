"""The HorizontalPodAutoscaler controller (kube-controller-manager's ``horizontalpodautoscaling``).

A re-implementation of upstream ``pkg/controller/podautoscaler/horizontal.go``
(``HorizontalController``) on kemu's controller runtime:

* **Queue.** Every HPA is reconciled once per sync period (15 s of cluster time,
  ``--horizontal-pod-autoscaler-sync-period``): adds and updates put the key on the
  queue *after* the period (upstream's ``AddRateLimited`` with a fixed-interval rate
  limiter), and every reconcile puts it back after the period; a key already waiting
  keeps its earlier time, so an HPA is never reconciled twice in one period.
* **Reconcile** (``reconcileAutoscaler``): read the target's ``scale`` subresource
  (``FailedGetScale`` when the API version, kind or object is wrong); a target at 0
  replicas with ``minReplicas`` > 0 disables scaling (``ScalingDisabled``); a target
  outside [min, max] is brought back; otherwise every metric spec is computed
  (:mod:`.replica_calculator`), the largest proposal wins, and it is normalised
  (:mod:`.behavior`: stabilisation, policies, min/max clamping). A changed count is
  written through the scale subresource (``SuccessfulRescale`` / ``FailedRescale``).
* **Status**: ``currentReplicas``, ``desiredReplicas``, ``currentMetrics``,
  ``lastScaleTime`` and the ``AbleToScale`` / ``ScalingActive`` / ``ScalingLimited``
  conditions with upstream's reasons and messages; written only when it changed.
* **Metrics** (:mod:`.metrics`): reconciliations and metric computations by action and
  error, and kube-state-metrics' HPA series at scrape time.

Metrics come from a :class:`~emulator.metricsapi.client.MetricsClient`; by default the
resource reader over the kubelet usage snapshot (``metrics.k8s.io``) combined with the
custom/external metrics adapter (:func:`emulator.metricsapi.custom.metrics_client`). Pods selected by
several HPAs' targets stop them all (``AmbiguousSelector``). Not modelled: per-HPA
tolerances (alpha in 1.33).
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Mapping
from typing import Any

from emulator.api import errors, kinds
from emulator.api.kinds import HORIZONTALPODAUTOSCALER, POD, Kind
from emulator.api.quantity import QuantityError, cpu_millis, format_millis
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.clock import rfc3339
from emulator.controllers.podautoscaler import behavior as bh
from emulator.controllers.podautoscaler import metrics as m
from emulator.controllers.podautoscaler.replica_calculator import ReplicaCalcError, ReplicaCalculator
from emulator.controllers.podautoscaler.selectors import HPASelectors
from emulator.controllers.runtime import (
    EVENT_NORMAL,
    EVENT_WARNING,
    Controller,
    ControllerContext,
    EventRecorder,
    ensure_indexers,
    object_of,
    split_key,
)
from emulator.informers import ResourceEventHandlerFuncs
from emulator.informers.indexer import LABEL_INDEX, NAMESPACE_INDEX, label_index_func, namespace_index_func
from emulator.metricsapi import custom
from emulator.metricsapi.client import MetricsClient, ObjectReference
from emulator.metricsapi.resource import ResourceMetricsReader

log = logging.getLogger(__name__)


# kube-controller-manager HPA flags' defaults.
DEFAULT_SYNC_PERIOD = 15.0
DEFAULT_WORKERS = 5  # --concurrent-horizontal-pod-autoscaler-syncs
_LABEL_INDEX = LABEL_INDEX
_NAMESPACE_INDEX = NAMESPACE_INDEX


class SpecError(Exception):
    """An error caused by the HPA's spec (upstream wraps these with ``errSpec``): metrics label ``spec``."""


class FixedIntervalRateLimiter:
    """client-go's ``FixedItemIntervalRateLimiter`` (upstream ``NewDefaultHPARateLimiter``): always the period."""

    def __init__(self, interval: float) -> None:
        self.interval = interval

    def when(self, item: Any) -> float:
        return self.interval

    def forget(self, item: Any) -> None:
        return None

    def num_requeues(self, item: Any) -> int:
        return 0


def set_condition(hpa: Obj, ctype: str, status: str, reason: str, message: str, *, now: float) -> None:
    """``setCondition``: lastTransitionTime moves only when the status changes."""
    conditions = hpa.setdefault("status", {}).setdefault("conditions", [])
    existing = next((c for c in conditions if c.get("type") == ctype), None)
    if existing is None:
        existing = {"type": ctype}
        conditions.append(existing)
    if existing.get("status") != status:
        existing["lastTransitionTime"] = rfc3339(now)
    existing["status"] = status
    existing["reason"] = reason
    existing["message"] = message


def _milli(value: Any) -> int:
    return cpu_millis(value)


def _selector_text(selector: Any) -> str:
    if not isinstance(selector, dict):
        return ""
    try:
        return str(LabelSelector.from_dict(selector))
    except errors.StatusError:
        return ""


def _metric_selector(metric: Obj) -> LabelSelector | None:
    sel = metric.get("selector")
    return LabelSelector.from_dict(sel) if isinstance(sel, dict) else None


def _selector_repr(metric: Obj) -> str:
    # Go's %+v of a *metav1.LabelSelector: nil prints as <nil>.
    sel = metric.get("selector")
    return "<nil>" if sel is None else f"&{sel}"


class HorizontalController(Controller):
    """Reconciles HorizontalPodAutoscalers; see the module docstring."""

    def __init__(self, ctx: ControllerContext, metrics_client: MetricsClient | None = None, *,
                 workers: int | None = None) -> None:
        self.sync_period = float(ctx.option("horizontal_pod_autoscaler_sync_period", DEFAULT_SYNC_PERIOD))
        super().__init__("horizontalpodautoscaling", ctx, workers=workers or int(
            ctx.option("concurrent_horizontal_pod_autoscaler_syncs", DEFAULT_WORKERS)),
            rate_limiter=FixedIntervalRateLimiter(self.sync_period))
        self.downscale_stabilization = float(ctx.option("horizontal_pod_autoscaler_downscale_stabilization",
                                                        bh.DEFAULT_DOWNSCALE_STABILIZATION))
        self.hpa_informer = self.watch(ctx.informers.informer_for(HORIZONTALPODAUTOSCALER))
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        ensure_indexers(self.pod_informer, {_LABEL_INDEX: label_index_func, _NAMESPACE_INDEX: namespace_index_func})
        self.hpa_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self._enqueue(obj), update=lambda _old, new: self._enqueue(new),
            delete=self._deleted))
        self.metrics_client: MetricsClient = metrics_client or self._default_metrics_client(ctx)
        self.calculator = ReplicaCalculator(
            self.metrics_client, self.list_pods, ctx.clock.now,
            tolerance=float(ctx.option("horizontal_pod_autoscaler_tolerance", 0.1)),
            cpu_initialization_period=float(ctx.option("horizontal_pod_autoscaler_cpu_initialization_period", 300.0)),
            delay_of_initial_readiness_status=float(
                ctx.option("horizontal_pod_autoscaler_initial_readiness_delay", 30.0)))
        self.history = bh.ScaleHistory()
        self.selectors = HPASelectors()
        if ctx.recorder is not None:
            # Upstream's HPA events come from the component "horizontal-pod-autoscaler".
            self.recorder = EventRecorder(ctx.core, "horizontal-pod-autoscaler", clock=ctx.clock,
                                          host=ctx.recorder.host)
        # When each key was last reconciled (cluster time): the benchmark checks the 15 s period with it.
        self.last_reconciled: dict[str, float] = {}
        self._desired_labels: set[str] = set()  # keys with a desired_replicas series

    # ------------------------------------------------------------------ wiring
    def _default_metrics_client(self, ctx: ControllerContext) -> MetricsClient:
        """Resource metrics from the kubelets' usage (read for the pods this controller's cache selects),
        custom and external metrics through the adapter (manager options ``metrics_rules``,
        ``prometheus_url``, as the API server's)."""
        resources = ResourceMetricsReader(ctx.core.store, ctx.clock.now, self.list_pods)
        try:
            return custom.metrics_client(ctx.core.store, ctx.clock.now, rules_path=ctx.option("metrics_rules", None),
                                         prometheus_url=ctx.option("prometheus_url", None), resources=resources)
        except Exception as e:  # a bad rules file must not stop CPU/memory autoscaling
            log.warning("horizontalpodautoscaling: custom/external metrics unavailable: %s", e)
            return resources

    def _enqueue(self, hpa: Obj) -> None:
        meta = hpa["metadata"]
        # Upstream enqueueHPA: AddRateLimited, i.e. after the sync period.
        self.queue.add_rate_limited(f"{meta.get('namespace') or ''}/{meta['name']}")

    def _deleted(self, obj: Any) -> None:
        hpa = object_of(obj)
        if hpa is not None:
            meta = hpa["metadata"]
            self.queue.add(f"{meta.get('namespace') or ''}/{meta['name']}")

    def list_pods(self, namespace: str, selector: LabelSelector) -> list[Obj]:
        """The pod lister: an exact ``key=value`` requirement is answered from the label index."""
        indexer = self.pod_informer.indexer
        candidates: list[Obj] | None = None
        for key, _op, _values in selector.requirements:
            value = selector.exact(key)
            if value is not None:
                candidates = indexer.by_index(_LABEL_INDEX, f"{key}={value}")
                break
        if candidates is None:
            candidates = indexer.by_index(_NAMESPACE_INDEX, namespace)
        return [p for p in candidates if (p["metadata"].get("namespace") or "") == namespace
                and selector.matches(p["metadata"].get("labels") or {})]

    def hpa_objects(self) -> list[Obj] | None:
        return self.hpa_informer.indexer.list() if self.hpa_informer.has_synced() else None

    def start(self) -> HorizontalController:
        if self.recorder is not None and self.recorder is not self.ctx.recorder:
            self.recorder.start()
        super().start()
        m.state_collector().add(self)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        m.state_collector().remove(self)
        super().stop(timeout)
        if self.recorder is not None and self.recorder is not self.ctx.recorder:
            self.recorder.stop()

    # ------------------------------------------------------------------ reconcile
    def reconcile(self, key: str) -> float | None:
        """``reconcileKey``: forget a deleted HPA; otherwise reconcile and come back after the period."""
        hpa = self.hpa_informer.indexer.get_by_key(key)
        if hpa is None:
            self.history.forget(key)
            self.selectors.delete(key)
            self.last_reconciled.pop(key, None)
            if key in self._desired_labels:
                self._desired_labels.discard(key)
                namespace, name = split_key(key)
                m.DESIRED_REPLICAS.remove(namespace or "", name)
            m.NUM_HPAS.set(len(self.hpa_informer.indexer))
            return None
        self.last_reconciled[key] = self.clock.now()
        try:
            self.reconcile_autoscaler(hpa, key)
        except Exception as e:  # upstream: HandleError, then the key comes back after the period anyway
            expected = isinstance(e, errors.StatusError | ReplicaCalcError | SpecError)
            log.log(logging.DEBUG if expected else logging.WARNING, "horizontalpodautoscaling: %s: %s", key, e,
                    exc_info=not expected)
        m.NUM_HPAS.set(len(self.hpa_informer.indexer))
        return self.sync_period

    def reconcile_autoscaler(self, shared: Obj, key: str) -> None:
        """``reconcileAutoscaler``; raises on error after recording status and events, as upstream returns one."""
        started = time.perf_counter()
        action, error_label = m.ACTION_NONE, m.ERROR_NONE
        try:
            action = self._reconcile(shared, key)
        except SpecError:
            action, error_label = m.ACTION_NONE, m.ERROR_SPEC
            raise
        except Exception:
            action, error_label = m.ACTION_NONE, m.ERROR_INTERNAL
            raise
        finally:
            m.observe_reconciliation(action, error_label, time.perf_counter() - started)

    def _reconcile(self, shared: Obj, key: str) -> str:
        now = self.clock.now()
        hpa = copy.deepcopy(shared)
        original_status = copy.deepcopy(hpa.get("status") or {})
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        namespace = hpa["metadata"].get("namespace") or ""
        reference = f"{ref.get('kind')}/{namespace}/{ref.get('name')}"

        try:
            target_kind = self._target_kind(ref)
            scale, target = self._get_scale(target_kind, namespace, str(ref.get("name") or ""))
        except (SpecError, errors.StatusError) as e:
            message = e.message if isinstance(e, errors.StatusError) else str(e)
            self.event(hpa, EVENT_WARNING, "FailedGetScale", message)
            set_condition(hpa, "AbleToScale", "False", "FailedGetScale",
                          f"the HPA controller was unable to get the target's current scale: {message}", now=now)
            self._update_status_if_needed(original_status, hpa)
            if isinstance(e, SpecError):
                raise
            raise errors.StatusError(e.code, e.reason, f"failed to query scale subresource for {reference}: "
                                     f"{message}") from None
        set_condition(hpa, "AbleToScale", "True", "SucceededGetScale",
                      "the HPA controller was able to get the target's current scale", now=now)
        current = int(scale["spec"]["replicas"])
        self.history.record_initial(key, current, now)

        min_replicas = int(spec["minReplicas"]) if spec.get("minReplicas") is not None else 1
        max_replicas = int(spec.get("maxReplicas") or 0)
        behavior = spec.get("behavior")
        statuses: list[Obj] = []
        desired = 0
        rescale_reason = ""
        rescale = True
        pending_error: Exception | None = None
        if current == 0 and min_replicas != 0:
            desired, rescale = 0, False
            set_condition(hpa, "ScalingActive", "False", "ScalingDisabled",
                          "scaling is disabled since the replica count of the target is zero", now=now)
        elif current > max_replicas:
            rescale_reason = "Current number of replicas above Spec.MaxReplicas"
            desired = max_replicas
        elif current < min_replicas:
            rescale_reason = "Current number of replicas below Spec.MinReplicas"
            desired = min_replicas
        else:
            proposal, metric_name, statuses, err = self.compute_replicas_for_metrics(hpa, scale, now)
            if err is not None and proposal == -1:
                self._set_current(hpa, current, statuses)
                self._update_status_if_needed(original_status, hpa)
                self.event(hpa, EVENT_WARNING, "FailedComputeMetricsReplicas", str(err))
                raise ReplicaCalcError(f"failed to compute desired number of replicas based on listed metrics for "
                                       f"{reference}: {err}")
            pending_error = err  # some metrics failed: scale on the others, report the error after
            rescale_metric = ""
            if proposal > desired:
                desired, rescale_metric = proposal, metric_name
            if desired > current:
                rescale_reason = f"{rescale_metric} above target"
            if desired < current:
                rescale_reason = "All metrics below target"
            arg = bh.NormalizationArg(key, current, desired, min_replicas, max_replicas)
            if behavior is None:
                desired, conds = bh.normalize_desired_replicas(self.history, arg, now,
                                                               window=self.downscale_stabilization)
            else:
                desired, conds = bh.normalize_with_behaviors(self.history, arg, behavior, now,
                                                             default_down_window=self.downscale_stabilization)
            for c in conds:
                set_condition(hpa, c.type, c.status, c.reason, c.message, now=now)
            rescale = desired != current

        action = m.ACTION_NONE
        if rescale:
            try:
                self._update_scale(target_kind, target, desired)
            except errors.StatusError as e:
                self.event(hpa, EVENT_WARNING, "FailedRescale",
                           f"New size: {desired}; reason: {rescale_reason}; error: {e.message}")
                set_condition(hpa, "AbleToScale", "False", "FailedUpdateScale",
                              f"the HPA controller was unable to update the target scale: {e.message}", now=now)
                self._set_current(hpa, current, statuses)
                self._update_status_if_needed(original_status, hpa)
                raise
            set_condition(hpa, "AbleToScale", "True", "SucceededRescale",
                          f"the HPA controller was able to update the target scale to {desired}", now=now)
            self.event(hpa, EVENT_NORMAL, "SuccessfulRescale", f"New size: {desired}; reason: {rescale_reason}")
            self.history.store_scale_event(behavior, key, current, desired, now)
            log.info("horizontalpodautoscaling: rescaled %s from %d to %d: %s", reference, current, desired,
                     rescale_reason)
            action = m.ACTION_SCALE_UP if desired > current else m.ACTION_SCALE_DOWN
        else:
            desired = current

        status = hpa.setdefault("status", {})
        status["currentReplicas"] = current
        status["desiredReplicas"] = desired
        if statuses:
            status["currentMetrics"] = statuses
        else:
            status.pop("currentMetrics", None)
        if rescale:
            status["lastScaleTime"] = rfc3339(now)
        m.DESIRED_REPLICAS.labels(namespace, hpa["metadata"]["name"]).set(desired)
        self._desired_labels.add(key)
        self._update_status_if_needed(original_status, hpa)
        if pending_error is not None:
            raise pending_error
        return action

    # ------------------------------------------------------------------ the scale subresource
    def _target_kind(self, ref: Mapping[str, Any]) -> Kind:
        api_version = str(ref.get("apiVersion") or "")
        group, _, version = api_version.rpartition("/")
        if not version or api_version.count("/") > 1:
            raise SpecError(f"unexpected GroupVersion string: {api_version}")
        kind_name = str(ref.get("kind") or "")
        for k in kinds.all_kinds():
            if k.group == group and k.kind == kind_name:
                return k
        raise errors.StatusError(404, "NotFound", f'no matches for kind "{kind_name}" in group "{group}"')

    def _get_scale(self, kind: Kind, namespace: str, name: str) -> tuple[Obj, Obj]:
        """The target's ``autoscaling/v1 Scale`` (and the object it came from)."""
        if "scale" not in kind.subresources:
            raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        obj = self.core.get(kind, namespace, name)
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        scale = {"spec": {"replicas": int(spec.get("replicas") or 0)},
                 "status": {"replicas": int(status.get("replicas") or 0),
                            "selector": _selector_text(spec.get("selector"))}}
        return scale, obj

    def _update_scale(self, kind: Kind, target: Obj, replicas: int) -> None:
        """PUT ``.../scale``: only ``spec.replicas`` changes, at the resourceVersion that was read."""
        new = {**target, "spec": {**(target.get("spec") or {}), "replicas": replicas}}
        self.core.update(kind, new)

    # ------------------------------------------------------------------ metrics
    def compute_replicas_for_metrics(self, hpa: Obj, scale: Obj, now: float
                                     ) -> tuple[int, str, list[Obj], Exception | None]:
        """``computeReplicasForMetrics``: the largest proposal; -1 when every metric (or a scale-down) failed."""
        specs = (hpa.get("spec") or {}).get("metrics") or []
        selector_text = scale["status"]["selector"]
        if not selector_text:
            self.event(hpa, EVENT_WARNING, "SelectorRequired", "selector is required")
            set_condition(hpa, "ScalingActive", "False", "InvalidSelector",
                          "the HPA target's scale is missing a selector", now=now)
            return -1, "", [], SpecError("selector is required")
        try:
            selector = LabelSelector.parse(selector_text)
        except errors.StatusError as e:
            msg = f"couldn't convert selector into a corresponding internal selector object: {e.message}"
            self.event(hpa, EVENT_WARNING, "InvalidSelector", msg)
            set_condition(hpa, "ScalingActive", "False", "InvalidSelector", msg, now=now)
            return -1, "", [], SpecError(msg)
        key = f"{hpa['metadata'].get('namespace') or ''}/{hpa['metadata']['name']}"
        self.selectors.put(key, selector)
        selecting = self.selectors.selecting(self.list_pods(hpa["metadata"].get("namespace") or "", selector))
        if len(selecting) > 1:
            msg = f"pods by selector {selector_text} are controlled by multiple HPAs: [{' '.join(selecting)}]"
            self.event(hpa, EVENT_WARNING, "AmbiguousSelector", msg)
            set_condition(hpa, "ScalingActive", "False", "AmbiguousSelector", msg, now=now)
            return -1, "", [], SpecError(msg)
        spec_replicas = scale["spec"]["replicas"]
        status_replicas = scale["status"]["replicas"]
        # A metric that fails keeps its zero-valued MetricStatus, as upstream's (``currentMetrics: [{type: ""}]``).
        statuses: list[Obj] = [{"type": ""} for _ in specs]
        replicas, metric = 0, ""
        invalid = 0
        first_error: Exception | None = None
        first_condition: tuple[str, str, str, str] | None = None
        for i, metric_spec in enumerate(specs):
            started = time.perf_counter()
            error_label = m.ERROR_NONE
            proposal = 0
            try:
                proposal, name, status = self.compute_replicas_for_metric(hpa, metric_spec, spec_replicas,
                                                                          status_replicas, selector)
            except _MetricError as e:
                error_label = m.ERROR_SPEC if e.spec else m.ERROR_INTERNAL
                if invalid == 0:
                    first_error, first_condition = e, e.condition
                invalid += 1
                continue
            finally:
                current_status = int((hpa.get("status") or {}).get("currentReplicas") or 0)
                action = m.ACTION_NONE
                if error_label == m.ERROR_NONE:
                    action = (m.ACTION_SCALE_UP if proposal > current_status
                              else m.ACTION_SCALE_DOWN if proposal < current_status else m.ACTION_NONE)
                m.observe_metric_computation(action, error_label, time.perf_counter() - started,
                                             str(metric_spec.get("type") or ""))
            statuses[i] = status
            if replicas == 0 or proposal > replicas:
                replicas, metric = proposal, name
        error: Exception | None = None
        if first_error is not None:
            error = ReplicaCalcError(f"invalid metrics ({invalid} invalid out of {len(specs)}), first error is: "
                                     f"{first_error}")
        if invalid >= len(specs) or (invalid > 0 and replicas < spec_replicas):
            if first_condition is not None:
                set_condition(hpa, *first_condition, now=now)
            return -1, "", statuses, error
        set_condition(hpa, "ScalingActive", "True", "ValidMetricFound",
                      f"the HPA was able to successfully calculate a replica count from {metric}", now=now)
        return replicas, metric, statuses, error

    def _fail(self, hpa: Obj, reason: str, err: str, spec: bool = False) -> _MetricError:
        """``getUnableComputeReplicaCountCondition``: the event now, the condition for the caller."""
        self.event(hpa, EVENT_WARNING, reason, err)
        return _MetricError(err, ("ScalingActive", "False", reason,
                                  f"the HPA was unable to compute the replica count: {err}"), spec)

    def compute_replicas_for_metric(self, hpa: Obj, spec: Obj, spec_replicas: int, status_replicas: int,
                                    selector: LabelSelector) -> tuple[int, str, Obj]:
        """``computeReplicasForMetric``: (proposal, metric name, MetricStatus); raises :class:`_MetricError`."""
        mtype = spec.get("type")
        namespace = hpa["metadata"].get("namespace") or ""
        calc = self.calculator
        try:
            if mtype in ("Resource", "ContainerResource"):
                return self._resource(hpa, spec, spec_replicas, selector)
            if mtype == "Pods":
                src = spec.get("pods") or {}
                metric = src.get("metric") or {}
                try:
                    replicas, usage, _ = calc.get_metric_replicas(
                        spec_replicas, _milli((src.get("target") or {}).get("averageValue")), metric.get("name", ""),
                        namespace=namespace, selector=selector, metric_selector=_metric_selector(metric))
                except ReplicaCalcError as e:
                    raise self._fail(hpa, "FailedGetPodsMetric", str(e)) from None
                return replicas, f"pods metric {metric.get('name')}", {
                    "type": "Pods", "pods": {"metric": metric, "current": {"averageValue": format_millis(usage)}}}
            if mtype == "Object":
                return self._object(hpa, spec, spec_replicas, status_replicas, selector)
            if mtype == "External":
                return self._external(hpa, spec, spec_replicas, status_replicas, selector)
        except _MetricError as e:
            prefix = {"Resource": f"failed to get {(spec.get('resource') or {}).get('name')} resource metric value",
                      "ContainerResource": f"failed to get {(spec.get('containerResource') or {}).get('container')}"
                                           " container metric value",
                      "Pods": "failed to get pods metric value",
                      "Object": "failed to get object metric value",
                      "External": f"failed to get {((spec.get('external') or {}).get('metric') or {}).get('name')}"
                                  " external metric value"}[str(mtype)]
            raise _MetricError(f"{prefix}: {e}", e.condition, e.spec) from None
        except (QuantityError, errors.StatusError) as e:
            message = e.message if isinstance(e, errors.StatusError) else str(e)
            raise self._fail(hpa, "FailedGetResourceMetric", message, spec=True) from None
        err = f'unknown metric source type "{mtype}"'
        raise self._fail(hpa, "InvalidMetricSourceType", err, spec=True)

    def _resource(self, hpa: Obj, spec: Obj, current: int, selector: LabelSelector) -> tuple[int, str, Obj]:
        container_type = spec.get("type") == "ContainerResource"
        src = spec.get("containerResource" if container_type else "resource") or {}
        name = str(src.get("name") or "")
        container = str(src.get("container") or "") if container_type else ""
        target = src.get("target") or {}
        namespace = hpa["metadata"].get("namespace") or ""
        reason = "FailedGetContainerResourceMetric" if container_type else "FailedGetResourceMetric"
        status_key, status_type = ("containerResource", "ContainerResource") if container_type else \
            ("resource", "Resource")
        base: Obj = {"name": name, **({"container": container} if container_type else {})}
        if target.get("averageValue") is not None:
            try:
                replicas, raw, _ = self.calculator.get_raw_resource_replicas(
                    current, _milli(target["averageValue"]), name, namespace=namespace, selector=selector,
                    container=container)
            except ReplicaCalcError as e:
                raise self._fail(hpa, reason, f"failed to get {name} usage: {e}") from None
            return replicas, f"{name} resource", {
                "type": status_type, status_key: {**base, "current": {"averageValue": format_millis(raw)}}}
        if target.get("averageUtilization") is None:
            raise self._fail(hpa, reason, "invalid resource metric source: neither an average utilization target "
                                          "nor an average value (usage) target was set", spec=True)
        try:
            replicas, utilization, raw, _ = self.calculator.get_resource_replicas(
                current, int(target["averageUtilization"]), name, namespace=namespace, selector=selector,
                container=container)
        except ReplicaCalcError as e:
            raise self._fail(hpa, reason, f"failed to get {name} utilization: {e}") from None
        label = f"{name} container resource" if container_type else f"{name} resource"
        return replicas, f"{label} utilization (percentage of request)", {
            "type": status_type, status_key: {**base, "current": {"averageUtilization": utilization,
                                                                  "averageValue": format_millis(raw)}}}

    def _object(self, hpa: Obj, spec: Obj, spec_replicas: int, status_replicas: int,
                selector: LabelSelector) -> tuple[int, str, Obj]:
        src = spec.get("object") or {}
        metric = src.get("metric") or {}
        target = src.get("target") or {}
        described = src.get("describedObject") or {}
        ref = ObjectReference(str(described.get("kind") or ""), str(described.get("name") or ""),
                              str(described.get("apiVersion") or ""))
        namespace = hpa["metadata"].get("namespace") or ""
        name = str(metric.get("name") or "")
        if target.get("type") == "Value" and target.get("value") is not None:
            try:
                replicas, usage, _ = self.calculator.get_object_metric_replicas(
                    spec_replicas, _milli(target["value"]), name, namespace=namespace, obj=ref, selector=selector,
                    metric_selector=_metric_selector(metric))
            except ReplicaCalcError as e:
                raise self._fail(hpa, "FailedGetObjectMetric", str(e)) from None
            return replicas, f"{ref.kind} metric {name}", {"type": "Object", "object": {
                "describedObject": described, "metric": metric, "current": {"value": format_millis(usage)}}}
        if target.get("type") == "AverageValue" and target.get("averageValue") is not None:
            try:
                replicas, usage, _ = self.calculator.get_object_per_pod_metric_replicas(
                    status_replicas, _milli(target["averageValue"]), name, namespace=namespace, obj=ref,
                    metric_selector=_metric_selector(metric))
            except ReplicaCalcError as e:
                raise self._fail(hpa, "FailedGetObjectMetric", f"failed to get {name} object metric: {e}") from None
            return replicas, f"external metric {name}({_selector_repr(metric)})", {"type": "Object", "object": {
                "describedObject": described, "metric": metric, "current": {"averageValue": format_millis(usage)}}}
        raise self._fail(hpa, "FailedGetObjectMetric",
                         "invalid object metric source: neither a value target nor an average value target was set",
                         spec=True)

    def _external(self, hpa: Obj, spec: Obj, spec_replicas: int, status_replicas: int,
                  selector: LabelSelector) -> tuple[int, str, Obj]:
        src = spec.get("external") or {}
        metric = src.get("metric") or {}
        target = src.get("target") or {}
        namespace = hpa["metadata"].get("namespace") or ""
        name = str(metric.get("name") or "")
        label = f"external metric {name}({_selector_repr(metric)})"
        if target.get("averageValue") is not None:
            try:
                replicas, usage, _ = self.calculator.get_external_per_pod_metric_replicas(
                    status_replicas, _milli(target["averageValue"]), name, namespace=namespace,
                    metric_selector=_metric_selector(metric))
            except ReplicaCalcError as e:
                raise self._fail(hpa, "FailedGetExternalMetric", f"failed to get {name} external metric: {e}") \
                    from None
            return replicas, label, {"type": "External", "external": {
                "metric": metric, "current": {"averageValue": format_millis(usage)}}}
        if target.get("value") is not None:
            try:
                replicas, usage, _ = self.calculator.get_external_metric_replicas(
                    spec_replicas, _milli(target["value"]), name, namespace=namespace,
                    metric_selector=_metric_selector(metric), selector=selector)
            except ReplicaCalcError as e:
                raise self._fail(hpa, "FailedGetExternalMetric", f"failed to get {name} external metric: {e}") \
                    from None
            return replicas, label, {"type": "External", "external": {
                "metric": metric, "current": {"value": format_millis(usage)}}}
        raise self._fail(hpa, "FailedGetExternalMetric",
                         "invalid external metric source: neither a value target nor an average value target was set",
                         spec=True)

    # ------------------------------------------------------------------ status
    @staticmethod
    def _set_current(hpa: Obj, current: int, statuses: list[Obj]) -> None:
        """``setCurrentReplicasAndMetricsInStatus``."""
        status = hpa.setdefault("status", {})
        status["currentReplicas"] = current
        if statuses:
            status["currentMetrics"] = statuses
        else:
            status.pop("currentMetrics", None)

    def _update_status_if_needed(self, original: Obj, hpa: Obj) -> None:
        """``updateStatusIfNeeded``: write only a changed status (``FailedUpdateStatus`` on error)."""
        status = hpa.get("status") or {}
        status.setdefault("currentReplicas", 0)
        status.setdefault("desiredReplicas", 0)
        if status == original:
            return
        try:
            self.core.update_status(HORIZONTALPODAUTOSCALER, hpa)
        except errors.StatusError as e:
            self.event(hpa, EVENT_WARNING, "FailedUpdateStatus", e.message)
            raise


class _MetricError(Exception):
    """One metric could not be computed: the message and the ScalingActive condition it implies."""

    def __init__(self, message: str, condition: tuple[str, str, str, str], spec: bool = False) -> None:
        super().__init__(message)
        self.condition = condition
        self.spec = spec


def new_controller(ctx: ControllerContext, metrics_client: MetricsClient | None = None) -> HorizontalController:
    """The controller manager's constructor.

    The metrics come from ``metrics_client``, else the manager option ``metrics_client`` (a
    :class:`~emulator.metricsapi.client.MetricsClient` combining resource, custom and external
    metrics), else the resource-metrics reader alone.
    """
    return HorizontalController(ctx, metrics_client or ctx.option("metrics_client", None))
