"""Delete propagation (Background / Foreground / Orphan) and the garbage collector, against a real Redis.

The collector is driven pass by pass with ``sync_once()``; no threads, no sleeps.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from emulator.api import errors
from emulator.api.kinds import CONFIGMAP, DEPLOYMENT, POD, REPLICASET, Kind
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.cluster import LocalCluster
from emulator.config import Config
from emulator.controllers.garbagecollector import GarbageCollector
from emulator.server.core import ServerCore
from emulator.store.store import Store
from tests import workloads as w
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def core(redis_url: str) -> ServerCore:
    c = ServerCore(Store.connect(redis_url), clock=ManualClock())
    c.bootstrap()
    return c


def read_without_processing(gc: GarbageCollector, count: int = 100) -> int:
    """Take up to ``count`` new queue entries and do nothing with them (what a collector that crashes does)."""
    gc.ensure_group()
    reply = gc.redis.xreadgroup(gc.group, gc.consumer, {gc.queue: ">"}, count=count)
    return len(reply[0][1]) if reply else 0


def gc_for(core: ServerCore, **kw: Any) -> GarbageCollector:
    kw.setdefault("sweep_interval", None)  # prove the queue does the work unless a test wants the sweep
    return GarbageCollector(core, **kw)


def exists(core: ServerCore, kind: Kind, name: str, namespace: str | None = "default") -> bool:
    try:
        core.get(kind, namespace, name)
    except errors.StatusError as e:
        assert e.code == 404
        return False
    return True


def converge(gc: GarbageCollector, done: Callable[[], bool], passes: int = 20) -> int:
    """Run collector passes until ``done()``; returns how many it took (fails after ``passes``)."""
    for n in range(1, passes + 1):
        gc.sync_once()
        if done():
            return n
    raise AssertionError(f"not converged after {passes} collector passes")


def queue_is_empty(core: ServerCore, gc: GarbageCollector) -> bool:
    pending = core.store.redis.xpending(core.store.gc_queue_key, gc.group)["pending"]
    return core.store.redis.xlen(core.store.gc_queue_key) == 0 and pending == 0


# ------------------------------------------------------------- options
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"propagation_policy": "Sideways"},
     'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": supported values: '
     '"Foreground", "Background", "Orphan", "nil"'),
    ({"propagation_policy": "Orphan", "orphan_dependents": True},
     'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Orphan": orphanDependents and '
     "deletionPropagation cannot be both set"),
])
def test_invalid_delete_options_are_422_and_delete_nothing(core: ServerCore, kwargs: Obj, message: str) -> None:
    core.create(CONFIGMAP, {"metadata": {"name": "cm"}})
    with pytest.raises(errors.StatusError) as exc:
        core.delete(CONFIGMAP, "default", "cm", **kwargs)
    assert (exc.value.code, exc.value.reason, exc.value.message) == (422, "Invalid", message)
    assert exc.value.to_status()["details"]["causes"][0]["field"] == "propagationPolicy"
    assert exists(core, CONFIGMAP, "cm")


# ---------------------------------------------------------- background
@pytest.mark.parametrize("policy", [None, "Background"])
def test_background_deletes_owner_at_once_and_cascades_through_replica_sets(core: ServerCore,
                                                                           policy: str | None) -> None:
    _, _, pods = w.web_chain(core, 3)
    gone = core.delete(DEPLOYMENT, "default", "web", propagation_policy=policy)
    assert not exists(core, DEPLOYMENT, "web")
    assert gone["metadata"]["name"] == "web"
    # Nothing else happened yet: the collector does the rest.
    assert exists(core, REPLICASET, "web-rs") and all(exists(core, POD, p["metadata"]["name"]) for p in pods)
    gc = gc_for(core)
    gc.sync_once()  # Deployment's entry deletes the ReplicaSet, whose own entry deletes the pods
    assert not exists(core, REPLICASET, "web-rs")
    assert not any(exists(core, POD, p["metadata"]["name"]) for p in pods)
    assert gc.stats.deleted == 4
    assert queue_is_empty(core, gc)


def test_background_deletes_bound_pods_gracefully(core: ServerCore) -> None:
    w.web_chain(core, 2, node="n1")
    core.delete(REPLICASET, "default", "web-rs")
    gc = gc_for(core)
    gc.sync_once()
    for name in ("web-0", "web-1"):
        meta = core.get(POD, "default", name)["metadata"]
        assert meta["deletionTimestamp"] and meta["deletionGracePeriodSeconds"] == 30
    assert queue_is_empty(core, gc)


def test_dependent_with_a_surviving_owner_keeps_living_without_the_dangling_reference(core: ServerCore) -> None:
    keep = core.create(CONFIGMAP, {"metadata": {"name": "keep"}})
    doomed = core.create(CONFIGMAP, {"metadata": {"name": "doomed"}})
    core.create(POD, w.owned_pod("shared", [doomed, keep]))
    core.delete(CONFIGMAP, "default", "doomed")
    gc_for(core).sync_once()
    refs = core.get(POD, "default", "shared")["metadata"]["ownerReferences"]
    assert [r["uid"] for r in refs] == [keep["metadata"]["uid"]]
    assert core.store.dependents(doomed["metadata"]["uid"]) == []


def test_owner_recreated_with_another_uid_does_not_save_dependents(core: ServerCore) -> None:
    _, rs, pods = w.web_chain(core, 2)
    core.delete(REPLICASET, "default", "web-rs")
    again = core.create(REPLICASET, w.replica_set("web-rs", 2, {"app": "web"}))
    assert again["metadata"]["uid"] != rs["metadata"]["uid"]
    gc_for(core).sync_once()
    assert not any(exists(core, POD, p["metadata"]["name"]) for p in pods)
    assert exists(core, REPLICASET, "web-rs")  # the new owner itself is nobody's garbage


# --------------------------------------------------------------- orphan
def test_orphan_keeps_dependents_without_the_owner_reference(core: ServerCore) -> None:
    dep, rs, pods = w.web_chain(core, 2)
    core.delete(DEPLOYMENT, "default", "web", propagation_policy="Orphan")
    assert not exists(core, DEPLOYMENT, "web")  # synchronous: no collector needed
    kept = core.get(REPLICASET, "default", "web-rs")
    assert "ownerReferences" not in kept["metadata"]
    assert core.store.dependents(dep["metadata"]["uid"]) == []
    gc = gc_for(core)
    gc.sync_once()
    assert exists(core, REPLICASET, "web-rs")
    assert all(exists(core, POD, p["metadata"]["name"]) for p in pods)  # still owned by the ReplicaSet
    assert core.store.dependents(rs["metadata"]["uid"]) == [(POD, "default/web-0"), (POD, "default/web-1")]
    assert gc.stats.deleted == 0


def test_orphan_finalizer_on_the_object_decides_when_no_policy_is_given(core: ServerCore) -> None:
    owner = core.create(CONFIGMAP, {"metadata": {"name": "owner", "finalizers": ["orphan"]}})
    core.create(POD, w.owned_pod("child", [owner]))
    core.delete(CONFIGMAP, "default", "owner")
    assert not exists(core, CONFIGMAP, "owner")
    assert "ownerReferences" not in core.get(POD, "default", "child")["metadata"]


def test_orphan_of_a_bound_pod_owner_waits_for_its_grace_period(core: ServerCore) -> None:
    owner = core.create(POD, w.owned_pod("owner", node="n1"))
    core.create(CONFIGMAP, {"metadata": {"name": "child", "ownerReferences": [w.owner_ref(owner)]}})
    marked = core.delete(POD, "default", "owner", propagation_policy="Orphan")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    assert marked["metadata"].get("finalizers") == []  # orphaning done, the finalizer is gone again
    assert "ownerReferences" not in core.get(CONFIGMAP, "default", "child")["metadata"]


# ----------------------------------------------------------- foreground
def test_foreground_owner_stays_with_the_finalizer_until_dependents_are_gone(core: ServerCore) -> None:
    _, _, pods = w.web_chain(core, 2, node="n1")  # bound pods terminate gracefully: the test is their kubelet
    marked = core.delete(DEPLOYMENT, "default", "web", propagation_policy="Foreground")
    assert marked["metadata"]["deletionTimestamp"] and marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    gc = gc_for(core)
    gc.sync_once()
    # The ReplicaSet has dependents, so it goes in the foreground too; its pods are terminating.
    rs_meta = core.get(REPLICASET, "default", "web-rs")["metadata"]
    assert rs_meta["deletionTimestamp"] and rs_meta["finalizers"] == ["foregroundDeletion"]
    assert all(core.get(POD, "default", p["metadata"]["name"])["metadata"]["deletionTimestamp"] for p in pods)
    assert core.get(DEPLOYMENT, "default", "web")["metadata"]["finalizers"] == ["foregroundDeletion"]
    for _ in range(3):  # more passes change nothing while the pods still exist
        gc.sync_once()
    assert exists(core, DEPLOYMENT, "web") and exists(core, REPLICASET, "web-rs")
    pending = core.store.redis.xpending(core.store.gc_queue_key, gc.group)["pending"]
    assert pending == 2  # both waiting owners stay on the queue until released
    for p in pods:  # the kubelet confirms the pods are gone
        core.delete(POD, "default", p["metadata"]["name"], grace_period_seconds=0)
    converge(gc, lambda: not exists(core, DEPLOYMENT, "web"))
    assert not exists(core, REPLICASET, "web-rs")
    assert queue_is_empty(core, gc)


@pytest.mark.parametrize(("block", "owner_waits"), [(True, True), (False, False)])
def test_foreground_honours_block_owner_deletion(core: ServerCore, block: bool, owner_waits: bool) -> None:
    owner = core.create(CONFIGMAP, {"metadata": {"name": "owner"}})
    core.create(POD, w.owned_pod("child", node="n1", refs=[w.owner_ref(owner, block=block)]))
    core.delete(CONFIGMAP, "default", "owner", propagation_policy="Foreground")
    gc = gc_for(core)
    gc.sync_once()
    assert core.get(POD, "default", "child")["metadata"]["deletionTimestamp"]  # deleted (gracefully) either way
    assert exists(core, CONFIGMAP, "owner") == owner_waits


def test_foreground_without_dependents_is_released_by_the_collector(core: ServerCore) -> None:
    core.create(CONFIGMAP, {"metadata": {"name": "lonely"}})
    core.delete(CONFIGMAP, "default", "lonely", propagation_policy="Foreground")
    assert exists(core, CONFIGMAP, "lonely")
    gc_for(core).sync_once()
    assert not exists(core, CONFIGMAP, "lonely")


def test_background_delete_of_a_foreground_owner_drops_the_finalizer(core: ServerCore) -> None:
    owner = core.create(CONFIGMAP, {"metadata": {"name": "owner"}})
    core.create(POD, w.owned_pod("child", [owner], node="n1"))
    core.delete(CONFIGMAP, "default", "owner", propagation_policy="Foreground")
    core.delete(CONFIGMAP, "default", "owner", propagation_policy="Background")
    assert not exists(core, CONFIGMAP, "owner")


# -------------------------------------------------------- restart safety
def test_work_queued_while_no_collector_runs_is_done_by_the_first_one(core: ServerCore) -> None:
    w.web_chain(core, 2)
    core.delete(REPLICASET, "default", "web-rs")
    assert core.store.redis.xlen(core.store.gc_queue_key) == 1
    gc = gc_for(core)
    gc.sync_once()
    assert not exists(core, POD, "web-0") and not exists(core, POD, "web-1")
    assert queue_is_empty(core, gc)


@pytest.mark.parametrize(("consumer", "claim_idle_ms"), [("gc-0", 60_000), ("gc-1", 0)])
def test_collector_restart_does_not_lose_queued_work(core: ServerCore, consumer: str, claim_idle_ms: int) -> None:
    """A collector that read entries and died leaves them pending; the next one (same name, or another after
    the claim timeout) does the work."""
    w.web_chain(core, 2)
    core.delete(REPLICASET, "default", "web-rs")
    crashed = gc_for(core, consumer="gc-0")
    assert read_without_processing(crashed) == 1
    assert exists(core, POD, "web-0")
    assert core.store.redis.xpending(core.store.gc_queue_key, crashed.group)["pending"] == 1
    restarted = gc_for(core, consumer=consumer, claim_idle_ms=claim_idle_ms)
    restarted.sync_once()
    assert not exists(core, POD, "web-0") and not exists(core, POD, "web-1")
    assert queue_is_empty(core, restarted)


def test_a_live_consumer_does_not_steal_entries_before_the_claim_timeout(core: ServerCore) -> None:
    w.web_chain(core, 1)
    core.delete(REPLICASET, "default", "web-rs")
    read_without_processing(gc_for(core, consumer="gc-0"))
    gc_for(core, consumer="gc-1", claim_idle_ms=60_000).sync_once()
    assert exists(core, POD, "web-0")


# ------------------------------------------------------------------ sweep
def test_sweep_collects_dependents_of_owners_that_never_existed(core: ServerCore) -> None:
    ghost = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "ghost", "uid": "no-such-uid"}}
    core.create(POD, w.owned_pod("orphaned", [ghost]))
    core.create(POD, w.owned_pod("unknown-kind", refs=[{"apiVersion": "example.com/v1", "kind": "Widget",
                                                       "name": "w", "uid": "u1"}]))
    core.create(POD, w.owned_pod("plain"))
    gc = gc_for(core, sweep_interval=3600.0, sweep_budget=2)
    gc.sync_once()  # the sweep starts at once but may only look at two objects per pass
    converge(gc, lambda: gc.stats.sweeps_completed == 1)
    assert gc.stats.swept_objects >= 3
    assert not exists(core, POD, "orphaned")
    assert exists(core, POD, "plain")
    assert exists(core, POD, "unknown-kind")  # an owner the collector cannot look up is not proof of absence


def test_sweep_is_periodic_in_cluster_time(core: ServerCore) -> None:
    clock = core.clock
    assert isinstance(clock, ManualClock)
    gc = gc_for(core, sweep_interval=600.0, sweep_at_start=False)
    core.create(POD, w.owned_pod("orphaned", refs=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "x",
                                                   "uid": "gone"}]))
    gc.sync_once()
    assert exists(core, POD, "orphaned") and gc.stats.sweeps_completed == 0
    clock.advance(601)
    gc.sync_once()
    assert not exists(core, POD, "orphaned") and gc.stats.sweeps_completed == 1


@pytest.mark.parametrize("step", [1.0, 400.0], ids=["ends-within-the-interval", "outlasts-the-interval"])
def test_the_next_sweep_is_due_an_interval_after_the_last_one_began(core: ServerCore, step: float) -> None:
    """A sweep spread over passes while cluster time moves on: the next is due ``sweep_interval`` after its start."""
    clock = core.clock
    assert isinstance(clock, ManualClock)
    interval = 600.0
    for i in range(3):
        core.create(CONFIGMAP, {"metadata": {"name": f"cm-{i}"}})
        core.create(POD, w.owned_pod(f"plain-{i}"))
    gc = gc_for(core, sweep_interval=interval, sweep_budget=3)
    began = clock.now()
    gc.sync_once()  # due at once; a few objects per pass, and the clock moves between passes
    passes = 1
    while gc.stats.sweeps_completed == 0:
        assert passes < 1000, "the first sweep did not finish"
        clock.advance(step)
        gc.sync_once()
        passes += 1
    assert passes >= 3, passes  # namespaces, configmaps, pods, the bootstrap RBAC: several passes
    due = began + interval
    swept = gc.stats.swept_objects
    if clock.now() < due:
        clock.advance(due - 1 - clock.now())
        gc.sync_once()
        assert gc.stats.swept_objects == swept, "a sweep began before it was due"
        clock.advance(1)
    gc.sync_once()
    assert gc.stats.swept_objects > swept, (
        f"no sweep {clock.now() - began:g} s after the last one began (it ended at {passes - 1} x {step:g} s)")


def test_sweep_releases_a_foreground_owner_whose_announcement_was_lost(core: ServerCore) -> None:
    owner = core.create(CONFIGMAP, {"metadata": {"name": "owner"}})
    core.create(POD, w.owned_pod("child", [owner]))
    core.delete(CONFIGMAP, "default", "owner", propagation_policy="Foreground")
    core.store.redis.delete(core.store.gc_queue_key)  # the process died before the collector heard of it
    gc = gc_for(core, sweep_interval=3600.0)
    converge(gc, lambda: not exists(core, CONFIGMAP, "owner"))
    assert not exists(core, POD, "child")


def test_sweep_finishes_an_orphaning_interrupted_half_way(core: ServerCore) -> None:
    owner = core.create(CONFIGMAP, {"metadata": {"name": "owner"}})
    core.create(POD, w.owned_pod("child", [owner]))
    # What a crash between "mark with the orphan finalizer" and "orphan the dependents" leaves.
    core.update(CONFIGMAP, {**owner, "metadata": {**owner["metadata"], "finalizers": ["orphan"]}})
    core.store.guaranteed_update(CONFIGMAP, "default", "owner", lambda o: {
        **o, "metadata": {**o["metadata"], "deletionTimestamp": "2023-11-14T22:13:20Z",
                          "deletionGracePeriodSeconds": 0}})
    gc = gc_for(core, sweep_interval=3600.0)
    converge(gc, lambda: not exists(core, CONFIGMAP, "owner"))
    child = core.get(POD, "default", "child")
    assert "ownerReferences" not in child["metadata"]


# --------------------------------------------------------- in a running cluster
def test_local_cluster_runs_the_collector_in_the_background(redis_url: str, tmp_path: Path) -> None:
    cluster = LocalCluster(Config(data_dir=tmp_path / "data", redis_url=redis_url, api_enabled=False))
    core = cluster.start()
    try:
        [manager] = cluster.controller_managers
        assert manager.wait_active(20)
        assert "garbagecollector" in manager.controllers() and "disruption" in manager.controllers()
        w.web_chain(core, 2)
        core.delete(DEPLOYMENT, "default", "web")
        gc_loop = manager.controllers()["garbagecollector"]
        wait_for(lambda: not (exists(core, POD, "web-0") or exists(core, POD, "web-1")
                              or exists(core, REPLICASET, "web-rs")),
                 20, "the background collector to cascade the deletion",
                 wake=lambda: gc_loop.wait_passes(1, timeout=5))
    finally:
        cluster.stop()
    assert cluster.controller_managers == []
