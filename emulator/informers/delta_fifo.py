"""DeltaFIFO: the queue between a reflector and an informer's processing loop.

Behaviour follows client-go ``tools/cache/delta_fifo.go``; the Python is our own.

* Per key, an ordered list of :class:`Delta` (``Added``/``Updated``/``Deleted``/
  ``Replaced``/``Sync``): the consumer sees *everything* that happened to an
  object since it last processed it, in order. Keys leave the queue in the
  order they first entered it, and a key is never queued twice.
* Two consecutive deletions of one key collapse into one (``dedupDeltas``),
  keeping the one that knows more: a real final state beats a
  :class:`DeletedFinalStateUnknown` tombstone.
* :meth:`DeltaFIFO.replace` (a relist) queues every listed object as
  ``Replaced`` (``Sync`` unless ``emit_delta_type_replaced``) and, for every
  key known before (queued, or in ``known_objects`` - the informer's indexer)
  that the list no longer holds, a ``Deleted`` carrying a
  :class:`DeletedFinalStateUnknown`: the deletion happened while we were not
  watching, so the last state we saw may be stale.
* :meth:`DeltaFIFO.resync` queues a ``Sync`` for every known object that has
  nothing queued (a queued delta is newer than the cache, and a stale Sync
  behind it would move the consumer backwards).
* :meth:`DeltaFIFO.pop` runs ``process`` *under the queue lock*, so whatever
  ``process`` updates (the indexer that is ``known_objects``) is always in
  step with the queue; ``process`` raising :class:`RequeueError` puts the
  item back (unless newer deltas arrived for it meanwhile, which cannot
  happen under the lock, so it simply goes back).
* :meth:`DeltaFIFO.has_synced` is true once the first ``replace`` has been
  fully popped (or the first add/update/delete came before any replace).

Objects are shared, never copied: the same dict may sit in several
informers' queues and caches (the watch multiplexer decodes each event once).
Everyone treats cached objects as immutable, as client-go requires.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from emulator.api.types import Obj

ADDED = "Added"
UPDATED = "Updated"
DELETED = "Deleted"
# A relist saw this object; it may or may not have changed while we were not watching.
REPLACED = "Replaced"
# A periodic resync re-delivers an object the cache already holds.
SYNC = "Sync"


@dataclass(frozen=True, slots=True)
class DeletedFinalStateUnknown:
    """Tombstone for an object deleted while the watch was down: ``obj`` is the last state seen (maybe stale)."""

    key: str
    obj: Obj | None


class Delta(NamedTuple):
    type: str
    object: Any  # the object (a dict), or a DeletedFinalStateUnknown for a Deleted found by a relist


Deltas = list[Delta]


class KeyListerGetter(Protocol):
    """What a DeltaFIFO needs of the consumer's store to detect deletions and resync (the indexer)."""

    def list_keys(self) -> list[str]: ...

    def get_by_key(self, key: str) -> Obj | None: ...


class FIFOClosedError(Exception):
    """Raised by :meth:`DeltaFIFO.pop` once the queue is closed and empty."""


class RequeueError(Exception):
    """Raise from a ``process`` function to put the item back; ``cause`` (if any) is re-raised by ``pop``."""

    def __init__(self, cause: BaseException | None = None) -> None:
        super().__init__(str(cause) if cause else "requeue")
        self.cause = cause


def meta_namespace_key(obj: Any) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects (client-go ``MetaNamespaceKeyFunc``)."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    name = meta.get("name", "")
    return f"{ns}/{name}" if ns else name


def _is_deletion_dup(newer: Delta, older: Delta) -> Delta | None:
    """If both are deletions, the one to keep (the one with the real final state); else None."""
    if newer.type != DELETED or older.type != DELETED:
        return None
    if isinstance(older.object, DeletedFinalStateUnknown):
        return newer
    return older


class DeltaFIFO:
    """A producer/consumer queue of per-key deltas. Thread-safe; see the module docstring."""

    def __init__(self, key_func: Callable[[Any], str] = meta_namespace_key,
                 known_objects: KeyListerGetter | None = None, *, emit_delta_type_replaced: bool = False,
                 transformer: Callable[[Any], Any] | None = None) -> None:
        self._key_func = key_func
        self._known = known_objects
        self._emit_replaced = emit_delta_type_replaced
        self._transformer = transformer
        # A plain Lock (not the RLock Condition defaults to): ``process`` must not re-enter the queue.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._items: dict[str, Deltas] = {}
        self._queue: deque[str] = deque()  # a key is in here iff it is in _items
        self._populated = False
        self._initial_population_count = 0
        self._closed = False

    # ----------------------------------------------------------------- keys
    def key_of(self, obj: Any) -> str:
        """The key of an object, a tombstone, or a non-empty :data:`Deltas` (its newest object)."""
        if isinstance(obj, list):
            if not obj:
                raise ValueError("0 length Deltas object; can't get key")
            obj = obj[-1].object
        if isinstance(obj, DeletedFinalStateUnknown):
            return obj.key
        return self._key_func(obj)

    # -------------------------------------------------------------- producer
    def add(self, obj: Obj) -> None:
        with self._lock:
            self._populated = True
            self._queue_action(ADDED, obj)
            self._wake()

    def update(self, obj: Obj) -> None:
        with self._lock:
            self._populated = True
            self._queue_action(UPDATED, obj)
            self._wake()

    def delete(self, obj: Any) -> None:
        """Queue a deletion, unless the key is unknown both here and to ``known_objects``.

        A key nobody knows was already reported deleted (typically by a relist's tombstone):
        a second report would only confuse handlers.
        """
        key = self.key_of(obj)
        with self._lock:
            self._populated = True
            if key not in self._items and (self._known is None or self._known.get_by_key(key) is None):
                return
            self._queue_action(DELETED, obj)
            self._wake()

    def apply(self, changes: Iterable[Delta]) -> None:
        """Queue a batch of ``Added``/``Updated``/``Deleted`` deltas under one lock acquisition.

        Equivalent to calling :meth:`add` / :meth:`update` / :meth:`delete` for each, in order;
        a watch delivers events in batches, and taking the lock (and waking the consumer) once
        per batch instead of once per event is most of the cost of queueing.
        """
        changes = list(changes)
        if not changes:
            return
        with self._lock:
            self._populated = True
            known, items, queue, key_func = self._known, self._items, self._queue, self._key_func
            for change in changes:
                if self._transformer is not None:
                    self._queue_action(change.type, change.object)  # the general path
                    continue
                # Inlined _queue_action (this is the hot path of every watch event).
                action, obj = change
                key = obj.key if isinstance(obj, DeletedFinalStateUnknown) else key_func(obj)
                deltas = items.get(key)
                if deltas is None:
                    if action == DELETED and (known is None or known.get_by_key(key) is None):
                        continue  # already reported deleted (see delete())
                    items[key] = [change]
                    queue.append(key)
                    continue
                keep = _is_deletion_dup(change, deltas[-1])
                if keep is None:
                    deltas.append(change)
                else:
                    deltas[-1] = keep
            self._wake()

    def _add_if_not_present(self, key: str, deltas: Deltas) -> None:
        self._populated = True
        if key in self._items:
            return
        self._queue.append(key)
        self._items[key] = list(deltas)
        self._cond.notify()

    def _wake(self) -> None:
        """Wake the consumers if anything is queued (lock held)."""
        if self._queue:
            self._cond.notify_all()

    def _queue_action(self, action: str, obj: Any) -> None:
        key = self.key_of(obj)
        if self._transformer is not None:
            obj = self._transformer(obj)
        deltas = self._items.get(key)
        if deltas is None:
            # Callers wake the consumer once per public call (_wake): a notify per key costs more
            # than the rest of queueing.
            self._items[key] = [Delta(action, obj)]
            self._queue.append(key)
            return
        new = Delta(action, obj)
        keep = _is_deletion_dup(new, deltas[-1])
        if keep is None:
            deltas.append(new)
        else:
            deltas[-1] = keep

    def replace(self, objs: Iterable[Obj], resource_version: int | str = "") -> None:
        """Atomically: queue every object as Replaced/Sync, then tombstones for keys that vanished."""
        del resource_version  # part of the client-go contract; the queue itself does not need it
        action = REPLACED if self._emit_replaced else SYNC
        with self._lock:
            keys: set[str] = set()
            for obj in objs:
                keys.add(self.key_of(obj))
                self._queue_action(action, obj)
            queued_deletions = 0
            # Keys with queued deltas that the relist no longer shows: their last queued state is the
            # freshest we know; unwrap an earlier tombstone so tombstones never nest.
            for key in [k for k in self._items if k not in keys]:
                last = self._items[key][-1].object
                if isinstance(last, DeletedFinalStateUnknown):
                    last = last.obj
                queued_deletions += 1
                self._queue_action(DELETED, DeletedFinalStateUnknown(key, last))
            if self._known is not None:
                # Keys only the consumer's cache knows (nothing queued): tombstone with the cached state.
                for key in self._known.list_keys():
                    if key in keys or key in self._items:
                        continue
                    queued_deletions += 1
                    self._queue_action(DELETED, DeletedFinalStateUnknown(key, self._known.get_by_key(key)))
            if not self._populated:
                self._populated = True
                self._initial_population_count = len(keys) + queued_deletions
            self._wake()

    def resync(self) -> None:
        """Queue a Sync for every known object with nothing queued (no-op without ``known_objects``)."""
        if self._known is None:
            return
        with self._lock:
            for key in self._known.list_keys():
                if key in self._items:
                    continue  # a queued delta is newer than the cache: a Sync behind it would go backwards
                obj = self._known.get_by_key(key)
                if obj is not None:
                    self._queue_action(SYNC, obj)
            self._wake()

    # -------------------------------------------------------------- consumer
    def _wait_locked(self, timeout: float | None) -> bool:
        """Wait (lock held) until an item is queued: False after ``timeout`` seconds; FIFOClosedError once closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._queue:
            if self._closed:
                raise FIFOClosedError("DeltaFIFO: manipulating with closed queue")
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            self._cond.wait(remaining)
        return True

    def pop(self, process: Callable[[Deltas, bool], None], timeout: float | None = None) -> Deltas | None:
        """Take the oldest key's deltas and run ``process(deltas, is_in_initial_list)`` under the lock.

        Blocks until an item is queued (None after ``timeout`` seconds if given). Raises
        :class:`FIFOClosedError` once closed. If ``process`` raises :class:`RequeueError`, the
        deltas go back in the queue and the error's cause (if any) is raised; any other
        exception propagates and the deltas are dropped (the informer's ``RetryOnError`` is off
        upstream too).
        """
        with self._lock:
            if not self._wait_locked(timeout):
                return None
            return self._process_next_locked(process)[0]

    def pop_many(self, process: Callable[[Deltas, bool], None], max_items: int = 256,
                 timeout: float | None = None) -> int:
        """Like :meth:`pop`, for up to ``max_items`` keys in one lock hold; returns how many were processed.

        Waits (up to ``timeout``) only for the first item. Each key is processed exactly as
        :meth:`pop` would; a :class:`RequeueError` requeues that key and ends the batch.
        Producers wait for the whole batch, so keep ``max_items`` small enough for their latency.
        """
        with self._lock:
            if not self._wait_locked(timeout):
                return 0
            done = 0
            queue = self._queue
            while queue and done < max_items:
                done += 1
                if not self._process_next_locked(process)[1]:
                    break
            return done

    def _process_next_locked(self, process: Callable[[Deltas, bool], None]) -> tuple[Deltas, bool]:
        """Pop the oldest key and process its deltas (lock held): (deltas, False) when they went back in the queue.

        A :class:`RequeueError` requeues them and raises its cause, if it has one.
        """
        is_in_initial_list = not self._has_synced_locked()
        key = self._queue.popleft()
        if self._initial_population_count > 0:
            self._initial_population_count -= 1
        deltas = self._items.pop(key)
        try:
            process(deltas, is_in_initial_list)
        except RequeueError as e:
            self._add_if_not_present(key, deltas)
            if e.cause is not None:
                raise e.cause from e
            return deltas, False
        return deltas, True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    # --------------------------------------------------------------- queries
    def has_synced(self) -> bool:
        """True once the first replace's items were all popped, or the first write was not a replace."""
        with self._lock:
            return self._has_synced_locked()

    def _has_synced_locked(self) -> bool:
        return self._populated and self._initial_population_count == 0

    def list(self) -> list[Any]:
        """The newest object of every queued key."""
        with self._lock:
            return [deltas[-1].object for deltas in self._items.values()]

    def list_keys(self) -> list[str]:
        with self._lock:
            return list(self._queue)

    def get_by_key(self, key: str) -> Deltas | None:
        """A copy of the key's queued deltas, or None."""
        with self._lock:
            deltas = self._items.get(key)
            return list(deltas) if deltas is not None else None

    def get(self, obj: Any) -> Deltas | None:
        return self.get_by_key(self.key_of(obj))

    def __len__(self) -> int:
        with self._lock:
            return len(self._queue)
