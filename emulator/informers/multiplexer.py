"""The watch multiplexer: one stream reader per process for every informer in it.

Upstream every informer holds its own HTTP watch; here one daemon thread per
process issues **one** ``XREAD BLOCK`` over every stream its subscriptions need,
pipelined with their trim watermarks (:meth:`Store.read_streams`), decodes each
entry once and hands every :class:`Subscription` the events after its own
position that pass its filter. A subscription the trim passed gets ``410 Gone``
and relists alone; a lost connection cancels every subscription (each reflector
relists: a restarted Redis may have lost writes already read). The design, step
by step, is in ``docs/architecture.md`` ("Informers").

Contract for subscribers: events are shared decoded dicts, read-only (as
client-go's cache objects); ``deliver`` runs on the reader thread under the
subscription's lock (nothing is delivered after :meth:`Subscription.cancel`
returns), so it must be quick. :func:`shared_multiplexer` gives one multiplexer
per Redis endpoint and key prefix per process (reference counted).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import redis

from emulator.api import errors
from emulator.api.types import Obj
from emulator.store import codec
from emulator.store.store import Store, WatchEvent, check_window, decode_entries

log = logging.getLogger(__name__)

Deliver = Callable[[list[WatchEvent], int], None]
OnError = Callable[[Exception], None]

# After a read that was not full, the reader waits this long before the next one, so that events arriving
# one by one (a pod's status writes at a few hundred pods/s) reach the informers in batches: one XREAD, one
# decode pass and one wake-up of each informer per batch instead of per event. It bounds the watch latency
# it adds (a few ms against the scheduler's and kubelets' own periods) and cuts each process's per-event
# CPU (docs/performance.md).
LINGER_MS = 5.0

# How many of this process's own writes (Multiplexer.remember) are kept for the reader to find in the
# streams; a write whose entry no subscription reads is forgotten in insertion order past this many.
OWN_WRITES = 8192

# What a broken connection looks like through redis-py (a killed server, a reset socket).
CONNECTION_ERRORS: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError, OSError)


class Subscription:
    """One subscriber's interest in one stream, from ``position`` (an rv, exclusive) on.

    ``deliver(events, last_rv)`` gets, in order, the events after the position that pass
    ``keep``; ``last_rv`` is the rv of the last entry read on the stream (filtered-out ones
    included), i.e. the subscriber's new position - what a watch BOOKMARK reports.
    ``on_error(exc)`` is called once, after the subscription has been cancelled, with a
    410 :class:`~emulator.api.errors.StatusError` or the connection error.
    """

    __slots__ = ("_lock", "active", "deliver", "delivered", "keep", "name", "on_error", "position", "stream")

    def __init__(self, stream: str, position: int, deliver: Deliver, on_error: OnError, *,
                 keep: Callable[[Obj], bool] | None = None, name: str = "") -> None:
        self.stream = stream
        self.position = position
        self.deliver = deliver
        self.on_error = on_error
        self.keep = keep
        self.name = name or stream
        self.active = True
        self.delivered = 0  # events handed to deliver (after filtering): for tests and metrics
        self._lock = threading.Lock()

    def cancel(self) -> bool:
        """Stop deliveries; once this returns, ``deliver`` is not running and never runs again.

        Returns whether the subscription was still active.
        """
        with self._lock:
            was = self.active
            self.active = False
            return was

    def __repr__(self) -> str:
        return f"Subscription({self.name!r}, position={self.position}, active={self.active})"


class Multiplexer:
    """One reader thread serving many subscriptions over many streams (see the module docstring)."""

    def __init__(self, store: Store, *, batch: int = 1000, block_ms: int = 100, linger_ms: float = LINGER_MS,
                 name: str = "kemu-watch-mux") -> None:
        self.store = store
        self.batch = batch
        self.block_ms = block_ms
        self.linger = linger_ms / 1000
        self._default_linger = self.linger
        self._lingers: Counter[float] = Counter()  # the linger (s) each holder of a shared reference asked for
        self.name = name
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._subs: dict[str, list[Subscription]] = {}
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._refs = 0
        self._own: dict[int, Obj] = {}  # rv -> what this process wrote at that rv (remember)
        # Counters, read by tests and the benchmark.
        self.reads = 0  # XREAD round trips issued
        self.entries_read = 0  # stream entries returned by those reads (each decoded once)
        self.failures = 0  # subscriptions cancelled by a 410 or a connection loss
        self.own_hits = 0  # entries not decoded: the process's own writes (remember)

    # -------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start the reader thread (idempotent)."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the reader; subscriptions stay registered (and are served again after ``start``)."""
        with self._lock:
            self._stopping = True
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self._lock:
            if self._thread is thread:
                self._thread = None

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    # ---------------------------------------------------------- subscriptions
    def subscribe(self, stream: str, position: int, deliver: Deliver, on_error: OnError, *,
                  keep: Callable[[Obj], bool] | None = None, name: str = "") -> Subscription:
        """Register interest in ``stream`` after ``position``; served from the next read on."""
        sub = Subscription(stream, position, deliver, on_error, keep=keep, name=name)
        with self._lock:
            self._subs.setdefault(stream, []).append(sub)
            self._cond.notify_all()
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Cancel ``sub`` (synchronously: no delivery runs after this returns) and forget it."""
        sub.cancel()
        self._forget([sub])

    def streams(self) -> list[str]:
        with self._lock:
            return sorted(s for s, subs in self._subs.items() if subs)

    def _forget(self, subs: list[Subscription]) -> None:
        with self._lock:
            for sub in subs:
                current = self._subs.get(sub.stream)
                if current is None:
                    continue
                if sub in current:
                    current.remove(sub)
                if not current:
                    del self._subs[sub.stream]

    def _fail(self, subs: list[Subscription], exc: Exception) -> None:
        failed = [s for s in subs if s.cancel()]
        self._forget(subs)
        self.failures += len(failed)
        for sub in failed:
            try:
                sub.on_error(exc)
            except Exception:  # a subscriber's bug must not kill the reader of every other informer
                log.exception("watch multiplexer: on_error of %s failed", sub.name)

    def remember(self, obj: Obj) -> None:
        """``obj`` is what this process just wrote, exactly as the store holds it at its resourceVersion.

        A write's watch event comes back to the writer's own informers; its entry's bytes are
        ``obj``'s encoding, so the reader hands subscribers ``obj`` instead of decoding them again
        (a kubelet shard's pod status writes and deletes are most of its pod stream). Only for
        write results (the store's reply): anything else would put a different object in the
        informers than the stream holds. Safe from any thread (single dict operations).
        """
        rv = int((obj.get("metadata") or {}).get("resourceVersion") or 0)
        if not rv:
            return
        own = self._own
        own[rv] = obj
        while len(own) > OWN_WRITES:
            try:
                del own[next(iter(own))]  # the oldest: its entry was read long ago, or by nobody here
            except (KeyError, RuntimeError, StopIteration):  # another thread changed it in between
                break

    def _decode(self, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> tuple[list[WatchEvent], int]:
        """The stream entries as events, each decoded once; the process's own writes are taken as remembered."""
        own = self._own
        if not own:
            return decode_entries(entries, None)
        out: list[WatchEvent] = []
        last = 0
        for entry_id, fields in entries:
            last = int(entry_id.split(b"-", 1)[0])
            obj = own.get(last)
            if obj is None:
                obj = codec.decode(fields[b"o"])
            else:
                self.own_hits += 1
            out.append(WatchEvent(fields[b"t"].decode(), obj, last))
        return out, last

    # ------------------------------------------------------------ the reader
    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._stopping and not self._subs:
                    self._cond.wait()
                if self._stopping:
                    return
                plan = {stream: list(subs) for stream, subs in self._subs.items()}
            read = self._read_once(plan)
            if 0 < read < self.batch and self.linger > 0:
                with self._lock:
                    if not self._stopping:
                        self._cond.wait(self.linger)  # the linger (LINGER_MS); stop() and subscribe() cut it

    def _read_once(self, plan: dict[str, list[Subscription]]) -> int:
        """One read of every stream in ``plan``, delivered; how many entries came back (the fullest stream's)."""
        positions = {stream: min(s.position for s in subs) for stream, subs in plan.items()}
        try:
            read = self.store.read_streams(positions, count=self.batch, block_ms=self.block_ms)
        except CONNECTION_ERRORS as e:
            log.warning("watch multiplexer: read of %d streams failed (%s): every subscriber relists",
                        len(positions), e)
            self._own.clear()  # a restarted Redis may have lost those writes, and reuse their versions
            self._fail([s for subs in plan.values() for s in subs], e)
            return 0
        except Exception as e:  # anything else (a protocol error) is as fatal for these watches
            log.exception("watch multiplexer: read failed")
            self._fail([s for subs in plan.values() for s in subs], e)
            return 0
        self.reads += 1
        for stream, subs in plan.items():
            first_retained = read.first_retained.get(stream)
            entries = read.entries.get(stream)
            events: list[WatchEvent] | None = None
            last = 0
            for sub in subs:
                if not sub.active:
                    continue
                try:
                    check_window(sub.position, first_retained)
                except errors.StatusError as e:
                    self._fail([sub], e)  # this subscriber alone fell out of the window
                    continue
                if not entries:
                    continue
                if events is None:
                    # Decode once for every subscriber of the stream.
                    events, last = self._decode(entries)
                    self.entries_read += len(entries)
                self._deliver(sub, events, last)
        return max((len(entries) for entries in read.entries.values() if entries), default=0)

    def _deliver(self, sub: Subscription, events: list[WatchEvent], last: int) -> None:
        position = sub.position
        if last <= position:
            return  # a lagging neighbour pulled the read back: this subscriber has all of it already
        keep = sub.keep
        if events[0].rv > position:
            mine = events if keep is None else [e for e in events if keep(e.object)]
        else:
            mine = [e for e in events if e.rv > position and (keep is None or keep(e.object))]
        with sub._lock:
            if not sub.active:
                return
            try:
                # Even with nothing for it, the call tells the subscriber its new position.
                sub.deliver(mine, last)
            except Exception as e:
                log.exception("watch multiplexer: delivery to %s failed; it will relist", sub.name)
                sub.active = False
                failure: Exception | None = e
            else:
                sub.position = last
                sub.delivered += len(mine)
                failure = None
        if failure is not None:
            self._forget([sub])
            self.failures += 1
            sub.on_error(failure)

    # ------------------------------------------------------ process sharing
    def acquire(self, linger_ms: float | None = None) -> Multiplexer:
        """One more reference; ``linger_ms`` is the linger this holder can live with (None: the default).

        The reader lingers the shortest time any holder asked for, so a process hosting a
        latency-sensitive component (a scheduler) keeps the default whatever its neighbours ask.
        """
        with self._lock:
            self._refs += 1
            self._lingers[self._default_linger if linger_ms is None else linger_ms / 1000] += 1
            self.linger = min(self._lingers)
        return self

    def release(self, linger_ms: float | None = None) -> int:
        """Drop one reference (taken with the same ``linger_ms``); returns how many remain."""
        with self._lock:
            self._refs = max(0, self._refs - 1)
            want = self._default_linger if linger_ms is None else linger_ms / 1000
            if self._lingers[want] > 0:
                self._lingers[want] -= 1
            self._lingers = +self._lingers  # drop zero counts
            self.linger = min(self._lingers, default=self._default_linger)
            return self._refs


_shared_lock = threading.Lock()
_shared: dict[tuple[Any, ...], Multiplexer] = {}


def _endpoint(store: Store) -> tuple[Any, ...]:
    kwargs = getattr(store.redis, "connection_pool", None)
    kw = getattr(kwargs, "connection_kwargs", {}) or {}
    return (store.config.prefix, *(kw.get(k) for k in ("host", "port", "path", "db", "username")))


def shared_multiplexer(store: Store, linger_ms: float | None = None) -> Multiplexer:
    """The process's multiplexer for ``store``'s Redis endpoint and prefix, with one more reference.

    ``linger_ms``: the longest linger the caller can live with (see :meth:`Multiplexer.acquire`).
    Pair with :func:`release_shared_multiplexer` (same ``linger_ms``); the last release stops the reader.
    """
    key = _endpoint(store)
    with _shared_lock:
        mux = _shared.get(key)
        if mux is None:
            mux = _shared[key] = Multiplexer(store)
        return mux.acquire(linger_ms)


def release_shared_multiplexer(mux: Multiplexer, timeout: float = 5.0, linger_ms: float | None = None) -> None:
    with _shared_lock:
        if mux.release(linger_ms) > 0:
            return
        for key, value in list(_shared.items()):
            if value is mux:
                del _shared[key]
    mux.stop(timeout)
