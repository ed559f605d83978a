"""The server core's batch of a preemption's victim writes: DisruptionTarget, then the delete, per victim.

``ServerCore.update_status_and_delete_many`` carries out what upstream's
``prepareCandidate`` does for each victim (``PatchPodStatus`` with
DisruptionTarget=True / PreemptionByScheduler, then ``DeletePod``), for all of
them in a few store round trips, and answers each victim's outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from emulator.api import errors
from emulator.api.kinds import NODE, POD
from emulator.clock import ManualClock, rfc3339
from emulator.scheduler.api_writer import ApiWriter
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.queue import SchedulingQueue
from emulator.scheduler.scheduler import SchedulerOptions
from emulator.server.core import ServerCore
from tests import builders as b

CONDITION = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
             "message": "default-scheduler: preempting to accommodate a higher priority pod"}


def disruption(status: dict[str, Any]) -> dict[str, Any] | None:
    """upstream ``UpdatePodCondition``: add the condition unless the pod has it already."""
    conditions = list(status.get("conditions") or ())
    if any(c.get("type") == CONDITION["type"] and c.get("reason") == CONDITION["reason"] for c in conditions):
        return None
    return {**status, "conditions": [*conditions, dict(CONDITION)]}


def has_condition(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "DisruptionTarget" and c.get("reason") == "PreemptionByScheduler"
               for c in (pod.get("status") or {}).get("conditions") or ())


def victim(core: ServerCore, name: str, **spec: Any) -> dict[str, Any]:
    return core.create(POD, b.pod(name, node="n1", **spec))


# Each case: set a victim up, return its (namespace, name, uid) and what should become of it:
# "deleted", "marked <grace>" (graceful deletion started now), "terminating" (a deletion already under way
# is left as it was), or an HTTP code.
def _grace_0(core: ServerCore, name: str) -> tuple[tuple[str, str, str], str]:
    return ("default", name, victim(core, name, terminationGracePeriodSeconds=0)["metadata"]["uid"]), "deleted"


def _graceful(core: ServerCore, name: str) -> tuple[tuple[str, str, str], str]:
    return ("default", name, victim(core, name)["metadata"]["uid"]), "marked 30"  # the default grace period


def _has_condition(core: ServerCore, name: str) -> tuple[tuple[str, str, str], str]:
    pod = victim(core, name, terminationGracePeriodSeconds=0)
    core.update_status(POD, {**pod, "status": {**pod["status"], "conditions": [dict(CONDITION)]}})
    return ("default", name, pod["metadata"]["uid"]), "deleted"


def _terminating(core: ServerCore, name: str) -> tuple[tuple[str, str, str], str]:
    uid = victim(core, name)["metadata"]["uid"]
    core.delete(POD, "default", name)  # graceful: 30 s, as the batch would ask again
    return ("default", name, uid), "terminating"


def _finalizer(core: ServerCore, name: str) -> tuple[tuple[str, str, str], str]:
    pod = victim(core, name, terminationGracePeriodSeconds=0)
    core.update(POD, {**pod, "metadata": {**pod["metadata"], "finalizers": ["example.com/keep"]}})
    return ("default", name, pod["metadata"]["uid"]), "marked 0"


def _gone(core: ServerCore, name: str) -> tuple[tuple[str, str, str], str]:
    uid = victim(core, name)["metadata"]["uid"]
    core.delete(POD, "default", name, grace_period_seconds=0)
    return ("default", name, uid), "404"


def _recreated(core: ServerCore, name: str) -> tuple[tuple[str, str, str], str]:
    uid = victim(core, name)["metadata"]["uid"]
    core.delete(POD, "default", name, grace_period_seconds=0)
    victim(core, name)
    return ("default", name, uid), "409"


@pytest.mark.parametrize("setup", [_grace_0, _graceful, _has_condition, _terminating, _finalizer, _gone, _recreated],
                         ids=["grace-0-deleted", "graceful-marked", "condition-already-there", "already-terminating",
                              "finalizer-holds-it", "already-gone", "recreated-same-name"])
def test_each_victim_gets_its_own_outcome(core: ServerCore, clock: ManualClock,
                                          setup: Callable[[ServerCore, str], Any]) -> None:
    """One batch of the case's victim and a plain grace-0 one: each ends as PatchPodStatus + DeletePod leave it."""
    target, want = setup(core, "v")
    plain = victim(core, "plain", terminationGracePeriodSeconds=0)
    before = core.store.current_rv()
    results = core.update_status_and_delete_many(POD, [target, ("default", "plain", plain["metadata"]["uid"])],
                                                 disruption)
    assert len(results) == 2
    # The plain victim: its condition written first (a MODIFIED event), then deleted with it.
    assert not isinstance(results[1], errors.StatusError) and has_condition(results[1])
    events = [(e.type, e.object["metadata"]["name"], has_condition(e.object))
              for e in core.store.watch(POD, before).next_batch(timeout=1)]
    assert [e for e in events if e[1] == "plain"] == [("MODIFIED", "plain", True), ("DELETED", "plain", True)]
    result = results[0]
    if want in ("404", "409"):
        assert isinstance(result, errors.StatusError) and result.code == int(want)
        assert not [e for e in events if e[1] == "v"]  # nothing written to it
        if want == "409":  # the pod of that name now is another one, untouched
            stored = core.get(POD, "default", "v")
            assert not has_condition(stored) and not stored["metadata"].get("deletionTimestamp")
        return
    assert not isinstance(result, errors.StatusError) and has_condition(result)
    if want == "deleted":
        with pytest.raises(errors.StatusError) as exc:
            core.get(POD, "default", "v")
        assert exc.value.code == 404
        assert ("DELETED", "v", True) in events
        return
    stored = core.get(POD, "default", "v")
    assert has_condition(stored)
    if want == "terminating":
        # The deletion asked for before (30 s from then) stands: asking again with the same grace changes nothing.
        assert stored["metadata"]["deletionTimestamp"] == rfc3339(clock.now() + 30)
        return
    grace = int(want.split()[1])
    assert stored["metadata"]["deletionGracePeriodSeconds"] == grace
    assert stored["metadata"]["deletionTimestamp"] == rfc3339(clock.now() + grace)


def test_a_status_write_that_loses_a_race_is_made_again_on_the_new_object(core: ServerCore) -> None:
    """Another writer changes the victim between the batch's read and its write: the batch's write is stale,
    so the condition is added again on top of the other writer's change (a patch), then the pod is deleted."""
    pod = victim(core, "v", terminationGracePeriodSeconds=0)
    calls = []

    def racing(status: dict[str, Any]) -> dict[str, Any] | None:
        calls.append(dict(status))
        if len(calls) == 1:  # the first time: someone else writes the pod meanwhile
            current = core.get(POD, "default", "v")
            core.update_status(POD, {**current, "status": {**current["status"], "message": "someone else"}})
        return disruption(status)

    before = core.store.current_rv()
    [result] = core.update_status_and_delete_many(POD, [("default", "v", pod["metadata"]["uid"])], racing)
    assert len(calls) == 2 and calls[1].get("message") == "someone else"
    assert not isinstance(result, errors.StatusError)
    assert has_condition(result) and result["status"]["message"] == "someone else"
    deleted = [e.object for e in core.store.watch(POD, before).next_batch(timeout=1) if e.type == "DELETED"]
    assert len(deleted) == 1 and has_condition(deleted[0]) and deleted[0]["status"]["message"] == "someone else"


def test_batches_work_after_redis_lost_the_commit_script(core: ServerCore) -> None:
    """Pipelined commits call the script by its digest; a Redis that lost it (a restart without its script cache)
    answers NOSCRIPT to every call, runs none, and the batch is sent again once the script is loaded."""
    pods = [victim(core, f"v{i}", terminationGracePeriodSeconds=0) for i in range(2)]
    core.store.redis.script_flush()
    results = core.update_status_and_delete_many(POD, [("default", p["metadata"]["name"], p["metadata"]["uid"])
                                                       for p in pods], disruption)
    assert all(not isinstance(r, errors.StatusError) and has_condition(r) for r in results)
    assert [p["metadata"]["name"] for p in core.list(POD, "default").items] == []


def _hmget_calls(core: ServerCore) -> int:
    """How many HMGETs (the store's reads of many objects) this Redis has served."""
    return int(core.store.redis.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0))


def _copy_current(core: ServerCore, pod: dict[str, Any]) -> dict[str, Any] | None:
    return pod


def _copy_stale(core: ServerCore, pod: dict[str, Any]) -> dict[str, Any] | None:
    current = core.get(POD, "default", "v")  # another writer changes the pod after the caller's copy
    core.update_status(POD, {**current, "status": {**current["status"], "message": "someone else"}})
    return pod


def _copy_gone(core: ServerCore, pod: dict[str, Any]) -> dict[str, Any] | None:
    core.delete(POD, "default", "v", grace_period_seconds=0)
    return pod


def _copy_recreated(core: ServerCore, pod: dict[str, Any]) -> dict[str, Any] | None:
    core.delete(POD, "default", "v", grace_period_seconds=0)
    victim(core, "v", terminationGracePeriodSeconds=0)
    return pod


def _no_copy(core: ServerCore, pod: dict[str, Any]) -> dict[str, Any] | None:
    return None


@pytest.mark.parametrize(("setup", "want", "reads"), [
    (_copy_current, "deleted", 0),  # the copy is what is stored: written and deleted without a read
    (_copy_stale, "deleted, kept the other write", 1),  # its write is stale: read, written again on the new pod
    (_copy_gone, "404", 0),  # the write on the copy answers 404 itself
    (_copy_recreated, "409", 1),  # the write is stale; the read finds another uid
    (_no_copy, "deleted", 1),
], ids=["current-copy", "stale-copy", "gone-since-copy", "recreated-since-copy", "no-copy"])
def test_the_callers_copy_spares_the_read_and_changes_no_outcome(core: ServerCore, setup: Any, want: str,
                                                                 reads: int) -> None:
    """``known``: the caller's copy (the scheduler's informer) stands for the stored victim in the first,
    resourceVersion-checked write; whatever happened since, each victim ends as without it."""
    pod = victim(core, "v", terminationGracePeriodSeconds=0)
    uid = pod["metadata"]["uid"]
    known = setup(core, pod)
    before = _hmget_calls(core)
    [result] = core.update_status_and_delete_many(POD, [("default", "v", uid)], disruption, known=[known])
    assert _hmget_calls(core) - before == reads
    if want in ("404", "409"):
        assert isinstance(result, errors.StatusError) and result.code == int(want)
        if want == "409":
            stored = core.get(POD, "default", "v")
            assert not has_condition(stored) and stored["metadata"]["uid"] != uid
        return
    assert not isinstance(result, errors.StatusError) and has_condition(result)
    assert (result["status"].get("message") == "someone else") == want.endswith("other write")
    with pytest.raises(errors.StatusError) as exc:
        core.get(POD, "default", "v")
    assert exc.value.code == 404


# ------------------------------------------------------------------ patch_status_many
def test_patch_status_many_gives_each_object_its_outcome(core: ServerCore) -> None:
    """Written, unchanged (the change says so: no write), gone (404) and re-created (409), in one batch."""
    written = victim(core, "written")
    same = victim(core, "same")
    gone_uid = victim(core, "gone")["metadata"]["uid"]
    core.delete(POD, "default", "gone", grace_period_seconds=0)
    old_uid = victim(core, "recreated")["metadata"]["uid"]
    core.delete(POD, "default", "recreated", grace_period_seconds=0)
    victim(core, "recreated")
    before = core.store.current_rv()
    targets = [("default", "written", written["metadata"]["uid"]), ("default", "same", same["metadata"]["uid"]),
               ("default", "gone", gone_uid), ("default", "recreated", old_uid)]
    results = core.patch_status_many(POD, targets, lambda i, current: (
        {**current["status"], "nominatedNodeName": "n2"} if i == 0 else None))
    assert results[0]["status"]["nominatedNodeName"] == "n2"  # type: ignore[index]
    assert core.get(POD, "default", "written")["status"]["nominatedNodeName"] == "n2"
    assert results[1] == core.get(POD, "default", "same")  # as stored: nothing written
    assert [(r.code if isinstance(r, errors.StatusError) else None) for r in results] == [None, None, 404, 409]
    modified = [e.object["metadata"]["name"] for e in core.store.watch(POD, before).next_batch(timeout=1)]
    assert modified == ["written"]


# ------------------------------------------------------------------ the API writer's batch of failures
def _writer(core: ServerCore, clock: ManualClock) -> ApiWriter:
    return ApiWriter(core, name="kemu-scheduler-0", clock=clock, options=SchedulerOptions(),
                     queue=SchedulingQueue(lambda a, b: True, clock=clock, name="test"))


MESSAGE = "0/3 nodes are available: 3 Insufficient cpu."


def _pending(core: ServerCore, name: str) -> PodInfo:
    return PodInfo(core.create(POD, b.pod(name)))


def _bind(core: ServerCore, info: PodInfo) -> None:
    core.create(NODE, b.node("n2"))
    core.bind("default", info.name, "n2")


@pytest.mark.parametrize(("setup", "want", "reads"), [
    (lambda core, info: None, "nominated", 0),  # PodScheduled=False and the nomination, and the event
    (_bind, "bound", 1),  # bound since the scheduler saw it: the failure is history (no write, no event)
    (lambda core, info: core.delete(POD, "default", info.name), "gone", 0),  # no event
], ids=["nominated", "bound-meanwhile", "gone"])
def test_failures_written_in_one_batch_as_one_by_one(core: ServerCore, clock: ManualClock, setup: Any,
                                                     want: str, reads: int) -> None:
    """A batch of failures (the case's pod between two plain ones) ends as ``_write_failure`` one by one would
    leave each: the nomination written unless the pod was bound or deleted since the scheduler saw it, and a
    FailedScheduling event only for the pods still pending. The scheduler's copies are written on directly:
    the store is read (one HMGET) only when one of them is stale."""
    writer = _writer(core, clock)
    infos = [_pending(core, name) for name in ("first", "case", "last")]
    setup(core, infos[1])
    before = _hmget_calls(core)
    events = writer._write_failures([(info, "default-scheduler", "Unschedulable", MESSAGE, "n1", False)
                                     for info in infos])
    assert _hmget_calls(core) - before == reads
    assert sorted(e["involvedObject"]["name"] for e in events) == sorted(
        ["first", "last"] + (["case"] if want == "nominated" else []))
    assert all(e["reason"] == "FailedScheduling" and e["message"] == MESSAGE for e in events)
    for name in ("first", "last") if want != "nominated" else ("first", "case", "last"):
        status = core.get(POD, "default", name)["status"]
        assert status["nominatedNodeName"] == "n1"
        [scheduled] = [c for c in status["conditions"] if c["type"] == "PodScheduled"]
        assert (scheduled["status"], scheduled["reason"], scheduled["message"]) == ("False", "Unschedulable",
                                                                                     MESSAGE)
    if want == "bound":
        pod = core.get(POD, "default", "case")
        assert pod["spec"]["nodeName"] == "n2" and "nominatedNodeName" not in pod["status"]
    if want == "gone":
        assert "case" not in [p["metadata"]["name"] for p in core.list(POD, "default").items]


def test_the_later_of_two_nominations_of_a_pod_in_one_batch_wins(core: ServerCore, clock: ManualClock) -> None:
    writer = _writer(core, clock)
    info = _pending(core, "p")
    other = _pending(core, "q")
    writer._write_failures([(info, "default-scheduler", "Unschedulable", MESSAGE, "n1", False),
                            (other, "default-scheduler", "Unschedulable", MESSAGE, "n3", False),
                            (info, "default-scheduler", "Unschedulable", MESSAGE, "n2", False)])
    assert core.get(POD, "default", "p")["status"]["nominatedNodeName"] == "n2"
    assert core.get(POD, "default", "q")["status"]["nominatedNodeName"] == "n3"


# ------------------------------------------------------------------ the preemptor requeued once its preemption is done
@pytest.mark.parametrize(("rejected_by", "held", "where"), [
    ("NodeResourcesFit", True, "backoff"),  # a victim's deletion may make room: requeued (still backing off)
    ("NodeName", True, "unschedulable"),  # no deletion helps a pod pinned to another node: it stays
    # Not attempted during its preemption: the writer moves nothing (the victims' own events do, as upstream).
    ("NodeResourcesFit", False, "unschedulable"),
], ids=["fit-requeued", "nodename-stays", "not-held-stays"])
def test_a_preemptor_held_while_its_victims_went_is_requeued_when_the_preemption_is_done(
        core: ServerCore, clock: ManualClock, rejected_by: str, held: bool, where: str) -> None:
    """The preemptor was attempted while its preemption was still being carried out (held: no second preemption)
    and its victims' deletion events reached the queue before it was back: it went to the unschedulable pool with
    no event left to move it. Upstream deletes the last victim after the preemptor left its preempting map; the
    writer makes that deletion's move once it is done."""
    writer = _writer(core, clock)
    queue = writer.queue
    core.create(NODE, b.node("n1"))
    victims = [victim(core, name, terminationGracePeriodSeconds=0) for name in ("v1", "v2")]
    preemptor = _pending(core, "preemptor")
    queue.add(preemptor.pod, preemptor)
    qp = queue.pop(timeout=0)
    assert qp is not None
    cycle = queue.scheduling_cycle
    qp.unschedulable_plugins.add(rejected_by)
    with writer._preempting_lock:
        writer._preempting.add(preemptor.key)  # what ``preempt`` records before handing the work to a worker
    if held:
        assert writer.is_preempting(preemptor.key)  # the scheduler's attempt meanwhile, which holds it
    assert queue.add_unschedulable_if_not_present(qp, cycle) == "unschedulable"
    writer._preempt((preemptor, "n1", [PodInfo(v) for v in victims], "default-scheduler"))
    assert [p["metadata"]["name"] for p in core.list(POD, "default").items] == ["preemptor"]
    entry = queue.get(preemptor.key)
    assert entry is not None and entry[0] == where
