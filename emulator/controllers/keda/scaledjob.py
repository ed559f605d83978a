"""KEDA's ScaledJob reconciler and job scale loop (kedacore/keda ``controllers/keda/scaledjob_controller.go``,
``pkg/scaling/executor/scale_jobs.go``).

Every ``pollingInterval`` (default 30 s of cluster time; the first poll at once) the
triggers are read through the same scalers as ScaledObjects (:mod:`emulator.keda.scalers`):
the queue length is the largest metric value over the triggers (``multipleScalersCalculation``
``max``, the default) and ``maxScale = min(ceil(queueLength / target), maxReplicaCount)``
(default 100). The number of Jobs to create then follows ``scalingStrategy.strategy``
(``scale_jobs.go`` ``getEffectiveMaxScale``):

* ``default``: ``maxScale - running``;
* ``custom``: ``min(maxScale - customScalingQueueLengthDeduction -
  int(running * customScalingRunningJobPercentage), maxReplicaCount)``;
* ``accurate``: ``maxReplicaCount - running`` if ``maxScale + running > maxReplicaCount``,
  else ``maxScale - pending``;

where ``running`` counts the ScaledJob's unfinished Jobs and ``pending`` those of them with
no active pod yet. Jobs are created from ``jobTargetRef`` (a Job spec) with
``generateName: <name>-``, the label ``scaledjob.keda.sh/name`` and an owner reference
(``KEDAJobsCreated`` "Created N jobs"). Finished Jobs beyond
``successfulJobsHistoryLimit`` / ``failedJobsHistoryLimit`` (default 100 each) are deleted,
oldest first. Conditions Ready / Active as for ScaledObjects; scaler failures are
``KEDAScalerFailed`` events and ``Ready=False``, never a crash. ``eager`` is served as
``default`` (see the Simplifications list).
"""

from __future__ import annotations

import copy
import logging
import math
import threading
from typing import Any

from emulator.api import errors
from emulator.api import keda as k
from emulator.api.kinds import JOB, POD, SCALEDJOB
from emulator.api.types import Obj
from emulator.controllers.keda.scaledobject import (
    POLL,
    Built,
    _Env,
    _target_value,
    initial_conditions,
    set_condition,
)
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
from emulator.keda import auth
from emulator.keda import prommetrics as pm
from emulator.keda.scalers import Scaler, ScalerConfig, ScalerError, build_scaler

log = logging.getLogger(__name__)

JOB_INDEX = "scaledjob"


def _job_index(job: Obj) -> list[str]:
    meta = job.get("metadata") or {}
    owner = (meta.get("labels") or {}).get(k.SCALEDJOB_LABEL)
    return [f"{meta.get('namespace')}/{owner}"] if owner else []


def _finished(job: Obj) -> str:
    """"Complete", "Failed" or "" (``IsJobFinished``)."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return ""


def effective_max_scale(strategy: Obj, max_scale: int, running: int, pending: int, max_replicas: int) -> int:
    """``getEffectiveMaxScale`` of scale_jobs.go for the ScaledJob's ``scalingStrategy``."""
    kind = strategy.get("strategy") or "default"
    if kind == "custom":
        deduction = int(strategy.get("customScalingQueueLengthDeduction") or 0)
        percentage = float(strategy.get("customScalingRunningJobPercentage") or 0.0)
        return min(max_scale - deduction - int(running * percentage), max_replicas)
    if kind == "accurate":
        if max_scale + running > max_replicas:
            return max_replicas - running
        return max_scale - pending
    return max_scale - running


class ScaledJobController(Controller):
    """KEDA's ScaledJob reconciler; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("keda-scaledjob", ctx, workers=workers or 1)
        self.sj_informer = self.watch(ctx.informers.informer_for(SCALEDJOB))
        self.job_informer = self.watch(ctx.informers.informer_for(JOB))
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        ensure_indexers(self.pod_informer, {NAMESPACE_INDEX: namespace_index_func})
        ensure_indexers(self.job_informer, {JOB_INDEX: _job_index})
        self.sj_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self.enqueue(obj), update=self._updated, delete=self._deleted))
        if ctx.recorder is not None:
            self.recorder = EventRecorder(ctx.core, "keda-operator", clock=ctx.clock, host=ctx.recorder.host)
        self.env = _Env(ctx.core.store.redis, ctx.clock.now, self)
        self.built: dict[str, Built] = {}
        self.due: dict[str, float] = {}
        self._lock = threading.Lock()

    def start(self) -> ScaledJobController:
        if self.recorder is not None and self.recorder is not self.ctx.recorder:
            self.recorder.start()
        super().start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        if self.recorder is not None and self.recorder is not self.ctx.recorder:
            self.recorder.stop()
        for built in self.built.values():
            built.close()
        self.built.clear()

    def event(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        super().event({"apiVersion": k.API_VERSION, "kind": "ScaledJob", **obj}, event_type, reason, message)

    def _updated(self, old: Obj, new: Obj) -> None:
        if (old.get("metadata") or {}).get("generation") != (new.get("metadata") or {}).get("generation"):
            self.enqueue(new)

    def _deleted(self, obj: Any) -> None:
        sj = object_of(obj)
        if sj is not None:
            self.enqueue(sj)

    # The scalers' env asks the ScaledObject informer for cpu/memory; ScaledJobs support neither.
    so_informer = None

    def reconcile(self, key: str) -> float | None:
        with self._lock:
            if key.startswith(POLL):
                return self.poll(key[len(POLL):])
            return self._reconcile(key)

    def _latest(self, key: str) -> Obj | None:
        ns, _, name = key.partition("/")
        try:
            return self.core.get(SCALEDJOB, ns, name)
        except errors.StatusError as e:
            if e.code == 404:
                return None
            raise

    def _reconcile(self, key: str) -> float | None:
        sj = self._latest(key)
        if sj is None:
            built = self.built.pop(key, None)
            if built is not None:
                built.close()
            self.due.pop(POLL + key, None)
            return None  # its Jobs go with it (garbage collector)
        now = self.clock.now()
        before = copy.deepcopy(sj.get("status") or {})
        initial_conditions(sj)
        try:
            self._build(key, sj)
        except ScalerError as e:
            set_condition(sj, "Ready", "False", "ScaledJobCheckFailed", "Failed to ensure ScaledJob is correctly "
                          "created", now=now)
            self.event(sj, EVENT_WARNING, "ScaledJobCheckFailed", str(e))
            self._write_status(sj, before)
            return None
        set_condition(sj, "Ready", "True", "ScaledJobReady", "ScaledJob is defined correctly and is ready to scaling",
                      now=now)
        self._write_status(sj, before)
        if POLL + key not in self.due:
            self.event(sj, EVENT_NORMAL, "KEDAScalersStarted", "Started scalers watch")
            self.due[POLL + key] = now
            self.enqueue_key(POLL + key)
        return None

    def _build(self, key: str, sj: Obj) -> Built:
        generation = int(sj["metadata"].get("generation") or 0)
        built = self.built.get(key)
        if built is not None and built.generation == generation:
            return built
        if built is not None:
            built.close()
        ns, name = sj["metadata"].get("namespace") or "default", sj["metadata"]["name"]
        scalers: list[tuple[int, Obj, Scaler, list[Obj]]] = []
        auth_types: list[str] = []
        try:
            for i, trigger in enumerate(k.triggers(sj)):
                params, used = auth.resolve(self.core, trigger, ns)
                if used:
                    auth_types.append(used)
                config = ScalerConfig(str(trigger.get("type") or ""), i, dict(trigger.get("metadata") or {}),
                                      params, str(trigger.get("metricType") or ""), ns, name, self.env)
                scaler = build_scaler(config)
                scalers.append((i, trigger, scaler, scaler.metric_specs()))
        except ScalerError:
            Built(generation, scalers, auth_types).close()
            self.built.pop(key, None)
            raise
        built = self.built[key] = Built(generation, scalers, auth_types)
        return built

    def _write_status(self, sj: Obj, before: Obj) -> None:
        if sj.get("status") == before:
            return
        try:
            self.core.update(SCALEDJOB, sj, subresource="status")
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise

    # ------------------------------------------------------------------ the job scale loop
    def poll(self, key: str) -> float | None:
        sj, built = self._latest(key), self.built.get(key)
        if sj is None or built is None or POLL + key not in self.due:
            self.due.pop(POLL + key, None)
            return None
        now = self.clock.now()
        ns, name = key.split("/", 1)
        pm.SCALE_LOOP_LATENCY.labels(ns, "scaledjob", name).set(max(0.0, now - self.due[POLL + key]))
        before = copy.deepcopy(sj.get("status") or {})
        interval = float(k.polling_interval(sj))
        try:
            self.request_job_scale(sj, built, now)
        finally:
            self._write_status(sj, before)
            self.due[POLL + key] = now + interval
        return interval

    def request_job_scale(self, sj: Obj, built: Built, now: float) -> None:
        ns, name = sj["metadata"].get("namespace") or "default", sj["metadata"]["name"]
        spec = sj.get("spec") or {}
        max_replicas = int(spec.get("maxReplicaCount") if spec.get("maxReplicaCount") is not None
                           else k.DEFAULT_SCALEDJOB_MAX_REPLICAS)
        queue_length, target, active, failed = 0.0, 0.0, False, False
        for index, trigger, scaler, specs in built.scalers:
            kind = str(trigger.get("type"))
            for metric_spec in specs:
                external = metric_spec.get("external")
                if external is None:
                    continue
                metric = external["metric"]["name"]
                labels = (ns, metric, name, f"{kind}Scaler", str(index), "scaledjob")
                try:
                    values, is_active = scaler.metrics_and_activity(metric)
                except ScalerError as e:
                    failed = True
                    pm.SCALER_ERRORS.labels(*labels).inc()
                    self.event(sj, EVENT_WARNING, "KEDAScalerFailed", str(e))
                    continue
                value = values[0] if values else 0.0
                pm.SCALER_METRICS_VALUE.labels(*labels).set(value)
                pm.SCALER_ACTIVE.labels(*labels).set(1 if is_active else 0)
                pm.SCALER_ERRORS.labels(*labels)  # RecordScalerError(nil): the series exists at 0
                if value >= queue_length:  # multipleScalersCalculation: max
                    queue_length, target = value, _target_value(external["target"])
                active = active or is_active
        max_scale = min(math.ceil(queue_length / target), max_replicas) if target > 0 else 0
        jobs = self.job_informer.indexer.by_index(JOB_INDEX, f"{ns}/{name}")
        unfinished = [j for j in jobs if not _finished(j)]
        running = len(unfinished)
        pending = sum(1 for j in unfinished if not int((j.get("status") or {}).get("active") or 0))
        create = 0
        if active:
            create = max(0, effective_max_scale(spec.get("scalingStrategy") or {}, max_scale, running, pending,
                                                max_replicas))
            create = min(create, max(0, max_replicas - running))
        min_count = int(spec.get("minReplicaCount") or 0)
        create = max(create, min_count - running)
        if create > 0:
            self._create_jobs(sj, create)
            self.event(sj, EVENT_NORMAL, "KEDAJobsCreated", f"Created {create} jobs")
        self._clean_up(sj, jobs)
        if failed:
            set_condition(sj, "Ready", "False", "TriggerError", "Triggers defined in ScaledJob are not working "
                          "correctly", now=now)
        else:
            set_condition(sj, "Ready", "True", "ScaledJobReady", "ScaledJob is defined correctly and is ready to "
                          "scaling", now=now)
        if active:
            set_condition(sj, "Active", "True", "ScalerActive", "Scaling is performed because triggers are active",
                          now=now)
        else:
            set_condition(sj, "Active", "False", "ScalerNotActive",
                          "Scaling is not performed because triggers are not active", now=now)

    def _create_jobs(self, sj: Obj, count: int) -> None:
        meta = sj["metadata"]
        ns, name = meta.get("namespace") or "default", meta["name"]
        job_spec = copy.deepcopy((sj.get("spec") or {}).get("jobTargetRef") or {})
        template = job_spec.setdefault("template", {})
        labels = {**((template.get("metadata") or {}).get("labels") or {}), k.SCALEDJOB_LABEL: name}
        template.setdefault("metadata", {})["labels"] = labels
        owner = {"apiVersion": k.API_VERSION, "kind": "ScaledJob", "name": name, "uid": meta.get("uid"),
                 "controller": True, "blockOwnerDeletion": True}
        bodies = [{"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"generateName": f"{name}-", "namespace": ns,
                                "labels": {"app.kubernetes.io/managed-by": "keda-operator",
                                           "app.kubernetes.io/name": name, k.SCALEDJOB_LABEL: name},
                                "ownerReferences": [owner]},
                   "spec": copy.deepcopy(job_spec)} for _ in range(count)]
        for result in self.core.create_many(JOB, bodies):
            if isinstance(result, errors.StatusError):
                self.event(sj, EVENT_WARNING, "KEDAJobCreateFailed", result.message)

    def _clean_up(self, sj: Obj, jobs: list[Obj]) -> None:
        """Delete finished Jobs beyond the history limits, oldest first (``deleteJobByCompletedStatus``)."""
        spec = sj.get("spec") or {}
        limits = {"Complete": int(spec.get("successfulJobsHistoryLimit", k.DEFAULT_HISTORY_LIMIT)),
                  "Failed": int(spec.get("failedJobsHistoryLimit", k.DEFAULT_HISTORY_LIMIT))}
        for state, limit in limits.items():
            done = sorted((j for j in jobs if _finished(j) == state),
                          key=lambda j: (j["metadata"].get("creationTimestamp") or "", j["metadata"]["name"]))
            for job in done[:max(0, len(done) - limit)]:
                try:
                    self.core.delete(JOB, job["metadata"].get("namespace"), job["metadata"]["name"])
                except errors.StatusError as e:
                    if e.code != 404:
                        raise


def new_controller(ctx: ControllerContext) -> ScaledJobController:
    return ScaledJobController(ctx)
