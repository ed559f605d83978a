"""The CronJob controller: creates a batch/v1 Job for every scheduled time of a CronJob, on the cluster clock.

A re-implementation of upstream ``pkg/controller/cronjob/cronjob_controllerv2.go``
(``syncCronJob``) and ``utils.go`` (``mostRecentScheduleTime``, ``getJobName``) on
kemu's controller runtime. One reconcile of a CronJob key:

1. **Active jobs.** The Jobs it controls (controller reference) are matched against
   ``status.active``: a finished Job leaves the list (a Complete one moves
   ``lastSuccessfulTime``), a Job the list does not name is added, a listed Job that no
   longer exists is removed.
2. **History.** Finished Jobs beyond ``successfulJobsHistoryLimit`` /
   ``failedJobsHistoryLimit`` are deleted oldest first (background propagation).
3. **Schedule.** Suspended: nothing more. Otherwise the most recent scheduled time
   ``t`` with ``earliest < t <= now`` (``earliest`` = ``lastScheduleTime``, else the
   CronJob's creation, but no earlier than ``now - startingDeadlineSeconds``), in
   ``spec.timeZone`` (UTC when unset). None: requeue for the next one. ``t`` older than
   ``startingDeadlineSeconds``: event ``MissSchedule``, requeue. A Job for ``t``
   already exists: requeue.
4. **concurrencyPolicy.** ``Forbid`` with an active Job: skip this time (the status is
   not moved, as upstream), requeue. ``Replace``: delete the active Jobs first.
   ``Allow``: run side by side.
5. **Create** Job ``<cronjob>-<t in minutes since the epoch>`` from ``jobTemplate``
   (its labels and annotations, plus ``batch.kubernetes.io/cronjob-scheduled-timestamp``),
   controlled by the CronJob; add it to ``status.active``, set ``lastScheduleTime``;
   event ``SuccessfulCreate``. Requeue for the next scheduled time (+100ms, as upstream).

A bad schedule or time zone (possible only for objects stored before validation
tightened) gets a ``UnparseableSchedule`` / ``UnknownTimeZone`` warning and no requeue.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from emulator.api import cron, errors
from emulator.api.kinds import CRONJOB, JOB
from emulator.api.meta import resource_version
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339, rfc3339
from emulator.controllers.runtime import (
    CONTROLLER_INDEX,
    EVENT_NORMAL,
    EVENT_WARNING,
    Controller,
    ControllerContext,
    controller_index_func,
    ensure_indexers,
    get_controller_of,
    meta_key,
    new_controller_ref,
    object_of,
    resolve_controller_ref,
)
from emulator.informers import ResourceEventHandlerFuncs

log = logging.getLogger(__name__)


DEFAULT_WORKERS = 5  # --concurrent-cron-job-syncs
SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
NEXT_SCHEDULE_DELTA = 0.1  # cronjob_controllerv2.go nextScheduleDelta
MAX_MISSED = 100  # a warning past this many missed start times (mostRecentScheduleTime)


def _finished(job: Obj) -> str | None:
    """``Complete`` or ``Failed`` when the Job has that condition True, else None."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def _finish_time(job: Obj) -> float:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return parse_rfc3339(cond.get("lastTransitionTime") or job["metadata"]["creationTimestamp"])
    return parse_rfc3339(job["metadata"]["creationTimestamp"])


def most_recent_schedule_time(cj: Obj, now: float, schedule: cron.Schedule) -> tuple[float | None, int]:
    """(the latest scheduled time in ``(earliest, now]`` or None, how many times were missed in that window)."""
    spec, status = cj.get("spec") or {}, cj.get("status") or {}
    earliest = parse_rfc3339(status.get("lastScheduleTime") or cj["metadata"]["creationTimestamp"])
    deadline = spec.get("startingDeadlineSeconds")
    if deadline is not None:
        earliest = max(earliest, now - float(deadline))
    tz = spec.get("timeZone")
    latest, missed, t = None, 0, schedule.next_after(earliest, tz)
    while t is not None and t <= now:
        latest, missed = t, missed + 1
        if missed > MAX_MISSED:
            # Upstream stops counting here too; jump near now so a long gap is not walked minute by minute.
            t = schedule.next_after(now - 1, tz)
            if t is not None and t <= now:
                latest = t
            break
        t = schedule.next_after(t, tz)
    return latest, missed


def job_name(cj: Obj, scheduled: float) -> str:
    """``getJobName``: ``<cronjob>-<scheduled time in minutes since the epoch>``."""
    return f"{cj['metadata']['name']}-{int(scheduled) // 60}"


class CronJobController(Controller):
    """Reconciles CronJobs; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("cronjob", ctx, workers=workers or int(ctx.option("concurrent_cron_job_syncs",
                                                                             DEFAULT_WORKERS)))
        self.cron_informer = self.watch_kind(CRONJOB)
        self.job_informer = self.watch(ctx.informers.informer_for(JOB))
        ensure_indexers(self.job_informer, {CONTROLLER_INDEX: controller_index_func})
        # key -> resourceVersion of our last status write: until the cache shows it, the CronJob in the cache
        # lacks the Job that write made active, and acting on it could start that Job's time again.
        self._written: dict[str, int] = {}
        self.job_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda job, _initial: self._job_event(job), update=lambda _old, new: self._job_event(new),
            delete=lambda obj: self._job_event(object_of(obj))))

    def _job_event(self, job: Obj | None) -> None:
        if job is None:
            return
        ref = get_controller_of(job)
        if ref is None:
            return
        owner = resolve_controller_ref(self.cron_informer.indexer, job["metadata"].get("namespace") or "", ref,
                                       CRONJOB.kind)
        if owner is not None:
            self.enqueue_key(meta_key(owner))

    # ------------------------------------------------------------ reconcile
    def reconcile(self, key: str) -> float | None:
        cj = self.cron_informer.indexer.get_by_key(key)
        if cj is None:
            self._written.pop(key, None)
            return None
        if int(resource_version(cj) or 0) < self._written.get(key, 0):
            return None  # the cache is behind our own status write; its update event queues the key again
        now = self.clock.now()
        jobs = [j for j in self.job_informer.indexer.by_index(CONTROLLER_INDEX, cj["metadata"]["uid"])]
        status: Obj = dict(cj.get("status") or {})
        self._sync_active(cj, jobs, status)
        self._cleanup_history(cj, jobs)
        requeue: float | None = None
        if not cj["metadata"].get("deletionTimestamp"):
            requeue = self._schedule(cj, jobs, status, now)
        if status != (cj.get("status") or {}):
            # A conflict (our cache behind our own last status write) is an error: the key is retried
            # once the cache shows that write, never written over it (lastScheduleTime must not go back).
            written = self.core.update_status(CRONJOB, {**cj, "status": status})
            self._written[key] = int(resource_version(written) or 0)
        return requeue

    def _sync_active(self, cj: Obj, jobs: list[Obj], status: Obj) -> None:
        by_uid = {j["metadata"]["uid"]: j for j in jobs}
        active = [ref for ref in status.get("active") or []
                  if (not _finished(by_uid[ref["uid"]]) if ref.get("uid") in by_uid else self._exists(ref))]
        listed = {ref.get("uid") for ref in active}
        for job in jobs:
            state = _finished(job)
            if state is None and job["metadata"]["uid"] not in listed and not job["metadata"].get("deletionTimestamp"):
                active.append(self._reference(job))
            if state == "Complete":
                done = _finish_time(job)
                last = status.get("lastSuccessfulTime")
                if last is None or parse_rfc3339(last) < done:
                    status["lastSuccessfulTime"] = rfc3339(done)
            if state is not None and any(ref.get("uid") == job["metadata"]["uid"] for ref in status.get("active")
                                         or []):
                self.event(cj, EVENT_NORMAL, "SawCompletedJob",
                           f"Saw completed job: {job['metadata']['name']}, condition: {state}")
        if active:
            status["active"] = active
        else:
            status.pop("active", None)

    def _exists(self, ref: Obj) -> bool:
        """An active Job our informer has not seen is asked of the API server before it leaves the list: the
        watch may simply be behind our own create (upstream syncCronJob's GetJob for the same reason)."""
        return self._fetch(ref) is not None

    def _fetch(self, ref: Obj) -> Obj | None:
        """The Job ``ref`` (an entry of status.active) read from the API server; None if it is gone."""
        job = errors.get_or_none(self.core, JOB, ref.get("namespace") or "", ref.get("name") or "")
        return job if job is not None and job["metadata"].get("uid") == ref.get("uid") else None

    @staticmethod
    def _reference(job: Obj) -> Obj:
        meta = job["metadata"]
        return {"kind": "Job", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"],
                "apiVersion": "batch/v1", "resourceVersion": meta.get("resourceVersion", "")}

    def _cleanup_history(self, cj: Obj, jobs: list[Obj]) -> None:
        spec = cj.get("spec") or {}
        for state, limit in (("Complete", spec.get("successfulJobsHistoryLimit")),
                             ("Failed", spec.get("failedJobsHistoryLimit"))):
            if limit is None:
                continue
            done = sorted((j for j in jobs if _finished(j) == state and not j["metadata"].get("deletionTimestamp")),
                          key=_finish_time)
            for job in done[:max(0, len(done) - int(limit))]:
                self._delete_job(cj, job)

    def _delete_job(self, cj: Obj, job: Obj) -> None:
        meta = job["metadata"]
        try:
            self.core.delete(JOB, meta["namespace"], meta["name"], propagation_policy="Background",
                             preconditions={"uid": meta["uid"]})
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise
            return
        self.event(cj, EVENT_NORMAL, "SuccessfulDelete", f"Deleted job {meta['name']}")

    def _schedule(self, cj: Obj, jobs: list[Obj], status: Obj, now: float) -> float | None:
        spec = cj.get("spec") or {}
        tz = spec.get("timeZone")
        try:
            schedule = cron.parse(str(spec.get("schedule") or ""))
            cron.location(tz)
        except cron.CronError as e:
            reason = "UnknownTimeZone" if "time zone" in str(e) else "UnparseableSchedule"
            self.event(cj, EVENT_WARNING, reason, f"invalid schedule: {spec.get('schedule')} : {e}")
            return None
        if spec.get("suspend"):
            return None
        scheduled, missed = most_recent_schedule_time(cj, now, schedule)
        upcoming = schedule.next_after(now, tz)
        requeue = None if upcoming is None else upcoming - now + NEXT_SCHEDULE_DELTA
        if scheduled is None:
            return requeue
        if missed > MAX_MISSED:
            self.event(cj, EVENT_WARNING, "TooManyMissedTimes",
                       "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check "
                       "clock skew")
        deadline = spec.get("startingDeadlineSeconds")
        if deadline is not None and scheduled + float(deadline) < now:
            self.event(cj, EVENT_WARNING, "MissSchedule",
                       f"Missed scheduled time to start a job: {rfc3339(scheduled)}")
            return requeue
        name = job_name(cj, scheduled)
        if any(j["metadata"]["name"] == name for j in jobs) or any(
                ref.get("name") == name for ref in status.get("active") or []):
            return requeue
        policy = spec.get("concurrencyPolicy", "Allow")
        if policy == "Forbid" and status.get("active"):
            log.debug("cronjob %s: not starting a job: the prior one is still running (Forbid)", meta_key(cj))
            return requeue
        if policy == "Replace":
            by_uid = {j["metadata"]["uid"]: j for j in jobs}
            for ref in status.get("active") or []:
                job = by_uid.get(ref.get("uid")) or self._fetch(ref)  # upstream GetJobs each from the API server
                if job is not None:
                    self._delete_job(cj, job)
            status.pop("active", None)
        created = self._create_job(cj, name, scheduled, tz)
        if created is not None:
            status["active"] = [*(status.get("active") or []), self._reference(created)]
        status["lastScheduleTime"] = rfc3339(scheduled)
        return requeue

    def _create_job(self, cj: Obj, name: str, scheduled: float, tz: str | None) -> Obj | None:
        template = (cj.get("spec") or {}).get("jobTemplate") or {}
        tmeta = template.get("metadata") or {}
        stamp = datetime.fromtimestamp(scheduled, tz=cron.location(tz))
        when = stamp.strftime("%Y-%m-%dT%H:%M:%SZ") if stamp.tzinfo is UTC else stamp.isoformat()
        body = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "namespace": cj["metadata"]["namespace"],
                             "labels": dict(tmeta.get("labels") or {}),
                             "annotations": {**(tmeta.get("annotations") or {}), SCHEDULED_TIMESTAMP: when},
                             "ownerReferences": [new_controller_ref(cj, CRONJOB)]},
                "spec": template.get("spec") or {}}
        try:
            job = self.core.create(JOB, body)
        except errors.StatusError as e:
            if e.reason == "AlreadyExists":
                return None  # ours from an earlier pass the cache had not shown yet
            self.event(cj, EVENT_WARNING, "FailedCreate", f"Error creating job: {e.message}")
            raise
        self.event(cj, EVENT_NORMAL, "SuccessfulCreate", f"Created job {name}")
        return job


def new_controller(ctx: ControllerContext) -> CronJobController:
    """The controller manager's constructor for this controller."""
    return CronJobController(ctx)
