"""The Job and TTL-after-finished controllers against a real Redis, on a manual cluster clock.

The test plays the kubelet: it moves the Job's pods to Running, Succeeded or Failed by hand.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from emulator.api import errors
from emulator.api.kinds import JOB, POD
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager
from emulator.server.core import ServerCore
from tests import builders as b
from tests.waiting import wait_for
from tests.workloads import retry_on_conflict

pytestmark = pytest.mark.integration


@pytest.fixture
def manager(start_manager: Callable[..., ControllerManager]) -> ControllerManager:
    return start_manager("job", "ttl-after-finished")


def job(name: str = "pi", *, completions: int | None = 3, parallelism: int = 2, backoff: int = 6,
        restart: str = "Never", deadline: int | None = None, ttl: int | None = None) -> Obj:
    spec: Obj = {"parallelism": parallelism, "backoffLimit": backoff,
                 "template": {"spec": {"restartPolicy": restart, "containers": [b.container()]}},
                 **b.not_none(completions=completions, activeDeadlineSeconds=deadline, ttlSecondsAfterFinished=ttl)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def live_pods(core: ServerCore, name: str = "pi") -> list[Obj]:
    return [p for p in core.list(POD, "default", label_selector=f"job-name={name}").items
            if p["status"].get("phase") not in ("Succeeded", "Failed") and not p["metadata"].get("deletionTimestamp")]


def finish(core: ServerCore, pod: Obj, phase: str) -> None:
    core.update_status(POD, {**pod, "status": {**pod["status"], "phase": phase}})


def reconcile_now(core: ServerCore, manager: ControllerManager, controller: str, name: str = "pi") -> None:
    """Have ``controller`` reconcile Job ``name`` at the current cluster time, and wait until it has.

    A "not yet" check after moving the clock must see a reconcile that ran at the new time: first every
    reconcile in progress (started before the move) finishes, then a touch of the Job's annotations
    makes the controller look again.
    """
    ctrl = manager.controllers()[controller]
    queue = ctrl.queue  # type: ignore[attr-defined]
    wait_for(lambda: len(queue) == 0 and queue.unfinished_work_seconds() == 0, 10, f"{controller} to be idle")
    before = ctrl.reconciles  # type: ignore[attr-defined]

    def touch() -> Obj:
        # An idle queue does not mean the controller is done: an informer may still deliver its
        # pods' events and the status write they cause can land between this read and write.
        current = core.get(JOB, "default", name)
        touched = {**current["metadata"].get("annotations", {}), "test/touch": str(before)}
        return core.update(JOB, {**current, "metadata": {**current["metadata"], "annotations": touched}})

    retry_on_conflict(touch)
    wait_for(lambda: ctrl.reconciles > before, 10, f"a {controller} reconcile")  # type: ignore[attr-defined]


def conditions(core: ServerCore, name: str = "pi") -> dict[str, str]:
    status = core.get(JOB, "default", name).get("status") or {}
    return {c["type"]: c["reason"] for c in status.get("conditions") or [] if c["status"] == "True"}


def test_job_runs_parallelism_pods_until_completions_then_completes(core: ServerCore,
                                                                      manager: ControllerManager) -> None:
    created = core.create(JOB, job())
    assert created["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid":
                                                           created["metadata"]["uid"]}}
    pods = wait_for(lambda: len(live_pods(core)) == 2 and live_pods(core), 10, "two pods (parallelism)")
    labels = pods[0]["metadata"]["labels"]
    assert labels["job-name"] == labels["batch.kubernetes.io/job-name"] == "pi"
    assert labels["controller-uid"] == created["metadata"]["uid"]
    assert pods[0]["metadata"]["ownerReferences"][0]["kind"] == "Job"
    for pod in pods:
        finish(core, pod, "Succeeded")
    # Two of three done: only one more pod is wanted, not two.
    last = wait_for(lambda: core.get(JOB, "default", "pi")["status"].get("succeeded") == 2 and live_pods(core),
                    10, "the third pod")
    assert len(last) == 1
    assert "Complete" not in conditions(core)
    finish(core, last[0], "Succeeded")
    wait_for(lambda: conditions(core) == {"SuccessCriteriaMet": "CompletionsReached", "Complete": "CompletionsReached"},
             10, "Complete")
    status = core.get(JOB, "default", "pi")["status"]
    assert (status["succeeded"], status["active"], status["failed"]) == (3, 0, 0)
    assert status["completionTime"] and status["startTime"]
    assert len(core.list(POD, "default").items) == 3


@pytest.mark.parametrize(("restart", "backoff", "failures_to_fail"), [
    ("Never", 0, 1),
    ("Never", 2, 3),
])
def test_backoff_limit_fails_the_job(core: ServerCore, manager: ControllerManager, restart: str, backoff: int,
                                     failures_to_fail: int) -> None:
    core.create(JOB, job(completions=1, parallelism=1, backoff=backoff, restart=restart))
    for i in range(failures_to_fail):
        pod = wait_for(lambda: live_pods(core), 10, f"pod {i}")[0]
        assert "Failed" not in conditions(core)
        finish(core, pod, "Failed")
    wait_for(lambda: conditions(core).get("Failed") == "BackoffLimitExceeded", 10, "Failed condition")
    assert conditions(core)["FailureTarget"] == "BackoffLimitExceeded"
    status = core.get(JOB, "default", "pi")["status"]
    assert status["failed"] == failures_to_fail and "completionTime" not in status
    assert not live_pods(core)


def test_on_failure_counts_container_restarts(core: ServerCore, manager: ControllerManager) -> None:
    core.create(JOB, job(completions=1, parallelism=1, backoff=2, restart="OnFailure"))
    pod = wait_for(lambda: live_pods(core), 10, "a pod")[0]
    core.update_status(POD, {**pod, "status": {**pod["status"], "phase": "Running", "containerStatuses": [
        {"name": "app", "ready": False, "restartCount": 2, "image": "x", "state": {"waiting": {}}}]}})
    wait_for(lambda: conditions(core).get("Failed") == "BackoffLimitExceeded", 10, "Failed by restarts")


def test_active_deadline_fails_the_job_and_deletes_its_pods(core: ServerCore, manager: ControllerManager,
                                                           clock: ManualClock) -> None:
    core.create(JOB, job(completions=5, parallelism=2, deadline=60))
    wait_for(lambda: len(live_pods(core)) == 2, 10, "pods")
    clock.advance(59)
    reconcile_now(core, manager, "job")
    assert "Failed" not in conditions(core)  # not yet
    clock.advance(2)
    wait_for(lambda: conditions(core).get("Failed") == "DeadlineExceeded", 10, "DeadlineExceeded")
    assert not live_pods(core)
    assert core.get(JOB, "default", "pi")["status"]["conditions"][-1]["message"] == \
        "Job was active longer than specified deadline"


def test_ttl_after_finished_deletes_the_job_on_the_cluster_clock(core: ServerCore, manager: ControllerManager,
                                                                 clock: ManualClock) -> None:
    core.create(JOB, job(completions=1, parallelism=1, ttl=100))
    finish(core, wait_for(lambda: live_pods(core), 10, "a pod")[0], "Succeeded")
    wait_for(lambda: "Complete" in conditions(core), 10, "Complete")
    clock.advance(99)
    reconcile_now(core, manager, "ttl-after-finished")
    assert core.get(JOB, "default", "pi")  # not yet

    def gone() -> bool:
        try:
            core.get(JOB, "default", "pi")
        except errors.StatusError as e:
            return e.code == 404
        return False

    clock.advance(2)
    wait_for(gone, 10, "the Job deleted after its TTL")
