"""The server core's batch of deletes by name: each pod ends as its own ``DELETE`` would leave it.

``ServerCore.delete_named_many`` is what a load driver uses to delete a batch of pods (client-go
sends one DELETE each). Each pod is planned as :meth:`ServerCore.delete` plans it - upstream's pod
strategy ``CheckGracefulDelete``: a bound, unfinished pod gets ``deletionTimestamp`` = now + its
``terminationGracePeriodSeconds``; an unbound or finished one goes at once; finalizers keep it,
marked; a graceful deletion under way is not extended - with one read for the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from emulator.api import errors
from emulator.api.kinds import POD
from emulator.clock import ManualClock, rfc3339
from emulator.server.core import ServerCore
from loadgen.drivers import StoreSink
from loadgen.plan import DELETE_POD
from tests import builders as b


def _bound(core: ServerCore, name: str) -> str:
    core.create(POD, b.pod(name, node="n1"))
    return "marked 30"  # the pod spec's default terminationGracePeriodSeconds


def _bound_grace_5(core: ServerCore, name: str) -> str:
    core.create(POD, b.pod(name, node="n1", terminationGracePeriodSeconds=5))
    return "marked 5"


def _bound_grace_0(core: ServerCore, name: str) -> str:
    core.create(POD, b.pod(name, node="n1", terminationGracePeriodSeconds=0))
    return "deleted"


def _unbound(core: ServerCore, name: str) -> str:
    core.create(POD, b.pod(name))
    return "deleted"  # never scheduled: nothing to stop


def _finished(core: ServerCore, name: str) -> str:
    pod = core.create(POD, b.pod(name, node="n1"))
    core.update_status(POD, {**pod, "status": {**pod["status"], "phase": "Succeeded"}})
    return "deleted"


def _finalizer(core: ServerCore, name: str) -> str:
    pod = core.create(POD, b.pod(name))
    core.update(POD, {**pod, "metadata": {**pod["metadata"], "finalizers": ["example.com/keep"]}})
    return "marked 0"  # it would go at once, but its finalizer holds it


def _terminating(core: ServerCore, name: str) -> str:
    core.create(POD, b.pod(name, node="n1"))
    core.delete(POD, "default", name, grace_period_seconds=10)
    return "marked 10"  # asking again with the longer default grace changes nothing


def _gone(core: ServerCore, name: str) -> str:
    return "404"


@pytest.mark.parametrize("setup", [_bound, _bound_grace_5, _bound_grace_0, _unbound, _finished, _finalizer,
                                   _terminating, _gone],
                         ids=["bound-default-grace", "bound-grace-5", "bound-grace-0", "unbound", "finished",
                              "finalizer-holds-it", "already-terminating", "gone"])
def test_each_pod_ends_as_its_own_delete_leaves_it(core: ServerCore, clock: ManualClock,
                                                     setup: Callable[[ServerCore, str], str]) -> None:
    """A batch of the case's pod and a plain bound one: each gets its own outcome, the plain one marked."""
    want = setup(core, "v")
    core.create(POD, b.pod("plain", node="n1"))
    clock.advance(3)  # the deletion's timestamp is taken now, not when the pods were made
    results = core.delete_named_many(POD, [("default", "v"), ("default", "plain")])
    plain = core.get(POD, "default", "plain")
    assert plain["metadata"]["deletionTimestamp"] == rfc3339(clock.now() + 30)
    assert results[1] == plain
    result = results[0]
    if want == "404":
        assert isinstance(result, errors.StatusError) and result.code == 404
        return
    assert not isinstance(result, errors.StatusError)
    if want == "deleted":
        with pytest.raises(errors.StatusError) as exc:
            core.get(POD, "default", "v")
        assert exc.value.code == 404
        return
    stored = core.get(POD, "default", "v")
    assert result == stored
    grace = int(want.split()[1])
    assert stored["metadata"]["deletionGracePeriodSeconds"] == grace
    # The deletion's clock: from the batch for a new mark, from the first delete for one under way.
    since = clock.now() - 3 if setup is _terminating else clock.now()
    assert stored["metadata"]["deletionTimestamp"] == rfc3339(since + grace)


def _hmget_calls(core: ServerCore) -> int:
    return int(core.store.redis.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0))


def test_a_batch_reads_once_and_writes_each_pod_once(core: ServerCore) -> None:
    """Ten pods: one read of them all, then one mark each (ten MODIFIED events, no other write)."""
    names = [f"p{i}" for i in range(10)]
    for name in names:
        core.create(POD, b.pod(name, node="n1"))
    reads, before = _hmget_calls(core), core.store.current_rv()
    results = core.delete_named_many(POD, [("default", n) for n in names])
    assert _hmget_calls(core) - reads == 1
    events = core.store.watch(POD, before).next_batch(timeout=1)
    assert sorted((e.type, e.object["metadata"]["name"]) for e in events) == sorted(
        ("MODIFIED", n) for n in names)
    assert all(not isinstance(r, errors.StatusError) and r["metadata"]["deletionTimestamp"] for r in results)


def test_a_pod_written_between_the_read_and_the_mark_is_deleted_on_its_own(
        core: ServerCore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch's mark loses its race (resourceVersion changed): the pod goes through ``delete``, which plans
    against the new object, so the other writer's change is kept and the pod is still marked."""
    core.create(POD, b.pod("v", node="n1"))
    real_get_many = core.store.get_many

    def racing_get_many(kind: Any, names: list[tuple[str | None, str]]) -> list[Any]:
        out = real_get_many(kind, names)
        current = core.get(POD, "default", "v")  # another writer, after the batch read the pod
        core.update_status(POD, {**current, "status": {**current["status"], "message": "someone else"}})
        return out

    # The real read, then a real write by someone else: the race a concurrent writer would make.
    monkeypatch.setattr(core.store, "get_many", racing_get_many)
    [result] = core.delete_named_many(POD, [("default", "v")])
    monkeypatch.undo()
    assert not isinstance(result, errors.StatusError)
    stored = core.get(POD, "default", "v")
    assert stored == result
    assert stored["status"]["message"] == "someone else"
    assert stored["metadata"]["deletionTimestamp"] == rfc3339(clock.now() + 30)


def test_the_store_drivers_delete_batch_reports_each_pod(core: ServerCore, clock: ManualClock) -> None:
    """The ``store`` load driver's sink deletes a batch of pods through the batch: a bound pod is marked (its
    kubelet finishes it), an unbound one is gone, a missing one is the batch's one failure, with the API's
    message."""
    core.create(POD, b.pod("bound", node="n1"))
    core.create(POD, b.pod("pending"))
    errs = StoreSink(core).run(DELETE_POD, [("default", "bound", None), ("default", "pending", None),
                                            ("default", "missing", None)])
    assert errs[:2] == [None, None]
    assert errs[2] is not None and "missing" in errs[2] and "not found" in errs[2]
    assert core.get(POD, "default", "bound")["metadata"]["deletionTimestamp"] == rfc3339(clock.now() + 30)
    assert [p["metadata"]["name"] for p in core.list(POD, "default").items] == ["bound"]
