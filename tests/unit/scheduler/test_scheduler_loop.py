"""The scheduling loop against an in-memory client: ownership, bind conflicts, PostFilter execution, Permit.

The integration tests run the same loop against the real store; here a fake client makes the store's
answers (a 409 on the first bind, say) exact and the clock manual.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import REGISTRY

from emulator.api import errors
from emulator.api.kinds import EVENT, POD
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.scheduler import in_tree_registry
from emulator.scheduler.api_writer import PREEMPTION_WORKERS
from emulator.scheduler.config import parse_configuration
from emulator.scheduler.framework.interface import Code, CycleState, NominatingInfo, PostFilterResult, Status
from emulator.scheduler.framework.types import FitError, PodInfo
from emulator.scheduler.scheduler import Scheduler, SchedulerOptions, owner_replica
from tests.builders import req_pod, sched_node
from tests.waiting import wait_for


class FakeClient:
    """Pods in a dict; ``refuse`` maps pod name -> the 409 messages its next binds get."""

    def __init__(self) -> None:
        self.pods: dict[str, Obj] = {}
        self.events: list[Obj] = []
        self.deleted: list[str] = []
        self.refuse: dict[str, list[str]] = {}
        self.refuse_delete: set[str] = set()  # pod names whose deletion fails with a 500
        self.binds = 0
        self.lock = threading.Lock()

    def add(self, pod: Obj) -> Obj:
        pod["metadata"].setdefault("uid", f"uid-{pod['metadata']['name']}")
        pod["metadata"]["resourceVersion"] = "1"
        self.pods[pod["metadata"]["name"]] = pod
        return pod

    def bind(self, namespace: str, name: str, node_name: str, *, annotations: Any = None, uid: str = "") -> Obj:
        with self.lock:
            self.binds += 1
            refusals = self.refuse.get(name)
            if refusals:
                raise errors.conflict("pods/binding", name, refusals.pop(0))
            pod = self.pods[name]
            if pod["spec"].get("nodeName"):
                raise errors.conflict("pods/binding", name, f'pod {name} is already assigned to node "x"')
            pod = {**pod, "spec": {**pod["spec"], "nodeName": node_name}}
            self.pods[name] = pod
            return pod

    def get(self, kind: Any, namespace: str | None, name: str) -> Obj:
        if name not in self.pods:
            raise errors.not_found("pods", name)
        return self.pods[name]

    def list(self, kind: Any, namespace: str | None = None) -> Any:
        @dataclass
        class Result:
            items: list[Obj]

        return Result(list(self.pods.values()) if kind is POD else [])

    def update_status(self, kind: Any, body: Obj) -> Obj:
        with self.lock:
            name = body["metadata"]["name"]
            pod = {**self.pods[name], "status": body["status"]}
            self.pods[name] = pod
            return pod

    def create_many(self, kind: Any, bodies: list[Obj]) -> list[Obj]:
        assert kind is EVENT
        with self.lock:
            self.events.extend(bodies)
        return bodies

    def delete(self, kind: Any, namespace: str | None, name: str, **options: Any) -> Obj:
        with self.lock:
            if name in self.refuse_delete:
                raise errors.StatusError(500, "InternalError", f"deleting {name} failed")
            self.deleted.append(name)
            return self.pods.pop(name)


def _scheduler(client: FakeClient, doc: dict[str, Any] | None = None, registry: Any = None,
               **options: Any) -> Scheduler:
    registry = registry if registry is not None else in_tree_registry()
    config = parse_configuration(doc or {}, validate_registry=registry)
    name = options.pop("name", f"test-{id(client)}")
    sched = Scheduler(client, config, registry=registry, clock=ManualClock(),
                      options=SchedulerOptions(name=name, bind_linger=0, **options))
    for i in range(2):
        sched.on_node_add(sched_node(f"n{i}", cpu="2", memory="8Gi"))
    return sched


def _pending(client: FakeClient, name: str, cpu: str = "1", **spec: Any) -> Obj:
    return client.add(req_pod(name, cpu, "1Gi", **spec))


def test_replicas_know_each_others_nominations():
    # Upstream's one queue knows every nominated pod; kemu's replicas each own a share of the pods, so each keeps
    # the nominations of the others' pods (from the pod informer) for its Filter.
    client = FakeClient()
    replicas = [_scheduler(client, replica=i, replicas=2, name=f"nom-{i}") for i in range(2)]
    pod = _pending(client, "preemptor")
    owner = owner_replica(pod, 2)
    other = replicas[1 - owner]
    nominated = {**pod, "status": {"nominatedNodeName": "n1"}}
    other.on_pod_update(pod, nominated)
    assert [p.key for p in other.queue.nominated_pods_by_node().get("n1", ())] == ["default/preemptor"]
    assert other.queue.get("default/preemptor") is None  # known as nominated, not queued
    bound = {**nominated, "spec": {**nominated["spec"], "nodeName": "n1"}}
    other.on_pod_update(nominated, bound)
    assert other.queue.nominated_pods_by_node() == {}
    other.on_pod_add(nominated)
    other.on_pod_delete(nominated)
    assert other.queue.nominated_pods_by_node() == {}
    # A pod for a scheduler name no replica serves is nobody's nomination here.
    stranger = {**_pending(client, "stranger", schedulerName="someone-else"), "status": {"nominatedNodeName": "n0"}}
    other.on_pod_add(stranger)
    assert other.queue.nominated_pods_by_node() == {}


def test_unknown_scheduler_name_is_left_alone():
    client = FakeClient()
    sched = _scheduler(client)
    sched.on_pod_add(_pending(client, "mine"))
    sched.on_pod_add(_pending(client, "theirs", schedulerName="someone-else"))
    assert sched.queue.get("default/mine") is not None and sched.queue.get("default/theirs") is None


def test_replicas_split_the_pods_and_each_pod_has_one_owner():
    client = FakeClient()
    replicas = [_scheduler(client, replica=i, replicas=3, name=f"split-{i}") for i in range(3)]
    pods = [_pending(client, f"p{i}") for i in range(60)]
    for pod in pods:
        for sched in replicas:
            sched.on_pod_add(pod)
    owners = [[sched.queue.get(f"default/p{i}") is not None for sched in replicas] for i in range(60)]
    assert all(sum(row) == 1 for row in owners)
    assert all(any(row[r] for row in owners) for r in range(3))  # every replica got a share
    assert [row.index(True) for row in owners] == [owner_replica(p, 3) for p in pods]


def test_bind_conflict_forgets_requeues_with_backoff_and_retries_to_success():
    client = FakeClient()
    sched = _scheduler(client, name="conflict-test")
    pod = _pending(client, "p")
    client.refuse["p"] = ["node n0 has no room for the pod: Insufficient cpu"]
    sched.on_pod_add(pod)
    sched.start()
    try:
        wait_for(lambda: sched.snapshot_stats()["conflicts"] == 1, 10, "a conflict")
        wait_for(lambda: sched.queue.counts()["backoff"] == 1, 10, "the pod to back off")
        assert sched.cache.get("default/p") is None  # the assumption was forgotten
        sched.clock.advance(1.0)  # first backoff: 1 s
        wait_for(lambda: client.pods["p"]["spec"].get("nodeName") is not None, 10, "the retry to bind")
        wait_for(lambda: sched.snapshot_stats()["scheduled"] == 1, 10, "one pod scheduled")
        assert sched.wait_for_idle(5)
    finally:
        sched.stop()
    assert client.binds == 2
    assert REGISTRY.get_sample_value("scheduler_bind_conflicts_total", {"scheduler": "conflict-test"}) == 1
    assert REGISTRY.get_sample_value("scheduler_assumed_forgotten_total",
                                     {"scheduler": "conflict-test", "reason": "bind_conflict"}) == 1
    assert REGISTRY.get_sample_value("scheduler_pod_scheduling_attempts_count", {"scheduler": "conflict-test"}) == 1
    assert REGISTRY.get_sample_value("scheduler_pod_scheduling_attempts_sum", {"scheduler": "conflict-test"}) == 2
    reasons = [e["reason"] for e in client.events]
    assert reasons.count("Scheduled") == 1 and reasons.count("FailedScheduling") == 1


def test_pod_bound_by_someone_else_is_dropped_not_retried():
    client = FakeClient()
    sched = _scheduler(client)
    pod = _pending(client, "p")
    client.refuse["p"] = ['pod p is already assigned to node "n1"']
    sched.on_pod_add(pod)
    sched.start()
    try:
        wait_for(lambda: sched.snapshot_stats()["dropped"] == 1, 10, "the drop")
        assert len(sched.queue) == 0 and sched.cache.get("default/p") is None
    finally:
        sched.stop()


def test_unschedulable_pod_gets_condition_and_event_once():
    client = FakeClient()
    sched = _scheduler(client)
    pod = _pending(client, "big", cpu="3")
    sched.on_pod_add(pod)
    sched.start()
    try:
        wait_for(lambda: any(e["reason"] == "FailedScheduling" for e in client.events), 10, "FailedScheduling")
        cond = next(c for c in client.pods["big"]["status"]["conditions"] if c["type"] == "PodScheduled")
        assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
        assert cond["message"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
        # Failing the same way again writes nothing new (upstream updatePod only writes a changed condition).
        sched.queue.activate([client.pods["big"]])
        wait_for(lambda: sched.snapshot_stats()["unschedulable"] == 2, 10, "two unschedulable attempts")
        assert sched.wait_for_idle(5)
        assert sum(e["reason"] == "FailedScheduling" for e in client.events) == 1
    finally:
        sched.stop()


# -- PostFilter execution and Permit ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Result(PostFilterResult):
    victims: tuple[PodInfo, ...] = ()


class _EvictEverything:
    """A PostFilter that nominates n0 and names every pod there as a victim (the loop must carry it out)."""

    name = "EvictEverything"

    def post_filter(self, state: Any, pod: PodInfo, snapshot: Any, node_to_status: Any) -> Any:
        index = snapshot.index_of("n0")
        victims = tuple(snapshot.pods_on(index))
        return _Result(NominatingInfo("n0", override=True), victims), Status(Code.SUCCESS)


class _HoldAtPermit:
    name = "HoldAtPermit"

    def permit(self, state: Any, pod: PodInfo, node: str) -> tuple[Status, float]:
        return Status(Code.WAIT), 30.0


@contextlib.contextmanager
def _held_at_permit() -> Iterator[tuple[FakeClient, Any, Obj]]:
    """A started scheduler whose HoldAtPermit plugin makes every pod wait, once the pending pod "held" waits."""
    client = FakeClient()
    registry = in_tree_registry()
    registry.register("HoldAtPermit", lambda args, handle: _HoldAtPermit())
    sched = _scheduler(client, {"profiles": [{"plugins": {"permit": {"enabled": [{"name": "HoldAtPermit"}]}}}]},
                       registry)
    pod = _pending(client, "held")
    sched.on_pod_add(pod)
    sched.start()
    try:
        wait_for(lambda: sched.get_waiting_pod(pod["metadata"]["uid"]) is not None, 10, "the pod to wait at Permit")
        yield client, sched, pod
    finally:
        sched.stop()


def test_post_filter_result_is_executed_victims_deleted_and_pod_nominated():
    client = FakeClient()
    registry = in_tree_registry()
    registry.register("EvictEverything", lambda args, handle: _EvictEverything())
    sched = _scheduler(client, {"profiles": [{"plugins": {"postFilter": {
        "disabled": [{"name": "*"}], "enabled": [{"name": "EvictEverything"}]}}}]}, registry)
    victim = client.add(req_pod("victim", "2", "1Gi", node="n0"))
    sched.on_pod_add(victim)
    sched.on_pod_add(client.add(req_pod("filler", "2", "1Gi", node="n1")))
    sched.on_pod_add(_pending(client, "preemptor", cpu="2"))
    sched.start()
    try:
        wait_for(lambda: "victim" in client.deleted, 10, "the victim's deletion")
        wait_for(lambda: client.pods["preemptor"]["status"].get("nominatedNodeName") == "n0", 10,
                 "the preemptor nominated to n0")
        assert "filler" not in client.deleted
        wait_for(lambda: any(e["reason"] == "Preempted" and e["involvedObject"]["name"] == "victim"
                             for e in client.events), 10, "the Preempted event")
        assert sched.queue.nominated_node(client.pods["preemptor"]) == "n0"
        assert REGISTRY.get_sample_value("scheduler_preemption_victims_sum", {"scheduler": sched.name}) == 1
    finally:
        sched.stop()


def test_permit_wait_holds_the_pod_until_allowed():
    with _held_at_permit() as (client, sched, pod):
        assert client.binds == 0 and sched.cache.is_assumed("default/held")
        fwk = sched.frameworks["default-scheduler"]
        seen: list[str] = []
        fwk.iterate_over_waiting_pods(lambda wp: seen.append(wp.info.name))
        assert seen == ["held"]
        sched.get_waiting_pod(pod["metadata"]["uid"]).allow("HoldAtPermit")  # type: ignore[union-attr]
        wait_for(lambda: client.pods["held"]["spec"].get("nodeName") is not None, 10, "the bind")


def test_permit_rejection_unreserves_and_requeues():
    with _held_at_permit() as (client, sched, pod):
        assert sched.frameworks["default-scheduler"].reject_waiting_pod(pod["metadata"]["uid"])
        # Rejected without a plugin name (upstream RejectWaitingPod): nothing to wait for, so it backs off.
        wait_for(lambda: sched.queue.counts()["backoff"] == 1, 10, "the rejected pod back in the queue")
        wait_for(lambda: sched.cache.get("default/held") is None, 10, "the assumption forgotten")
        assert client.binds == 0


def test_metrics_carry_upstream_names_and_the_scheduler_label():
    client = FakeClient()
    sched = _scheduler(client, name="metrics-test", plugin_metrics_sample_percent=100)
    sched.on_pod_add(_pending(client, "p"))
    sched.on_pod_add(_pending(client, "too-big", cpu="9"))
    sched.start()
    try:
        wait_for(lambda: sched.snapshot_stats()["attempts"] == 2, 10, "two attempts")
        assert sched.wait_for_idle(5)
    finally:
        sched.stop()
    get = REGISTRY.get_sample_value
    labels = {"profile": "default-scheduler", "scheduler": "metrics-test"}
    assert get("scheduler_schedule_attempts_total", {"result": "scheduled", **labels}) == 1
    assert get("scheduler_schedule_attempts_total", {"result": "unschedulable", **labels}) == 1
    assert get("scheduler_scheduling_attempt_duration_seconds_count", {"result": "scheduled", **labels}) == 1
    assert get("scheduler_pod_scheduling_sli_duration_seconds_count", {"attempts": "1",
                                                                       "scheduler": "metrics-test"}) == 1
    assert get("scheduler_framework_extension_point_duration_seconds_count",
               {"extension_point": "Filter", "status": "Success", **labels}) == 1
    assert get("scheduler_framework_extension_point_duration_seconds_count",
               {"extension_point": "Bind", "status": "Success", **labels}) == 1
    assert get("scheduler_plugin_execution_duration_seconds_count",
               {"plugin": "NodeResourcesFit", "extension_point": "Filter", "status": "Success",
                "scheduler": "metrics-test"}) == 2
    assert get("scheduler_preemption_attempts_total", {"scheduler": "metrics-test"}) == 1


def test_pending_pods_gauge_is_read_at_scrape_time():
    client = FakeClient()
    sched = _scheduler(client, name="gauge-test")
    for i in range(3):
        sched.on_pod_add(_pending(client, f"p{i}"))
    assert REGISTRY.get_sample_value("scheduler_pending_pods", {"queue": "active", "scheduler": "gauge-test"}) == 3
    assert REGISTRY.get_sample_value("scheduler_cache_size", {"type": "nodes", "scheduler": "gauge-test"}) is not None


@pytest.mark.parametrize("bad", [{"replica": 2, "replicas": 2}, {"replicas": 0}, {"bind_workers": -1}])
def test_bad_options_are_refused(bad):
    with pytest.raises(ValueError):
        SchedulerOptions(**bad)


def test_node_events_reach_cache_and_queue():
    client = FakeClient()
    sched = _scheduler(client)
    sched.on_pod_add(_pending(client, "big", cpu="4"))
    assert sched.schedule_next()  # no 4-cpu node yet: unschedulable
    assert sched.queue.counts()["unschedulable"] == 1
    sched.clock.advance(5)  # past its backoff
    sched.on_node_add(sched_node("huge", cpu="8", memory="16Gi"))
    assert sched.queue.counts()["active"] == 1  # NodeAdd moved it back
    assert sched.schedule_next()
    assert sched.cache.get("default/big").node == "huge"  # type: ignore[union-attr]


def test_inline_binding_on_the_scheduling_thread():
    client = FakeClient()
    sched = _scheduler(client, bind_workers=0)
    for i in range(5):
        sched.on_pod_add(_pending(client, f"p{i}", cpu="500m"))
    sched.start()
    try:
        wait_for(lambda: all(client.pods[f"p{i}"]["spec"].get("nodeName") for i in range(5)), 10, "all binds")
        assert sched.wait_for_idle(5) and sched.snapshot_stats()["scheduled"] == 5
    finally:
        sched.stop()


def test_a_pod_running_preemption_does_not_preempt_again_until_its_victims_are_handled():
    # Upstream async preemption's IsPodRunningPreemption: the API writer may lag behind the scheduling thread.
    client = FakeClient()
    sched = _scheduler(client)
    preemptor = PodInfo(_pending(client, "preemptor", cpu="2"))
    victim = client.add(req_pod("victim", "2", "1Gi", node="n0"))
    sched.api.preemption(preemptor, "n0", (PodInfo(victim),), "default-scheduler")
    assert sched.api.is_preempting("default/preemptor") and not sched.api.is_preempting("default/victim")
    sched.api.close()
    sched.api.run()  # carries out the queued writes, then returns (closed)
    assert "victim" in client.deleted and not sched.api.is_preempting("default/preemptor")


def _preempts(sched: Scheduler, pod: Obj) -> list[str]:
    """One scheduling cycle's failure path for ``pod`` on the scheduler's cache: the victims it would evict."""
    info = PodInfo(pod)
    fwk = sched.profile_for(pod)
    assert fwk is not None
    state = CycleState()
    with sched.cache.cycle() as snapshot:
        fit = fwk.schedule_pod(state, info, snapshot)
        assert isinstance(fit, FitError)
        _, victims = sched._post_filter(fwk, state, info, snapshot, fit)
    return [v.name for v in victims]


def _terminating(pod: Obj) -> Obj:
    """``pod`` as the API writer's writes leave it: DisruptionTarget=True (PreemptionByScheduler), being deleted."""
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    return {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2024-01-01T00:00:00Z"},
            "status": {**(pod.get("status") or {}), "conditions": [condition]}}


# What the scheduler's cache shows of the first preemption's victim when the preemptor is tried again, after the
# API writer carried that preemption out; and whether the preemptor may preempt again (and whom).
@pytest.mark.parametrize(("seen", "delete_fails", "again"), [
    # The informer has not delivered the victim's deletion yet: preempting again would evict a second pod for
    # room already being freed (the double preemption the benchmarks showed).
    ("running", False, []),
    # Terminating by preemption on the nominated node: upstream PodEligibleToPreemptOthers says wait.
    ("terminating", False, []),
    # Gone, and a lower-priority pod took the room meanwhile: nothing is awaited, the pod preempts that one.
    ("gone-room-taken", False, ["squatter"]),
    # The victim's deletion failed: it is not awaited (it would never go), the pod may preempt it again.
    ("running", True, ["victim"]),
], ids=["victim-not-yet-terminating-in-cache", "victim-terminating", "victim-gone-room-retaken",
        "victim-deletion-failed"])
def test_a_preemptor_waits_for_its_victims_to_be_seen_going_before_preempting_again(seen, delete_fails, again):
    client = FakeClient()
    sched = _scheduler(client)
    sched.on_pod_add(client.add(req_pod("filler", "2", "1Gi", node="n1", priority=1000)))  # never a victim
    victim = client.add(req_pod("victim", "2", "1Gi", node="n0", priority=0))
    sched.on_pod_add(victim)
    preemptor = _pending(client, "preemptor", cpu="2", priority=100)
    assert _preempts(sched, preemptor) == ["victim"]  # the first preemption: n0's victim
    if delete_fails:
        client.refuse_delete.add("victim")
    sched.api.preemption(PodInfo(preemptor), "n0", (PodInfo(victim),), "default-scheduler")
    sched.api.close()
    sched.api.run()  # the writes are done (and the queue closed); the informer has delivered none of them
    assert not sched.api.is_preempting("default/preemptor")
    nominated = {**preemptor, "status": {"nominatedNodeName": "n0"}}
    if seen == "terminating":
        sched.on_pod_update(victim, _terminating(victim))
    elif seen == "gone-room-taken":
        sched.on_pod_delete(_terminating(victim))
        sched.on_pod_add(client.add(req_pod("squatter", "2", "1Gi", node="n0", priority=0)))
    assert _preempts(sched, nominated) == again


class _OrderedClient(FakeClient):
    """Records the order of status writes and deletes: ("status", pod, nominatedNodeName) / ("delete", pod)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, ...]] = []

    def update_status(self, kind: Any, body: Obj) -> Obj:
        self.writes.append(("status", body["metadata"]["name"], body["status"].get("nominatedNodeName", "")))
        return super().update_status(kind, body)

    def delete(self, kind: Any, namespace: str | None, name: str, **options: Any) -> Obj:
        self.writes.append(("delete", name))
        return super().delete(kind, namespace, name, **options)


# Writes queued before a pod's new nomination; the nomination must be written first (a competing replica learns of
# it only then) and stay: an older failure of the same pod that clears its nomination is superseded.
@pytest.mark.parametrize("older", ["own-failure-clearing-nomination", "another-pods-preemption"])
def test_a_nomination_is_written_before_older_writes_and_is_not_undone_by_them(older):
    client = _OrderedClient()
    sched = _scheduler(client)
    pod = PodInfo(_pending(client, "preemptor", cpu="2", priority=100))
    if older == "own-failure-clearing-nomination":
        sched.api.failure(pod, "default-scheduler", "Unschedulable", "no room", nominated=None, clear_nominated=True)
    else:
        other = PodInfo(_pending(client, "other", cpu="2", priority=100))
        victim = client.add(req_pod("victim", "2", "1Gi", node="n1", priority=0))
        sched.api.preemption(other, "n1", (PodInfo(victim),), "default-scheduler")
    sched.api.failure(pod, "default-scheduler", "Unschedulable", "preempting", nominated="n0", clear_nominated=False)
    sched.api.close()
    sched.api.run()
    assert client.writes[0] == ("status", "preemptor", "n0")
    assert client.pods["preemptor"]["status"]["nominatedNodeName"] == "n0"
    if older == "another-pods-preemption":
        assert ("delete", "victim") in client.writes[1:]


@pytest.mark.parametrize(("others_victim", "again"), [
    # Another preemptor's victim on this pod's nominated node, evicted but not yet terminating in the cache:
    # upstream's PodEligibleToPreemptOthers (a lower-priority pod terminating by preemption there) says wait.
    ("awaited", []),
    # Nobody is evicting it: the pod may preempt it.
    ("not-awaited", ["v2"]),
], ids=["another-preemptions-victim-on-nominated-node", "no-preemption-in-flight"])
def test_a_nominated_pod_waits_for_other_preemptions_on_its_node(others_victim, again):
    client = FakeClient()
    sched = _scheduler(client)
    sched.on_pod_add(client.add(req_pod("filler", "2", "1Gi", node="n1", priority=1000)))  # never a victim
    sched.on_pod_add(client.add(req_pod("v2", "1", "1Gi", node="n0", priority=0)))  # v1, this pod's victim, is gone
    other = PodInfo(_pending(client, "other", cpu="1", priority=100))
    sched.queue.add_nominated_pod(other, "n0")  # nominated to n0 too: n0's free cpu is held for it
    if others_victim == "awaited":
        sched.api.preemption(other, "n0", (PodInfo(client.pods["v2"]),), "default-scheduler")
    pod = {**_pending(client, "preemptor", cpu="1", priority=100), "status": {"nominatedNodeName": "n0"}}
    assert _preempts(sched, pod) == again


# Preemptions queued at once, fewer or more than the API writer's workers carry out together: every victim is
# deleted, each only after its own preemptor's nomination is written (upstream writes the nomination before
# PrepareCandidate's deletions), each gets its Preempted event, and no preemptor is left "running preemption".
@pytest.mark.parametrize("preemptors", [1, PREEMPTION_WORKERS + 2], ids=["one", "more-than-the-workers"])
def test_preemptions_carried_out_together_delete_each_victim_after_its_preemptors_nomination(preemptors):
    client = _OrderedClient()
    sched = _scheduler(client)
    for i in range(preemptors):
        pod = PodInfo(_pending(client, f"preemptor-{i}", cpu="2", priority=100))
        victims = [PodInfo(client.add(req_pod(f"victim-{i}-{k}", "1", "1Gi", node="n0", priority=0)))
                   for k in range(2)]
        sched.api.failure(pod, "default-scheduler", "Unschedulable", "preempting", nominated="n0",
                          clear_nominated=False)
        sched.api.preemption(pod, "n0", victims, "default-scheduler")
    sched.api.close()
    sched.api.run()  # the workers finish before run returns
    for i in range(preemptors):
        nominated = client.writes.index(("status", f"preemptor-{i}", "n0"))
        for k in range(2):
            assert client.writes.index(("delete", f"victim-{i}-{k}")) > nominated
        assert not sched.api.is_preempting(f"default/preemptor-{i}")
    assert sorted(e["involvedObject"]["name"] for e in client.events if e["reason"] == "Preempted") == sorted(
        f"victim-{i}-{k}" for i in range(preemptors) for k in range(2))
    assert sched.api.idle()


class _BlockingDeletes(FakeClient):
    """Deletes wait until ``release`` is set; ``deleting`` is set once one has started."""

    def __init__(self) -> None:
        super().__init__()
        self.deleting = threading.Event()
        self.release = threading.Event()

    def delete(self, kind: Any, namespace: str | None, name: str, **options: Any) -> Obj:
        self.deleting.set()
        assert self.release.wait(10)
        return super().delete(kind, namespace, name, **options)


def test_the_api_writer_is_not_idle_while_a_preemption_is_being_carried_out():
    client = _BlockingDeletes()
    sched = _scheduler(client)
    pod = PodInfo(_pending(client, "preemptor", cpu="2", priority=100))
    victim = PodInfo(client.add(req_pod("victim", "2", "1Gi", node="n0", priority=0)))
    writer = threading.Thread(target=sched.api.run, daemon=True)
    writer.start()
    try:
        sched.api.preemption(pod, "n0", (victim,), "default-scheduler")
        assert client.deleting.wait(10)  # on a worker now, the writer's queue empty
        assert not sched.api.idle() and sched.api.is_preempting("default/preemptor")
    finally:
        client.release.set()
    wait_for(sched.api.idle, 10, "the preemption carried out")
    assert client.deleted == ["victim"] and not sched.api.is_preempting("default/preemptor")
    sched.api.close()
    writer.join(10)
