"""Informers against a real Redis: list+watch, relist on 410 and on a Redis restart, the multiplexer, shards.

Fault injection goes through :class:`InstrumentedRedis`, a thin wrapper around the *real* client
that counts the pipelined ``XREAD`` s (which thread, which streams, how many entries) and can
hold them at a gate - that is how a watcher is made to fall behind a stream trim on purpose.
Nothing here sleeps: every wait is a condition with a deadline.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from emulator.api import errors
from emulator.api.kinds import CONFIGMAP, NAMESPACE, NODE, POD, Kind
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.informers import (
    NODE_NAME_INDEX,
    Backoff,
    DeletedFinalStateUnknown,
    Multiplexer,
    Reflector,
    ResourceEventHandlerFuncs,
    SharedInformer,
    SharedInformerFactory,
    meta_namespace_key,
    shared_multiplexer,
)
from emulator.informers.delta_fifo import DeltaFIFO
from emulator.informers.multiplexer import LINGER_MS, release_shared_multiplexer
from emulator.informers.sharding import shard_raw_filter
from emulator.server.core import ServerCore
from emulator.store import codec
from emulator.store.redis_server import EmbeddedRedis
from emulator.store.store import Store, StoreConfig, WatchEvent
from tests import builders as b
from tests.waiting import wait_for, wait_for_aof_write

pytestmark = pytest.mark.integration


# ------------------------------------------------------------------ helpers
class _Pipeline:
    def __init__(self, inner: Any, owner: InstrumentedRedis) -> None:
        self._inner = inner
        self._owner = owner
        self._streams: tuple[str, ...] | None = None

    def xread(self, streams: dict[str, str], *args: Any, **kwargs: Any) -> _Pipeline:
        self._streams = tuple(streams)
        self._inner.xread(streams, *args, **kwargs)
        return self

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        if self._streams is None:
            return self._inner.execute(*args, **kwargs)
        self._owner.before_xread()
        result = self._inner.execute(*args, **kwargs)
        self._owner.record_xread(self._streams, result[0])
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class InstrumentedRedis:
    """The real redis client, with its XREAD pipelines counted and optionally held at a gate."""

    def __init__(self, inner: redis.Redis) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.xreads: list[tuple[str, tuple[str, ...], dict[str, int]]] = []  # (thread, streams, entries)
        self._gate = threading.Event()
        self._gate.set()
        self._waiting = threading.Condition()
        self.waiting_at_gate = 0

    def pipeline(self, *args: Any, **kwargs: Any) -> _Pipeline:
        return _Pipeline(self._inner.pipeline(*args, **kwargs), self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def hold(self) -> None:
        with self._waiting:
            self.waiting_at_gate = 0
        self._gate.clear()

    def wait_for_readers_at_gate(self, n: int, timeout: float = 10.0) -> bool:
        with self._waiting:
            return self._waiting.wait_for(lambda: self.waiting_at_gate >= n, timeout)

    def release(self) -> None:
        self._gate.set()

    def before_xread(self) -> None:
        if not self._gate.is_set():
            with self._waiting:
                self.waiting_at_gate += 1
                self._waiting.notify_all()
            self._gate.wait(30)

    def record_xread(self, streams: tuple[str, ...], reply: Any) -> None:
        entries = {(name.decode() if isinstance(name, bytes) else name): len(items) for name, items in reply or ()}
        with self._lock:
            self.xreads.append((threading.current_thread().name, streams, entries))

    def reset(self) -> None:
        with self._lock:
            self.xreads.clear()


class Recorder:
    """A handler that rebuilds the cache from notifications and flags any inconsistent one.

    Consistent means: an add is for a key not present, an update's ``old`` is exactly the
    state last delivered for its key, a delete is for a present key.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.model: dict[str, Obj] = {}
        self.violations: list[str] = []
        self.counts: Counter[str] = Counter()
        self.initial_adds = 0
        self.tombstones: list[DeletedFinalStateUnknown] = []
        self.same_rv_updates = 0

    def on_add(self, obj: Obj, is_in_initial_list: bool) -> None:
        key = meta_namespace_key(obj)
        with self.cond:
            if key in self.model:
                self.violations.append(f"add of present {key}")
            self.model[key] = obj
            self.counts["add"] += 1
            self.initial_adds += is_in_initial_list
            self.cond.notify_all()

    def on_update(self, old: Obj, new: Obj) -> None:
        key = meta_namespace_key(new)
        with self.cond:
            if self.model.get(key) is not old:
                self.violations.append(f"update of {key}: old is not the last delivered state")
            if _rv(old) == _rv(new):
                self.same_rv_updates += 1
            self.model[key] = new
            self.counts["update"] += 1
            self.cond.notify_all()

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        key = meta_namespace_key(obj)
        with self.cond:
            if key not in self.model:
                self.violations.append(f"delete of absent {key}")
            self.model.pop(key, None)
            self.counts["delete"] += 1
            if isinstance(obj, DeletedFinalStateUnknown):
                self.tombstones.append(obj)
            self.cond.notify_all()

    def state(self) -> dict[str, str]:
        with self.cond:
            return {k: _rv(o) for k, o in self.model.items()}

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
        with self.cond:
            return self.cond.wait_for(predicate, timeout)


def _rv(obj: Obj) -> str:
    return str(obj["metadata"]["resourceVersion"])


def store_state(store: Store, kind: Kind, keep: Callable[[Obj], bool] = lambda o: True) -> dict[str, str]:
    return {meta_namespace_key(o): _rv(o) for o in store.list(kind).items if keep(o)}


def cache_state(informer: SharedInformer) -> dict[str, str]:
    return {meta_namespace_key(o): _rv(o) for o in informer.indexer.list()}


def fast_backoff() -> Backoff:
    return Backoff(initial=0.02, cap=0.2, jitter=0.0)


@pytest.fixture
def core(redis_url: str) -> ServerCore:
    c = ServerCore(Store.connect(redis_url))
    c.bootstrap()
    for ns in ("a", "b"):
        c.create(NAMESPACE, b.namespace(ns))
    return c


@pytest.fixture
def factories() -> Iterator[list[SharedInformerFactory]]:
    """Factories to shut down after the test whatever happens."""
    made: list[SharedInformerFactory] = []
    yield made
    for f in made:
        f.shutdown()


def relabel(store: Store, kind: Kind, ns: str | None, name: str, value: str) -> Obj:
    def mutate(obj: Obj) -> Obj:
        meta = obj["metadata"]
        return {**obj, "metadata": {**meta, "labels": {**(meta.get("labels") or {}), "v": value}}}

    return store.guaranteed_update(kind, ns, name, mutate)


# ------------------------------------------------------------ list + watch
@pytest.mark.parametrize(("options", "keep"), [
    ({}, lambda o: True),
    ({"namespace": "a"}, lambda o: o["metadata"]["namespace"] == "a"),
    ({"label_selector": "app=web"}, lambda o: o["metadata"]["labels"].get("app") == "web"),
    ({"field_selector": "spec.nodeName=n1"}, lambda o: o["spec"].get("nodeName") == "n1"),
    ({"namespace": "b", "label_selector": "app in (web,db)"},
     lambda o: o["metadata"]["namespace"] == "b" and o["metadata"]["labels"].get("app") in ("web", "db")),
], ids=["everything", "namespace", "label-selector", "field-selector", "namespace-and-set-selector"])
def test_informer_lists_then_watches_into_exactly_the_store_state(
        core: ServerCore, factories: list[SharedInformerFactory], options: dict[str, Any],
        keep: Callable[[Obj], bool]) -> None:
    store = core.store
    for i in range(30):
        core.create(POD, b.pod(f"p{i}", "ab"[i % 2], labels={"app": ("web", "db", "job")[i % 3]},
                               node=f"n{i % 3}" if i % 4 else None))
    factory = SharedInformerFactory(store, backoff_factory=fast_backoff)
    factories.append(factory)
    informer = factory.informer_for(POD, **options)
    recorder = Recorder()
    registration = informer.add_event_handler(recorder)
    factory.start()
    assert factory.wait_for_cache_sync(10) == {key: True for key in factory.informers()}
    wait_for(registration.has_synced, 20, "the handler to run every initial add")
    expected = store_state(store, POD, keep)
    assert cache_state(informer) == expected and recorder.initial_adds == len(expected) > 0

    # Then the watch: creates, updates (in and out of the selection), deletes.
    for i in range(30, 40):
        core.create(POD, b.pod(f"p{i}", "ab"[i % 2], labels={"app": ("web", "db", "job")[i % 3]}, node="n1"))
    for i in range(0, 30, 3):
        relabel(store, POD, "ab"[i % 2], f"p{i}", str(i))
    for i in range(1, 30, 5):
        store.delete(POD, "ab"[i % 2], f"p{i}")
    final_rv = store.current_rv()
    expected = store_state(store, POD, keep)
    assert recorder.wait_for(lambda: {k: _rv(o) for k, o in recorder.model.items()} == expected), (
        recorder.state(), expected)
    assert cache_state(informer) == expected
    assert recorder.violations == []
    wait_for(lambda: informer.last_sync_resource_version >= final_rv, 20, "the informer's rv to catch up")
    assert informer.reflector.lists == 1  # no relist was needed


def test_indexes_answer_from_the_informer_cache(core: ServerCore, factories: list[SharedInformerFactory]) -> None:
    for i in range(12):
        core.create(POD, b.pod(f"p{i}", "ab"[i % 2], node=f"n{i % 3}" if i % 4 else None))
    factory = SharedInformerFactory(core.store)
    factories.append(factory)
    informer = factory.informer_for(POD)
    factory.start()
    assert informer.wait_for_cache_sync(10)
    by_node = {n: sorted(o["metadata"]["name"] for o in informer.indexer.by_index(NODE_NAME_INDEX, n))
               for n in ("", "n1", "n2")}
    assert by_node == {"": ["p0", "p4", "p8"], "n1": ["p1", "p10", "p7"], "n2": ["p11", "p2", "p5"]}
    assert sorted(informer.indexer.index_keys("namespace", "b")) == [f"b/p{i}" for i in (1, 11, 3, 5, 7, 9)]


# -------------------------------------------------- trimmed stream -> 410
@pytest.mark.parametrize("multiplexed", [True, False], ids=["multiplexed", "direct-watch"])
def test_stream_trimmed_mid_watch_relists_and_handlers_stay_consistent(redis_url: str, multiplexed: bool) -> None:
    config = StoreConfig(stream_cap=8)
    writer = ServerCore(Store.connect(redis_url, config))
    writer.bootstrap()
    wstore = writer.store
    for i in range(20):
        writer.create(POD, b.pod(f"p{i}"))
    for i in range(3):
        writer.create(NODE, b.node(f"n{i}"))
    client = InstrumentedRedis(redis.Redis.from_url(redis_url))
    store = Store(client, config)  # type: ignore[arg-type]  # a wrapper around the real client
    mux = Multiplexer(store) if multiplexed else None
    pods = SharedInformer(store, POD, multiplexer=mux, backoff=fast_backoff())
    nodes = SharedInformer(store, NODE, multiplexer=mux, backoff=fast_backoff())
    recorder = Recorder()
    pods.add_event_handler(recorder)
    try:
        if mux is not None:
            mux.start()
        pods.start()
        nodes.start()
        assert pods.wait_for_cache_sync(10) and nodes.wait_for_cache_sync(10)
        assert recorder.wait_for(lambda: len(recorder.model) == 20)

        # Hold every watch read, then write far more than the stream keeps: the watcher falls out of the window.
        client.hold()
        # Every watching thread must be parked at the gate: the multiplexer, or both direct watches.
        assert client.wait_for_readers_at_gate(1 if multiplexed else 2), "a watch never came back for its next read"
        for i in range(0, 20, 2):
            relabel(wstore, POD, "default", f"p{i}", "x")
        deleted = [f"default/p{i}" for i in range(1, 20, 4)]
        for key in deleted:
            wstore.delete(POD, *key.split("/"))
        for i in range(20, 50):
            writer.create(POD, b.pod(f"p{i}"))
        writer.store.delete(POD, "default", "p49")  # born and gone inside the gap: nobody ever hears of it
        first_retained = int(wstore.redis.hget(wstore.trim_key, wstore.stream_key(POD)).split(b"-")[0])
        assert first_retained > pods.last_sync_resource_version + 1  # really out of the window
        client.release()

        expected = store_state(wstore, POD)
        assert recorder.wait_for(lambda: {k: _rv(o) for k, o in recorder.model.items()} == expected), (
            sorted(set(recorder.state().items()) ^ set(expected.items())))
        assert cache_state(pods) == expected
        assert recorder.violations == []
        # The gap's deletions arrive as tombstones carrying the last state the informer saw.
        assert sorted(t.key for t in recorder.tombstones) == sorted(deleted)
        assert all(t.obj is not None and t.obj["metadata"]["name"] == t.key.split("/")[1]
                   for t in recorder.tombstones)
        assert "default/p49" not in {t.key for t in recorder.tombstones}
        assert pods.reflector.lists >= 2
        assert any(isinstance(e, errors.StatusError) and e.code == 410 for e in pods.reflector.watch_errors)
        # Only the trimmed stream's informer relisted.
        assert nodes.reflector.lists == 1 and nodes.reflector.watch_errors == []
        assert cache_state(nodes) == store_state(wstore, NODE)
    finally:
        client.release()
        pods.stop()
        nodes.stop()
        if mux is not None:
            mux.stop()


# ------------------------------------------------------------ Redis restart
def test_redis_restart_informers_relist_and_converge(redis_server: EmbeddedRedis, redis_url: str,
                                                     factories: list[SharedInformerFactory]) -> None:
    writer = ServerCore(Store.connect(redis_url))
    writer.bootstrap()
    for i in range(15):
        writer.create(POD, b.pod(f"p{i}"))
        writer.create(CONFIGMAP, {"metadata": {"name": f"c{i}", "namespace": "default"}})
    # No client-side retries: a lost connection reaches the informers at once instead of being papered over.
    store = Store(redis.Redis.from_url(redis_url, retry=Retry(NoBackoff(), 0)))
    factory = SharedInformerFactory(store, backoff_factory=fast_backoff)
    factories.append(factory)
    pods, cms = factory.informer_for(POD), factory.informer_for(CONFIGMAP)
    recorder = Recorder()
    pods.add_event_handler(recorder)
    factory.start()
    assert all(factory.wait_for_cache_sync(10).values())
    # The crash must not take the writes above with it (the deletes below need them): on a busy disk
    # Redis may still hold them in its AOF buffer (see wait_for_aof_write).
    wait_for_aof_write(writer.store.redis)
    try:
        redis_server.kill()
        wait_for(lambda: pods.reflector.watch_errors and cms.reflector.watch_errors, 20, "both watches to break")
        wait_for(lambda: pods.reflector.list_errors, 20, "a relist to fail while Redis is down")
        redis_server.restart()
    finally:
        if not redis_server.running:
            redis_server.restart()
    writer = ServerCore(Store.connect(redis_url))
    for i in range(0, 15, 3):
        writer.store.delete(POD, "default", f"p{i}")
    for i in range(15, 25):
        writer.create(POD, b.pod(f"p{i}"))
    relabel(writer.store, POD, "default", "p1", "after-restart")
    expected = store_state(writer.store, POD)
    assert recorder.wait_for(lambda: {k: _rv(o) for k, o in recorder.model.items()} == expected, 30), (
        sorted(set(recorder.state().items()) ^ set(expected.items())))
    wait_for(lambda: cache_state(cms) == store_state(writer.store, CONFIGMAP), 30, "configmaps to converge")
    assert cache_state(pods) == expected
    assert recorder.violations == []
    # The configmaps did not change, so their cache may converge before their relist: wait for it.
    wait_for(lambda: pods.reflector.lists >= 2 and cms.reflector.lists >= 2, 30, "both informers to relist")
    assert any(isinstance(e, redis.ConnectionError) for e in pods.reflector.watch_errors)
    # Back-off grew while Redis was down (fast_backoff doubles from 20 ms, capped at 200 ms).
    delays = pods.reflector.backoffs
    assert delays[0] == pytest.approx(0.02) and delays == sorted(delays) and max(delays) <= 0.2


# -------------------------------------------------------- the multiplexer
def test_many_informers_share_one_reader_and_one_xread_per_batch(
        core: ServerCore, redis_url: str, factories: list[SharedInformerFactory],
        request: pytest.FixtureRequest) -> None:
    client = InstrumentedRedis(redis.Redis.from_url(redis_url))
    store = Store(client)  # type: ignore[arg-type]
    mux = Multiplexer(store)
    request.addfinalizer(mux.stop)
    factory = SharedInformerFactory(store, multiplexer=mux)
    factories.append(factory)
    s0, s1 = 0, 1
    informers = [
        factory.informer_for(POD),
        factory.informer_for(POD, namespace="a"),
        factory.informer_for(POD, label_selector="app=web"),
        factory.informer_for(POD, field_selector="spec.nodeName=n1"),
        factory.pod_shard_informer(s0),
        factory.pod_shard_informer(s1),
        factory.informer_for(NODE),
        factory.informer_for(CONFIGMAP),
        factory.informer_for(CONFIGMAP, namespace="b"),
        factory.informer_for(NAMESPACE),
    ]
    assert factory.informer_for(POD, namespace="a") is informers[1]  # one informer per combination
    recorders = [Recorder() for _ in informers]
    for informer, recorder in zip(informers, recorders, strict=True):
        informer.add_event_handler(recorder)
    factory.start()
    assert all(factory.wait_for_cache_sync(10).values())
    streams = sorted({store.stream_key(POD), store.stream_key(POD, s0), store.stream_key(POD, s1),
                      store.stream_key(NODE), store.stream_key(CONFIGMAP), store.stream_key(NAMESPACE)})
    wait_for(lambda: mux.streams() == streams, 20, "every informer to subscribe")
    # A read planned before the last subscriptions arrived may still be blocked: let one full read pass.
    wait_for(lambda: any(len(s) == len(streams) for _, s, _ in client.xreads), 20, "a read of every stream")
    lengths_before = {s: client.xlen(s) for s in streams}
    client.reset()
    decoded_before = mux.entries_read

    nodes = [f"n{i}" for i in range(8)]
    core.create_many(NODE, [b.node(n) for n in nodes])
    pods = [b.pod(f"p{i}", "ab"[i % 2], labels={"app": ("web", "db")[i % 2]}, node=nodes[i % 8] if i % 3 else None)
            for i in range(120)]
    core.create_many(POD, pods)
    core.create_many(CONFIGMAP, [{"metadata": {"name": f"c{i}", "namespace": "ab"[i % 2]}} for i in range(20)])
    for i in range(0, 120, 7):
        core.store.delete(POD, "ab"[i % 2], f"p{i}")

    def shard_keep(s: int) -> Callable[[Obj], bool]:
        return lambda o: bool(o["spec"].get("nodeName")) and core.store.shard_of(o["spec"]["nodeName"]) == s

    expectations: list[Callable[[Obj], bool]] = [
        lambda o: True, lambda o: o["metadata"]["namespace"] == "a",
        lambda o: o["metadata"]["labels"].get("app") == "web", lambda o: o["spec"].get("nodeName") == "n1",
        shard_keep(s0), shard_keep(s1), lambda o: True, lambda o: True,
        lambda o: o["metadata"]["namespace"] == "b", lambda o: True,
    ]
    for informer, recorder, keep in zip(informers, recorders, expectations, strict=True):
        expected = store_state(core.store, informer.kind, keep)
        assert recorder.wait_for(lambda r=recorder, e=expected: {k: _rv(o) for k, o in r.model.items()} == e)
        assert cache_state(informer) == expected
        assert recorder.violations == []

    # One reader thread did every XREAD, each over every stream, and read each entry once.
    reader_threads = {thread for thread, _, _ in client.xreads}
    assert reader_threads == {mux.name} and mux.thread is not None and mux.thread.name == mux.name
    assert sum(t.name == mux.name for t in threading.enumerate()) == 1
    assert [s for _, s, _ in client.xreads if tuple(sorted(s)) != tuple(streams)] == []
    entries_per_stream: Counter[str] = Counter()
    for _, _, entries in client.xreads:
        entries_per_stream.update(entries)
    written = {s: client.xlen(s) - lengths_before[s] for s in streams}
    assert {s: n for s, n in entries_per_stream.items() if n} == {s: n for s, n in written.items() if n}
    assert sum(written.values()) > len(client.xreads)  # batches: far fewer reads than events
    # Ten informers consumed the events (most pod events several times over), each entry decoded once.
    assert mux.entries_read - decoded_before == sum(written.values())
    assert sum(r.counts.total() for r in recorders) > sum(written.values())


def test_factories_of_one_process_share_the_process_multiplexer(core: ServerCore, redis_url: str,
                                                                 factories: list[SharedInformerFactory]) -> None:
    one = SharedInformerFactory(core.store)
    two = SharedInformerFactory(Store.connect(redis_url))
    factories.extend([one, two])
    assert one.multiplexer is two.multiplexer
    one.informer_for(POD)
    two.informer_for(CONFIGMAP)
    one.start()
    two.start()
    assert all(one.wait_for_cache_sync(10).values()) and all(two.wait_for_cache_sync(10).values())
    assert sum(t.name == one.multiplexer.name for t in threading.enumerate()) == 1
    mux = one.multiplexer
    one.shutdown()
    assert mux.running  # still serving the second factory
    two.shutdown()
    factories.clear()
    assert not mux.running
    fresh = shared_multiplexer(core.store)  # a new one after the last release
    try:
        assert fresh is not mux
    finally:
        release_shared_multiplexer(fresh)


@pytest.mark.parametrize(("asks", "released", "expected_ms"), [
    ((None,), (), LINGER_MS),
    ((50.0,), (), 50.0),
    ((50.0, None), (), LINGER_MS),  # a default holder (a scheduler) keeps the short linger
    ((50.0, 20.0), (), 20.0),
    ((50.0, None), (None,), 50.0),  # the short-linger holder left
    ((50.0, 20.0), (20.0, 50.0), LINGER_MS),  # nobody holds it: back to the default
], ids=["default", "one-long", "long-and-default", "two-long", "default-released", "all-released"])
def test_shared_multiplexer_lingers_the_shortest_time_its_holders_ask(
        core: ServerCore, asks: tuple[float | None, ...], released: tuple[float | None, ...],
        expected_ms: float) -> None:
    muxes = [shared_multiplexer(core.store, ask) for ask in asks]
    mux = muxes[0]
    try:
        for ask in released:
            release_shared_multiplexer(mux, linger_ms=ask)
        assert mux.linger == pytest.approx(expected_ms / 1000)
    finally:
        for _ in range(len(asks) - len(released)):
            release_shared_multiplexer(mux)


# ------------------------------------------------------------------ shards
def test_the_processs_own_writes_are_delivered_as_written_not_decoded(core: ServerCore,
                                                                      request: pytest.FixtureRequest) -> None:
    """Multiplexer.remember: a write's result is what its entry decodes to, so subscribers get it as is."""
    mux = Multiplexer(core.store)
    request.addfinalizer(mux.stop)
    got: list[WatchEvent] = []
    since = core.store.current_rv()
    mux.subscribe(core.store.stream_key(CONFIGMAP), since, lambda events, _last: got.extend(events),
                  lambda exc: None)
    mine = [core.create(CONFIGMAP, {"metadata": {"name": f"own-{i}"}, "data": {"k": str(i)}}) for i in range(2)]
    for obj in mine:
        mux.remember(obj)
    other = core.create(CONFIGMAP, {"metadata": {"name": "someone-elses"}})
    gone = core.store.delete(CONFIGMAP, "default", "own-0")
    mux.remember(gone)
    mux.start()
    wait_for(lambda: len(got) == 4, 10, "the four events")
    assert [e.type for e in got] == ["ADDED", "ADDED", "ADDED", "DELETED"]
    assert got[0].object is mine[0] and got[1].object is mine[1] and got[3].object is gone
    assert got[2].object == other and got[2].object is not other  # decoded: not this process's write
    assert mux.own_hits == 3
    for event in got:  # what a reader that does not remember decodes
        assert event.object == core.store.watch(CONFIGMAP, event.rv - 1).next_batch(timeout=1)[0].object


def test_shard_informer_holds_exactly_its_shards_pods(core: ServerCore,
                                                      factories: list[SharedInformerFactory]) -> None:
    store = core.store
    nodes = [f"node-{i}" for i in range(40)]
    shard = store.shard_of(nodes[0])
    mine = [n for n in nodes if store.shard_of(n) == shard]
    other = [n for n in nodes if store.shard_of(n) != shard]
    assert mine and other
    for i in range(60):
        # A label *called* nodeName naming one of our nodes must not fool the list's byte-level pre-filter.
        labels = {"nodeName": mine[0]} if i % 5 == 0 else {}
        core.create(POD, b.pod(f"p{i}", labels=labels, node=nodes[i % len(nodes)] if i % 6 else None))
    factory = SharedInformerFactory(store)
    factories.append(factory)
    informer = factory.pod_shard_informer(shard)
    recorder = Recorder()
    informer.add_event_handler(recorder)
    factory.start()
    assert informer.wait_for_cache_sync(10)

    def in_shard(o: Obj) -> bool:
        node = o["spec"].get("nodeName")
        return bool(node) and store.shard_of(node) == shard

    assert cache_state(informer) == store_state(store, POD, in_shard) != {}
    # Bind an unbound pod into the shard and one elsewhere (store-level writes, as a scheduler's bind).
    unbound = [o for o in store.list(POD).items if not o["spec"].get("nodeName")]
    for pod_obj, node in ((unbound[0], mine[0]), (unbound[1], other[0])):
        store.guaranteed_update(POD, "default", pod_obj["metadata"]["name"],
                                lambda o, n=node: {**o, "spec": {**o["spec"], "nodeName": n}})
    bound_now = unbound[0]["metadata"]["name"]
    gone = next(o for o in store.list(POD).items if in_shard(o) and o["metadata"]["name"] != bound_now)
    store.delete(POD, "default", gone["metadata"]["name"])
    core.create(POD, b.pod("late-mine", node=mine[-1]))
    core.create(POD, b.pod("late-other", node=other[-1]))
    expected = store_state(store, POD, in_shard)
    assert recorder.wait_for(lambda: {k: _rv(o) for k, o in recorder.model.items()} == expected)
    assert cache_state(informer) == expected
    assert recorder.violations == []
    assert f"default/{bound_now}" in expected
    assert "default/late-other" not in cache_state(informer)
    # The watch reads the shard's own stream, not the whole pod stream.
    assert factory.multiplexer.streams() == [store.stream_key(POD, shard)]


@pytest.mark.parametrize(("spec_node", "label", "passes"), [
    ("mine", None, True),
    ("other", None, False),
    (None, None, False),
    ("other", "mine", True),  # a false positive the exact filter removes afterwards
    ("mine", "other", True),
], ids=["bound-in-shard", "bound-elsewhere", "unbound", "label-names-our-node", "label-names-another-node"])
def test_shard_raw_filter_never_drops_a_pod_of_the_shard(redis_url: str, spec_node: str | None, label: str | None,
                                                          passes: bool) -> None:
    store = Store.connect(redis_url)
    names = [f"node-{i}" for i in range(40)]
    shard = store.shard_of(names[0])
    node_of = {"mine": names[0], "other": next(n for n in names if store.shard_of(n) != shard)}
    body = b.pod("p", labels={"nodeName": node_of[label]} if label else None,
                 node=node_of[spec_node] if spec_node else None)
    raw = codec.encode(body)
    assert shard_raw_filter(store.node_shards, shard)(raw) is passes


# ------------------------------------------------------------- resync etc.
def test_resync_reaches_only_handlers_that_asked_for_it(core: ServerCore) -> None:
    for i in range(5):
        core.create(CONFIGMAP, {"metadata": {"name": f"c{i}", "namespace": "default"}})
    clock = ManualClock()
    informer = SharedInformer(core.store, CONFIGMAP, resync_period=30.0, clock=clock, resync_check_interval=0.005)
    resyncing, quiet = Recorder(), Recorder()
    informer.add_event_handler(resyncing)
    informer.add_event_handler(quiet, resync_period=0)
    informer.start()
    try:
        assert informer.wait_for_cache_sync(10)
        assert resyncing.wait_for(lambda: len(resyncing.model) == 5) and quiet.wait_for(lambda: len(quiet.model) == 5)
        clock.advance(29)
        clock.advance(2)  # cluster time passes the 30 s period: the next check resyncs
        assert resyncing.wait_for(lambda: resyncing.same_rv_updates == 5)
        core.create(CONFIGMAP, {"metadata": {"name": "marker", "namespace": "default"}})
        assert quiet.wait_for(lambda: "default/marker" in quiet.model)  # ordered after any resync
        assert quiet.counts["update"] == 0 and quiet.same_rv_updates == 0
        assert resyncing.violations == [] and quiet.violations == []
    finally:
        informer.stop()


def test_handler_added_to_a_running_informer_gets_the_cache_first(core: ServerCore) -> None:
    for i in range(7):
        core.create(CONFIGMAP, {"metadata": {"name": f"c{i}", "namespace": "default"}})
    informer = SharedInformer(core.store, CONFIGMAP)
    informer.start()
    try:
        assert informer.wait_for_cache_sync(10)
        late = Recorder()
        gate = threading.Event()
        registration = informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda o, initial: (gate.wait(10), late.on_add(o, initial))))
        assert not registration.has_synced()  # seven initial notifications not yet run
        gate.set()
        assert late.wait_for(lambda: late.initial_adds == 7)
        wait_for(registration.has_synced, 20, "the late handler to sync")
        assert informer.listeners() == [registration]
        informer.remove_event_handler(registration)
        assert informer.listeners() == []
    finally:
        informer.stop()


def test_a_failing_handler_does_not_stop_the_others(core: ServerCore) -> None:
    informer = SharedInformer(core.store, CONFIGMAP)
    good = Recorder()

    def boom(obj: Obj, initial: bool) -> None:
        raise RuntimeError("handler bug")

    bad = informer.add_event_handler(ResourceEventHandlerFuncs(add=boom))
    informer.add_event_handler(good)
    informer.start()
    try:
        assert informer.wait_for_cache_sync(10)
        for i in range(3):
            core.create(CONFIGMAP, {"metadata": {"name": f"c{i}", "namespace": "default"}})
        assert good.wait_for(lambda: len(good.model) == 3)
        wait_for(lambda: bad.errors == 3, 20, "the failing handler to be called for every add")
    finally:
        informer.stop()


@pytest.mark.parametrize("shared_handler_thread", [False, True], ids=["thread-per-handler", "shared-handler-thread"])
def test_every_handler_sees_the_store_on_its_own_thread_or_the_shared_one(
        core: ServerCore, request: pytest.FixtureRequest, shared_handler_thread: bool) -> None:
    """With ``shared_handler_thread`` every handler runs on the informer's one handler thread: each still
    sees every notification in order (the Recorder checks it), a failing one stops none of the others,
    and a removed one is called no more - exactly as with a thread per handler.
    """
    for i in range(5):
        core.create(CONFIGMAP, {"metadata": {"name": f"c{i}", "namespace": "a"}})
    mux = Multiplexer(core.store)
    request.addfinalizer(mux.stop)
    informer = SharedInformer(core.store, CONFIGMAP, multiplexer=mux, shared_handler_thread=shared_handler_thread)
    request.addfinalizer(informer.stop)
    recorders = [Recorder() for _ in range(3)]
    ran_on: list[set[str]] = [set() for _ in recorders]

    def on_thread(recorder: Recorder, threads: set[str]) -> ResourceEventHandlerFuncs:
        def add(obj: Obj, initial: bool) -> None:
            threads.add(threading.current_thread().name)
            recorder.on_add(obj, initial)

        def update(old: Obj, new: Obj) -> None:
            threads.add(threading.current_thread().name)
            recorder.on_update(old, new)

        def delete(obj: Obj | DeletedFinalStateUnknown) -> None:
            threads.add(threading.current_thread().name)
            recorder.on_delete(obj)

        return ResourceEventHandlerFuncs(add=add, update=update, delete=delete)

    registrations = [informer.add_event_handler(on_thread(r, t)) for r, t in zip(recorders, ran_on, strict=True)]

    def boom(obj: Obj, initial: bool) -> None:
        raise RuntimeError("handler bug")

    failing = informer.add_event_handler(ResourceEventHandlerFuncs(add=boom))
    mux.start()
    informer.start()
    assert informer.wait_for_cache_sync(10)
    wait_for(lambda: all(reg.has_synced() for reg in registrations), 20, "every handler to run the initial list")

    for i in range(5, 25):
        core.create(CONFIGMAP, {"metadata": {"name": f"c{i}", "namespace": "ab"[i % 2]}})
    for i in range(0, 25, 3):
        relabel(core.store, CONFIGMAP, "ab"[i % 2] if i >= 5 else "a", f"c{i}", "changed")
    for i in range(1, 25, 4):
        core.store.delete(CONFIGMAP, "ab"[i % 2] if i >= 5 else "a", f"c{i}")
    expected = store_state(core.store, CONFIGMAP)
    for recorder in recorders:
        assert recorder.wait_for(lambda r=recorder: r.state() == expected), sorted(
            set(recorder.state().items()) ^ set(expected.items()))
        assert recorder.violations == []
    assert cache_state(informer) == expected
    wait_for(lambda: failing.errors == 25, 20, "the failing handler to be called for every add")

    if shared_handler_thread:
        assert ran_on == [{f"{informer.name}-handlers"}] * 3
    else:
        assert all(len(t) == 1 for t in ran_on) and len(set().union(*ran_on)) == 3

    informer.remove_event_handler(registrations[0])
    core.create(CONFIGMAP, {"metadata": {"name": "after-removal", "namespace": "a"}})
    for recorder in recorders[1:]:
        assert recorder.wait_for(lambda r=recorder: "a/after-removal" in r.model)
    assert "a/after-removal" not in recorders[0].model


def test_inline_handlers_run_on_the_processing_thread_in_order(core: ServerCore,
                                                               request: pytest.FixtureRequest) -> None:
    """``inline=True``: the handler runs on the informer's processing thread (no thread of its own), sees every
    notification in order, syncs once the initial list has run through it, a failing one stops none of the
    others, one added to a running informer gets the cache first, and a removed one is called no more."""
    for i in range(5):
        core.create(CONFIGMAP, {"metadata": {"name": f"c{i}", "namespace": "a"}})
    mux = Multiplexer(core.store)
    request.addfinalizer(mux.stop)
    informer = SharedInformer(core.store, CONFIGMAP, multiplexer=mux)
    request.addfinalizer(informer.stop)
    recorders = [Recorder() for _ in range(2)]
    ran_on: list[set[str]] = [set() for _ in recorders]

    def on_thread(recorder: Recorder, threads: set[str]) -> ResourceEventHandlerFuncs:
        def add(obj: Obj, initial: bool) -> None:
            threads.add(threading.current_thread().name)
            recorder.on_add(obj, initial)

        def update(old: Obj, new: Obj) -> None:
            threads.add(threading.current_thread().name)
            recorder.on_update(old, new)

        def delete(obj: Obj | DeletedFinalStateUnknown) -> None:
            threads.add(threading.current_thread().name)
            recorder.on_delete(obj)

        return ResourceEventHandlerFuncs(add=add, update=update, delete=delete)

    first = informer.add_event_handler(on_thread(recorders[0], ran_on[0]), inline=True)

    def boom(obj: Obj, initial: bool) -> None:
        raise RuntimeError("handler bug")

    failing = informer.add_event_handler(ResourceEventHandlerFuncs(add=boom), inline=True)
    mux.start()
    informer.start()
    assert informer.wait_for_cache_sync(10)
    wait_for(first.has_synced, 20, "the inline handler to run the initial list")
    assert recorders[0].initial_adds == 5  # synced means every initial notification has run through it
    late = informer.add_event_handler(on_thread(recorders[1], ran_on[1]), inline=True)
    assert late.has_synced() and recorders[1].initial_adds == 5  # the cache replayed to it on the spot

    for i in range(5, 25):
        core.create(CONFIGMAP, {"metadata": {"name": f"c{i}", "namespace": "ab"[i % 2]}})
    for i in range(0, 25, 3):
        relabel(core.store, CONFIGMAP, "ab"[i % 2] if i >= 5 else "a", f"c{i}", "changed")
    for i in range(1, 25, 4):
        core.store.delete(CONFIGMAP, "ab"[i % 2] if i >= 5 else "a", f"c{i}")
    expected = store_state(core.store, CONFIGMAP)
    for recorder in recorders:
        assert recorder.wait_for(lambda r=recorder: r.state() == expected), sorted(
            set(recorder.state().items()) ^ set(expected.items()))
        assert recorder.violations == []
    wait_for(lambda: failing.errors == 25, 20, "the failing handler to be called for every add")
    assert ran_on[0] - {threading.current_thread().name} == {f"{informer.name}-process"}
    assert ran_on[1] - {threading.current_thread().name} == {f"{informer.name}-process"}

    informer.remove_event_handler(first)
    core.create(CONFIGMAP, {"metadata": {"name": "after-removal", "namespace": "a"}})
    assert recorders[1].wait_for(lambda: "a/after-removal" in recorders[1].model)
    assert "a/after-removal" not in recorders[0].model


# ------------------------------------------------------ reflector details
def test_reflector_backs_off_exponentially_while_lists_fail(redis_url: str) -> None:
    class BrokenPipelines:
        def __init__(self, inner: redis.Redis) -> None:
            self._inner = inner

        def pipeline(self, *args: Any, **kwargs: Any) -> Any:
            raise redis.ConnectionError("injected: connection refused")

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    store = Store(BrokenPipelines(redis.Redis.from_url(redis_url)))  # type: ignore[arg-type]
    clock = ManualClock()
    slept: list[float] = []
    fifo = DeltaFIFO()
    reflector = Reflector(store, CONFIGMAP, fifo, page_size=0,
                          backoff=Backoff(initial=0.8, cap=30.0, jitter=0.0, reset_after=120.0, clock=clock),
                          clock=clock, sleep=lambda d: (slept.append(d), len(slept) >= 8 and reflector.stop()))
    reflector.run()  # returns once the injected sleep stops it: no real time passes
    assert slept == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    assert len(reflector.list_errors) == 8 and reflector.lists == 0 and not fifo.has_synced()


@pytest.mark.parametrize(("steps", "expected"), [
    ([0, 0, 0], [0.8, 1.6, 3.2]),
    ([0, 0, 121, 0], [0.8, 1.6, 0.8, 1.6]),
    ([0] * 8, [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]),
], ids=["doubles", "resets-after-two-quiet-minutes", "capped-at-30s"])
def test_backoff_follows_client_go(steps: list[float], expected: list[float]) -> None:
    clock = ManualClock()
    backoff = Backoff(jitter=0.0, clock=clock)
    got = []
    for step in steps:
        clock.advance(step)
        got.append(backoff.next())
    assert got == pytest.approx(expected)
    jittered = Backoff(clock=clock, rand=lambda: 0.5)  # up to 100 % jitter on top
    assert jittered.next() == pytest.approx(1.2)


def test_paged_list_replays_older_than_the_listed_state_are_dropped(redis_url: str) -> None:
    store = Store.connect(redis_url)
    fifo = DeltaFIFO(emit_delta_type_replaced=True)
    reflector = Reflector(store, CONFIGMAP, fifo)

    def cm(name: str, rv: int, value: str) -> Obj:
        return {"metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)}, "data": {"v": value}}

    # Page 1 read at rv 10; page 2 read later showed "late" at rv 14 (a change after the list's rv).
    reflector._sync_with([cm("early", 9, "a"), cm("late", 14, "new")], 10, paged=True)
    replay = [WatchEvent("MODIFIED", cm("late", 12, "old"), 12), WatchEvent("MODIFIED", cm("early", 13, "b"), 13),
              WatchEvent("MODIFIED", cm("late", 14, "new"), 14), WatchEvent("MODIFIED", cm("late", 15, "newer"), 15)]
    reflector._deliver(replay, 15)
    deltas = fifo.get_by_key("default/late") or []
    assert [(d.type, d.object["data"]["v"]) for d in deltas] == [("Replaced", "new"), ("Updated", "newer")]
    assert [d.object["data"]["v"] for d in fifo.get_by_key("default/early") or []] == ["a", "b"]
    assert reflector._listed_rvs is None and reflector.last_sync_resource_version == 15  # guard dropped


@pytest.mark.parametrize(("informer_period", "handler_period", "started", "expected", "check_after"), [
    (0.0, 30.0, False, 0.0, 0.0),
    (30.0, None, False, 30.0, 30.0),
    (30.0, 60.0, False, 60.0, 30.0),
    (30.0, 10.0, False, 10.0, 10.0),
    (30.0, 0.2, False, 1.0, 1.0),
    (30.0, 10.0, True, 30.0, 30.0),
    (30.0, 0.0, True, 0.0, 30.0),
], ids=["informer-without-resync-ignores-handlers", "default-is-the-informers", "longer-kept",
        "shorter-before-start-speeds-up-checks", "at-least-one-second", "shorter-after-start-raised-to-check",
        "zero-means-never"])
def test_handler_resync_periods_follow_client_go(core: ServerCore, informer_period: float,
                                                 handler_period: float | None, started: bool, expected: float,
                                                 check_after: float) -> None:
    informer = SharedInformer(core.store, CONFIGMAP, resync_period=informer_period)
    try:
        if started:
            informer.start()
        registration = informer.add_event_handler(Recorder(), resync_period=handler_period)
        assert registration.resync_period == expected
        assert informer.reflector.resync_period == check_after
    finally:
        informer.stop()
