"""Indexer: an informer's thread-safe local cache, with secondary indexes.

Follows client-go ``tools/cache/store.go``, ``thread_safe_store.go`` and
``index.go`` (Python of our own). Objects are kept by key (``namespace/name``
or ``name``); an *index function* maps an object to the values it is indexed
under (zero, one or many), and ``by_index(index, value)`` answers "every
object whose index function yields ``value``" from a ``value -> keys`` map,
without scanning.

Standard index functions (names are the ``index`` argument of ``by_index``):

======================  ===========================================  =========================
name                    values of an object                          used for
======================  ===========================================  =========================
``namespace``           ``[metadata.namespace]`` ("" if none)        per-namespace listers
``spec.nodeName``       ``[spec.nodeName]``, "" for an unbound pod   pods of a node; pending pods
``label``               ``["key=value" for every label]``            selector lookups by one pair
``owner``               uid of every ``ownerReference``              dependents of an owner
======================  ===========================================  =========================

Custom index functions are any ``Callable[[dict], Iterable[str]]``.

Writes recompute the object's index values and touch only the index entries
that changed (``updateSingleIndex`` upstream), so an update that keeps the
node name and labels costs a few set lookups. Reads return the stored dicts
themselves: callers must not mutate them (the same object may be shared with
other informers of the process).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from emulator.api.types import Obj
from emulator.informers.delta_fifo import DeletedFinalStateUnknown, meta_namespace_key

IndexFunc = Callable[[Obj], Iterable[str]]

NAMESPACE_INDEX = "namespace"
NODE_NAME_INDEX = "spec.nodeName"
LABEL_INDEX = "label"
OWNER_UID_INDEX = "owner"


def namespace_index_func(obj: Obj) -> list[str]:
    """client-go ``MetaNamespaceIndexFunc``: the namespace ("" for cluster-scoped objects)."""
    return [(obj.get("metadata") or {}).get("namespace") or ""]


def node_name_index_func(obj: Obj) -> list[str]:
    """The node a pod is bound to; "" for an unbound pod, so ``by_index(NODE_NAME_INDEX, "")`` lists pending pods."""
    return [(obj.get("spec") or {}).get("nodeName") or ""]


def label_index_func(obj: Obj) -> list[str]:
    """One ``key=value`` value per label."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return [f"{k}={v}" for k, v in labels.items()]


def owner_uid_index_func(obj: Obj) -> list[str]:
    """The uid of every owner in ``metadata.ownerReferences``."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [str(r["uid"]) for r in refs if r.get("uid")]


STANDARD_INDEXERS: dict[str, IndexFunc] = {
    NAMESPACE_INDEX: namespace_index_func,
    NODE_NAME_INDEX: node_name_index_func,
    LABEL_INDEX: label_index_func,
    OWNER_UID_INDEX: owner_uid_index_func,
}


def _values(fn: IndexFunc, obj: Obj) -> set[str]:
    return set(fn(obj))


class Indexer:
    """Thread-safe ``key -> object`` store with named indexes; also the DeltaFIFO's ``known_objects``."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None,
                 key_func: Callable[[Any], str] = meta_namespace_key) -> None:
        self._key_func = key_func
        self._lock = threading.Lock()
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        if indexers:
            self.add_indexers(indexers)

    # ----------------------------------------------------------------- setup
    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add index functions; existing objects are indexed at once. A name may be added only once."""
        with self._lock:
            clash = set(indexers) & set(self._indexers)
            if clash:
                raise ValueError(f"indexer conflict: {sorted(clash)}")
            for name, fn in indexers.items():
                self._indexers[name] = fn
                index: dict[str, set[str]] = {}
                for key, obj in self._items.items():
                    for value in _values(fn, obj):
                        index.setdefault(value, set()).add(key)
                self._indices[name] = index

    @property
    def indexers(self) -> dict[str, IndexFunc]:
        with self._lock:
            return dict(self._indexers)

    # ---------------------------------------------------------------- writes
    def key_of(self, obj: Any) -> str:
        return obj.key if isinstance(obj, DeletedFinalStateUnknown) else self._key_func(obj)

    def add(self, obj: Obj) -> Obj | None:
        """Store ``obj`` (add or replace); returns the object it replaced, if any."""
        return self.update(obj)

    def update(self, obj: Obj) -> Obj | None:
        """Store ``obj`` (add or replace); returns the object it replaced, if any.

        Returning the old object lets the informer tell an add from an update with one key
        computation and one lock acquisition instead of a ``get`` followed by an ``update``.
        """
        key = self._key_func(obj)
        with self._lock:
            old = self._items.get(key)
            self._items[key] = obj
            self._reindex(key, old, obj)
        return old

    def delete(self, obj: Any) -> None:
        """Remove by the key of ``obj`` (an object or a :class:`DeletedFinalStateUnknown`); no-op if absent."""
        key = self.key_of(obj)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._reindex(key, old, None)

    def replace(self, objs: Iterable[Obj], resource_version: int | str = "") -> None:
        """Swap the whole content for ``objs`` and rebuild every index."""
        del resource_version
        items = {self._key_func(o): o for o in objs}
        with self._lock:
            self._items = items
            for name, fn in self._indexers.items():
                index: dict[str, set[str]] = {}
                for key, obj in items.items():
                    for value in _values(fn, obj):
                        index.setdefault(value, set()).add(key)
                self._indices[name] = index

    def resync(self) -> None:
        """Nothing to do for a plain cache (part of client-go's Store contract)."""

    def _reindex(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for name, fn in self._indexers.items():
            index = self._indices[name]
            if old is None and new is not None:  # an add: nothing to remove
                for value in fn(new):
                    keys = index.get(value)
                    if keys is None:
                        index[value] = {key}
                    else:
                        keys.add(key)
                continue
            old_raw = fn(old) if old is not None else ()
            new_raw = fn(new) if new is not None else ()
            if isinstance(old_raw, list | tuple) and old_raw == new_raw:
                continue  # the common update (a status change): nothing moves, no sets built
            old_values, new_values = set(old_raw), set(new_raw)
            if old_values == new_values:
                continue
            for value in old_values - new_values:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]  # don't let a churn of values (pod names, uids) grow the map
            for value in new_values - old_values:
                index.setdefault(value, set()).add(key)

    # ----------------------------------------------------------------- reads
    def get(self, obj: Any) -> Obj | None:
        return self.get_by_key(self.key_of(obj))

    def get_by_key(self, key: str) -> Obj | None:
        with self._lock:
            return self._items.get(key)

    def list(self) -> list[Obj]:
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def _index(self, name: str) -> dict[str, set[str]]:
        index = self._indices.get(name)
        if index is None:
            raise KeyError(f"index with name {name} does not exist")
        return index

    def index_keys(self, name: str, value: str) -> list[str]:
        """Keys of the objects indexed under ``value`` by index ``name`` (sorted, for stable output)."""
        with self._lock:
            return sorted(self._index(name).get(value, ()))

    def by_index(self, name: str, value: str) -> list[Obj]:
        """Objects indexed under ``value`` by index ``name``, in key order."""
        with self._lock:
            keys = sorted(self._index(name).get(value, ()))
            return [self._items[k] for k in keys]

    def index(self, name: str, obj: Obj) -> list[Obj]:
        """Objects sharing at least one value of index ``name`` with ``obj`` (client-go ``Index``)."""
        with self._lock:
            index = self._index(name)
            keys: set[str] = set()
            for value in _values(self._indexers[name], obj):
                keys |= index.get(value, set())
            return [self._items[k] for k in sorted(keys)]

    def list_index_func_values(self, name: str) -> list[str]:
        """Every value index ``name`` currently holds."""
        with self._lock:
            return sorted(self._index(name))
