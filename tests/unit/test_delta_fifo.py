"""DeltaFIFO semantics (client-go tools/cache/delta_fifo.go): ordering, dedup, Replace, Resync, Pop, HasSynced."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from emulator.informers.delta_fifo import (
    ADDED,
    DELETED,
    REPLACED,
    SYNC,
    UPDATED,
    DeletedFinalStateUnknown,
    Delta,
    DeltaFIFO,
    FIFOClosedError,
    RequeueError,
    meta_namespace_key,
)
from emulator.informers.indexer import Indexer
from tests.waiting import wait_for


def obj(name: str, rv: int = 1, ns: str | None = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(rv)}
    if ns:
        meta["namespace"] = ns
    return {"metadata": meta}


def tomb(name: str, last: dict[str, Any] | None) -> DeletedFinalStateUnknown:
    return DeletedFinalStateUnknown(f"default/{name}", last)


def summary(deltas: list[Delta] | None) -> list[tuple[str, Any]]:
    """(type, rv or tombstone marker) per delta: compact and comparable."""
    out: list[tuple[str, Any]] = []
    for d in deltas or []:
        if isinstance(d.object, DeletedFinalStateUnknown):
            inner = d.object.obj
            out.append((d.type, ("tomb", inner["metadata"]["resourceVersion"] if inner else None)))
        else:
            out.append((d.type, d.object["metadata"]["resourceVersion"]))
    return out


def drain(fifo: DeltaFIFO) -> list[tuple[str, list[tuple[str, Any]], bool]]:
    """Pop everything: (key, deltas summary, is_in_initial_list) in pop order."""
    out: list[tuple[str, list[tuple[str, Any]], bool]] = []
    seen: list[bool] = []
    while len(fifo):
        deltas = fifo.pop(lambda d, initial: seen.append(initial), timeout=0)
        assert deltas is not None
        out.append((fifo.key_of(deltas), summary(deltas), seen[-1]))
    return out


def apply(fifo: DeltaFIFO, ops: list[tuple[str, Any]]) -> None:
    for op, arg in ops:
        getattr(fifo, op)(arg)


# ------------------------------------------------------------------ keys
@pytest.mark.parametrize(("value", "key"), [
    (obj("a"), "default/a"),
    (obj("n1", ns=None), "n1"),
    (DeletedFinalStateUnknown("kube-system/x", None), "kube-system/x"),
    ([Delta(ADDED, obj("old")), Delta(UPDATED, obj("b"))], "default/b"),
], ids=["namespaced", "cluster-scoped", "tombstone", "deltas-newest"])
def test_key_of(value: Any, key: str) -> None:
    assert DeltaFIFO().key_of(value) == key


def test_key_of_empty_deltas_is_an_error() -> None:
    with pytest.raises(ValueError, match="0 length Deltas"):
        DeltaFIFO().key_of([])


# ------------------------------------------------- per-key order and dedup
@pytest.mark.parametrize(("ops", "expected"), [
    ([("add", obj("a", 1)), ("update", obj("a", 2)), ("update", obj("a", 3))],
     [(ADDED, "1"), (UPDATED, "2"), (UPDATED, "3")]),
    ([("add", obj("a", 1)), ("delete", obj("a", 2)), ("delete", obj("a", 2))],
     [(ADDED, "1"), (DELETED, "2")]),
    ([("add", obj("a", 1)), ("delete", tomb("a", obj("a", 1))), ("delete", obj("a", 3))],
     [(ADDED, "1"), (DELETED, "3")]),
    ([("add", obj("a", 1)), ("delete", obj("a", 3)), ("delete", tomb("a", obj("a", 1)))],
     [(ADDED, "1"), (DELETED, "3")]),
    ([("add", obj("a", 1)), ("delete", obj("a", 2)), ("add", obj("a", 3)), ("delete", obj("a", 4))],
     [(ADDED, "1"), (DELETED, "2"), (ADDED, "3"), (DELETED, "4")]),
], ids=["updates-kept-in-order", "identical-deletes-collapse", "real-delete-replaces-tombstone",
        "tombstone-after-real-delete-dropped", "non-consecutive-deletes-kept"])
def test_deltas_per_key_are_ordered_and_deletes_deduplicated(ops: list[tuple[str, Any]],
                                                             expected: list[tuple[str, Any]]) -> None:
    fifo = DeltaFIFO()
    apply(fifo, ops)
    assert fifo.list_keys() == ["default/a"]
    assert summary(fifo.get_by_key("default/a")) == expected


def test_delete_of_a_key_nobody_knows_is_ignored() -> None:
    known = Indexer()
    fifo = DeltaFIFO(known_objects=known)
    fifo.delete(obj("ghost"))
    assert len(fifo) == 0
    known.add(obj("cached"))
    fifo.delete(obj("cached", 5))  # known to the consumer's cache: the deletion is news
    assert summary(fifo.get_by_key("default/cached")) == [(DELETED, "5")]


def test_keys_pop_in_first_queued_order_with_all_their_deltas() -> None:
    fifo = DeltaFIFO()
    apply(fifo, [("add", obj("a", 1)), ("add", obj("b", 2)), ("update", obj("a", 3)), ("add", obj("c", 4))])
    assert [(key, deltas) for key, deltas, _ in drain(fifo)] == [
        ("default/a", [(ADDED, "1"), (UPDATED, "3")]),
        ("default/b", [(ADDED, "2")]),
        ("default/c", [(ADDED, "4")]),
    ]


# ------------------------------------------------------------------ replace
@pytest.mark.parametrize(("known", "queued", "listed", "expected"), [
    ([], [], [obj("a", 1), obj("b", 2)],
     {"default/a": [(REPLACED, "1")], "default/b": [(REPLACED, "2")]}),
    ([obj("a", 1), obj("gone", 2)], [], [obj("a", 3)],
     {"default/a": [(REPLACED, "3")], "default/gone": [(DELETED, ("tomb", "2"))]}),
    ([], [("add", obj("q", 5))], [],
     {"default/q": [(ADDED, "5"), (DELETED, ("tomb", "5"))]}),
    ([obj("q", 1)], [("update", obj("q", 6))], [],
     {"default/q": [(UPDATED, "6"), (DELETED, ("tomb", "6"))]}),
    ([], [("add", obj("q", 5)), ("delete", tomb("q", obj("q", 5)))], [],
     {"default/q": [(ADDED, "5"), (DELETED, ("tomb", "5"))]}),
], ids=["fresh-list", "vanished-known-key-gets-tombstone-with-cached-state",
        "vanished-queued-key-gets-tombstone-with-newest-queued-state", "queued-state-beats-cache",
        "tombstones-never-nest"])
def test_replace(known: list[dict[str, Any]], queued: list[tuple[str, Any]], listed: list[dict[str, Any]],
                 expected: dict[str, list[tuple[str, Any]]]) -> None:
    indexer = Indexer()
    for o in known:
        indexer.add(o)
    fifo = DeltaFIFO(known_objects=indexer, emit_delta_type_replaced=True)
    apply(fifo, queued)
    fifo.replace(listed, 10)
    assert {k: summary(fifo.get_by_key(k)) for k in fifo.list_keys()} == expected
    for key, deltas in expected.items():
        if deltas[-1][0] == DELETED:  # the tombstone carries the right key and an unwrapped object
            last = fifo.get_by_key(key)[-1].object  # type: ignore[index]
            assert isinstance(last, DeletedFinalStateUnknown) and last.key == key
            assert not isinstance(last.obj, DeletedFinalStateUnknown)


def test_replace_emits_sync_unless_replaced_is_requested() -> None:
    fifo = DeltaFIFO()
    fifo.replace([obj("a")], 1)
    assert summary(fifo.get_by_key("default/a")) == [(SYNC, "1")]


# ------------------------------------------------------------------- resync
def test_resync_queues_sync_only_for_known_keys_with_nothing_queued() -> None:
    indexer = Indexer()
    for o in (obj("a", 1), obj("b", 2)):
        indexer.add(o)
    fifo = DeltaFIFO(known_objects=indexer)
    fifo.update(obj("a", 3))  # newer than the cache: a Sync of the cached a=1 would go backwards
    fifo.resync()
    assert {k: summary(fifo.get_by_key(k)) for k in fifo.list_keys()} == {
        "default/a": [(UPDATED, "3")],
        "default/b": [(SYNC, "2")],
    }


def test_resync_without_known_objects_does_nothing() -> None:
    fifo = DeltaFIFO()
    fifo.resync()
    assert len(fifo) == 0


# ---------------------------------------------------------------- has_synced
@pytest.mark.parametrize(("known", "setup", "pops_to_sync"), [
    ([], [("replace", [obj("a"), obj("b")])], 2),
    ([], [("replace", [])], 0),
    ([], [("add", obj("a"))], 0),
    ([obj("x")], [("replace", [obj("a")])], 2),
    ([], [("replace", [obj("a")]), ("add", obj("b")), ("replace", [obj("c")])], 1),
], ids=["first-list-fully-popped", "empty-first-list", "write-before-any-list",
        "tombstones-count-in-the-first-list", "only-the-first-replace-counts"])
def test_has_synced(known: list[dict[str, Any]], setup: list[tuple[str, Any]], pops_to_sync: int) -> None:
    indexer = Indexer()
    for o in known:
        indexer.add(o)
    fifo = DeltaFIFO(known_objects=indexer, emit_delta_type_replaced=True)
    assert not fifo.has_synced()
    apply(fifo, setup)
    initial_flags = []
    for _ in range(pops_to_sync):
        assert not fifo.has_synced()
        fifo.pop(lambda d, initial: initial_flags.append(initial), timeout=0)
    assert fifo.has_synced()
    assert initial_flags == [True] * pops_to_sync
    # Anything popped after the sync is no longer part of the initial list.
    fifo.add(obj("late"))
    flags: list[bool] = []
    while len(fifo):
        fifo.pop(lambda d, initial: flags.append(initial), timeout=0)
    assert flags and not any(flags)


# ---------------------------------------------------------------------- pop
def test_requeue_puts_the_item_back_and_raises_the_cause() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a", 1))

    def fail(deltas: list[Delta], initial: bool) -> None:
        raise RequeueError(ValueError("try later"))

    with pytest.raises(ValueError, match="try later"):
        fifo.pop(fail)
    assert summary(fifo.get_by_key("default/a")) == [(ADDED, "1")]
    assert fifo.pop(lambda d, i: None, timeout=0) is not None
    assert len(fifo) == 0


def test_other_errors_drop_the_item() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a"))

    def boom(deltas: list[Delta], initial: bool) -> None:
        raise RuntimeError("handler bug")

    with pytest.raises(RuntimeError):
        fifo.pop(boom)
    assert len(fifo) == 0


def test_pop_blocks_until_an_item_arrives_and_close_wakes_it() -> None:
    fifo = DeltaFIFO()
    got: list[Any] = []
    popped = threading.Event()

    def consumer() -> None:
        got.append(fifo.pop(lambda d, i: None))
        popped.set()
        try:
            fifo.pop(lambda d, i: None)
        except FIFOClosedError as e:
            got.append(e)

    t = threading.Thread(target=consumer)
    t.start()
    # The consumer blocks in pop (CPython's Condition lists its waiters), not a 50 ms pause standing in for it.
    wait_for(lambda: fifo._cond._waiters, 5, "the consumer to block in pop")  # type: ignore[attr-defined]
    assert not popped.is_set()  # nothing queued: still blocked
    fifo.add(obj("a", 7))
    assert popped.wait(5)
    fifo.close()
    t.join(5)
    assert not t.is_alive()
    assert summary(got[0]) == [(ADDED, "7")]
    assert isinstance(got[1], FIFOClosedError)


def test_pop_with_timeout_returns_none_when_empty() -> None:
    assert DeltaFIFO().pop(lambda d, i: None, timeout=0.01) is None


def test_process_runs_under_the_lock_so_known_objects_stay_in_step() -> None:
    indexer = Indexer()
    fifo = DeltaFIFO(known_objects=indexer, emit_delta_type_replaced=True)
    fifo.replace([obj("a", 1)], 1)

    def process(deltas: list[Delta], initial: bool) -> None:
        indexer.add(deltas[-1].object)
        # A producer racing us cannot see "a" neither queued nor known: it waits for the lock.
        assert fifo._lock.locked()

    fifo.pop(process)
    fifo.replace([], 2)  # a is now known only to the indexer: the relist must tombstone it
    assert summary(fifo.get_by_key("default/a")) == [(DELETED, ("tomb", "1"))]


def test_transformer_sees_every_object_once() -> None:
    seen: list[str] = []

    def strip(o: Any) -> Any:
        if isinstance(o, dict):
            seen.append(meta_namespace_key(o))
            return {**o, "stripped": True}
        return o

    fifo = DeltaFIFO(transformer=strip)
    fifo.add(obj("a"))
    fifo.update(obj("a", 2))
    assert seen == ["default/a", "default/a"]
    assert all(d.object["stripped"] for d in fifo.get_by_key("default/a") or [])


# ------------------------------------------------------------- batch paths
@pytest.mark.parametrize("ops", [
    [("add", obj("a", 1)), ("update", obj("a", 2)), ("add", obj("b", 3)), ("delete", obj("a", 4))],
    [("add", obj("a", 1)), ("delete", obj("a", 2)), ("delete", obj("a", 2)), ("delete", obj("ghost", 3))],
    [("delete", obj("cached", 5)), ("update", obj("c", 6)), ("delete", tomb("c", obj("c", 6)))],
], ids=["mixed", "dedup-and-unknown-delete", "known-object-delete-and-tombstone"])
def test_apply_batch_equals_one_call_per_change(ops: list[tuple[str, Any]]) -> None:
    kinds = {"add": ADDED, "update": UPDATED, "delete": DELETED}
    fifos = []
    for _ in range(2):
        known = Indexer()
        known.add(obj("cached", 1))
        fifos.append(DeltaFIFO(known_objects=known))
    apply(fifos[0], ops)
    fifos[1].apply([Delta(kinds[op], arg) for op, arg in ops])
    assert [(k, summary(fifos[0].get_by_key(k))) for k in fifos[0].list_keys()] == \
        [(k, summary(fifos[1].get_by_key(k))) for k in fifos[1].list_keys()]
    assert fifos[1].has_synced()  # a watch write before any list counts as populated, as add() does


def test_pop_many_processes_a_bounded_batch_in_order_and_stops_at_a_requeue() -> None:
    fifo = DeltaFIFO()
    fifo.apply([Delta(ADDED, obj(f"k{i}", i)) for i in range(10)])
    seen: list[str] = []
    assert fifo.pop_many(lambda d, i: seen.append(fifo.key_of(d)), max_items=4) == 4
    assert seen == [f"default/k{i}" for i in range(4)]

    def requeue_k5(deltas: list[Delta], initial: bool) -> None:
        if fifo.key_of(deltas) == "default/k5":
            raise RequeueError()
        seen.append(fifo.key_of(deltas))

    assert fifo.pop_many(requeue_k5, max_items=100) == 2  # k4 done, k5 requeued: the batch ends there
    assert fifo.list_keys() == [f"default/k{i}" for i in range(6, 10)] + ["default/k5"]
    assert fifo.pop_many(lambda d, i: None, timeout=0) == 5
    assert fifo.pop_many(lambda d, i: None, timeout=0) == 0
