"""The TTL-after-finished controller: deletes finished Jobs ``ttlSecondsAfterFinished`` after they finished.

A re-implementation of upstream ``pkg/controller/ttlafterfinished/ttlafterfinished_controller.go``.
A Job with ``spec.ttlSecondsAfterFinished`` and a True ``Complete`` or
``Failed`` condition expires at that condition's ``lastTransitionTime`` plus the
TTL, on the **cluster clock**. Before expiry the key is requeued for the
remaining time; at expiry the controller re-reads the Job from the store (the
cache may be stale: the TTL may have been changed or the Job re-created,
``processJob``'s fresh GET), checks again, and deletes it with Background
propagation and a uid + resourceVersion precondition, so the garbage collector
removes its pods.

The finish-time helpers live here (not imported from the Job controller:
controllers stay independent of each other).
"""

from __future__ import annotations

import logging

from emulator.api import errors
from emulator.api.kinds import JOB
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339
from emulator.controllers.runtime import Controller, ControllerContext, split_key
from emulator.informers import ResourceEventHandlerFuncs

log = logging.getLogger(__name__)

# kube-controller-manager --concurrent-ttl-after-finished-syncs default.
DEFAULT_WORKERS = 5


def job_finish_time(job: Obj) -> float | None:
    """``jobFinishTime``: the transition time of the True Complete/Failed condition (None: not finished)."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            ts = cond.get("lastTransitionTime")
            return parse_rfc3339(ts) if ts else None
    return None


def time_left(job: Obj, now: float) -> float | None:
    """Cluster seconds until the Job expires (<= 0: expired); None when it has no TTL or is not finished."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    if ttl is None or job["metadata"].get("deletionTimestamp"):
        return None
    finished = job_finish_time(job)
    if finished is None:
        return None
    return finished + float(ttl) - now


class TTLAfterFinishedController(Controller):
    """Deletes expired finished Jobs; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("ttl-after-finished", ctx, workers=workers or int(
            ctx.option("concurrent_ttl_after_finished_syncs", DEFAULT_WORKERS)))
        self.job_informer = self.watch(ctx.informers.informer_for(JOB))
        self.job_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self._enqueue_if_due(obj), update=lambda _old, new: self._enqueue_if_due(new)))
        self.deleted = 0

    def _enqueue_if_due(self, job: Obj) -> None:
        if time_left(job, self.clock.now()) is not None:
            self.enqueue(job)

    def reconcile(self, key: str) -> float | None:
        job = self.job_informer.indexer.get_by_key(key)
        if job is None:
            return None
        left = time_left(job, self.clock.now())
        if left is None or left > 0:
            return left  # not finished with a TTL, or not expired yet
        namespace, name = split_key(key)
        fresh = errors.get_or_none(self.core, JOB, namespace, name)
        if fresh is None:
            return None
        left = time_left(fresh, self.clock.now())
        if left is None or left > 0:
            return left
        meta = fresh["metadata"]
        try:
            self.core.delete(JOB, namespace, name, propagation_policy="Background",
                             preconditions={"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]})
        except errors.StatusError as e:
            if e.code == 404:
                return None
            raise
        self.deleted += 1
        log.debug("ttl-after-finished: deleted Job %s", key)
        return None


def new_controller(ctx: ControllerContext) -> TTLAfterFinishedController:
    """The controller manager's constructor for this controller."""
    return TTLAfterFinishedController(ctx)
