"""The CronJob controller against a real Redis, on a manual cluster clock.

The test moves cluster time minute by minute and plays the Job controller (it marks Jobs
Complete by hand). Expected activation times are computed here from the schedule's
meaning (every fifth minute, 17:30 in New York), not read back from kemu's parser.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from emulator.api import errors
from emulator.api.kinds import CRONJOB, JOB
from emulator.api.types import Obj
from emulator.clock import ManualClock, parse_rfc3339, rfc3339
from emulator.controllers.manager import ControllerManager
from emulator.server.core import ServerCore
from tests.waiting import cache_matches, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def manager(start_manager: Callable[..., ControllerManager]) -> ControllerManager:
    return start_manager("cronjob")


def cron_job(schedule: str, **spec: object) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "report", "namespace": "default"},
            "spec": {"schedule": schedule, **spec, "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure", "containers": [{"name": "report", "image": "busybox:1.36"}]}}}}}}


def jobs(core: ServerCore) -> list[Obj]:
    return sorted(core.list(JOB, "default").items, key=lambda j: j["metadata"]["name"])


def scheduled(job: Obj) -> float:
    return parse_rfc3339(job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"])


def step_and_sync(clock: ManualClock, manager: ControllerManager, seconds: float) -> None:
    """Move cluster time and wait until the controller has looked again at the new time.

    "Looked" means a reconcile that started once the controller's caches held the store's CronJob
    and Jobs. A reconcile on a cache still behind the controller's own last status write returns
    early (it waits for that write's update event) yet counts: waiting for any reconcile let the
    Replace case look before the real one (every run with a 50 ms watch linger).
    """
    ctrl: Any = manager.controllers()["cronjob"]
    core = ctrl.core

    def idle_and_current() -> bool:
        return (len(ctrl.queue) == 0 and ctrl.queue.unfinished_work_seconds() == 0
                and cache_matches(core, ctrl.cron_informer, CRONJOB) and cache_matches(core, ctrl.job_informer, JOB))

    wait_for(idle_and_current, 10, "the controller done with the current time")  # before time moves on
    clock.advance(seconds)
    wait_for(idle_and_current, 10, "the controller's caches to hold the store's CronJob and Jobs")
    before = ctrl.reconciles
    ctrl.enqueue_key("default/report")
    wait_for(lambda: ctrl.reconciles > before and len(ctrl.queue) == 0 and ctrl.queue.unfinished_work_seconds() == 0,
             10, "a reconcile at the new time")


def complete(core: ServerCore, job: Obj) -> None:
    now = rfc3339(core.clock.now())
    current = core.get(JOB, "default", job["metadata"]["name"])
    status = {**(current.get("status") or {}), "succeeded": 1, "completionTime": now, "conditions": [
        {"type": "Complete", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": now}]}
    core.update_status(JOB, {**current, "status": status})


def test_fires_at_every_scheduled_time_and_never_before(core: ServerCore, clock: ManualClock,
                                                        manager: ControllerManager) -> None:
    t0 = clock.now()
    core.create(CRONJOB, cron_job("*/5 * * * *"))
    for _ in range(16):
        step_and_sync(clock, manager, 60)
    # Every multiple of five minutes in (t0, now]: the schedule's meaning, in UTC.
    first = (int(t0) // 300 + 1) * 300
    expected = list(range(first, int(clock.now()) + 1, 300))
    made = jobs(core)
    assert [scheduled(j) for j in made] == expected
    assert [j["metadata"]["name"] for j in made] == [f"report-{t // 60}" for t in expected]
    for job in made:  # created in the minute the time came, not before
        created = parse_rfc3339(job["metadata"]["creationTimestamp"])
        assert scheduled(job) <= created < scheduled(job) + 60
        assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    status = core.get(CRONJOB, "default", "report")["status"]
    assert parse_rfc3339(status["lastScheduleTime"]) == expected[-1]
    assert len(status["active"]) == len(expected)


def test_forbid_skips_while_a_job_runs(core: ServerCore, clock: ManualClock, manager: ControllerManager) -> None:
    core.create(CRONJOB, cron_job("* * * * *", concurrencyPolicy="Forbid"))
    step_and_sync(clock, manager, 60)
    (first,) = jobs(core)
    for _ in range(3):
        step_and_sync(clock, manager, 60)
        assert [j["metadata"]["name"] for j in jobs(core)] == [first["metadata"]["name"]]
    complete(core, first)
    # The prior run finished: the most recent missed time runs now (no startingDeadlineSeconds), as upstream.
    latest = int(clock.now()) // 60 * 60
    wait_for(lambda: len(jobs(core)) == 2, 10, "the next job once the first finished")
    assert scheduled(jobs(core)[1]) == latest
    status = core.get(CRONJOB, "default", "report")["status"]
    assert [a["name"] for a in status["active"]] == [jobs(core)[1]["metadata"]["name"]]
    assert parse_rfc3339(status["lastSuccessfulTime"]) <= clock.now()


def test_replace_deletes_the_running_job(core: ServerCore, clock: ManualClock, manager: ControllerManager) -> None:
    core.create(CRONJOB, cron_job("* * * * *", concurrencyPolicy="Replace"))
    step_and_sync(clock, manager, 60)
    (first,) = jobs(core)
    step_and_sync(clock, manager, 60)
    names = [j["metadata"]["name"] for j in jobs(core) if not j["metadata"].get("deletionTimestamp")]
    assert first["metadata"]["name"] not in names and len(names) == 1


def test_time_zone(core: ServerCore, clock: ManualClock, manager: ControllerManager) -> None:
    zone = ZoneInfo("America/New_York")
    local = datetime.fromtimestamp(clock.now(), zone)
    at = local.replace(hour=17, minute=30, second=0, microsecond=0)
    if at.timestamp() <= clock.now():
        at += timedelta(days=1)
    core.create(CRONJOB, cron_job("30 17 * * *", timeZone="America/New_York"))
    while clock.now() < at.timestamp() - 1:
        step_and_sync(clock, manager, min(300.0, at.timestamp() - 1 - clock.now()))
        assert jobs(core) == []
    while not jobs(core):
        step_and_sync(clock, manager, 60)
    (job,) = jobs(core)
    assert scheduled(job) == at.timestamp()
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == at.isoformat()
    assert datetime.fromtimestamp(scheduled(job), UTC).hour != 17  # it was 17:30 in New York, not in UTC


@pytest.mark.parametrize(("late", "runs"), [(20, True), (40, False)], ids=["within-deadline", "missed"])
def test_starting_deadline(core: ServerCore, clock: ManualClock, manager: ControllerManager, late: int,
                           runs: bool) -> None:
    core.create(CRONJOB, cron_job("* * * * *", startingDeadlineSeconds=30, suspend=True))
    step_and_sync(clock, manager, 300)
    assert jobs(core) == []
    # Resume `late` seconds after a scheduled minute: it runs only within the 30s deadline.
    step_and_sync(clock, manager, (60 - clock.now() % 60) + late)
    current = core.get(CRONJOB, "default", "report")
    core.update(CRONJOB, {**current, "spec": {**current["spec"], "suspend": False}})
    step_and_sync(clock, manager, 0)
    assert len(jobs(core)) == (1 if runs else 0)


def test_history_limit_keeps_the_newest_successes(core: ServerCore, clock: ManualClock,
                                                  manager: ControllerManager) -> None:
    core.create(CRONJOB, cron_job("* * * * *", successfulJobsHistoryLimit=1))
    for _ in range(3):
        step_and_sync(clock, manager, 60)
        for job in jobs(core):
            if not job.get("status", {}).get("conditions"):
                complete(core, job)
    step_and_sync(clock, manager, 1)

    def finished_kept() -> list[str]:
        return [j["metadata"]["name"] for j in jobs(core) if j.get("status", {}).get("conditions")
                and not j["metadata"].get("deletionTimestamp")]

    # The last completion reaches the controller through its Job informer (an update enqueues the CronJob),
    # which may deliver it after the reconcile above: wait for the history to settle, then check which is kept.
    wait_for(lambda: len(finished_kept()) == 1, 10, "the history limit to leave one finished Job")
    assert finished_kept() == [f"report-{int(clock.now()) // 60}"]


@pytest.mark.parametrize(("spec", "field"), [
    ({"schedule": "61 * * * *"}, "spec.schedule"),
    ({"schedule": "TZ=UTC * * * * *"}, "spec.schedule"),
    ({"schedule": "* * * * *", "timeZone": "Mars/Olympus"}, "spec.timeZone"),
    ({"schedule": "* * * * *", "concurrencyPolicy": "Sometimes"}, "spec.concurrencyPolicy"),
], ids=["minute-range", "tz-in-schedule", "unknown-zone", "policy"])
def test_invalid_cron_jobs_are_422(core: ServerCore, spec: Obj, field: str) -> None:
    body = cron_job(str(spec.pop("schedule")), **spec)
    with pytest.raises(errors.StatusError) as e:
        core.create(CRONJOB, body)
    assert e.value.code == 422 and field in {c.field for c in e.value.causes}
