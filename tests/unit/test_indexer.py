"""Indexer (client-go thread_safe_store.go / index.go): standard and custom indexes, updates, thread safety."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from emulator.informers.delta_fifo import DeletedFinalStateUnknown
from emulator.informers.indexer import (
    LABEL_INDEX,
    NAMESPACE_INDEX,
    NODE_NAME_INDEX,
    OWNER_UID_INDEX,
    STANDARD_INDEXERS,
    Indexer,
)


def pod(name: str, ns: str = "default", *, node: str | None = None, labels: dict[str, str] | None = None,
        owners: tuple[str, ...] = (), rv: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": dict(labels or {}), "resourceVersion": str(rv)}
    if owners:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": f"rs-{u}", "uid": u} for u in owners]
    spec: dict[str, Any] = {"containers": []}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec}


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


CLUSTER = [
    pod("web-1", "shop", node="n1", labels={"app": "web", "tier": "front"}, owners=("rs-a",)),
    pod("web-2", "shop", node="n2", labels={"app": "web", "tier": "front"}, owners=("rs-a",)),
    pod("db-0", "shop", node="n1", labels={"app": "db"}, owners=("sts-b",)),
    pod("pending", "batch", labels={"app": "job"}, owners=("job-c", "extra-d")),
    pod("lonely", "default"),
    node("n1"),
]


def priority_class_of(obj: dict[str, Any]) -> list[str]:
    pc = (obj.get("spec") or {}).get("priorityClassName")
    return [pc] if pc else []


@pytest.mark.parametrize(("index", "value", "keys"), [
    (NAMESPACE_INDEX, "shop", ["shop/db-0", "shop/web-1", "shop/web-2"]),
    (NAMESPACE_INDEX, "", ["n1"]),
    (NAMESPACE_INDEX, "nowhere", []),
    (NODE_NAME_INDEX, "n1", ["shop/db-0", "shop/web-1"]),
    (NODE_NAME_INDEX, "", ["batch/pending", "default/lonely", "n1"]),
    (LABEL_INDEX, "app=web", ["shop/web-1", "shop/web-2"]),
    (LABEL_INDEX, "tier=front", ["shop/web-1", "shop/web-2"]),
    (LABEL_INDEX, "app=nope", []),
    (OWNER_UID_INDEX, "rs-a", ["shop/web-1", "shop/web-2"]),
    (OWNER_UID_INDEX, "extra-d", ["batch/pending"]),
], ids=["namespace", "cluster-scoped-namespace-is-empty", "unknown-namespace", "node-name",
        "unbound-pods-have-empty-node", "label-pair", "second-label-pair", "unknown-label", "owner-uid",
        "second-owner"])
def test_standard_indexes(index: str, value: str, keys: list[str]) -> None:
    indexer = Indexer(STANDARD_INDEXERS)
    for obj in CLUSTER:
        indexer.add(obj)
    assert indexer.index_keys(index, value) == keys
    assert [o["metadata"]["name"] for o in indexer.by_index(index, value)] == [k.split("/")[-1] for k in keys]


def test_custom_index_function_and_multi_value_lookups() -> None:
    indexer = Indexer({"priority": priority_class_of, LABEL_INDEX: STANDARD_INDEXERS[LABEL_INDEX]})
    high = {**pod("a"), "spec": {"priorityClassName": "high"}}
    indexer.add(high)
    indexer.add({**pod("b"), "spec": {"priorityClassName": "low"}})
    indexer.add(pod("c"))
    assert indexer.index_keys("priority", "high") == ["default/a"]
    assert indexer.list_index_func_values("priority") == ["high", "low"]
    # index(): everything sharing at least one value with the given object
    indexer.add(pod("d", labels={"app": "x", "team": "t"}))
    indexer.add(pod("e", labels={"team": "t"}))
    indexer.add(pod("f", labels={"app": "x"}))
    probe = pod("probe", labels={"app": "x", "team": "t"})
    assert [o["metadata"]["name"] for o in indexer.index(LABEL_INDEX, probe)] == ["d", "e", "f"]


@pytest.mark.parametrize(("before", "after", "index", "old_value", "new_value"), [
    (pod("p", node="n1"), pod("p", node="n2", rv=2), NODE_NAME_INDEX, "n1", "n2"),
    (pod("p"), pod("p", node="n1", rv=2), NODE_NAME_INDEX, "", "n1"),
    (pod("p", labels={"v": "1"}), pod("p", labels={"v": "2"}, rv=2), LABEL_INDEX, "v=1", "v=2"),
    (pod("p", owners=("u1",)), pod("p", owners=("u2",), rv=2), OWNER_UID_INDEX, "u1", "u2"),
], ids=["pod-moves-node", "pod-gets-bound", "label-changes", "owner-changes"])
def test_update_moves_the_key_between_index_values_and_drops_empty_ones(
        before: dict[str, Any], after: dict[str, Any], index: str, old_value: str, new_value: str) -> None:
    indexer = Indexer(STANDARD_INDEXERS)
    indexer.add(before)
    indexer.update(after)
    assert indexer.index_keys(index, old_value) == []
    assert old_value not in indexer.list_index_func_values(index)  # no empty sets left behind
    assert indexer.index_keys(index, new_value) == ["default/p"]
    assert indexer.get_by_key("default/p") is after


def test_delete_by_object_or_tombstone_and_unknown_keys() -> None:
    indexer = Indexer(STANDARD_INDEXERS)
    for obj in CLUSTER:
        indexer.add(obj)
    indexer.delete(pod("web-1", "shop"))  # the key is what counts, not the (stale) content
    indexer.delete(DeletedFinalStateUnknown("shop/web-2", None))
    indexer.delete(pod("never-there"))
    assert indexer.index_keys(LABEL_INDEX, "app=web") == []
    assert indexer.index_keys(OWNER_UID_INDEX, "rs-a") == []
    assert indexer.get_by_key("shop/web-1") is None
    assert sorted(indexer.list_keys()) == ["batch/pending", "default/lonely", "n1", "shop/db-0"]


def test_replace_rebuilds_every_index() -> None:
    indexer = Indexer(STANDARD_INDEXERS)
    for obj in CLUSTER:
        indexer.add(obj)
    indexer.replace([pod("new", "shop", node="n9", labels={"app": "web"})], 42)
    assert indexer.list_keys() == ["shop/new"]
    assert indexer.index_keys(LABEL_INDEX, "app=web") == ["shop/new"]
    assert indexer.index_keys(NODE_NAME_INDEX, "n1") == []
    assert indexer.list_index_func_values(NAMESPACE_INDEX) == ["shop"]


def test_add_indexers_indexes_existing_objects_and_refuses_duplicates() -> None:
    indexer = Indexer()
    for obj in CLUSTER:
        indexer.add(obj)
    indexer.add_indexers({NODE_NAME_INDEX: STANDARD_INDEXERS[NODE_NAME_INDEX]})
    assert indexer.index_keys(NODE_NAME_INDEX, "n2") == ["shop/web-2"]
    with pytest.raises(ValueError, match="conflict"):
        indexer.add_indexers({NODE_NAME_INDEX: STANDARD_INDEXERS[NODE_NAME_INDEX]})
    with pytest.raises(KeyError, match="does not exist"):
        indexer.by_index("missing", "x")


def test_concurrent_writers_leave_indexes_consistent_with_items() -> None:
    indexer = Indexer(STANDARD_INDEXERS)
    barrier = threading.Barrier(4)

    def writer(t: int) -> None:
        barrier.wait()
        for i in range(2000):
            name = f"p{i % 50}"
            if i % 7 == 6:
                indexer.delete(pod(name, f"ns{t}"))
            else:
                indexer.update(pod(name, f"ns{t}", node=f"n{i % 5}", labels={"gen": str(i % 3)}, rv=i))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    items = {indexer.key_of(o): o for o in indexer.list()}
    for name, fn in STANDARD_INDEXERS.items():
        rebuilt: dict[str, set[str]] = {}
        for key, obj in items.items():
            for value in fn(obj):
                rebuilt.setdefault(value, set()).add(key)
        assert {v: set(indexer.index_keys(name, v)) for v in indexer.list_index_func_values(name)} == rebuilt
