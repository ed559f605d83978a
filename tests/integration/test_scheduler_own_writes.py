"""The scheduler hands its own writes' results to its informers' reader (``Multiplexer.remember``).

A write's watch event comes back to the writer's informers; when the reader
holds the write's result for that resourceVersion it delivers it instead of
decoding the entry. That is only right when the result *is* what the stream
entry holds: checked here against the stream itself, for every victim outcome
of a preemption (upstream ``prepareCandidate``: DisruptionTarget, then the
delete) and for the nominations (upstream ``updatePod``), and end to end with
two scheduler replicas sharing one store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from emulator.api.kinds import NODE, POD, PRIORITYCLASS
from emulator.clock import ManualClock
from emulator.informers import SharedInformerFactory
from emulator.informers.multiplexer import Multiplexer
from emulator.scheduler.api_writer import ApiWriter
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.queue import SchedulingQueue
from emulator.scheduler.scheduler import Scheduler, SchedulerOptions
from emulator.server.core import ServerCore
from emulator.store import codec
from tests import builders as b
from tests.integration.test_preemption_writes import (
    _finalizer,
    _gone,
    _grace_0,
    _graceful,
    _has_condition,
    _recreated,
    _terminating,
)
from tests.waiting import wait_for


def _writer(core: ServerCore, clock: ManualClock, remembered: list[dict[str, Any]]) -> ApiWriter:
    writer = ApiWriter(core, name="kemu-scheduler-0", clock=clock, options=SchedulerOptions(),
                       queue=SchedulingQueue(lambda a, b: True, clock=clock, name="test"))
    writer.remember = remembered.append
    return writer


def _stream_entry(core: ServerCore, rv: int) -> tuple[str, dict[str, Any]]:
    """The pod stream's entry at ``rv``, decoded as a watch reader decodes it."""
    [(_, fields)] = core.store.redis.xrange(core.store.stream_key(POD), str(rv), str(rv))
    return fields[b"t"].decode(), codec.decode(fields[b"o"])


def _rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def _assert_entries_match(core: ServerCore, remembered: list[dict[str, Any]]) -> None:
    for obj in remembered:
        _, entry = _stream_entry(core, _rv(obj))
        assert entry == obj


# The victims' cases of test_preemption_writes, and what the stream's entry at the remembered version is.
@pytest.mark.parametrize(("setup", "entry_type"), [
    (_grace_0, "DELETED"), (_graceful, "MODIFIED"), (_has_condition, "DELETED"), (_terminating, "MODIFIED"),
    (_finalizer, "MODIFIED"), (_gone, None), (_recreated, None),
], ids=["grace-0-deleted", "graceful-marked", "condition-already-there", "already-terminating",
        "finalizer-holds-it", "already-gone", "recreated-same-name"])
def test_a_victims_outcome_is_what_its_watch_event_carries(core: ServerCore, clock: ManualClock,
                                                           setup: Callable[[ServerCore, str], Any],
                                                           entry_type: str | None) -> None:
    """Each victim's outcome handed to the reader is, field for field, the stream's entry at its version (None:
    a 404 or 409 outcome, nothing handed over)."""
    core.create(NODE, b.node("n1"))
    (_, name, uid), _ = setup(core, "v")
    plain = core.create(POD, b.pod("plain", node="n1", terminationGracePeriodSeconds=0))
    preemptor = PodInfo(core.create(POD, b.pod("preemptor")))
    remembered: list[dict[str, Any]] = []
    writer = _writer(core, clock, remembered)
    stored = {p["metadata"]["name"]: p for p in core.list(POD, "default").items}
    current = stored.get(name) if stored.get(name, {}).get("metadata", {}).get("uid") == uid else None
    victim = PodInfo(current if current is not None else {**b.pod(name, node="n1"),
                                                         "metadata": {"name": name, "namespace": "default",
                                                                      "uid": uid, "resourceVersion": "1"}})
    writer._execute_preemption(preemptor, "n1", [victim, PodInfo(plain)], "default-scheduler")
    by_name = {obj["metadata"]["name"]: obj for obj in remembered}
    assert sorted(by_name) == sorted(["plain"] + ([name] if entry_type and not current_deleting(current) else []))
    _assert_entries_match(core, remembered)
    assert _stream_entry(core, _rv(by_name["plain"]))[0] == "DELETED"
    if name in by_name:
        assert _stream_entry(core, _rv(by_name[name]))[0] == entry_type


def current_deleting(pod: dict[str, Any] | None) -> bool:
    """A victim whose graceful deletion has started gets no call at all (upstream ``prepareCandidate``)."""
    return bool(pod and pod["metadata"].get("deletionTimestamp"))


@pytest.mark.parametrize("batch", [1, 3], ids=["one-by-one", "batch"])
def test_a_written_nomination_is_what_its_watch_event_carries(core: ServerCore, clock: ManualClock,
                                                              batch: int) -> None:
    """The nominations written (PodScheduled=False and ``nominatedNodeName``), one alone or a batch, are handed
    over as the stream holds them; a pod bound meanwhile gets no write and nothing is handed over for it."""
    infos = [PodInfo(core.create(POD, b.pod(f"p{i}"))) for i in range(batch)]
    if batch > 1:
        core.create(NODE, b.node("n2"))
        core.bind("default", "p1", "n2")  # bound since the scheduler saw it: no write
    remembered: list[dict[str, Any]] = []
    writer = _writer(core, clock, remembered)
    writer._write_failures([(info, "default-scheduler", "Unschedulable", "0/1 nodes are available.", "n1", False)
                            for info in infos])
    assert sorted(o["metadata"]["name"] for o in remembered) == [f"p{i}" for i in range(batch) if i != 1 or batch == 1]
    assert all(o["status"]["nominatedNodeName"] == "n1" for o in remembered)
    _assert_entries_match(core, remembered)


def test_two_replicas_preempting_read_their_own_writes_without_decoding(core: ServerCore, clock: ManualClock) -> None:
    """Two replicas over one store, each with its own informers: a high-priority pod preempts low-priority ones.
    Its replica's reader takes the nomination and the victims' deletions from what it wrote (own hits), and
    both replicas' caches end as the store holds the pods."""
    core.create(NODE, b.sched_node("n1", cpu="2"))
    core.create(PRIORITYCLASS, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                "metadata": {"name": "high"}, "value": 10})
    for i in range(2):
        core.create(POD, b.req_pod(f"low-{i}", "1", node="n1", terminationGracePeriodSeconds=0))
    factories, schedulers = [], []
    try:
        for replica in range(2):
            # A multiplexer each, as two scheduler processes have (one shared would take either's writes as own).
            factory = SharedInformerFactory(core.store, multiplexer=Multiplexer(core.store))
            scheduler = Scheduler(core, clock=clock, options=SchedulerOptions(
                name=f"kemu-scheduler-{replica}", replica=replica, replicas=2, record_events=False, seed=replica))
            scheduler.attach(factory)
            factory.start()
            factories.append(factory)
            schedulers.append(scheduler)
        wait_for(lambda: all(s.has_synced() for s in schedulers), 10, "informers synced")
        for s in schedulers:
            s.start()
        # Counted before the preemptor exists: its replica may nominate it before the next line runs.
        # What each reader holds as its process's own writes before the preemptor exists.
        before = {id(s): set(factories[i].multiplexer._own) for i, s in enumerate(schedulers)}
        core.create(POD, b.req_pod("high", "2", priority_class="high"))
        owner = next(s for s in schedulers if s.responsible(core.get(POD, "default", "high")))

        def bound() -> bool:
            return bool(core.get(POD, "default", "high")["spec"].get("nodeName"))

        wait_for(bound, 20, "the preemptor bound", tick=lambda: clock.advance(1.0))
        mux = factories[schedulers.index(owner)].multiplexer
        # Its nomination, the two victims' deletions and its bind, handed to its reader as written (DisruptionTarget
        # writes of the victims are the batch's own, not handed back). Whether the reader then takes each entry as
        # remembered is a race (it may read an entry before the writer's reply arrives, and decodes it then), so
        # the test asserts what the writer hands over, not the reader's hit count.
        wait_for(lambda: len(set(mux._own) - before[id(owner)]) >= 4, 10, "the owner's writes handed to its reader")
        store_pods = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in core.list(POD, "default").items}
        assert store_pods == {"high": "n1"}
        for s in schedulers:
            wait_for(lambda s=s: not s.check_consistency(), 10, f"{s.name}'s cache matches the store")
    finally:
        for s in schedulers:
            s.stop()
        for f in factories:
            f.shutdown()
            f.multiplexer.stop()
