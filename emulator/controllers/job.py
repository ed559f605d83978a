"""The Job controller: runs pods of a batch/v1 Job to completion, within its failure and time budgets.

A re-implementation of upstream ``pkg/controller/job/job_controller.go``
(``syncJob``, ``manageJob``, ``pastBackoffLimitOnFailure``,
``pastActiveDeadline``) on kemu's controller runtime. One reconcile of a Job key:

1. **Count pods.** The pods the Job controls (controller reference, claimed
   through :class:`~emulator.controllers.runtime.ControllerRefManager` with the
   server-generated ``batch.kubernetes.io/controller-uid`` selector) are split
   into active (not terminal, not being deleted), succeeded and failed.
   ``status.succeeded`` / ``status.failed`` never go down: kemu keeps the larger
   of the stored count and the pods it sees (upstream: the ``job-tracking``
   finalizer and ``status.uncountedTerminatedPods``).
2. **Failure criteria** in upstream's order: ``backoffLimit`` (restartPolicy
   Never: more failed pods than the limit; OnFailure: failed pods plus the
   container restarts of active pods reach the limit, or any with limit 0) →
   reason ``BackoffLimitExceeded`` "Job has reached the specified backoff
   limit"; ``activeDeadlineSeconds`` past ``status.startTime`` → reason
   ``DeadlineExceeded`` "Job was active longer than specified deadline".
3. **Success criteria**: ``succeeded >= completions`` (or, without
   ``completions``, one success and no active pod) → reason
   ``CompletionsReached`` "Reached expected number of succeeded pods".
4. **Terminal conditions as upstream 1.32** (``delayTerminalCondition``, on
   because JobPodReplacementPolicy is on by default): the interim condition
   comes first — ``FailureTarget`` or ``SuccessCriteriaMet`` — and the active
   pods are deleted; ``Failed`` or ``Complete`` (with ``completionTime`` for
   Complete) is added only once no pod of the Job is still running or
   terminating, so a finished Job never has live pods.
5. **Manage pods** otherwise: ``want = min(parallelism, completions -
   succeeded)`` (without completions: parallelism until a first success, then no
   new pods); missing pods are created in slow-start batches with expectations
   (never a double create while our own writes are unseen), surplus active pods
   are deleted (not-ready and newest first). ``spec.suspend`` deletes the active
   pods and sets ``Suspended``.
6. **Status**: ``active``, ``ready``, ``succeeded``, ``failed``,
   ``terminating``, ``startTime`` (first sync of an unsuspended Job),
   ``completionTime``, ``conditions``; written only when changed. A Job with an
   ``activeDeadlineSeconds`` is requeued for the moment its deadline passes.

Pods are made from the template (labels ``job-name``, ``controller-uid``,
``batch.kubernetes.io/job-name``, ``batch.kubernetes.io/controller-uid`` come
from the server's Job defaulting), ``generateName: <job>-``, and a controller
reference. Events: ``SuccessfulCreate``, ``SuccessfulDelete``,
``BackoffLimitExceeded``, ``DeadlineExceeded``, ``Completed``.

``ttlSecondsAfterFinished`` is upstream's separate TTL-after-finished
controller: :mod:`emulator.controllers.ttlafterfinished`.

What kemu leaves out (Indexed completion, pod failure and success policies,
replacement back-off) is listed under Simplifications in ``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

from emulator.api import errors
from emulator.api.kinds import JOB, POD
from emulator.api.pdb import is_pod_ready
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339, rfc3339
from emulator.controllers.runtime import (
    CONTROLLER_INDEX,
    EVENT_NORMAL,
    EVENT_WARNING,
    ControllerContext,
    ControllerRefManager,
    PodOwnerController,
    get_controller_of,
    meta_key,
    new_controller_ref,
    recheck_deletion_timestamp,
)

# kube-controller-manager --concurrent-job-syncs default.
DEFAULT_WORKERS = 5
# Upstream's per-pass cap on pod creations/deletions (job_controller.go MaxPodCreateDeletePerSync).
MAX_POD_CREATE_DELETE_PER_SYNC = 500

COMPLETE, FAILED = "Complete", "Failed"
FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED = "FailureTarget", "SuccessCriteriaMet", "Suspended"
REASON_BACKOFF = "BackoffLimitExceeded"
REASON_DEADLINE = "DeadlineExceeded"
REASON_COMPLETIONS = "CompletionsReached"
MESSAGES = {
    REASON_BACKOFF: "Job has reached the specified backoff limit",
    REASON_DEADLINE: "Job was active longer than specified deadline",
    REASON_COMPLETIONS: "Reached expected number of succeeded pods",
}


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _condition(job: Obj, ctype: str) -> Obj | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype and cond.get("status") == "True":
            return cond
    return None


def is_job_finished(job: Obj) -> bool:
    """``IsJobFinished``: a ``Complete`` or ``Failed`` condition is True."""
    return _condition(job, COMPLETE) is not None or _condition(job, FAILED) is not None


def _restarts(pod: Obj) -> int:
    status = pod.get("status") or {}
    return sum(int(c.get("restartCount") or 0)
               for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []))


def past_backoff_limit(job: Obj, active: Sequence[Obj], failed: int) -> bool:
    """The backoff limit check: ``failed > backoffLimit`` (Never) or ``pastBackoffLimitOnFailure`` (OnFailure)."""
    spec = job.get("spec") or {}
    limit = int(spec.get("backoffLimit", 6))
    restart = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    if restart == "OnFailure":
        total = failed + sum(_restarts(p) for p in active)
        return total > 0 if limit == 0 else total >= limit
    return failed > limit


def _set_condition(status: Obj, ctype: str, reason: str, message: str, now: float) -> bool:
    """Add or update a True condition; returns whether it changed (upstream ``ensureJobConditionStatus``)."""
    conditions = list(status.get("conditions") or [])
    for cond in conditions:
        if cond.get("type") == ctype:
            if cond.get("status") == "True" and cond.get("reason") == reason:
                return False
            cond.update(status="True", reason=reason, message=message, lastTransitionTime=rfc3339(now),
                        lastProbeTime=rfc3339(now))
            status["conditions"] = conditions
            return True
    conditions.append({"type": ctype, "status": "True", "reason": reason, "message": message,
                       "lastProbeTime": rfc3339(now), "lastTransitionTime": rfc3339(now)})
    status["conditions"] = conditions
    return True


class JobController(PodOwnerController):
    """Reconciles Jobs; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("job", ctx, workers=workers or int(ctx.option("concurrent_job_syncs", DEFAULT_WORKERS)))
        self.job_informer, self.pod_informer = self.watch_owners_and_pods(JOB)

    # ------------------------------------------------------------ reconcile
    def reconcile(self, key: str) -> float | None:
        job = self.job_informer.indexer.get_by_key(key)
        if job is None:
            self.expectations.delete_expectations(key)
            return None
        if is_job_finished(job) or job["metadata"].get("deletionTimestamp"):
            return None
        spec = job.get("spec") or {}
        selector = LabelSelector.from_dict(spec.get("selector"), "spec.selector")
        pods = self._claim_pods(job, selector)
        now = self.clock.now()
        status: Obj = dict(job.get("status") or {})
        active = [p for p in pods if _phase(p) not in ("Succeeded", "Failed")
                  and not p["metadata"].get("deletionTimestamp")]
        terminating = [p for p in pods if _phase(p) not in ("Succeeded", "Failed")
                       and p["metadata"].get("deletionTimestamp")]
        succeeded = max(int(status.get("succeeded") or 0), sum(1 for p in pods if _phase(p) == "Succeeded"))
        failed_pods = sum(1 for p in pods if _phase(p) == "Failed")
        failed = max(int(status.get("failed") or 0), failed_pods)
        suspended = bool(spec.get("suspend"))
        if not suspended and not status.get("startTime"):
            status["startTime"] = rfc3339(now)

        # Terminal criteria: an interim condition already set wins; else failure first, then success.
        reason: str | None = None
        interim = _condition(job, FAILURE_TARGET) or _condition(job, SUCCESS_CRITERIA_MET)
        if interim is not None:
            reason = interim.get("reason")
        elif past_backoff_limit(job, active, failed):
            reason = REASON_BACKOFF
        elif self._past_deadline(job, status, now):
            reason = REASON_DEADLINE
        else:
            completions = spec.get("completions")
            done = succeeded >= int(completions) if completions is not None else (succeeded > 0 and not active)
            if done:
                reason = REASON_COMPLETIONS

        requeue: float | None = None
        if reason is not None:
            success = reason == REASON_COMPLETIONS
            if _set_condition(status, SUCCESS_CRITERIA_MET if success else FAILURE_TARGET, reason,
                              MESSAGES[reason], now):
                self.event(job, EVENT_NORMAL if success else EVENT_WARNING,
                           "Completed" if success else reason, MESSAGES[reason] if not success else "Job completed")
            self._delete_pods(job, active)
            terminating += active
            active = []
            if not terminating:
                _set_condition(status, COMPLETE if success else FAILED, reason, MESSAGES[reason], now)
                if success:
                    status["completionTime"] = rfc3339(now)
        elif suspended:
            _set_condition(status, SUSPENDED, "JobSuspended", "Job suspended", now)
            self._delete_pods(job, active)
            terminating += active
            active = []
        else:
            status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != SUSPENDED]
            if not status["conditions"]:
                del status["conditions"]
            if self.expectations.satisfied_expectations(key):
                active = self._manage(job, active, succeeded)
            deadline = spec.get("activeDeadlineSeconds")
            if deadline is not None and status.get("startTime"):
                requeue = max(0.0, parse_rfc3339(status["startTime"]) + float(deadline) - now) + 0.001

        status.update(active=len(active), ready=sum(1 for p in active if is_pod_ready(p)), succeeded=succeeded,
                      failed=failed, terminating=len(terminating))
        self._write_status(job, status)
        return requeue

    @staticmethod
    def _past_deadline(job: Obj, status: Obj, now: float) -> bool:
        """``pastActiveDeadline``: activeDeadlineSeconds elapsed since startTime (cluster clock)."""
        deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
        start = status.get("startTime")
        return deadline is not None and bool(start) and now - parse_rfc3339(start) >= float(deadline)

    def _claim_pods(self, job: Obj, selector: LabelSelector) -> list[Obj]:
        meta = job["metadata"]
        index = self.pod_informer.indexer
        candidates = index.by_index(CONTROLLER_INDEX, meta["uid"]) + \
            index.by_index(CONTROLLER_INDEX, f"orphan/{meta.get('namespace') or ''}")
        manager = ControllerRefManager(self.core, job, JOB, selector, recheck_deletion_timestamp(self.core, JOB, job))
        # Upstream claims terminal pods too (they count toward succeeded/failed), but never adopts them.
        claimed = manager.claim(POD, candidates, lambda p: bool(get_controller_of(p)) or _phase(p) not in (
            "Succeeded", "Failed"))
        if manager.errors:
            raise manager.errors[0]
        return claimed

    def _manage(self, job: Obj, active: list[Obj], succeeded: int) -> list[Obj]:
        """``manageJob``: create or delete toward the wanted number of active pods; returns the active pods."""
        spec = job.get("spec") or {}
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        if completions is not None:
            want = max(0, min(parallelism, int(completions) - succeeded))
        else:
            want = len(active) if succeeded > 0 else parallelism
        key = meta_key(job)
        diff = want - len(active)
        if diff < 0:
            # Not-ready pods first, then the newest (upstream sorts by controller.ActivePods).
            victims = sorted(active, key=lambda p: (is_pod_ready(p), p["metadata"].get("creationTimestamp") or ""),
                             )[:min(-diff, MAX_POD_CREATE_DELETE_PER_SYNC)]
            self._delete_pods(job, victims)
            gone = {id(p) for p in victims}
            return [p for p in active if id(p) not in gone]
        if diff > 0:
            diff = min(diff, MAX_POD_CREATE_DELETE_PER_SYNC)
            self.expectations.expect_creations(key, diff)
            template = spec.get("template") or {}
            ref = new_controller_ref(job, JOB)
            created, batch, first_error = 0, 1, None
            remaining = diff
            while remaining > 0 and first_error is None:  # slowStartBatch
                n = min(batch, remaining)
                results = self.core.create_many(POD, [self._pod_body(job, template, ref) for _ in range(n)])
                for result in results:
                    if isinstance(result, errors.StatusError):
                        first_error = first_error or result
                        self.event(job, EVENT_WARNING, "FailedCreate", f"Error creating: {result.message}")
                    else:
                        created += 1
                        self.event(job, EVENT_NORMAL, "SuccessfulCreate", f"Created pod: {result['metadata']['name']}")
                remaining -= n
                batch *= 2
            if diff - created:
                self.expectations.lower_expectations(key, diff - created, 0)
            if first_error is not None:
                raise first_error
        return active

    @staticmethod
    def _pod_body(job: Obj, template: Obj, ref: Obj) -> Obj:
        tmeta = template.get("metadata") or {}
        meta: Obj = {"generateName": f"{job['metadata']['name']}-"[:58], "namespace": job["metadata"]["namespace"],
                     "labels": dict(tmeta.get("labels") or {}), "ownerReferences": [ref]}
        if tmeta.get("annotations"):
            meta["annotations"] = dict(tmeta["annotations"])
        if tmeta.get("finalizers"):
            meta["finalizers"] = list(tmeta["finalizers"])
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec") or {}}

    def _delete_pods(self, job: Obj, pods: Sequence[Obj]) -> None:
        key = meta_key(job)
        if not pods:
            return
        self.expectations.expect_deletions(key, len(pods))
        for pod in pods:
            error = self.delete_owned_pod(job, key, pod)
            if error is not None:
                self.event(job, EVENT_WARNING, "FailedDelete", f"Error deleting: {error.message}")
                raise error

    def _write_status(self, job: Obj, status: Obj) -> None:
        if status == (job.get("status") or {}):
            return
        self.core.update_status(JOB, {**job, "status": status})


def new_controller(ctx: ControllerContext) -> JobController:
    """The controller manager's constructor for this controller."""
    return JobController(ctx)
