"""The store and the server core against a real Redis: the Kubernetes consistency contract."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import pytest
import redis

from emulator.api import errors
from emulator.api.kinds import CONFIGMAP, LIMITRANGE, NAMESPACE, NODE, POD, PRIORITYCLASS, RUNTIMECLASS
from emulator.cluster import LocalCluster
from emulator.config import Config
from emulator.server.core import ServerCore
from emulator.store import codec
from emulator.store.store import Store, StoreConfig, WatchEvent
from tests import builders as b
from tests.waiting import wait_for_aof_write

pytestmark = pytest.mark.integration


@pytest.fixture
def core(redis_url: str) -> ServerCore:
    c = ServerCore(Store.connect(redis_url))
    c.bootstrap()
    return c


def drain(watch, n: int, timeout: float = 20.0) -> list[WatchEvent]:
    """Read events until ``n`` arrived or the deadline passed (a deadline, not a sleep)."""
    out: list[WatchEvent] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(watch.next_batch(timeout=0.2))
    return out


def snapshot(client: redis.Redis) -> dict[bytes, object]:
    """Every key with a cheap fingerprint of its content, to prove a rejected write changed nothing."""
    out: dict[bytes, object] = {}
    for key in client.scan_iter():
        t = client.type(key)
        out[key] = (t, client.xlen(key) if t == b"stream" else client.dump(key))
    return out


# ------------------------------------------------------------ concurrency
def test_two_writers_same_resource_version_exactly_one_wins(core: ServerCore) -> None:
    created = core.create(CONFIGMAP, {"metadata": {"name": "cm"}, "data": {"v": "0"}})
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def writer(value: str) -> None:
        body = {**created, "data": {"v": value}}
        barrier.wait()
        try:
            outcomes[value] = core.update(CONFIGMAP, body)
        except errors.StatusError as e:
            outcomes[value] = e

    threads = [threading.Thread(target=writer, args=(v,)) for v in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wins = {v: o for v, o in outcomes.items() if isinstance(o, dict)}
    losses = {v: o for v, o in outcomes.items() if isinstance(o, errors.StatusError)}
    assert len(wins) == 1 and len(losses) == 1
    (loser, err), = losses.items()
    assert err.code == 409 and err.reason == "Conflict"
    stored = core.get(CONFIGMAP, "default", "cm")
    assert stored["data"] == {"v": next(iter(wins))}
    assert stored["data"]["v"] != loser


def test_stale_update_changes_nothing(core: ServerCore) -> None:
    first = core.create(CONFIGMAP, {"metadata": {"name": "cm"}, "data": {"v": "0"}})
    core.update(CONFIGMAP, {**first, "data": {"v": "1"}})
    before = snapshot(core.store.redis)
    with pytest.raises(errors.StatusError) as exc:
        core.update(CONFIGMAP, {**first, "data": {"v": "stale"}})
    assert exc.value.code == 409
    assert snapshot(core.store.redis) == before


def _create_worker(url: str, worker: int, n: int) -> None:
    c = ServerCore(Store.connect(url))
    for i in range(n):
        c.create(CONFIGMAP, {"metadata": {"name": f"w{worker}-{i}"}})


def test_concurrent_creates_from_four_processes_watched_once_in_order(core: ServerCore, redis_url: str) -> None:
    watch = core.watch(CONFIGMAP, core.store.current_rv())
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_create_worker, args=(redis_url, w, 250)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    listed = core.list(CONFIGMAP)
    assert len(listed.items) == 1000
    rvs = [int(o["metadata"]["resourceVersion"]) for o in listed.items]
    assert len(set(rvs)) == 1000
    events = drain(watch, 1000)
    assert len(events) == 1000
    assert all(e.type == "ADDED" for e in events)
    assert [e.rv for e in events] == sorted(e.rv for e in events)
    names = [e.object["metadata"]["name"] for e in events]
    assert len(set(names)) == 1000
    assert {e.rv for e in events} == set(rvs)
    assert drain(watch, 1, timeout=0.3) == []


# ------------------------------------------------------------------ watch
def test_watch_resume_delivers_exactly_the_later_events(core: ServerCore) -> None:
    objs = [core.create(CONFIGMAP, {"metadata": {"name": f"c{i}"}}) for i in range(10)]
    core.update(CONFIGMAP, {**objs[3], "data": {"x": "y"}})
    core.delete(CONFIGMAP, "default", "c5")
    resume_at = int(objs[6]["metadata"]["resourceVersion"])
    events = drain(core.watch(CONFIGMAP, resume_at), 5)
    got = [(e.type, e.object["metadata"]["name"]) for e in events]
    assert got == [("ADDED", "c7"), ("ADDED", "c8"), ("ADDED", "c9"), ("MODIFIED", "c3"), ("DELETED", "c5")]
    deleted = events[-1]
    assert deleted.object["metadata"]["resourceVersion"] == str(deleted.rv)


def test_watch_filters_by_namespace_labels_and_fields(core: ServerCore) -> None:
    core.create(NAMESPACE, b.namespace("other"))
    start = core.store.current_rv()
    core.create(POD, b.pod("a", labels={"app": "web"}))
    core.create(POD, b.pod("b", labels={"app": "db"}))
    core.create(POD, b.pod("c", "other", labels={"app": "web"}))
    core.create(POD, b.pod("d", labels={"app": "web"}, node="n1"))
    names = lambda w: [e.object["metadata"]["name"] for e in drain(w, 10, timeout=0.5)]  # noqa: E731
    assert names(core.watch(POD, start, "default", label_selector="app=web")) == ["a", "d"]
    assert names(core.watch(POD, start, field_selector="spec.nodeName=n1")) == ["d"]
    assert names(core.watch(POD, start, label_selector="app in (web),app!=db",
                            field_selector="metadata.namespace=other")) == ["c"]


def test_watch_older_than_the_retained_window_is_gone(redis_url: str) -> None:
    store = Store.connect(redis_url, StoreConfig(stream_cap=16))
    c = ServerCore(store)
    c.bootstrap()
    first = c.create(CONFIGMAP, {"metadata": {"name": "first"}})
    for i in range(40):
        c.create(CONFIGMAP, {"metadata": {"name": f"c{i}"}})
    with pytest.raises(errors.StatusError) as exc:
        c.watch(CONFIGMAP, int(first["metadata"]["resourceVersion"]))
    assert exc.value.code == 410 and exc.value.reason == "Expired"
    recent = c.store.current_rv() - 3
    assert [e.object["metadata"]["name"] for e in drain(c.watch(CONFIGMAP, recent), 3)] == ["c37", "c38", "c39"]


def test_watch_falling_behind_a_trim_gets_gone(redis_url: str) -> None:
    c = ServerCore(Store.connect(redis_url, StoreConfig(stream_cap=16)))
    c.bootstrap()
    watch = c.watch(CONFIGMAP, c.store.current_rv())
    for i in range(40):
        c.create(CONFIGMAP, {"metadata": {"name": f"c{i}"}})
    with pytest.raises(errors.StatusError) as exc:
        watch.next_batch(timeout=0.1)
    assert exc.value.code == 410


def test_bound_pods_also_go_to_their_node_shard_stream(core: ServerCore) -> None:
    store = core.store
    shard = store.shard_of("node-7")
    start = store.current_rv()
    core.create(POD, b.pod("unbound"))
    core.create(POD, b.pod("bound", node="node-7"))
    events = drain(store.watch(POD, start, shard=shard), 1, timeout=0.5)
    assert [e.object["metadata"]["name"] for e in events] == ["bound"]
    other = (shard + 1) % store.node_shards
    assert drain(store.watch(POD, start, shard=other), 1, timeout=0.2) == []


# ------------------------------------------------------------- list/paging
def test_list_pages_with_limit_and_continue(core: ServerCore) -> None:
    core.create(NAMESPACE, b.namespace("ns2"))
    for i in range(25):
        core.create(CONFIGMAP, {"metadata": {"name": f"c{i:02d}", "namespace": "default" if i % 2 else "ns2",
                                             "labels": {"i": str(i % 3)}}})
    pages, token = [], None
    while True:
        page = core.list(CONFIGMAP, limit=7, continue_token=token)
        pages.append(page)
        token = page.continue_token
        if token is None:
            break
    assert [len(p.items) for p in pages] == [7, 7, 7, 4]
    keys = [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for p in pages for o in p.items]
    assert keys == sorted(keys) and len(set(keys)) == 25
    assert {p.resource_version for p in pages} == {pages[0].resource_version}
    ns_items = core.list(CONFIGMAP, "ns2", label_selector="i=0").items
    assert sorted(o["metadata"]["name"] for o in ns_items) == ["c00", "c06", "c12", "c18", "c24"]
    page = core.list(CONFIGMAP, "ns2", label_selector="i=0", limit=2)
    assert [o["metadata"]["name"] for o in page.items] == ["c00", "c06"] and page.continue_token
    with pytest.raises(errors.StatusError) as exc:
        core.list(CONFIGMAP, continue_token="not-a-token")
    assert exc.value.code == 400


# ------------------------------------------------------------- status path
def test_status_update_keeps_spec_and_spec_update_keeps_status(core: ServerCore) -> None:
    created = core.create(POD, b.pod("p"))
    assert created["metadata"]["generation"] == 1
    with_status = core.update_status(POD, {**created, "spec": {"containers": []},
                                           "status": {"phase": "Running"}})
    assert with_status["status"] == {"phase": "Running"}
    assert with_status["spec"] == created["spec"]
    labelled = core.update(POD, {**created, "metadata": {**created["metadata"], "labels": {"x": "y"},
                                                          "resourceVersion": ""},
                                 "status": {"phase": "Failed"}})
    assert labelled["status"] == {"phase": "Running"}
    assert labelled["metadata"]["labels"] == {"x": "y"}
    assert labelled["metadata"]["generation"] == 1  # metadata-only change
    assert int(labelled["metadata"]["resourceVersion"]) > int(with_status["metadata"]["resourceVersion"])


def test_noop_update_does_not_write(core: ServerCore) -> None:
    created = core.create(CONFIGMAP, {"metadata": {"name": "cm"}, "data": {"a": "b"}})
    assert core.update(CONFIGMAP, created) == created


def test_dependents_index_follows_owner_references(core: ServerCore) -> None:
    owner = core.create(CONFIGMAP, {"metadata": {"name": "owner"}})
    uid = owner["metadata"]["uid"]
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
    dep = core.create(POD, {**b.pod("dep"), "metadata": {"name": "dep", "namespace": "default",
                                                          "ownerReferences": [ref]}})
    store = core.store
    assert store.dependents(uid) == [(POD, "default/dep")]
    core.update(POD, {**dep, "metadata": {**dep["metadata"], "ownerReferences": []}})
    assert store.dependents(uid) == []
    core.update(POD, {**core.get(POD, "default", "dep"), "metadata": {**dep["metadata"], "resourceVersion": "",
                                                                       "ownerReferences": [ref]}})
    assert store.dependents(uid) == [(POD, "default/dep")]
    core.delete(CONFIGMAP, "default", "owner")
    queued = store.redis.xrange(store.gc_queue_key)
    assert [fields[b"uid"].decode() for _, fields in queued] == [uid]
    core.delete(POD, "default", "dep")
    assert store.dependents(uid) == []


# ----------------------------------------------------------------- delete
def test_delete_preconditions(core: ServerCore) -> None:
    obj = core.create(CONFIGMAP, {"metadata": {"name": "cm"}})
    for pre in ({"uid": "wrong"}, {"resourceVersion": "1"}):
        with pytest.raises(errors.StatusError) as exc:
            core.delete(CONFIGMAP, "default", "cm", preconditions=pre)
        assert exc.value.code == 409
    gone = core.delete(CONFIGMAP, "default", "cm", preconditions={"uid": obj["metadata"]["uid"]})
    assert int(gone["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])
    with pytest.raises(errors.StatusError) as exc:
        core.get(CONFIGMAP, "default", "cm")
    assert exc.value.code == 404


def test_bound_pod_deletes_gracefully_unbound_at_once(core: ServerCore) -> None:
    core.create(POD, b.pod("bound", node="n1"))
    core.create(POD, b.pod("unbound"))
    marked = core.delete(POD, "default", "bound")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    assert marked["metadata"]["deletionTimestamp"]
    assert core.get(POD, "default", "bound")["metadata"]["deletionTimestamp"]
    core.delete(POD, "default", "unbound")
    with pytest.raises(errors.StatusError):
        core.get(POD, "default", "unbound")
    core.delete(POD, "default", "bound", grace_period_seconds=0)
    with pytest.raises(errors.StatusError):
        core.get(POD, "default", "bound")


def _finished(core: ServerCore, name: str) -> dict:
    """A bound pod, deleted gracefully (marked), whose kubelet wrote its terminal status: what it deletes."""
    core.create(POD, b.pod(name, node="n1"))
    core.delete(POD, "default", name)
    pod = core.get(POD, "default", name)
    return core.update_status(POD, {**pod, "status": {**pod["status"], "phase": "Succeeded"}})


def _changed_since(core: ServerCore, name: str) -> tuple[dict, str]:
    held = _finished(core, name)
    core.update_status(POD, {**held, "status": {**held["status"], "message": "written by someone else"}})
    return held, "deleted"


def _finalizer(core: ServerCore, name: str) -> tuple[dict, str]:
    held = _finished(core, name)
    held = core.update(POD, {**held, "metadata": {**held["metadata"], "finalizers": ["example.com/keep"]}})
    return held, "marked"


def _recreated(core: ServerCore, name: str) -> tuple[dict, str]:
    held = _finished(core, name)
    core.delete(POD, "default", name, grace_period_seconds=0)
    core.create(POD, b.pod(name, node="n1"))
    return held, "409"


def _gone(core: ServerCore, name: str) -> tuple[dict, str]:
    held = _finished(core, name)
    core.delete(POD, "default", name, grace_period_seconds=0)
    return held, "404"


@pytest.mark.parametrize("setup", [
    lambda core, name: (_finished(core, name), "deleted"),
    _changed_since, _finalizer, _recreated, _gone,
], ids=["held-is-current", "changed-since-held", "finalizer-holds-it", "recreated-same-name", "already-gone"])
def test_delete_many_is_delete_with_grace_0_and_uid_precondition(core: ServerCore, setup) -> None:
    """Each object ends as ``delete(grace_period_seconds=0, preconditions={uid})`` would leave it."""
    core.create(POD, b.pod("bystander", node="n1"))
    held, want = setup(core, "p")
    plain = _finished(core, "plain")
    results = core.delete_many(POD, [held, plain])
    assert not isinstance(results[1], errors.StatusError)
    with pytest.raises(errors.StatusError):
        core.get(POD, "default", "plain")
    result = results[0]
    if want in ("404", "409"):
        assert isinstance(result, errors.StatusError) and result.code == int(want)
    elif want == "deleted":
        assert not isinstance(result, errors.StatusError)
        assert int(result["metadata"]["resourceVersion"]) > int(held["metadata"]["resourceVersion"])
        with pytest.raises(errors.StatusError) as exc:
            core.get(POD, "default", "p")
        assert exc.value.code == 404
    else:  # marked: the finalizer keeps it, with grace 0
        stored = core.get(POD, "default", "p")
        assert stored["metadata"]["deletionGracePeriodSeconds"] == 0
        assert stored["metadata"]["finalizers"] == ["example.com/keep"]
    assert core.get(POD, "default", "bystander")["metadata"]["name"] == "bystander"


@pytest.mark.parametrize("owned", [False, True], ids=["copied", "owned"])
def test_create_many_owned_bodies_are_defaulted_in_place_not_copied(core: ServerCore, owned: bool) -> None:
    bodies = [{"metadata": {"name": f"cm-{i}", "namespace": "default"}, "data": {"k": str(i)}} for i in range(3)]
    stored = core.create_many(CONFIGMAP, bodies, owned=owned)
    for body, obj in zip(bodies, stored, strict=True):
        assert not isinstance(obj, errors.StatusError)
        assert obj == core.get(CONFIGMAP, "default", body["metadata"]["name"])
        assert obj["metadata"]["uid"] and obj["kind"] == "ConfigMap"
        # Owned: the body is the defaulted object (only the resourceVersion is the store's); else untouched.
        assert (body["metadata"].get("uid") == obj["metadata"]["uid"]) is owned
        assert "resourceVersion" not in body["metadata"]


# --------------------------------------------------------------- admission
def test_create_defaults(core: ServerCore) -> None:
    body = b.pod("p", containers=[b.container(lim_cpu="500m", lim_memory="1Gi")])
    del body["metadata"]["namespace"]
    pod = core.create(POD, body)
    meta = pod["metadata"]
    assert meta["namespace"] == "default" and meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert pod["status"]["qosClass"] == "Guaranteed"
    assert body["metadata"].get("uid") is None  # the caller's object is not modified


def test_limit_range_defaults_every_container(core: ServerCore) -> None:
    core.create(LIMITRANGE, b.limit_range("mem", default={"memory": "512Mi"}, default_request={"memory": "256Mi"}))
    pod = core.create(POD, b.pod("p", containers=[b.container("a"), b.container("b", memory="100Mi")],
                                 init=[b.container("init")]))
    res = [c["resources"] for c in pod["spec"]["initContainers"] + pod["spec"]["containers"]]
    assert res[0] == {"limits": {"memory": "512Mi"}, "requests": {"memory": "256Mi"}}
    assert res[1] == res[0]
    assert res[2] == {"limits": {"memory": "512Mi"}, "requests": {"memory": "100Mi"}}


@pytest.mark.parametrize("flushed", [False, True], ids=["scripts-loaded", "after-script-flush"])
def test_a_pod_create_reads_admission_objects_even_after_redis_forgot_its_scripts(
        core: ServerCore, flushed: bool) -> None:
    # Admission's prefetch sends its range script as a bare EVALSHA (no SCRIPT EXISTS round trip first);
    # a Redis that lost its script cache (restarted, SCRIPT FLUSH) answers NOSCRIPT and the store loads it.
    core.create(LIMITRANGE, b.limit_range("mem", default={"memory": "512Mi"}, default_request={"memory": "256Mi"}))
    if flushed:
        core.store.redis.script_flush()
    pod = core.create(POD, b.pod("p", containers=[b.container("a")]))
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"memory": "512Mi"},
                                                         "requests": {"memory": "256Mi"}}


def test_limit_range_max_is_enforced(core: ServerCore) -> None:
    core.create(LIMITRANGE, b.limit_range("cap", max_={"cpu": "1"}))
    with pytest.raises(errors.StatusError) as exc:
        core.create(POD, b.pod("big", containers=[b.container(lim_cpu="2")]))
    assert exc.value.code == 403
    assert "maximum cpu usage per Container is 1, but limit is 2" in exc.value.message
    ok = core.create(POD, b.pod("small"))
    assert ok["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1"}


@pytest.mark.parametrize(
    ("classes", "pod_class", "priority", "policy", "class_after"),
    [
        ([], None, 0, "PreemptLowerPriority", None),
        ([("high", 1000, False, None)], "high", 1000, "PreemptLowerPriority", "high"),
        ([("batch", 10, False, "Never")], "batch", 10, "Never", "batch"),
        ([("dflt", 7, True, None), ("high", 1000, False, None)], None, 7, "PreemptLowerPriority", "dflt"),
        ([], "system-node-critical", 2000001000, "PreemptLowerPriority", "system-node-critical"),
    ],
    ids=["none", "named", "never-preempt", "global-default", "built-in"],
)
def test_priority_class_resolution(core: ServerCore, classes, pod_class, priority, policy, class_after) -> None:
    for name, value, glob, pol in classes:
        core.create(PRIORITYCLASS, b.priority_class(name, value, global_default=glob, policy=pol))
    pod = core.create(POD, b.pod("p", priority_class=pod_class))
    assert pod["spec"]["priority"] == priority
    assert pod["spec"]["preemptionPolicy"] == policy
    assert pod["spec"].get("priorityClassName") == class_after


def test_second_global_default_priority_class_is_rejected(core: ServerCore) -> None:
    core.create(PRIORITYCLASS, b.priority_class("one", 1, global_default=True))
    with pytest.raises(errors.StatusError) as exc:
        core.create(PRIORITYCLASS, b.priority_class("two", 2, global_default=True))
    assert exc.value.code == 403


def test_runtime_class_overhead_is_copied(core: ServerCore) -> None:
    core.create(RUNTIMECLASS, b.runtime_class("kata", overhead={"cpu": "250m", "memory": "120Mi"}))
    pod = core.create(POD, b.pod("p", runtime_class="kata"))
    assert pod["spec"]["overhead"] == {"cpu": "250m", "memory": "120Mi"}
    with pytest.raises(errors.StatusError) as exc:
        core.create(POD, b.pod("q", runtime_class="missing"))
    assert exc.value.code == 403 and exc.value.causes[0].field == "spec.runtimeClassName"


def test_default_toleration_seconds(core: ServerCore) -> None:
    pod = core.create(POD, b.pod("p"))
    tol = {(t["key"], t["tolerationSeconds"]) for t in pod["spec"]["tolerations"]}
    assert tol == {("node.kubernetes.io/not-ready", 300), ("node.kubernetes.io/unreachable", 300)}


# --------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ("not an object", 400, None),
        (b.pod("p", containers=[b.container(cpu="12xyz")]), 422, "spec.containers[0].resources.requests[cpu]"),
        ({**b.pod(), "metadata": {"namespace": "default"}}, 422, "metadata.name"),
        (b.pod("p", containers=[b.container(memory="-1")]), 422, "spec.containers[0].resources.requests[memory]"),
        (b.pod("p", priority_class="nope"), 403, "spec.priorityClassName"),
        (b.pod("p", "no-such-ns"), 404, None),
        ({**b.pod(), "kind": "Node"}, 400, None),
    ],
    ids=["malformed", "invalid-quantity", "missing-name", "negative-request", "unknown-priority-class",
         "missing-namespace", "wrong-kind"],
)
def test_bad_input_is_rejected_and_changes_nothing(core: ServerCore, body, code, field) -> None:
    before = snapshot(core.store.redis)
    with pytest.raises(errors.StatusError) as exc:
        core.create(POD, body)
    assert exc.value.code == code
    if field:
        assert field in [c.field for c in exc.value.causes]
        if code == 422:  # Invalid names the field in the message too; Forbidden keeps upstream's wording
            assert field in exc.value.message
    assert exc.value.to_status()["kind"] == "Status"
    assert snapshot(core.store.redis) == before


def test_create_many_reports_each_failure_and_stores_the_rest(core: ServerCore) -> None:
    results = core.create_many(POD, [b.pod("a"), b.pod("b", containers=[b.container(cpu="bad")]), b.pod("a")])
    assert isinstance(results[0], dict)
    assert isinstance(results[1], errors.StatusError) and results[1].code == 422
    assert isinstance(results[2], errors.StatusError) and results[2].reason == "AlreadyExists"
    assert [p["metadata"]["name"] for p in core.list(POD).items] == ["a"]


def test_terminating_namespace_refuses_new_objects(core: ServerCore) -> None:
    ns = core.create(NAMESPACE, b.namespace("going"))
    core.update_status(NAMESPACE, {**ns, "status": {"phase": "Terminating"}})
    with pytest.raises(errors.StatusError) as exc:
        core.create(POD, b.pod("p", "going"))
    assert exc.value.code == 403


def _configmap(name: str, namespace: str = "default", **meta: object) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": namespace, **meta}, "data": {"k": name}}


def test_create_many_of_a_kind_without_node_room_writes_what_one_create_at_a_time_writes(core: ServerCore) -> None:
    """Such creates go to the store in one script call (lua/create_many.lua): each object, its resourceVersion,
    its ADDED event, its namespace check and its owners are what commit.lua gives a create of its own."""
    ns = core.create(NAMESPACE, b.namespace("going"))
    core.update_status(NAMESPACE, {**ns, "status": {"phase": "Terminating"}})
    owner = core.create(CONFIGMAP, _configmap("owner"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    core.create(CONFIGMAP, _configmap("taken"))
    watch = core.watch(CONFIGMAP, core.store.current_rv())
    rv0 = core.store.current_rv()
    bodies = [_configmap("a"), _configmap("taken"), _configmap("b", ownerReferences=[ref]), _configmap("a"),
              _configmap("c", "missing"), _configmap("d", "going"), _configmap("e")]
    results = core.create_many(CONFIGMAP, bodies)
    created = [r for r in results if not isinstance(r, errors.StatusError)]
    assert [r["metadata"]["name"] for r in created] == ["a", "b", "e"]
    assert [r["metadata"]["resourceVersion"] for r in created] == [str(rv0 + 1), str(rv0 + 2), str(rv0 + 3)]
    refused = {i: (r.code, r.reason) for i, r in enumerate(results) if isinstance(r, errors.StatusError)}
    assert refused == {1: (409, "AlreadyExists"), 3: (409, "AlreadyExists"), 4: (404, "NotFound"),
                       5: (403, "Forbidden")}
    for r in created:
        assert core.get(CONFIGMAP, "default", r["metadata"]["name"]) == r
    events = drain(watch, 3)
    assert [(e.type, e.object, e.rv) for e in events] == [("ADDED", r, int(r["metadata"]["resourceVersion"]))
                                                         for r in created]
    assert core.store.dependents(owner["metadata"]["uid"]) == [(CONFIGMAP, "default/b")]
    # the stored bytes are the object's encoding, resourceVersion spliced in, as commit.lua stores them
    raw = core.store.redis.hmget(core.store.objects_key(CONFIGMAP), [f"default/{r['metadata']['name']}"
                                                                     for r in created])
    assert raw == [codec.encode(r) for r in created]
    single = core.create(CONFIGMAP, _configmap("f"))
    assert core.store.redis.hget(core.store.objects_key(CONFIGMAP), "default/f") == codec.encode(single)


def test_a_large_create_many_is_split_into_script_calls_in_one_round_trip(core: ServerCore) -> None:
    rv0 = core.store.current_rv()
    names = [f"cm-{i:03}" for i in range(300)]  # more than one script call holds (_CREATE_CHUNK)
    bodies = [_configmap(n) for n in names]
    bodies[200] = _configmap("cm-000")  # taken by the first call: refused by the second
    results = core.create_many(CONFIGMAP, bodies)
    assert isinstance(results[200], errors.StatusError) and results[200].reason == "AlreadyExists"
    created = [r for r in results if not isinstance(r, errors.StatusError)]
    assert [r["metadata"]["resourceVersion"] for r in created] == [str(rv0 + i) for i in range(1, 300)]
    entries = core.store.redis.xrange(core.store.stream_key(CONFIGMAP), min=f"({rv0}-0")
    assert [codec.decode(f[b"o"])["metadata"]["name"] for _id, f in entries] == names[:200] + names[201:]


def test_create_many_trims_the_stream_as_single_creates_do(redis_url: str) -> None:
    c = ServerCore(Store.connect(redis_url, StoreConfig(stream_cap=16)))
    c.bootstrap()
    first = c.create(CONFIGMAP, _configmap("first"))
    for start in range(0, 40, 8):
        c.create_many(CONFIGMAP, [_configmap(f"c{i}") for i in range(start, start + 8)])
    assert c.store.redis.xlen(c.store.stream_key(CONFIGMAP)) <= 16 + 16 // 8 + 8
    with pytest.raises(errors.StatusError) as exc:
        c.watch(CONFIGMAP, int(first["metadata"]["resourceVersion"]))
    assert exc.value.code == 410
    recent = c.store.current_rv() - 3
    assert [e.object["metadata"]["name"] for e in drain(c.watch(CONFIGMAP, recent), 3)] == ["c37", "c38", "c39"]


# --------------------------------------------------------------- durability
@pytest.mark.parametrize(("durability", "appendfsync"), [
    # `kemu up --durability strict`: each commit is fsynced before its reply; the kill may follow at once.
    ("strict", "always"),
    # The default: the kill waits for Redis to write its AOF buffer, which a busy disk may postpone.
    ("everysec", "everysec"),
], ids=["strict-kill-at-once", "everysec-kill-once-the-aof-is-written"])
def test_acknowledged_writes_survive_kill_9_of_embedded_redis(tmp_path: Path, durability: str,
                                                              appendfsync: str) -> None:
    # The store alone: no API server or controllers, whose retries against the dead Redis only slow the stop.
    cfg = Config(data_dir=tmp_path / "data", durability=durability, api_enabled=False, controller_managers=0)
    cluster = LocalCluster(cfg)
    core = cluster.start()
    assert core.store.redis.config_get("appendfsync") == {"appendfsync": appendfsync}
    acked = [core.create(NODE, b.node(f"n{i}")) for i in range(300)]
    acked += [r for r in core.create_many(POD, [b.pod(f"p{i}") for i in range(700)]) if isinstance(r, dict)]
    last_rv = core.store.current_rv()
    if durability != "strict":
        wait_for_aof_write(core.store.redis)
    assert cluster.redis is not None
    cluster.redis.kill()
    cluster.store = None  # its connections point at a dead server
    cluster.stop()

    again = LocalCluster(cfg)
    core2 = again.start()
    try:
        assert core2.store.current_rv() >= last_rv
        nodes = {o["metadata"]["name"]: o for o in core2.list(NODE).items}
        pods = {o["metadata"]["name"]: o for o in core2.list(POD).items}
        for obj in acked:
            stored = (nodes if obj["kind"] == "Node" else pods)[obj["metadata"]["name"]]
            assert stored == obj
        events = drain(core2.watch(POD, 0), 700)
        assert len(events) == 700
    finally:
        again.stop()


# ------------------------------------------------------------------- bind
def _room(core: ServerCore, node: str) -> dict[str, int]:
    raw = core.store.redis.hgetall(f"kemu:alloc:{node}")
    return {k.decode(): int(v) for k, v in raw.items() if int(v)}


def test_bind_is_atomic_against_node_room(core: ServerCore) -> None:
    core.create(NODE, b.node("n1", cpu="1", memory="1Gi"))
    core.create(POD, b.pod("a", containers=[b.container(cpu="600m", memory="100Mi")]))
    core.create(POD, b.pod("b", containers=[b.container(cpu="600m", memory="100Mi")]))
    bound = core.bind("default", "a", "n1")
    assert bound["spec"]["nodeName"] == "n1"
    assert [c["type"] for c in bound["status"]["conditions"]] == ["PodScheduled"]
    assert _room(core, "n1") == {"cpu": 600, "memory": 100 * 2**20, "pods": 1}
    before = snapshot(core.store.redis)
    with pytest.raises(errors.StatusError) as exc:
        core.bind("default", "b", "n1")
    assert exc.value.code == 409 and "Insufficient cpu" in exc.value.message
    assert snapshot(core.store.redis) == before
    with pytest.raises(errors.StatusError) as exc:
        core.bind("default", "a", "n1")
    assert exc.value.code == 409 and "already assigned" in exc.value.message


def test_finished_or_deleted_pods_give_their_room_back(core: ServerCore) -> None:
    core.create(NODE, b.node("n1", cpu="1", memory="1Gi"))
    core.create(POD, b.pod("a", containers=[b.container(cpu="1")]))
    core.create(POD, b.pod("b", containers=[b.container(cpu="1")]))
    core.create(POD, b.pod("c", containers=[b.container(cpu="1")]))
    a = core.bind("default", "a", "n1")
    core.update_status(POD, {**a, "status": {**a["status"], "phase": "Succeeded"}})
    assert _room(core, "n1") == {}
    core.bind("default", "b", "n1")
    core.delete(POD, "default", "b", grace_period_seconds=0)
    assert _room(core, "n1") == {}
    assert core.bind("default", "c", "n1")["spec"]["nodeName"] == "n1"


def test_bind_refuses_a_taken_host_port(core: ServerCore) -> None:
    core.create(NODE, b.node("n1"))
    web = b.container(cpu="100m")
    web["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    core.create(POD, b.pod("a", containers=[web]))
    core.create(POD, b.pod("b", containers=[web]))
    core.bind("default", "a", "n1")
    with pytest.raises(errors.StatusError) as exc:
        core.bind("default", "b", "n1")
    assert exc.value.code == 409 and "TCP/8080" in exc.value.message


def test_competing_binders_never_overcommit(core: ServerCore) -> None:
    core.create(NODE, b.node("n1", cpu="10", memory="64Gi"))
    core.create_many(POD, [b.pod(f"p{i}", containers=[b.container(cpu="1")]) for i in range(30)])
    results: list[str] = []

    def binder(names: list[str]) -> None:
        for n in names:
            try:
                core.bind("default", n, "n1")
                results.append(n)
            except errors.StatusError as e:
                assert e.code == 409

    threads = [threading.Thread(target=binder, args=([f"p{i}" for i in range(k, 30, 3)],)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 10
    assert _room(core, "n1")["cpu"] == 10_000
    bound = [p for p in core.list(POD).items if p["spec"].get("nodeName")]
    assert sorted(p["metadata"]["name"] for p in bound) == sorted(results)


def test_bind_many_is_each_an_atomic_bind(core: ServerCore) -> None:
    core.create(NODE, b.node("n1", cpu="3", memory="8Gi"))
    pods = [core.create(POD, b.pod(f"p{i}", containers=[b.container(cpu="1")])) for i in range(5)]
    # p1 changes after the caller read it: its binding is retried against the new version.
    core.update(POD, {**pods[1], "metadata": {**pods[1]["metadata"], "labels": {"x": "y"}}})
    bound_p0 = core.bind("default", "p0", "n1")
    results = core.bind_many([(pods[0], "n1"), (pods[1], "n1"), (pods[2], "n1"), (pods[4], "nope")])
    assert isinstance(results[0], errors.StatusError) and "already assigned" in results[0].message
    assert [r["spec"]["nodeName"] for r in results[1:3]] == ["n1", "n1"]  # type: ignore[index]
    assert results[1]["metadata"]["labels"] == {"x": "y"}  # type: ignore[index]
    assert isinstance(results[3], errors.StatusError) and "no room" in results[3].message  # no such node
    assert bound_p0["spec"]["nodeName"] == "n1"
    assert _room(core, "n1") == {"cpu": 3000, "pods": 3}
    with pytest.raises(errors.StatusError) as exc:  # and now the node is full
        core.bind("default", "p3", "n1")
    assert "Insufficient cpu" in exc.value.message


# ------------------------------------------------------------- the readers' read (emulator.store.wire)
class PipelineReads(redis.Redis):
    """A redis-py client the packed read leaves alone (not exactly redis.Redis): the pipeline path, as reference."""


def _stream_store(url: str, client_class: type[redis.Redis], protocol: int | None, **config: int) -> Store:
    kwargs = {} if protocol is None else {"protocol": protocol}
    return Store(client_class.from_url(url, **kwargs), StoreConfig(**config))


@pytest.mark.parametrize("protocol", [None, 2, 3], ids=["default", "resp2", "resp3"])
@pytest.mark.parametrize(("positions", "count"), [
    ("mid", 1000),
    ("mid", 2),
    ("start", 1000),
    ("end", 1000),
], ids=["from-the-middle", "count-limits-each-stream", "everything", "nothing-new"])
def test_packed_stream_read_returns_what_the_pipeline_read_returns(redis_url: str, protocol: int, positions: str,
                                                                   count: int) -> None:
    core = ServerCore(Store.connect(redis_url, StoreConfig(stream_cap=16)))
    core.bootstrap()
    start = core.store.current_rv()
    created = [core.create(CONFIGMAP, _configmap(f"c{i}")) for i in range(24)]  # trims: a watermark to read
    core.create(POD, b.pod("p"))
    mid = int(created[20]["metadata"]["resourceVersion"])
    at = {"mid": mid, "start": start, "end": core.store.current_rv()}[positions]
    fast = _stream_store(redis_url, redis.Redis, protocol, stream_cap=16)
    slow = _stream_store(redis_url, PipelineReads, None, stream_cap=16)  # the store's client, as connect() makes it
    assert fast._fast_reads and not slow._fast_reads
    streams = {fast.stream_key(CONFIGMAP): at, fast.stream_key(POD): at, fast.stream_key(NODE): at}
    got, want = fast.read_streams(streams, count=count), slow.read_streams(streams, count=count)
    assert got == want
    if positions == "mid":
        assert [e[0] for e in got.entries[fast.stream_key(CONFIGMAP)]][:1] == [f"{mid + 1}-0".encode()]
        assert got.first_retained[fast.stream_key(CONFIGMAP)] is not None
    if positions == "end":
        assert got.entries == {}


def test_packed_stream_read_blocks_until_an_entry_arrives(core: ServerCore, redis_url: str) -> None:
    store = Store.connect(redis_url)
    stream = store.stream_key(CONFIGMAP)
    at = store.current_rv()
    assert store.read_streams({stream: at}, block_ms=10).entries == {}  # nothing within the block
    writer = threading.Thread(target=lambda: core.create(CONFIGMAP, _configmap("late")))
    writer.start()
    read = store.read_streams({stream: at}, block_ms=20_000)
    writer.join()
    assert [codec.decode(f[b"o"])["metadata"]["name"] for _, f in read.entries[stream]] == ["late"]


def test_packed_stream_read_error_reply_leaves_the_connection_in_step(core: ServerCore, redis_url: str) -> None:
    store = Store.connect(redis_url)
    store.redis.set("not-a-stream", "x")
    at = store.current_rv()
    core.create(CONFIGMAP, _configmap("after"))
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        store.read_streams({"not-a-stream": 0, store.stream_key(CONFIGMAP): at})
    # Both replies were read: the pool keeps its one connection, still open, and the next read gets its own replies.
    (conn,) = store.redis.connection_pool._available_connections
    assert conn._sock is not None
    read = store.read_streams({store.stream_key(CONFIGMAP): at})
    assert [codec.decode(f[b"o"])["metadata"]["name"] for _, f in read.entries[store.stream_key(CONFIGMAP)]] \
        == ["after"]
    assert store.redis.connection_pool._available_connections == [conn]


def test_packed_stream_read_retries_over_a_killed_connection(core: ServerCore, redis_url: str) -> None:
    store = Store.connect(redis_url)
    stream = store.stream_key(CONFIGMAP)
    at = store.current_rv()
    core.create(CONFIGMAP, _configmap("kept"))
    assert stream in store.read_streams({stream: at}).entries  # the reader's pooled connection now exists
    killed = redis.Redis.from_url(redis_url).client_kill_filter(_type="normal", skipme=True)
    assert killed >= 1
    read = store.read_streams({stream: at})  # the read is idempotent: redis-py's Retry reconnects and reads again
    assert [codec.decode(f[b"o"])["metadata"]["name"] for _, f in read.entries[stream]] == ["kept"]
