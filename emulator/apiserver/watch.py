"""HTTP watches, streamed from the store's Redis streams with ``redis.asyncio``.

A watch is a chunked HTTP response of newline-delimited JSON events
``{"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR", "object": {...}}``,
as upstream's ``handlers/watch.go`` writes them for JSON clients.

Where it starts (upstream ``storage/cacher``, "resourceVersion semantics" in
the API concepts docs):

* ``resourceVersion`` absent or ``"0"``: the current state first, one ADDED
  per object (read by the sync core in a worker thread), then every change
  after that state's resourceVersion;
* ``resourceVersion=R``: every change after R. If the stream no longer holds
  them (trimmed, see :func:`emulator.store.store.check_window`), the request
  answers ``410 Gone`` before the stream starts; if that is discovered once
  events have been sent, an ``ERROR`` event carrying the 410 ``Status`` ends it;
* ``sendInitialEvents=true`` (the WatchList protocol): the current state as
  ADDED events, then a BOOKMARK annotated ``k8s.io/initial-events-end``.

Reading is shared: one API server process reads and decodes each stream
**once** for all of its watches, through the informers' watch multiplexer
(:class:`emulator.informers.multiplexer.Multiplexer`: one reader thread, one
``XREAD BLOCK`` over every stream a watch needs, each entry decoded once), as
upstream's cacher serves every watch of a resource from one etcd watch. Each
watch is a :class:`~emulator.informers.multiplexer.Subscription` from its own
resourceVersion with its own filter (namespace, label and field selectors: the
store's :func:`emulator.store.store.event_filter`, so HTTP and in-process
watches cannot disagree). The reader thread also serializes the events (once
per event for every plain-JSON watch, :class:`EncodedEvents`; Tables per
watch), so the event loop only writes bytes out and a watch costs a coroutine,
not a thread or a Redis connection. A watch whose client reads slower than its
events arrive (more than :data:`MAX_PENDING_EVENTS` waiting) is ended cleanly,
as upstream's cacher closes an unresponsive watcher: the client watches again
from the last resourceVersion it received.
The reader reads each stream from its most lagging watch's position, so a
watch that starts far back (a catch-up of many thousand events) delays the
others of its worker for as many batched reads; upstream's cacher serves such
a watch from its in-memory history instead.

With ``allowWatchBookmarks=true`` a BOOKMARK carrying the resourceVersion read
so far (filtered-out events included) is sent every ``bookmark_interval``
seconds (upstream sends them about once a minute), so a client whose
selector matches nothing still learns how far it has read.
``timeoutSeconds`` ends the stream cleanly; without it a watch lasts 30-60
minutes, like upstream's ``--min-request-timeout`` default. When the server
shuts down (:data:`DRAINING`), streams end cleanly within a second so
clients resume from their last resourceVersion elsewhere.

Metrics (:mod:`.metrics`, ``docs/metrics.md``): open watches, events sent, and the
lag behind the newest resourceVersion. Simplifications (selector transitions):
``docs/architecture.md``.
"""

from __future__ import annotations

import asyncio
import collections
import random
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import cast

import orjson
import redis.asyncio as aioredis
from prometheus_client import Counter, Histogram
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import EqualJitterBackoff

from emulator.api import errors
from emulator.api.kinds import Kind
from emulator.api.selectors import FieldSelector, LabelSelector
from emulator.api.types import Obj
from emulator.apiserver import metrics, tables
from emulator.informers.multiplexer import Multiplexer, Subscription
from emulator.store.store import Store, StreamRead, WatchEvent, check_window, event_filter

# Set when the process is asked to stop: open watches end their streams cleanly.
DRAINING = threading.Event()
# How often a quiet watch wakes up to check its deadline and DRAINING.
POLL_SECONDS = 1.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# Events read for a watch but not yet written to its client. Upstream's cacher gives each watcher a
# buffered channel and closes a watcher that stays full ("unresponsive"); here a client that falls this
# far behind has its stream ended (after what it was already handed), and it watches again from there.
MAX_PENDING_EVENTS = 100_000
# Initial ADDED events are serialized in chunks of this many objects, off the event loop.
INITIAL_CHUNK = 500
# The largest HTTP chunk a watch writes (bigger when one event is): upstream writes each event on its
# own, so clients split lines per chunk. The official Python client's line splitter copies the rest of
# its buffer for every line (kubernetes.watch.watch.iter_resp_lines), so a chunk of n events costs it
# O(n^2) bytes copied: ~0.14 ms more per event at 1,000 pod events a chunk, which a watch that fell
# behind gets when everything pending is written at once.
FRAME_BYTES = 64 * 1024


def frames(data: bytes, limit: int = FRAME_BYTES) -> list[bytes]:
    """``data`` (whole event lines) cut at line ends into pieces of at most ``limit`` bytes (or one line)."""
    if len(data) <= limit:
        return [data]
    out, start, end = [], 0, len(data)
    while start < end:
        cut = start + limit
        if cut >= end:
            out.append(data[start:])
            break
        nl = data.rfind(b"\n", start, cut)
        if nl < 0:  # one line longer than the limit: the whole line
            nl = data.find(b"\n", cut)
            nl = end - 1 if nl < 0 else nl
        out.append(data[start:nl + 1])
        start = nl + 1
    return out


@dataclass(frozen=True)
class WatchRequest:
    kind: Kind
    namespace: str | None
    label_selector: LabelSelector | None
    field_selector: FieldSelector | None
    since_rv: int
    send_initial: bool
    initial_end_bookmark: bool
    allow_bookmarks: bool
    timeout_seconds: float | None
    table_version: str = ""  # "" = plain objects; "v1"/"v1beta1" = meta.k8s.io Table events
    include_object: str = "Metadata"


class _LagReader:
    """What the process's multiplexer reads through: the store's ``read_streams``, plus the newest rv.

    The watch-lag metric compares each batch with the cluster's newest resourceVersion when it was
    read; the reader fetches it after a read that returned entries (one GET per read, not per watch).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.newest = 0

    def read_streams(self, positions: Mapping[str, int], *, count: int = 1000,
                     block_ms: int | None = None) -> StreamRead:
        read = self.store.read_streams(positions, count=count, block_ms=block_ms)
        if read.entries:
            self.newest = int(self.store.redis.get(self.store._rv_key) or 0)
        return read


class EncodedEvents:
    """Each event's plain-JSON watch line, serialized once for every watch of the process that sends it.

    Used only by the multiplexer's reader thread. Keyed by resourceVersion but kept with the decoded
    event it was made from, and used only for that very object: a flushed store that counts its
    resourceVersions from 0 again can never get an older event's bytes.
    """

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._lines: dict[int, tuple[WatchEvent, bytes]] = {}
        self.encoded = 0  # serializations done (for tests and the benchmark)
        self.shared = 0  # lines handed out again

    def line(self, event: WatchEvent) -> bytes:
        hit = self._lines.get(event.rv)
        if hit is not None and hit[0] is event:
            self.shared += 1
            return hit[1]
        data = orjson.dumps({"type": event.type, "object": event.object}) + b"\n"
        self.encoded += 1
        self._lines[event.rv] = (event, data)
        while len(self._lines) > self.size:
            del self._lines[next(iter(self._lines))]
        return data


class WatchSource:
    """Serves one server process's watches: one shared stream reader, plus a ``redis.asyncio`` client.

    The asynchronous client answers the window check before a watch starts, ``/readyz`` and the
    RBAC source's own watch; the watches themselves are fed by :attr:`mux`.
    """

    def __init__(self, store: Store, redis_url: str, bookmark_interval: float = 60.0, batch: int = 1000) -> None:
        self.store = store
        self.redis_url = redis_url
        self.bookmark_interval = bookmark_interval
        self.batch = batch
        self._client: aioredis.Redis | None = None
        self._reader = _LagReader(store)
        self._mux: Multiplexer | None = None
        self._mux_lock = threading.Lock()
        self.lines = EncodedEvents(size=4 * batch)

    @property
    def client(self) -> aioredis.Redis:
        # Created on first use, inside the running event loop its connections belong to.
        if self._client is None:
            # The store client's retry policy: the 410 check rides out a Redis restart.
            cfg = self.store.config
            retry = AsyncRetry(EqualJitterBackoff(cap=cfg.retry_cap, base=cfg.retry_base), cfg.retries)
            self._client = aioredis.Redis.from_url(self.redis_url, socket_keepalive=True, retry=retry)
        return self._client

    @property
    def mux(self) -> Multiplexer:
        """The process's stream reader, started on first use (after a worker's fork, never before)."""
        with self._mux_lock:
            if self._mux is None:
                # The reader is duck-typed: the multiplexer only calls read_streams on its store.
                self._mux = Multiplexer(cast(Store, self._reader), batch=self.batch, name="kemu-apiserver-watch")
            self._mux.start()
            return self._mux

    @property
    def newest(self) -> int:
        """The newest resourceVersion seen by the last read that returned entries (reader thread)."""
        return self._reader.newest

    async def close(self) -> None:
        mux, self._mux = self._mux, None
        if mux is not None:
            await asyncio.to_thread(mux.stop)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def check(self, kind: Kind, since_rv: int) -> None:
        """410 Gone now, before any byte is sent, if events after ``since_rv`` were trimmed."""
        stream = self.store.stream_key(kind)
        check_window(since_rv, await self.client.hget(self.store.trim_key, stream))


class EventEncoder:
    """Turns watch events into response lines: plain objects, or one-row Tables for ``kubectl get -w``."""

    def __init__(self, req: WatchRequest, now: Callable[[], float], lines: EncodedEvents | None = None) -> None:
        self.req = req
        self.now = now
        self.lines = lines
        self.printer = tables.printer_for(req.kind.resource)
        self._columns_sent = False

    def _object(self, obj: Obj) -> Obj:
        if not self.req.table_version:
            return obj
        # Upstream sends the column definitions once per watch ("to save bandwidth"); kubectl reuses them.
        out = tables.table(self.printer, [obj], self.now(), include_object=self.req.include_object,
                           version=self.req.table_version,
                           resource_version=str((obj.get("metadata") or {}).get("resourceVersion") or ""),
                           with_columns=not self._columns_sent)
        self._columns_sent = True
        return out

    def event(self, type_: str, obj: Obj) -> bytes:
        return orjson.dumps({"type": type_, "object": self._object(obj)}) + b"\n"

    def events(self, events: list[WatchEvent]) -> bytes:
        if self.lines is not None and not self.req.table_version:
            line = self.lines.line
            return b"".join([line(e) for e in events])
        return b"".join([self.event(e.type, e.object) for e in events])

    def initial(self, objs: list[Obj]) -> bytes:
        return b"".join([self.event("ADDED", o) for o in objs])

    def bookmark(self, rv: int, initial_end: bool = False) -> bytes:
        meta: Obj = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        if self.req.table_version:
            obj: Obj = {"kind": "Table", "apiVersion": f"meta.k8s.io/{self.req.table_version}", "metadata": meta,
                        "rows": []}
        else:
            obj = {"kind": self.req.kind.kind, "apiVersion": self.req.kind.api_version, "metadata": meta}
        return orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n"

    @staticmethod
    def error(err: errors.StatusError) -> bytes:
        return orjson.dumps({"type": "ERROR", "object": err.to_status()}) + b"\n"


class _Feed:
    """One watch's inbox between the reader thread (``deliver``/``failed``) and its response coroutine.

    The reader thread serializes each batch and appends it; the coroutine is woken at most once per
    pass of its loop. ``last`` is the resourceVersion read so far for this watch, filtered-out events
    included (what a BOOKMARK reports).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, encoder: EncodedEvents | EventEncoder, last: int,
                 newest: Callable[[], int]) -> None:
        self.loop = loop
        self.encoder = encoder
        self.last = last
        self.newest = newest
        self.chunks: collections.deque[tuple[bytes, int, int]] = collections.deque()  # (bytes, events, lag)
        self.pending = 0  # events in chunks (approximate across threads: only a bound)
        self.error: Exception | None = None
        self.overflow = False
        self.wake = asyncio.Event()
        self._woken = False

    # ------------------------------------------------------------ reader thread
    def deliver(self, events: list[WatchEvent], last: int) -> None:
        if events and not self.overflow:
            if self.pending + len(events) > MAX_PENDING_EVENTS:
                self.overflow = True  # nothing more is queued: the stream ends after what it holds
            else:
                self.chunks.append((self.encoder.events(events), len(events), max(self.newest() - last, 0)))
                self.pending += len(events)
                self.last = last
                self._notify()
                return
        if not self.overflow:
            self.last = last  # no event for this watch: only the position (for bookmarks) moves
        else:
            self._notify()

    def failed(self, exc: Exception) -> None:
        self.error = exc
        self._notify()

    def _notify(self) -> None:
        if not self._woken:
            self._woken = True
            self.loop.call_soon_threadsafe(self.wake.set)

    # ------------------------------------------------------------ event loop
    async def wait(self, timeout: float) -> None:
        if not self.wake.is_set():
            try:
                await asyncio.wait_for(self.wake.wait(), timeout)
            except TimeoutError:
                return
        self.wake.clear()
        self._woken = False

    def take(self) -> list[tuple[bytes, int, int]]:
        out = []
        while self.chunks:
            chunk = self.chunks.popleft()
            self.pending -= chunk[1]
            out.append(chunk)
        return out


def default_timeout() -> float:
    # Upstream: a random duration in [minRequestTimeout, 2*minRequestTimeout), 1800 s by default,
    # so that watches of many clients do not all expire together.
    return 1800.0 * (1 + random.random())


async def stream_events(req: WatchRequest, source: WatchSource, initial: list[Obj] | None, start_rv: int,
                        now: Callable[[], float]) -> AsyncIterator[bytes]:
    """The body of a watch response: ``initial`` objects as ADDED, then the stream after ``start_rv``.

    The caller has already checked the window (so a 410 could still be a plain HTTP error).
    """
    group, resource = req.kind.group, req.kind.plural
    open_watches = metrics.LONGRUNNING.labels("WATCH", group, resource)
    open_watches.inc()
    try:
        async for chunk in _stream(req, source, initial, start_rv, now,
                                   sent=metrics.WATCH_EVENTS.labels(group, resource),
                                   lag=metrics.WATCH_LAG.labels(group, resource)):
            yield chunk
    finally:
        open_watches.dec()


async def _stream(req: WatchRequest, source: WatchSource, initial: list[Obj] | None, start_rv: int,
                  now: Callable[[], float], *, sent: Counter, lag: Histogram) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    encoder = EventEncoder(req, now, source.lines)
    timeout = req.timeout_seconds if req.timeout_seconds is not None else default_timeout()
    deadline = loop.time() + timeout
    if initial:
        # Serialized in a worker thread: a large initial state must not hold up other requests.
        for i in range(0, len(initial), INITIAL_CHUNK):
            yield await asyncio.to_thread(encoder.initial, initial[i:i + INITIAL_CHUNK])
        sent.inc(len(initial))
    if req.initial_end_bookmark:
        yield encoder.bookmark(start_rv, initial_end=True)
    # From here on the encoder is used by the reader thread only (Table watches keep per-watch state).
    feed = _Feed(loop, encoder, start_rv, lambda: source.newest)
    mux = source.mux
    sub: Subscription = mux.subscribe(source.store.stream_key(req.kind), start_rv, feed.deliver, feed.failed,
                                      keep=event_filter(req.namespace, req.label_selector, req.field_selector),
                                      name=f"watch {req.kind.plural}")
    try:
        next_bookmark = loop.time() + source.bookmark_interval
        while not DRAINING.is_set():
            t = loop.time()
            if t >= deadline:
                return
            block = min(deadline - t, POLL_SECONDS)
            if req.allow_bookmarks:
                block = min(block, max(next_bookmark - t, 0.001))
            await feed.wait(block)
            chunks = feed.take()
            if chunks:
                for frame in frames(b"".join(c[0] for c in chunks) if len(chunks) > 1 else chunks[0][0], FRAME_BYTES):
                    yield frame
                sent.inc(sum(c[1] for c in chunks))
                for c in chunks:
                    lag.observe(c[2])
            if feed.error is not None:
                if isinstance(feed.error, errors.StatusError):  # 410: the stream moved past this watch
                    yield encoder.error(feed.error)
                # Otherwise Redis was gone for longer than the retries: end the stream cleanly (as on
                # shutdown); the client watches again from its last resourceVersion and gets 503 +
                # Retry-After until Redis is back.
                return
            if feed.overflow and not feed.chunks:
                return
            if req.allow_bookmarks and loop.time() >= next_bookmark:
                yield encoder.bookmark(feed.last)
                next_bookmark = loop.time() + source.bookmark_interval
    finally:
        mux.unsubscribe(sub)
