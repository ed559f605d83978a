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

Reading is ``XREAD BLOCK`` on the kind's stream from ``R-0`` on an
``redis.asyncio`` connection, so a watch costs a coroutine and a Redis
connection, never a thread; the event filter (namespace, label and field
selectors) is the store's own :func:`emulator.store.store.event_filter` and
entries are decoded with :func:`emulator.store.store.decode_entries`, so HTTP
and in-process watches cannot disagree.

With ``allowWatchBookmarks=true`` a BOOKMARK carrying the resourceVersion read
so far (filtered-out events included) is sent every ``bookmark_interval``
seconds (upstream sends them about once a minute), so a client whose
selector matches nothing still learns how far it has read.
``timeoutSeconds`` ends the stream cleanly; without it a watch lasts 30-60
minutes, like upstream's ``--min-request-timeout`` default. When the server
shuts down (:data:`DRAINING`), streams end cleanly within a second so
clients resume from their last resourceVersion elsewhere.

Metrics (:mod:`.metrics`, ``docs/metrics.md``): open watches, events sent, and the
lag behind the newest resourceVersion. Simplifications (selector transitions, one
reader per watch): ``docs/architecture.md``.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

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
from emulator.store.store import UNAVAILABLE, Store, WatchEvent, check_window, decode_entries, event_filter

# Set when the process is asked to stop: open watches end their streams cleanly.
DRAINING = threading.Event()
# How often a quiet watch wakes up to check its deadline and DRAINING.
POLL_SECONDS = 1.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


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


class WatchSource:
    """Reads watch streams for one server process (one ``redis.asyncio`` pool shared by its watches)."""

    def __init__(self, store: Store, redis_url: str, bookmark_interval: float = 60.0, batch: int = 1000) -> None:
        self.store = store
        self.redis_url = redis_url
        self.bookmark_interval = bookmark_interval
        self.batch = batch
        self._client: aioredis.Redis | None = None

    @property
    def client(self) -> aioredis.Redis:
        # Created on first use, inside the running event loop its connections belong to.
        if self._client is None:
            # The store client's retry policy: a watch (and its 410 check) rides out a Redis restart.
            cfg = self.store.config
            retry = AsyncRetry(EqualJitterBackoff(cap=cfg.retry_cap, base=cfg.retry_base), cfg.retries)
            self._client = aioredis.Redis.from_url(self.redis_url, socket_keepalive=True, retry=retry)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def check(self, kind: Kind, since_rv: int) -> None:
        """410 Gone now, before any byte is sent, if events after ``since_rv`` were trimmed."""
        stream = self.store.stream_key(kind)
        check_window(since_rv, await self.client.hget(self.store.trim_key, stream))

    async def read(self, stream: str, after_rv: int, block_seconds: float) -> tuple[list[Any], Any, int]:
        """One blocking XREAD after ``after_rv``, then the stream's trim mark and the newest resourceVersion."""
        pipe = self.client.pipeline(transaction=False)
        pipe.xread({stream: f"{after_rv}-0"}, count=self.batch, block=max(1, int(block_seconds * 1000)))
        # After the XREAD on the server: if nothing after after_rv was trimmed by now, nothing was before.
        pipe.hget(self.store.trim_key, stream)
        # The watch-lag metric's reference point; same round trip, so it costs no extra latency.
        pipe.get(self.store._rv_key)
        reply, first_retained, newest = await pipe.execute()
        return (reply[0][1] if reply else []), first_retained, int(newest or 0)


class EventEncoder:
    """Turns watch events into response lines: plain objects, or one-row Tables for ``kubectl get -w``."""

    def __init__(self, req: WatchRequest, now: Callable[[], float]) -> None:
        self.req = req
        self.now = now
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
        return b"".join(self.event(e.type, e.object) for e in events)

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
    encoder = EventEncoder(req, now)
    keep = event_filter(req.namespace, req.label_selector, req.field_selector)
    stream = source.store.stream_key(req.kind)
    timeout = req.timeout_seconds if req.timeout_seconds is not None else default_timeout()
    deadline = loop.time() + timeout
    last = start_rv
    if initial:
        for i in range(0, len(initial), 500):
            yield b"".join(encoder.event("ADDED", o) for o in initial[i:i + 500])
        sent.inc(len(initial))
    if req.initial_end_bookmark:
        yield encoder.bookmark(last, initial_end=True)
    next_bookmark = loop.time() + source.bookmark_interval
    while not DRAINING.is_set():
        t = loop.time()
        if t >= deadline:
            return
        block = min(deadline - t, POLL_SECONDS)
        if req.allow_bookmarks:
            block = min(block, max(next_bookmark - t, 0.001))
        try:
            entries, first_retained, newest = await source.read(stream, last, block)
        except UNAVAILABLE:
            # Redis gone for longer than the retries: end the stream cleanly (as on shutdown); the client
            # watches again from its last resourceVersion and gets 503 + Retry-After until Redis is back.
            return
        try:
            check_window(last, first_retained)
        except errors.StatusError as e:
            yield encoder.error(e)
            return
        if entries:
            events, last = decode_entries(entries, keep)
            if events:
                yield encoder.events(events)
                sent.inc(len(events))
                lag.observe(max(newest - last, 0))
        if req.allow_bookmarks and loop.time() >= next_bookmark:
            yield encoder.bookmark(last)
            next_bookmark = loop.time() + source.bookmark_interval
