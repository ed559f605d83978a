"""Reflector: keeps a local store (a DeltaFIFO, usually) in step with one kind in the cluster store.

Behaviour follows client-go ``tools/cache/reflector.go`` (``ListAndWatch``);
the Python is our own.

``run()`` loops over *list then watch*:

1. **List** the kind (namespace / selectors / node shard applied), paged with
   ``limit``/``continue`` (``page_size``, default 1000) so one huge list never
   holds Redis for long, and ``replace`` the target's content with the result
   at the list's resourceVersion - the target turns vanished keys into
   tombstones (DeltaFIFO) or simply swaps its content (Indexer).
2. **Watch** from exactly that resourceVersion: every event after it reaches
   the target as ``add``/``update``/``delete``; ``last_sync_resource_version``
   follows the stream position (filtered-out entries included, as a BOOKMARK
   would). The watch is a :class:`~emulator.informers.multiplexer.Subscription`
   of the process's multiplexer, or - without one - a private
   :class:`~emulator.store.store.Watch` read on the reflector's own thread.
3. On **410 Gone** (the stream was trimmed past our position) or a **broken
   connection**, back off and relist. Back-off is client-go's: 0.8 s doubling
   to 30 s, plus up to 100 % jitter, reset after 2 minutes without failures.
   The clock and the sleep are injected, so tests control both.

Periodic **resync** (``resync_period``, cluster-clock seconds; 0 = never)
calls the target's ``resync()`` when ``should_resync()`` agrees, as the
reflector's resync goroutine does upstream.

Paged lists in kemu are not snapshots (see ``docs/architecture.md``): page
``k`` shows the state when page ``k`` was read, while the watch starts at the
first page's resourceVersion. So the watch may replay a change a later page
already showed; applying it would move the cache *back* for a moment. The
reflector drops such replays: an event for a key the list returned with
resourceVersion ``r`` is skipped if its own rv is ``<= r`` (the list already
holds that state or a newer one). The guard is dropped once the watch passes
the newest resourceVersion the list showed.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from emulator.api.kinds import POD, Kind
from emulator.api.selectors import FieldSelector, LabelSelector
from emulator.api.types import Obj
from emulator.clock import Clock, SystemClock
from emulator.informers.delta_fifo import ADDED, DELETED, UPDATED, Delta, meta_namespace_key
from emulator.informers.multiplexer import Multiplexer
from emulator.informers.sharding import shard_object_filter, shard_raw_filter
from emulator.store.store import Store, WatchEvent, event_filter

log = logging.getLogger(__name__)

# Watch event types -> delta types, for targets that take a whole batch at once (DeltaFIFO.apply).
_DELTA_OF = {"ADDED": ADDED, "MODIFIED": UPDATED, "DELETED": DELETED}


class ReflectorTarget(Protocol):
    """The part of client-go's ``Store`` a reflector writes to (DeltaFIFO and Indexer both fit)."""

    def add(self, obj: Obj) -> None: ...

    def update(self, obj: Obj) -> None: ...

    def delete(self, obj: Any) -> None: ...

    def replace(self, objs: Iterable[Obj], resource_version: int | str = "") -> None: ...

    def resync(self) -> None: ...


class Backoff:
    """Exponential back-off with jitter and reset (client-go ``wait.NewExponentialBackoffManager``)."""

    def __init__(self, initial: float = 0.8, cap: float = 30.0, *, factor: float = 2.0, jitter: float = 1.0,
                 reset_after: float = 120.0, clock: Clock | None = None,
                 rand: Callable[[], float] = random.random) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self._clock = clock or SystemClock()
        self._rand = rand
        self._next = initial
        self._last: float | None = None

    def next(self) -> float:
        """The next delay to wait, in seconds."""
        now = self._clock.now()
        if self._last is not None and now - self._last > self.reset_after:
            self._next = self.initial  # quiet for a while: the source is healthy again
        self._last = now
        delay = self._next
        self._next = min(self._next * self.factor, self.cap)
        if self.jitter > 0:
            delay += self._rand() * self.jitter * delay
        return delay


class Reflector:
    """Lists and watches one kind into a :class:`ReflectorTarget` (see the module docstring)."""

    def __init__(self, store: Store, kind: Kind, target: ReflectorTarget, *, namespace: str | None = None,
                 label_selector: LabelSelector | None = None, field_selector: FieldSelector | None = None,
                 shard: int | None = None, page_size: int = 1000, multiplexer: Multiplexer | None = None,
                 resync_period: float = 0.0, should_resync: Callable[[], bool] | None = None,
                 clock: Clock | None = None, backoff: Backoff | None = None,
                 sleep: Callable[[float], object] | None = None, resync_check_interval: float = 1.0,
                 watch_timeout: float = 1.0, name: str = "") -> None:
        if shard is not None and kind is not POD:
            raise ValueError("node-shard streams exist for pods only")
        if namespace and not kind.namespaced:
            namespace = None
        self.store = store
        self.kind = kind
        self.target = target
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.shard = shard
        self.page_size = page_size
        self.multiplexer = multiplexer
        self.resync_period = resync_period
        self.should_resync = should_resync
        self.clock = clock or SystemClock()
        self.backoff = backoff or Backoff()
        self.resync_check_interval = resync_check_interval
        self.watch_timeout = watch_timeout
        self.name = name or f"reflector[{kind.resource}{'@' + str(shard) if shard is not None else ''}]"
        self.stream = store.stream_key(kind, shard)
        # Filter for watch events (the shard stream holds only the shard's pods already).
        self._keep = event_filter(namespace, label_selector, field_selector)
        self._raw_filter = shard_raw_filter(store.node_shards, shard) if shard is not None else None
        self._object_filter = shard_object_filter(store.node_shards, shard) if shard is not None else None
        self._sleep = sleep or self._interruptible_sleep
        # One lock round per watch batch when the target supports it (DeltaFIFO.apply), else per event.
        self._apply_batch: Callable[[list[Delta]], None] | None = getattr(target, "apply", None)
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._rv_lock = threading.Lock()
        self._last_sync_rv = 0
        self._next_resync = 0.0
        # Paged-list replay guard: key -> rv the list showed, until the watch passes guard_until.
        self._listed_rvs: dict[str, int] | None = None
        self._guard_until = 0
        # Counters for tests and metrics.
        self.lists = 0
        self.watch_errors: list[Exception] = []
        self.list_errors: list[Exception] = []
        self.backoffs: list[float] = []

    # ------------------------------------------------------------- lifecycle
    def run(self) -> None:
        """List and watch until :meth:`stop`; every failure backs off, then relists."""
        while not self._stopped.is_set():
            try:
                self.list_and_watch()
            except Exception as e:
                if self._stopped.is_set():
                    break
                log.info("%s: %s; relisting after back-off", self.name, e)
            if self._stopped.is_set():
                break
            delay = self.backoff.next()
            self.backoffs.append(delay)
            self._sleep(delay)

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def _interruptible_sleep(self, seconds: float) -> None:
        self._stopped.wait(seconds)

    @property
    def last_sync_resource_version(self) -> int:
        with self._rv_lock:
            return self._last_sync_rv

    def _set_last_sync(self, rv: int) -> None:
        with self._rv_lock:
            self._last_sync_rv = rv

    # ------------------------------------------------------------------ list
    def list_objects(self) -> tuple[list[Obj], int, bool]:
        """(objects, list resourceVersion, whether the list took more than one page)."""
        store, kind = self.store, self.kind
        kwargs: dict[str, Any] = {"label_selector": self.label_selector, "field_selector": self.field_selector,
                                  "raw_filter": self._raw_filter}
        if self.page_size <= 0:
            result = store.list(kind, self.namespace, **kwargs)
            items, rv, paged = result.items, result.resource_version, False
        else:
            items, rv, token, pages = [], 0, None, 0
            while True:
                page = store.list(kind, self.namespace, limit=self.page_size, continue_token=token, **kwargs)
                pages += 1
                if not rv:
                    rv = page.resource_version
                items.extend(page.items)
                token = page.continue_token
                if not token or self._stopped.is_set():
                    break
            paged = pages > 1
        if self._object_filter is not None:
            items = [o for o in items if self._object_filter(o)]
        return items, rv, paged

    def _sync_with(self, items: list[Obj], rv: int, paged: bool) -> None:
        self._listed_rvs = None
        if paged:
            listed = {meta_namespace_key(o): int((o.get("metadata") or {}).get("resourceVersion") or 0)
                      for o in items}
            newest = max(listed.values(), default=0)
            if newest > rv:  # some page was read after the first: replays are possible
                self._listed_rvs, self._guard_until = listed, newest
        self.target.replace(items, rv)
        self._set_last_sync(rv)

    # ----------------------------------------------------------------- watch
    def list_and_watch(self) -> None:
        """One list, then watch until an error (raised) or :meth:`stop` (returns)."""
        try:
            items, rv, paged = self.list_objects()
        except Exception as e:
            self.list_errors.append(e)
            raise
        if self._stopped.is_set():
            return
        # The resync period counts from before the list is handed over: its handlers may see the items
        # (and a test step a ManualClock) before this thread goes on, which must not push the resync later.
        listed_at = self.clock.now()
        self._sync_with(items, rv, paged)
        self.lists += 1
        self._next_resync = listed_at + self.resync_period
        try:
            if self.multiplexer is not None:
                self._watch_multiplexed(rv)
            else:
                self._watch_direct(rv)
        except Exception as e:  # 410 Gone, a lost connection: the caller backs off and relists
            self.watch_errors.append(e)
            raise

    def _watch_multiplexed(self, rv: int) -> None:
        assert self.multiplexer is not None
        failure: list[Exception] = []
        self._wake.clear()

        def on_error(exc: Exception) -> None:
            failure.append(exc)
            self._wake.set()

        sub = self.multiplexer.subscribe(self.stream, rv, self._deliver, on_error, keep=self._keep, name=self.name)
        try:
            while not self._stopped.is_set():
                self._wake.wait(self._wait_interval())
                self._wake.clear()
                if failure:
                    raise failure[0]  # the multiplexer's 410 or connection error, re-raised on our thread
                self._maybe_resync()
        finally:
            self.multiplexer.unsubscribe(sub)

    def _watch_direct(self, rv: int) -> None:
        watch = self.store.watch(self.kind, rv, namespace=self.namespace, label_selector=self.label_selector,
                                 field_selector=self.field_selector, shard=self.shard)
        try:
            while not self._stopped.is_set():
                timeout = self.watch_timeout
                if self.resync_period > 0:
                    timeout = min(timeout, self.resync_check_interval)
                events = watch.next_batch(timeout=timeout)
                self._deliver(events, watch.last_rv)
                self._maybe_resync()
        finally:
            watch.close()

    def _wait_interval(self) -> float | None:
        return self.resync_check_interval if self.resync_period > 0 else None

    def _deliver(self, events: list[WatchEvent], last_rv: int) -> None:
        """Apply watch events to the target (runs on the multiplexer's thread when multiplexed)."""
        listed = self._listed_rvs
        if listed is not None:
            # A paged list may already show a newer state than these events: drop the replays.
            events = [e for e in events
                      if (seen := listed.get(meta_namespace_key(e.object))) is None or e.rv > seen]
        if events:
            if self._apply_batch is not None:
                self._apply_batch([Delta(_DELTA_OF[e.type], e.object) for e in events])
            else:
                target = self.target
                for event in events:
                    if event.type == "MODIFIED":
                        target.update(event.object)
                    elif event.type == "ADDED":
                        target.add(event.object)
                    else:
                        target.delete(event.object)
        if listed is not None and last_rv >= self._guard_until:
            self._listed_rvs = None
        self._set_last_sync(last_rv)

    def _maybe_resync(self) -> None:
        now = self.clock.now()
        if self.resync_period <= 0 or now < self._next_resync:
            return
        if self.should_resync is None or self.should_resync():
            self.target.resync()
        self._next_resync = now + self.resync_period  # from the check, not after the resync ran
