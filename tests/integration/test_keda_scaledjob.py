"""KEDA ScaledJobs: Jobs in proportion to the backlog of a real Redis list, each pod a batch that exits 0.

A ScaledJob on a ``redis`` trigger with listLength 5 and 30 items: the first poll sees
queueLength 30, so ``maxScale = min(ceil(30 / 5), maxReplicaCount 10) = 6`` and the default
strategy creates ``maxScale - running (0) = 6`` Jobs. Each Job's pod is a queue worker
(1 item/s) that runs 5 s and exits 0, so the Jobs consume the list and complete; polls
after that see an empty list and create nothing; finished Jobs beyond
``successfulJobsHistoryLimit`` (2) are deleted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from emulator.api.kinds import JOB, SCALEDJOB
from emulator.clock import ManualClock
from emulator.controllers.keda.scaledjob import effective_max_scale
from emulator.controllers.manager import ControllerManager
from emulator.kubelet import queueworker
from emulator.kubelet.shard import KubeletShard
from emulator.server.core import ServerCore
from tests.integration.test_keda_operator import events, shard, world  # noqa: F401 (the shard fixture)
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

Obj = dict[str, Any]
LIST, ITEMS, PER_JOB, MAX = "sj-jobs", 30, 5, 10


def scaled_job(**spec: Any) -> Obj:
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledJob",
            "metadata": {"name": "batch", "namespace": "default"},
            "spec": {"pollingInterval": 30, "maxReplicaCount": MAX, "successfulJobsHistoryLimit": 2,
                     "jobTargetRef": {"backoffLimit": 0, "template": {
                         "metadata": {"annotations": {
                             "kemu.io/profile": "queue-worker", "kemu.io/queue": LIST,
                             "kemu.io/items-per-second": "1", "kemu.io/startup-delay": "0s",
                             "kemu.io/duration": f"{PER_JOB}s", "kemu.io/exit-code": "0"}},
                         "spec": {"restartPolicy": "Never", "containers": [
                             {"name": "worker", "image": "worker:1",
                              "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}},
                     "triggers": [{"type": "redis", "metadata": {"listName": LIST, "listLength": str(PER_JOB)}}],
                     **spec}}


def jobs(core: ServerCore) -> list[Obj]:
    return list(core.list(JOB, "default").items)


def complete(job: Obj) -> bool:
    return any(c["type"] == "Complete" and c["status"] == "True" for c in (job.get("status") or {}).get("conditions")
               or [])


def test_scaled_job_creates_jobs_for_the_backlog_and_they_complete(
        core: ServerCore, clock: ManualClock, shard: KubeletShard,  # noqa: F811
        start_manager: Callable[..., ControllerManager]) -> None:
    redis = core.store.redis
    redis.delete(LIST)
    redis.rpush(LIST, *(f"job-item-{i}" for i in range(ITEMS)))
    start_manager("job", "keda-scaledjob")
    core.create(SCALEDJOB, scaled_job())
    expected = min(math.ceil(ITEMS / PER_JOB), MAX) - 0
    wait_for(lambda: len(jobs(core)) == expected, 20, f"{expected} Jobs from the first poll")
    wait_for(lambda: f"Created {expected} jobs" in [e["message"] for e in events(core, "KEDAJobsCreated")], 10,
             "the KEDAJobsCreated event")
    step = world(core, clock, shard)
    wait_for(lambda: redis.llen(LIST) == 0 and all(complete(j) for j in jobs(core)), 120,
             "the Jobs draining the list and completing", tick=step)
    assert queueworker.consumed(redis, core.store.config.prefix)[LIST] == ITEMS
    assert sorted(queueworker.done_items(redis, core.store.config.prefix, LIST)) == \
        sorted(f"job-item-{i}" for i in range(ITEMS))
    # Later polls: nothing waits, no new Jobs; finished Jobs beyond the history limit go.
    wait_for(lambda: len(jobs(core)) == 2, 60, "the successful-jobs history limit (2)", tick=step)
    so = core.get(SCALEDJOB, "default", "batch")
    active = next(c for c in so["status"]["conditions"] if c["type"] == "Active")
    assert active["reason"] == "ScalerNotActive"


STRATEGIES = [
    # (strategy, maxScale, running, pending, max) -> jobs to create, worked out from scale_jobs.go
    ({"strategy": "default"}, 6, 2, 0, 10, 6 - 2),
    ({"strategy": "custom", "customScalingQueueLengthDeduction": 1, "customScalingRunningJobPercentage": "0.5"},
     6, 4, 0, 10, min(6 - 1 - int(4 * 0.5), 10)),
    ({"strategy": "accurate"}, 6, 2, 1, 10, 6 - 1),
    ({"strategy": "accurate"}, 9, 4, 1, 10, 10 - 4),
    ({"strategy": "eager"}, 3, 2, 1, 10, min(10 - 2 - 1, 3)),
    ({"strategy": "eager"}, 9, 4, 3, 10, min(10 - 4 - 3, 9)),
]


@pytest.mark.parametrize(("strategy", "max_scale", "running", "pending", "max_replicas", "expected"), STRATEGIES,
                         ids=["default", "custom", "accurate-under-max", "accurate-over-max", "eager-backlog-bound",
                              "eager-slots-bound"])
def test_scaling_strategies(strategy: Obj, max_scale: int, running: int, pending: int, max_replicas: int,
                            expected: int) -> None:
    assert effective_max_scale(strategy, max_scale, running, pending, max_replicas) == expected
