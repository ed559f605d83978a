"""SharedInformer and SharedInformerFactory: one cache and one watch per kind, many handlers.

Behaviour follows client-go ``tools/cache/shared_informer.go`` and
``controller.go`` (``processDeltas``); the Python is our own.

Data path of one informer::

    multiplexer thread ──deliver──► Reflector ──► DeltaFIFO ──pop──► processing thread
                                                                     │ indexer.update/add/delete
                                                                     │ distribute notifications
                                                       ┌─────────────┴─────────────┐
                                                       ▼                           ▼
                                              listener thread (handler A)   listener thread (handler B)

* The **reflector** thread lists and relists; watch events arrive on the
  process's multiplexer thread and only go as far as the DeltaFIFO.
* The **processing** thread pops the FIFO and, under the FIFO's lock (so the
  FIFO's ``known_objects`` - the indexer - is always in step), applies each
  delta to the indexer and turns it into a notification: ``Added``/``Updated``/
  ``Replaced``/``Sync`` of a key already cached is an *update*, otherwise an
  *add*; ``Deleted`` is a *delete* (of the object, or of a
  :class:`~emulator.informers.delta_fifo.DeletedFinalStateUnknown`).
* An update whose old and new resourceVersions are equal is a **sync**: it
  goes only to handlers whose resync period is due (client-go
  ``sharedIndexInformer.OnUpdate``). So a relist that finds an object
  unchanged tells nobody, and a periodic resync reaches exactly the handlers
  that asked for it.
* Each handler has its own **listener** thread and unbounded buffer, so a
  slow handler delays only itself. A listener wakes once per burst and runs
  everything buffered, which keeps the per-event thread hand-off cost down.
  With ``shared_handler_thread`` the handlers of one informer share one
  thread instead (each keeps its buffer, order and sync tracking): one
  wake-up per batch instead of one per handler, for a process whose handlers
  only enqueue keys (the controller manager: ~15 on its pod informer).
* ``on_add(obj, is_in_initial_list)`` is True for the objects of the first
  list (and for the replay a handler added to a running informer gets); a
  handler registration's ``has_synced()`` is True once the informer has synced
  *and* the handler has run every such initial notification.

A handler that raises is logged and skipped (a simplification, see
``docs/architecture.md``). Processes hosting many informers should raise the
garbage collector's thresholds (``docs/architecture.md``, "Informers").

:class:`SharedInformerFactory` hands out one informer per (kind, namespace,
label selector, field selector, node shard) - asking twice returns the same
informer - and ties every informer of the process to one multiplexer.
:meth:`SharedInformerFactory.pod_shard_informer` is the kubelet shard's
informer: pods bound to the nodes of one shard, from that shard's stream.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from emulator.api.kinds import POD, Kind
from emulator.api.meta import resource_version
from emulator.api.selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector
from emulator.api.types import Obj
from emulator.clock import Clock, SystemClock
from emulator.informers.delta_fifo import (
    ADDED,
    DELETED,
    REPLACED,
    SYNC,
    UPDATED,
    DeletedFinalStateUnknown,
    DeltaFIFO,
    Deltas,
    FIFOClosedError,
)
from emulator.informers.indexer import NAMESPACE_INDEX, NODE_NAME_INDEX, STANDARD_INDEXERS, Indexer, IndexFunc
from emulator.informers.multiplexer import Multiplexer, release_shared_multiplexer, shared_multiplexer
from emulator.informers.reflector import Backoff, Reflector
from emulator.store.store import Store

log = logging.getLogger(__name__)

# client-go minimumResyncPeriod: a handler may not ask for resyncs more often than this.
MINIMUM_RESYNC_PERIOD = 1.0


class ResourceEventHandler(Protocol):
    """What an informer notifies (client-go ``ResourceEventHandler``)."""

    def on_add(self, obj: Obj, is_in_initial_list: bool) -> None: ...

    def on_update(self, old: Obj, new: Obj) -> None: ...

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None: ...


@dataclass
class ResourceEventHandlerFuncs:
    """A handler from plain functions; any of them may be None (client-go ``ResourceEventHandlerFuncs``)."""

    add: Callable[[Obj, bool], None] | None = None
    update: Callable[[Obj, Obj], None] | None = None
    delete: Callable[[Obj | DeletedFinalStateUnknown], None] | None = None

    def on_add(self, obj: Obj, is_in_initial_list: bool) -> None:
        if self.add is not None:
            self.add(obj, is_in_initial_list)

    def on_update(self, old: Obj, new: Obj) -> None:
        if self.update is not None:
            self.update(old, new)

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        if self.delete is not None:
            self.delete(obj)


# Notifications: (kind, a, b). add: (obj, is_in_initial_list); update: (old, new); delete: (obj, None).
_ADD, _UPDATE, _DELETE = 0, 1, 2


class _Notification(NamedTuple):
    kind: int
    a: Any
    b: Any


def _dispatch(handler: ResourceEventHandler, note: _Notification) -> None:
    if note.kind == _UPDATE:
        handler.on_update(note.a, note.b)
    elif note.kind == _ADD:
        handler.on_add(note.a, note.b)
    else:
        handler.on_delete(note.a)


class _Dispatcher:
    """One thread running the handlers of several registrations of one informer (``shared_handler_thread``).

    Upstream gives every handler a goroutine of its own; a Python thread per handler costs a thread
    wake-up (and a GIL hand-off) per watch batch per handler, which is most of what ~15 quick
    enqueue-a-key handlers on the controller manager's pod informer cost. Here the registrations
    share one wake-up event and one thread, which drains each registration's buffer in turn: each
    handler still sees its own notifications in order and exactly once, and ``has_synced`` is kept
    per registration; what changes is only that a slow handler delays the other handlers of the
    same informer (never the informer or the reader).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.wakeup = threading.Event()
        self._lock = threading.Lock()
        self._registrations: list[HandlerRegistration] = []
        self._thread: threading.Thread | None = None
        self._stopped = False

    def add(self, registration: HandlerRegistration) -> None:
        with self._lock:
            if registration not in self._registrations:
                self._registrations = [*self._registrations, registration]
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
        self.wakeup.set()  # it may have notifications buffered before it started

    def remove(self, registration: HandlerRegistration) -> None:
        with self._lock:
            self._registrations = [r for r in self._registrations if r is not registration]

    def stop(self) -> None:
        self._stopped = True
        self.wakeup.set()

    def join(self, timeout: float | None = None) -> None:
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stopped:
            self.wakeup.wait()
            self.wakeup.clear()
            for registration in self._registrations:  # copy-on-write list: no lock needed to iterate
                if self._stopped:
                    return
                registration.drain()


class HandlerRegistration:
    """One handler on one informer: its buffer, its thread, its resync schedule (client-go ``processorListener``).

    With a ``dispatcher`` the handler runs on the dispatcher's thread, shared with the informer's
    other handlers, instead of a thread of its own (see :class:`_Dispatcher`). ``inline``: it runs
    on the informer's processing thread as each notification is distributed, with no buffer and
    no thread - for a handler that only hands the object on to a queue of its own (a kubelet
    shard's inbox), where a thread wake-up per watch batch would cost more than the call.
    """

    def __init__(self, handler: ResourceEventHandler, *, requested_resync: float, resync_period: float, now: float,
                 upstream_synced: Callable[[], bool], name: str, dispatcher: _Dispatcher | None = None,
                 inline: bool = False) -> None:
        self.handler = handler
        self.requested_resync_period = requested_resync
        self.resync_period = resync_period
        self.next_resync = now + resync_period
        self.name = name
        self._upstream_synced = upstream_synced
        # The buffer is a deque (append/popleft are atomic) and the wake-up an Event: adding a
        # notification costs an append and, only when the listener sleeps, one Event.set.
        self._pending: deque[_Notification] = deque()
        self._dispatcher = dispatcher
        self._inline = inline
        self._wakeup = dispatcher.wakeup if dispatcher is not None else threading.Event()
        self._count_lock = threading.Lock()
        self._draining = threading.Lock()  # held while this handler's notifications run (join waits on it)
        self._initial_pending = 0
        self._stopped = False
        self._started = False
        self._thread: threading.Thread | None = None
        self.errors = 0  # handler calls that raised

    # The informer calls these with its delta lock held.
    def add(self, note: _Notification) -> None:
        if self._inline:
            self._call_inline(note)
            return
        if note.kind == _ADD and note.b:
            with self._count_lock:
                self._initial_pending += 1
        self._pending.append(note)
        # The listener clears the event *before* draining, so an append it might miss sets it again.
        if not self._wakeup.is_set():
            self._wakeup.set()

    def _call_inline(self, note: _Notification) -> None:
        """Run the handler for ``note`` now, on the caller's thread (the informer's, in order)."""
        if self._stopped:
            return
        initial = note.kind == _ADD and note.b
        if initial:  # has_synced() stays False while an initial-list notification is being handled
            with self._count_lock:
                self._initial_pending += 1
        with self._draining:
            try:
                _dispatch(self.handler, note)
            except Exception:
                self.errors += 1
                log.exception("%s: event handler failed", self.name)
        if initial:
            with self._count_lock:
                self._initial_pending -= 1

    def should_resync(self, now: float) -> bool:
        return self.resync_period > 0 and now >= self.next_resync

    def determine_next_resync(self, now: float) -> None:
        self.next_resync = now + self.resync_period

    def has_synced(self) -> bool:
        """The informer has synced and this handler has run every initial-list notification."""
        # Upstream first: once it has synced, every initial notification has been counted, so a
        # zero count read afterwards really means "all delivered" (not "none counted yet").
        if not self._upstream_synced():
            return False
        with self._count_lock:
            return self._initial_pending == 0

    def pending(self) -> int:
        return len(self._pending)

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self._inline:
            return  # no thread: the informer's processing thread runs the handler
        if self._dispatcher is not None:
            self._dispatcher.add(self)
            return
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        if self._dispatcher is not None:
            self._dispatcher.remove(self)
        self._wakeup.set()

    def join(self, timeout: float | None = None) -> None:
        if self._inline:
            # No handler call of ours runs once this returns (unless called from that very call).
            if self._draining.acquire(timeout=-1 if timeout is None else timeout):
                self._draining.release()
            return
        if self._dispatcher is not None:
            # No handler call of ours runs once this returns (unless called from that very call).
            if self._dispatcher._thread is not threading.current_thread() and \
                    self._draining.acquire(timeout=-1 if timeout is None else timeout):
                self._draining.release()
            return
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopped:
            self._wakeup.wait()
            self._wakeup.clear()
            self.drain()

    def drain(self) -> None:
        """Run every buffered notification, in order (on this registration's thread or its dispatcher's)."""
        handler = self.handler
        pending = self._pending
        with self._draining:
            initial_done = 0
            while pending:
                if self._stopped:
                    return  # undelivered notifications are dropped, as upstream does on stop
                note = pending.popleft()
                try:
                    _dispatch(handler, note)
                except Exception:
                    self.errors += 1
                    log.exception("%s: event handler failed", self.name)
                if note.kind == _ADD and note.b:
                    initial_done += 1
                    if initial_done >= 256 or not pending:  # keep has_synced() current in long bursts
                        with self._count_lock:
                            self._initial_pending -= initial_done
                        initial_done = 0
            if initial_done:
                with self._count_lock:
                    self._initial_pending -= initial_done


class SharedInformer:
    """A cache of one kind (optionally one namespace / selectors / node shard) fed by a reflector.

    ``start()`` runs it on its own threads; ``has_synced()`` / ``wait_for_cache_sync()`` tell
    when the first list is in the cache. Read the cache through :attr:`indexer` (``get_by_key``,
    ``list``, ``by_index``); never mutate what it returns.

    With a ``multiplexer`` the watch is a subscription of it, and whoever owns the multiplexer
    starts it (the factory does); without one the informer reads its stream on its own
    reflector thread (one connection and one decode per informer: fine for a test or a tool,
    not for a process with many informers).
    """

    def __init__(self, store: Store, kind: Kind, *, namespace: str | None = None,
                 label_selector: LabelSelector | str | None = None,
                 field_selector: FieldSelector | str | None = None, shard: int | None = None,
                 indexers: Mapping[str, IndexFunc] | None = None, resync_period: float = 0.0,
                 clock: Clock | None = None, multiplexer: Multiplexer | None = None, page_size: int = 1000,
                 backoff: Backoff | None = None, sleep: Callable[[float], object] | None = None,
                 resync_check_interval: float = 1.0, name: str = "", shared_handler_thread: bool = False) -> None:
        if isinstance(label_selector, str):
            label_selector = parse_label_selector(label_selector)
        if isinstance(field_selector, str):
            field_selector = parse_field_selector(field_selector, kind.selectable_fields)
        self.kind = kind
        self.namespace = namespace if kind.namespaced else None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.shard = shard
        self.clock = clock or SystemClock()
        self.name = name or f"informer[{kind.resource}{'@' + str(shard) if shard is not None else ''}]"
        self.default_resync_period = resync_period
        self._resync_check_period = resync_period
        # shared_handler_thread: every handler runs on one thread of the informer (_Dispatcher), not one each.
        self._dispatcher = _Dispatcher(f"{self.name}-handlers") if shared_handler_thread else None
        self.indexer = Indexer(indexers if indexers is not None else _default_indexers(kind))
        self.fifo = DeltaFIFO(known_objects=self.indexer, emit_delta_type_replaced=True)
        self.reflector = Reflector(
            store, kind, self.fifo, namespace=self.namespace, label_selector=label_selector,
            field_selector=field_selector, shard=shard, page_size=page_size, multiplexer=multiplexer,
            resync_period=resync_period, should_resync=self._should_resync, clock=self.clock, backoff=backoff,
            sleep=sleep, resync_check_interval=resync_check_interval, name=self.name.replace("informer", "reflector"))
        self._lock = threading.Lock()  # started / stopped / listener set
        self._block_deltas = threading.Lock()  # held while a delta is applied or a handler joins
        self._listeners: dict[HandlerRegistration, bool] = {}  # -> is it syncing in this resync round
        self._started = False
        self._stopped = False
        self._synced = threading.Event()
        self._threads: list[threading.Thread] = []

    # --------------------------------------------------------------- handlers
    def add_event_handler(self, handler: ResourceEventHandler, resync_period: float | None = None, *,
                          inline: bool = False) -> HandlerRegistration:
        """Register ``handler``; on a running informer it first gets an add for every cached object.

        ``inline``: the handler runs on the informer's processing thread, under its delta lock, as
        each notification is distributed (no buffer, no thread of its own: see
        :class:`HandlerRegistration`). Only for a handler that returns at once and never calls back
        into the informer (it hands the object to a queue of its own).

        ``resync_period`` (cluster seconds) defaults to the informer's; 0 means never. As in
        client-go (``AddEventHandlerWithResyncPeriod``): a period under one second becomes one
        second; an informer created without resync (period 0) never resyncs, whatever a handler
        asks; before start a shorter period speeds up the informer's resync checks, after start
        it is raised to the check period.
        """
        requested = self.default_resync_period if resync_period is None else resync_period
        with self._lock:
            if self._stopped:
                raise RuntimeError(f"{self.name}: handler not added, the informer has stopped")
            period = requested
            if period > 0:
                period = max(period, MINIMUM_RESYNC_PERIOD)
                if 0 < period < self._resync_check_period and not self._started:
                    self._resync_check_period = period
                    self.reflector.resync_period = period
                if self._resync_check_period == 0:
                    log.warning("%s: resync period %ss ignored: this informer does not resync", self.name, period)
                    period = 0
                else:
                    # The reflector's resync timer is fixed once running (client-go does the same).
                    period = max(period, self._resync_check_period)
            listener = HandlerRegistration(handler, requested_resync=requested, resync_period=period,
                                           now=self.clock.now(), upstream_synced=self.has_synced,
                                           name=f"{self.name}-handler-{len(self._listeners)}",
                                           dispatcher=None if inline else self._dispatcher, inline=inline)
            if not self._started:
                self._listeners[listener] = True
                return listener
            # Join a running informer: no delta may be applied while we replay the cache to the new handler.
            with self._block_deltas:
                self._listeners[listener] = True
                for obj in self.indexer.list():
                    listener.add(_Notification(_ADD, obj, True))
                listener.start()
            return listener

    def remove_event_handler(self, registration: HandlerRegistration) -> None:
        with self._lock, self._block_deltas:
            if self._listeners.pop(registration, None) is None:
                return
        registration.stop()
        registration.join(5.0)

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        with self._lock:
            if self._started:
                raise RuntimeError("informer has already started")
            self.indexer.add_indexers(indexers)

    # -------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start the reflector, the processing loop and every handler's thread (idempotent)."""
        with self._lock:
            if self._started or self._stopped:
                return
            self._started = True
            for listener in self._listeners:
                listener.start()
            for target, suffix in ((self._process_loop, "process"), (self.reflector.run, "reflector")):
                thread = threading.Thread(target=target, name=f"{self.name}-{suffix}", daemon=True)
                self._threads.append(thread)
                thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every thread of this informer; it cannot be started again."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            listeners = list(self._listeners)
        self.reflector.stop()
        self.fifo.close()
        for thread in self._threads:
            thread.join(timeout)
        for listener in listeners:
            listener.stop()
        for listener in listeners:
            listener.join(timeout)
        if self._dispatcher is not None:
            self._dispatcher.stop()
            self._dispatcher.join(timeout)

    @property
    def has_started(self) -> bool:
        return self._started

    def has_synced(self) -> bool:
        """The first list has been popped into the cache (client-go ``HasSynced``)."""
        return self._started and self.fifo.has_synced()

    def wait_for_cache_sync(self, timeout: float) -> bool:
        """Block until :meth:`has_synced` (True) or ``timeout`` seconds passed (False)."""
        deadline = time.monotonic() + timeout
        while not self.has_synced():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            # The processing loop sets the event as soon as it pops the last initial item; the short
            # timeout covers an initial list with nothing in it (no pop ever happens). client-go polls too.
            self._synced.wait(min(remaining, 0.01))
        return True

    @property
    def last_sync_resource_version(self) -> int:
        return self.reflector.last_sync_resource_version

    # ------------------------------------------------------------ the cache
    def get_store(self) -> Indexer:
        return self.indexer

    def listeners(self) -> list[HandlerRegistration]:
        with self._lock:
            return list(self._listeners)

    # ------------------------------------------------------- processing loop
    def _process_loop(self) -> None:
        fifo = self.fifo
        while True:
            try:
                # A batch per lock hold: the watch delivers bursts, and per-key locking would dominate.
                fifo.pop_many(self._handle_deltas, max_items=256)
            except FIFOClosedError:
                return
            except Exception:
                log.exception("%s: processing deltas failed", self.name)
            if not self._synced.is_set() and fifo.has_synced():
                self._synced.set()

    def _handle_deltas(self, deltas: Deltas, is_in_initial_list: bool) -> None:
        """client-go ``processDeltas``: apply to the indexer, then notify. Runs under the FIFO lock."""
        indexer = self.indexer
        with self._block_deltas:
            listeners = self._listeners
            for delta in deltas:
                obj = delta.object
                if delta.type == DELETED:
                    indexer.delete(obj)
                    self._distribute(listeners, _Notification(_DELETE, obj, None), sync=False)
                    continue
                if delta.type not in (ADDED, UPDATED, REPLACED, SYNC):
                    continue
                old = indexer.update(obj)
                if old is not None:
                    # Same resourceVersion: nothing changed (a resync, or a relist of an unchanged object).
                    self._distribute(listeners, _Notification(_UPDATE, old, obj),
                                     sync=resource_version(old) == resource_version(obj))
                else:
                    self._distribute(listeners, _Notification(_ADD, obj, is_in_initial_list), sync=False)

    @staticmethod
    def _distribute(listeners: dict[HandlerRegistration, bool], note: _Notification, *, sync: bool) -> None:
        for listener, syncing in listeners.items():
            if not sync or syncing:
                listener.add(note)

    def _should_resync(self) -> bool:
        """Called by the reflector's resync timer: mark the handlers whose resync period is due."""
        now = self.clock.now()
        needed = False
        with self._block_deltas:
            for listener in self._listeners:
                due = listener.should_resync(now)
                self._listeners[listener] = due
                if due:
                    needed = True
                    listener.determine_next_resync(now)
        return needed


def _default_indexers(kind: Kind) -> dict[str, IndexFunc]:
    """By namespace for namespaced kinds (client-go's factory default); pods also by node name."""
    out: dict[str, IndexFunc] = {}
    if kind.namespaced:
        out[NAMESPACE_INDEX] = STANDARD_INDEXERS[NAMESPACE_INDEX]
    if kind is POD:
        out[NODE_NAME_INDEX] = STANDARD_INDEXERS[NODE_NAME_INDEX]
    return out


class InformerKey(NamedTuple):
    resource: str
    namespace: str
    label_selector: str
    field_selector: str
    shard: int | None


class SharedInformerFactory:
    """One informer per (kind, namespace, selectors, node shard), all on one multiplexer.

    Without an explicit ``multiplexer`` the factory takes the process's shared one for the
    store's Redis (:func:`~emulator.informers.multiplexer.shared_multiplexer`) and releases
    it on :meth:`shutdown`, asking it to linger at most ``linger_ms`` between reads (None: the
    multiplexer's default, :data:`~emulator.informers.multiplexer.LINGER_MS`). ``namespace``
    restricts every informer of the factory to one namespace (client-go ``WithNamespace``).
    ``shared_handler_threads``: each informer runs all its handlers on one thread of its own
    instead of one thread per handler (see :class:`_Dispatcher`): for a process whose many
    handlers only enqueue keys (the controller manager).
    """

    def __init__(self, store: Store, *, clock: Clock | None = None, default_resync: float = 0.0,
                 namespace: str | None = None, multiplexer: Multiplexer | None = None, page_size: int = 1000,
                 backoff_factory: Callable[[], Backoff] | None = None,
                 sleep: Callable[[float], object] | None = None, resync_check_interval: float = 1.0,
                 linger_ms: float | None = None, shared_handler_threads: bool = False) -> None:
        self.store = store
        self.shared_handler_threads = shared_handler_threads
        self.clock = clock or SystemClock()
        self.default_resync = default_resync
        self.namespace = namespace
        self._owns_mux = multiplexer is None
        self._linger_ms = linger_ms
        self.multiplexer = multiplexer if multiplexer is not None else shared_multiplexer(store, linger_ms)
        self.page_size = page_size
        self._backoff_factory = backoff_factory
        self._sleep = sleep
        self._resync_check_interval = resync_check_interval
        self._lock = threading.Lock()
        self._informers: dict[InformerKey, SharedInformer] = {}
        self._shutdown = False

    def informer_for(self, kind: Kind, *, namespace: str | None = None,
                     label_selector: LabelSelector | str | None = None,
                     field_selector: FieldSelector | str | None = None, shard: int | None = None,
                     indexers: Mapping[str, IndexFunc] | None = None,
                     resync_period: float | None = None) -> SharedInformer:
        """The informer for this combination, created on first request (``indexers`` then apply)."""
        if isinstance(label_selector, str):
            label_selector = parse_label_selector(label_selector)
        if isinstance(field_selector, str):
            field_selector = parse_field_selector(field_selector, kind.selectable_fields)
        ns = (namespace or self.namespace or "") if kind.namespaced else ""
        key = InformerKey(kind.resource, ns, "" if label_selector is None else str(label_selector),
                          "" if field_selector is None else str(field_selector), shard)
        with self._lock:
            if self._shutdown:
                raise RuntimeError("informer factory has been shut down")
            informer = self._informers.get(key)
            if informer is None:
                informer = SharedInformer(
                    self.store, kind, namespace=ns or None, label_selector=label_selector,
                    field_selector=field_selector, shard=shard, indexers=indexers,
                    resync_period=self.default_resync if resync_period is None else resync_period,
                    clock=self.clock, multiplexer=self.multiplexer, page_size=self.page_size,
                    backoff=self._backoff_factory() if self._backoff_factory else None, sleep=self._sleep,
                    resync_check_interval=self._resync_check_interval,
                    shared_handler_thread=self.shared_handler_threads)
                self._informers[key] = informer
            return informer

    def pod_shard_informer(self, shard: int, *, indexers: Mapping[str, IndexFunc] | None = None,
                           resync_period: float | None = None) -> SharedInformer:
        """The kubelet shard's pod informer: pods bound to a node of ``shard``, from the shard's stream.

        Its list reads every pod but decodes only the shard's (see :mod:`emulator.informers.sharding`).
        """
        if not 0 <= shard < self.store.node_shards:
            raise ValueError(f"shard {shard} out of range: the store has {self.store.node_shards} node shards")
        return self.informer_for(POD, shard=shard, indexers=indexers, resync_period=resync_period)

    def informers(self) -> dict[InformerKey, SharedInformer]:
        with self._lock:
            return dict(self._informers)

    def start(self) -> None:
        """Start the multiplexer and every informer not started yet (call again after adding informers)."""
        with self._lock:
            informers = list(self._informers.values())
        self.multiplexer.start()
        for informer in informers:
            informer.start()

    def wait_for_cache_sync(self, timeout: float) -> dict[InformerKey, bool]:
        """Wait (sharing one deadline) until every started informer has synced; per-informer result."""
        deadline = time.monotonic() + timeout
        out: dict[InformerKey, bool] = {}
        for key, informer in self.informers().items():
            if informer.has_started:
                out[key] = informer.wait_for_cache_sync(max(0.0, deadline - time.monotonic()))
        return out

    def shutdown(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._shutdown = True
            informers = list(self._informers.values())
        for informer in informers:
            informer.stop(timeout)
        if self._owns_mux:
            release_shared_multiplexer(self.multiplexer, timeout, self._linger_ms)


def wait_for_cache_sync(timeout: float, *synced: Callable[[], bool]) -> bool:
    """Wait until every ``has_synced`` function (informers', handler registrations') is True."""
    deadline = time.monotonic() + timeout
    pending: Iterable[Callable[[], bool]] = list(synced)
    while True:
        pending = [fn for fn in pending if not fn()]
        if not pending:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(remaining, 0.01))
