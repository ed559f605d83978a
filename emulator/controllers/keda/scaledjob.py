"""KEDA's ScaledJob reconciler and job scale loop (kedacore/keda ``controllers/keda/scaledjob_controller.go``,
``pkg/scaling/executor/scale_jobs.go``).

The work queue, the per-object lock, the scalers cache and the poll timing are
:mod:`emulator.controllers.keda.scalehandler`'s. Every ``pollingInterval`` (default 30 s of
cluster time; the first poll at once) the triggers are read through the same scalers as
ScaledObjects (:mod:`emulator.keda.scalers`): the queue length is the largest metric value
over the triggers (``multipleScalersCalculation`` ``max``, the default) and
``maxScale = min(ceil(queueLength / target), maxReplicaCount)`` (default 100). The number
of Jobs to create then follows ``scalingStrategy.strategy`` (``scale_jobs.go``
``GetEffectiveMaxScale``):

* ``default``: ``maxScale - running``;
* ``custom``: ``min(maxScale - customScalingQueueLengthDeduction -
  int(running * customScalingRunningJobPercentage), maxReplicaCount)``;
* ``accurate``: ``maxReplicaCount - running`` if ``maxScale + running > maxReplicaCount``,
  else ``maxScale - pending``;
* ``eager``: ``min(maxReplicaCount - running - pending, maxScale)`` — fill every free slot
  up to the backlog at once;

where ``running`` counts the ScaledJob's unfinished Jobs and ``pending`` those of them with
no active pod yet. Jobs are created from ``jobTargetRef`` (a Job spec) with
``generateName: <name>-``, the label ``scaledjob.keda.sh/name`` and an owner reference
(``KEDAJobsCreated`` "Created N jobs"). Finished Jobs beyond
``successfulJobsHistoryLimit`` / ``failedJobsHistoryLimit`` (default 100 each) are deleted,
oldest first. Conditions Ready / Active as for ScaledObjects; scaler failures are
``KEDAScalerFailed`` events and ``Ready=False``, never a crash.
"""

from __future__ import annotations

import copy
import math

from emulator.api import errors
from emulator.api import keda as k
from emulator.api.kinds import JOB, SCALEDJOB
from emulator.api.types import Obj
from emulator.controllers.keda.scalehandler import (
    Built,
    ScalableController,
    initial_conditions,
    set_active,
    set_condition,
    target_value,
)
from emulator.controllers.runtime import ControllerContext, ensure_indexers
from emulator.controllers.runtime.events import EVENT_NORMAL, EVENT_WARNING
from emulator.keda.scalers import ScalerError

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
    """``GetEffectiveMaxScale`` of scale_jobs.go for the ScaledJob's ``scalingStrategy``."""
    kind = strategy.get("strategy") or "default"
    if kind == "custom":
        deduction = int(strategy.get("customScalingQueueLengthDeduction") or 0)
        percentage = float(strategy.get("customScalingRunningJobPercentage") or 0.0)
        return min(max_scale - deduction - int(running * percentage), max_replicas)
    if kind == "accurate":
        if max_scale + running > max_replicas:
            return max_replicas - running
        return max_scale - pending
    if kind == "eager":
        return min(max_replicas - running - pending, max_scale)
    return max_scale - running


class ScaledJobController(ScalableController):
    """KEDA's ScaledJob reconciler; see the module docstring."""

    kind_name = "ScaledJob"
    loop_type = "scaledjob"

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("keda-scaledjob", ctx, SCALEDJOB, workers=workers or 1)
        self.job_informer = self.watch(ctx.informers.informer_for(JOB))
        ensure_indexers(self.job_informer, {JOB_INDEX: _job_index})

    def reconcile_object(self, key: str) -> float | None:
        sj = self.latest(key)
        if sj is None:
            self.forget(key)
            return None  # its Jobs go with it (garbage collector)
        now = self.clock.now()
        before = copy.deepcopy(sj.get("status") or {})
        initial_conditions(sj)
        try:
            self.build(key, sj)
        except ScalerError as e:
            self.build_failed(sj, str(e), now)
            self.write_status(sj, before)
            return None
        set_condition(sj, "Ready", "True", "ScaledJobReady", "ScaledJob is defined correctly and is ready to scaling",
                      now=now)
        self.write_status(sj, before)
        self.start_loop(sj, key, now)
        return None

    def build_failed(self, obj: Obj, error: str, now: float) -> None:
        set_condition(obj, "Ready", "False", "ScaledJobCheckFailed", "Failed to ensure ScaledJob is correctly created",
                      now=now)
        self.event(obj, EVENT_WARNING, "ScaledJobCheckFailed", error)

    # ------------------------------------------------------------------ the job scale loop
    def poll_object(self, obj: Obj, built: Built, now: float) -> bool:
        """``RequestJobScale``: Jobs for the backlog, history clean-up, conditions; whether a scaler failed."""
        sj = obj
        ns, name = sj["metadata"].get("namespace") or "default", sj["metadata"]["name"]
        spec = sj.get("spec") or {}
        max_replicas = int(spec.get("maxReplicaCount") if spec.get("maxReplicaCount") is not None
                           else k.DEFAULT_SCALEDJOB_MAX_REPLICAS)
        queue_length, target, active, failed = 0.0, 0.0, False, False
        for index, trigger, scaler, specs in built.scalers:
            for metric_spec in specs:
                external = metric_spec.get("external")
                if external is None:
                    continue
                reading = self.read(sj, index, trigger, scaler, external["metric"]["name"])
                if reading.error:
                    failed = True
                    continue
                if reading.value >= queue_length:  # multipleScalersCalculation: max
                    queue_length, target = reading.value, target_value(external["target"])
                active = active or reading.active
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
        set_active(sj, active, now)
        return failed

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
