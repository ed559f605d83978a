"""The cluster state store: Redis with the Kubernetes consistency contract.

Layout in Redis (``P`` is the key prefix, ``R`` a kind's resource such as
``pods`` or ``deployments.apps``)::

    P rv                 the one global resourceVersion counter
    P o:R                hash  object key ("ns/name" or "name") -> msgpack object
    P v:R                hash  object key -> resourceVersion (cheap CAS checks)
    P i:R                zset  object keys, all score 0, so ZRANGEBYLEX pages in key order
    P s:R                stream of watch events; entry id = "<resourceVersion>-0"
    P s:pods@N           stream of events of pods bound to a node of shard N
    P trim               hash  stream -> id of its first retained entry after a trim
    P ow:R               hash  object key -> its owners' uids (from ownerReferences)
    P dep:U              set   "R|key" of every object owned by uid U (the garbage collector's index)
    P gcq                stream uids of deleted objects that had dependents (the collector's queue)
    P meta               hash  store-wide settings every client must agree on (node shards)

Every write is ``lua/commit.lua``: precondition check, ``INCR`` of the counter,
store, append the event to the kind's stream (and the node shard's stream for a
bound pod); a batch of creates of a kind without node room (Events, ...) is one
call of ``lua/create_many.lua``, which writes each object as ``commit.lua`` would.
Commits go through :class:`~emulator.store.wire.CommitClient` (pre-packed, one
round trip per batch); the commit path is :mod:`emulator.store.commit`, a mixin of
:class:`Store`. The event's stream id is the resourceVersion, so "watch from R" is
``XREAD`` after ``R-0``. Streams are capped; when a trim happens the first
retained id is recorded, and a watch from a resourceVersion the trim may have
passed answers 410 Gone, as etcd compaction does upstream.

This class knows nothing of validation, defaulting or admission: that is the
server core (:mod:`emulator.server.core`), which both the HTTP façade and
internal components call. What the store does own is the storage contract:
optimistic concurrency (409 on a stale resourceVersion), preconditions,
ordered and gap-free watches, paged lists.

Simplification (documented in docs/architecture.md): paged lists read the
current state page by page, not a snapshot at the first page's
resourceVersion as etcd does. Every page reports the first page's
resourceVersion, so a watch started from it may replay a change a later page
already showed, but never misses one.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson
import redis
from redis.backoff import EqualJitterBackoff, NoBackoff
from redis.retry import Retry

from emulator.api import errors
from emulator.api.kinds import NODE, POD, Kind, by_resource
from emulator.api.meta import resource_version
from emulator.api.selectors import FieldSelector, LabelSelector
from emulator.store import codec, wire
from emulator.store.commit import (
    _COMMIT_LUA,
    _CREATE_MANY_LUA,
    UNAVAILABLE,  # noqa: F401 (re-exported: the API server answers 503 on these)
    Commits,
    object_key,
)
from emulator.store.wire import CommitClient

_RANGE_LUA = """
-- KEYS 1 rv counter, 2 objects hash, 3 order zset; ARGV 1 min, 2 max, 3 count
local keys = redis.call('ZRANGEBYLEX', KEYS[3], ARGV[1], ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local values = {}
if #keys > 0 then values = redis.call('HMGET', KEYS[2], unpack(keys)) end
return {redis.call('GET', KEYS[1]) or '0', keys, values}
"""


@dataclass(frozen=True)
class StoreConfig:
    prefix: str = "kemu:"
    # Watch events retained per stream; a watch older than this window gets 410 Gone.
    stream_cap: int = 200_000
    # Node shards for kubelet pod streams; the first client to connect fixes it for the store.
    node_shards: int = 16
    # How many objects one list round trip reads when paging or filtering.
    list_chunk: int = 1000
    # Riding out a Redis restart (see "Store unavailable" below): a failed command is retried this many
    # times, the n-th wait drawn from [t/2, t] with t = min(retry_cap, retry_base * 2**n) (redis-py's
    # EqualJitterBackoff): 8 retries from 50 ms capped at 1 s wait 2.75-5.5 s in all, longer than the
    # embedded Redis takes to come back under `kemu up`'s supervisor (about a second).
    retries: int = 8
    retry_base: float = 0.05
    retry_cap: float = 1.0

    def retry(self) -> Retry:
        return Retry(EqualJitterBackoff(cap=self.retry_cap, base=self.retry_base), self.retries,
                     supported_errors=(redis.ConnectionError, redis.TimeoutError))


class WatchEvent(NamedTuple):
    type: str  # ADDED | MODIFIED | DELETED
    object: dict[str, Any]
    rv: int


class StreamRead(NamedTuple):
    """What :meth:`Store.read_streams` read: raw entries per stream (absent: none) and trim watermarks."""

    entries: dict[str, list[tuple[bytes, dict[bytes, bytes]]]]
    first_retained: dict[str, bytes | None]


class ListResult(NamedTuple):
    items: list[dict[str, Any]]
    resource_version: int
    continue_token: str | None


def parse_resource_version(value: str | int | None, what: str = "resourceVersion") -> int:
    """Parse a client-supplied resourceVersion; "" / None / "0" mean "any" and give 0."""
    if value is None or value == "":
        return 0
    try:
        rv = int(value)
    except (TypeError, ValueError):
        raise errors.bad_request(f'invalid {what} "{value}": must be a decimal integer') from None
    if rv < 0:
        raise errors.bad_request(f'invalid {what} "{value}": must not be negative')
    return rv


class Store(Commits):
    """Synchronous store client. Thread-safe (redis-py pools connections).

    **Store unavailable** (Redis restarting): :meth:`connect` gives reads a client that reconnects and
    retries with back-off (:meth:`StoreConfig.retry`): a read is idempotent, so a retry is always
    right. Commits go through a second client that never retries on its own: a commit whose
    connection broke before the reply may or may not have run, and running it again could answer
    409 AlreadyExists for a create that did land. Instead :meth:`_commit_resolved` reads the key
    back and decides (:meth:`_landed`): our bytes (or, for a create, our uid) are there - it landed;
    the precondition still holds - it did not, commit again; someone else's write is there - 409
    Conflict, as a lost race would answer. What is still unreachable after the retries raises one of
    :data:`UNAVAILABLE`.
    """

    def __init__(self, client: redis.Redis, config: StoreConfig | None = None, *,
                 writer: redis.Redis | None = None) -> None:
        self.redis = client
        self.config = config or StoreConfig()
        self._writer = writer if writer is not None else client
        p = self.config.prefix
        self._rv_key = f"{p}rv"
        self._trim_key = f"{p}trim"
        # Watch reads skip redis-py's pipeline when the reading client is a plain one (emulator.store.wire).
        self._fast_reads = wire.can_read_fast(client)
        self.gc_queue_key = f"{p}gcq"
        self._commit = self._writer.register_script(_COMMIT_LUA)
        self._create_many = self._writer.register_script(_CREATE_MANY_LUA)
        self._key_cache: dict[tuple[str, int | None], list[str]] = {}
        self._range = client.register_script(_RANGE_LUA)
        client.hsetnx(f"{p}meta", "node_shards", self.config.node_shards)
        self.node_shards = int(client.hget(f"{p}meta", "node_shards") or self.config.node_shards)

    @classmethod
    def connect(cls, url: str, config: StoreConfig | None = None) -> Store:
        config = config or StoreConfig()
        reads = redis.Redis.from_url(url, socket_keepalive=True, retry=config.retry())
        # Commits skip redis-py's per-command work (emulator.store.wire); any other writer client works too.
        writes = CommitClient.from_url(url, socket_keepalive=True, retry=Retry(NoBackoff(), 0))
        return cls(reads, config, writer=writes)

    def close(self) -> None:
        self.redis.close()
        if self._writer is not self.redis:
            self._writer.close()

    # ----------------------------------------------------------------- keys
    def objects_key(self, kind: Kind) -> str:
        return f"{self.config.prefix}o:{kind.resource}"

    def stream_key(self, kind: Kind, shard: int | None = None) -> str:
        base = f"{self.config.prefix}s:{kind.resource}"
        return base if shard is None else f"{base}@{shard}"

    def shard_of(self, node_name: str) -> int:
        """The kubelet shard that owns ``node_name`` (stable across processes and runs)."""
        return zlib.crc32(node_name.encode()) % self.node_shards

    def create(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a new object; 409 AlreadyExists if the key is taken, 404 if its namespace is missing."""
        keys, args = self._commit_args(kind, "c", obj, "", check_namespace=True)
        return self._result(kind, obj, self._commit_resolved(kind, keys, args))

    def create_many(self, kind: Kind, objs: list[dict[str, Any]]) -> list[dict[str, Any] | errors.StatusError]:
        """Create in one pipelined round trip; each element is the stored object or its error."""
        calls = [self._commit_args(kind, "c", obj, "", check_namespace=True) for obj in objs]
        lean = kind is not POD and kind is not NODE and isinstance(self._writer, CommitClient) and bool(objs)
        out: list[dict[str, Any] | errors.StatusError] = []
        for obj, reply in zip(objs, self._create_lean(kind, calls) if lean else self._commit_pipelined(kind, calls),
                              strict=True):
            try:
                out.append(self._result(kind, obj, reply))
            except errors.StatusError as e:
                out.append(e)
        return out

    def update(self, kind: Kind, obj: dict[str, Any], expected_rv: str | None = None, *,
               bind: bool = False) -> dict[str, Any]:
        """Replace the object if its stored resourceVersion is ``expected_rv`` (default: the object's own).

        409 Conflict when stale: nothing of the write is stored. ``bind`` (pods): this write puts
        the pod on a node, and must fail with 409 if the node lacks room for its requests or ports.
        """
        expected = resource_version(obj) if expected_rv is None else expected_rv
        if not expected:
            raise errors.internal("store update needs the expected resourceVersion")
        keys, args = self._commit_args(kind, "u", obj, expected, bind=bind)
        return self._result(kind, obj, self._commit_resolved(kind, keys, args))

    def update_many(self, kind: Kind, objs: list[dict[str, Any]], expected_rvs: list[str] | None = None, *,
                    bind: bool = False) -> list[dict[str, Any] | errors.StatusError]:
        """Replace many objects in one pipelined round trip, each a compare-and-set of its own.

        ``expected_rvs[i]`` (default: each object's own ``metadata.resourceVersion``) is
        ``objs[i]``'s precondition, exactly as in :meth:`update`; the writes are independent
        (not one transaction), so each element of the result is the stored object or its error
        (409 when stale, 404 when gone) and one conflict never blocks the others. For writers
        that produce many small updates per period (kubelet shards: leases, node and pod
        status), where one round trip per object would dominate; ``bind`` as in :meth:`update`
        (a scheduler binding a batch of pods).
        """
        rvs = expected_rvs if expected_rvs is not None else [resource_version(o) for o in objs]
        if len(rvs) != len(objs):
            raise ValueError("update_many: one expected resourceVersion per object")
        calls = []
        for obj, expected in zip(objs, rvs, strict=True):
            if not expected:
                raise errors.internal("store update needs the expected resourceVersion")
            calls.append(self._commit_args(kind, "u", obj, expected, bind=bind))
        return self._pipelined_results(kind, objs, calls)

    def delete(self, kind: Kind, namespace: str | None, name: str, *, expected_rv: str = "",
               uid: str = "") -> dict[str, Any]:
        """Delete with optional resourceVersion / uid preconditions; returns the object at its deletion rv."""
        while True:
            current = self.get(kind, namespace, name)
            rv = resource_version(current)
            if expected_rv and expected_rv != rv:
                raise errors.stale_resource_version(kind.plural, name, kind.group)
            if uid and uid != (current["metadata"].get("uid") or ""):
                raise errors.conflict(kind.plural, name, f"Precondition failed: UID in precondition: {uid}, "
                                      f"UID in object meta: {current['metadata'].get('uid', '')}", kind.group)
            keys, args = self._commit_args(kind, "d", current, rv, uid=uid)
            try:
                return self._result(kind, current, self._commit_resolved(kind, keys, args))
            except errors.StatusError as e:
                # Someone wrote in between: retry against the new state unless the caller pinned a version.
                if e.reason != "Conflict" or expected_rv:
                    raise

    def delete_many(self, kind: Kind, objs: list[dict[str, Any]]) -> list[dict[str, Any] | errors.StatusError]:
        """Delete many objects in one pipelined round trip, each conditional on its resourceVersion and uid.

        Each object must be the stored one at its ``metadata.resourceVersion`` (an informer's copy
        or a write's result): it is what the DELETED watch event carries. A stale one gets 409
        (nothing written), a gone one 404; the rest are deleted, each independently.
        """
        calls = [self._commit_args(kind, "d", obj, resource_version(obj), uid=obj["metadata"].get("uid") or "")
                 for obj in objs]
        return self._pipelined_results(kind, objs, calls)

    def guaranteed_update(self, kind: Kind, namespace: str | None, name: str,
                          mutate: Callable[[dict[str, Any]], dict[str, Any] | None],
                          attempts: int = 64, *, bind: bool = False) -> dict[str, Any]:
        """Read-modify-write with retry on conflict (upstream storage.Interface.GuaranteedUpdate).

        ``mutate`` gets the current object and returns the new one (same resourceVersion), or
        None to leave it unchanged. It may raise a StatusError to abort.
        """
        for _ in range(attempts):
            current = self.get(kind, namespace, name)
            new = mutate(current)
            if new is None:
                return current
            try:
                return self.update(kind, new, resource_version(current), bind=bind)
            except errors.StaleResourceVersion:
                continue
        raise errors.conflict(kind.plural, name, f"gave up after {attempts} conflicting writes", kind.group)

    # ---------------------------------------------------------------- reads
    def dependents(self, owner_uid: str) -> list[tuple[Kind, str]]:
        """(kind, object key) of every object whose ownerReferences name ``owner_uid``."""
        out = []
        for member in sorted(self.redis.smembers(f"{self.config.prefix}dep:{owner_uid}")):
            resource, _, key = member.decode().partition("|")
            out.append((by_resource(resource), key))
        return out

    def current_rv(self) -> int:
        return int(self.redis.get(self._rv_key) or 0)

    def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]:
        data = self.redis.hget(self.objects_key(kind), object_key(kind, namespace, name))
        if data is None:
            raise errors.not_found(kind.plural, name, kind.group)
        return codec.decode(data)

    def get_many(self, kind: Kind, names: list[tuple[str | None, str]]) -> list[dict[str, Any] | None]:
        """Several objects of ``kind`` by (namespace, name) in one round trip; None for one that does not exist."""
        if not names:
            return []
        raw = self.redis.hmget(self.objects_key(kind), [object_key(kind, ns, name) for ns, name in names])
        return [None if data is None else codec.decode(data) for data in raw]

    def list(self, kind: Kind, namespace: str | None = None, *, label_selector: LabelSelector | None = None,
             field_selector: FieldSelector | None = None, limit: int = 0,
             continue_token: str | None = None, raw_filter: Callable[[bytes], bool] | None = None) -> ListResult:
        """List objects in key order, filtered, optionally paged (``limit`` > 0 / ``continue_token``).

        ``raw_filter`` sees each stored object's encoded bytes before it is decoded and drops it
        when it answers False: a cheap pre-filter for criteria no selector expresses (a sharded
        informer's "pods of my node shard"), saving the decode of every object it rejects. It
        must never reject an object the caller wants; the caller re-checks what it keeps.
        """
        if namespace and not kind.namespaced:
            namespace = None
        if field_selector is not None and namespace is None and kind.namespaced:
            namespace = field_selector.exact("metadata.namespace") or None

        def keep(obj: dict[str, Any]) -> bool:
            if label_selector is not None and not label_selector.matches((obj.get("metadata") or {}).get("labels")):
                return False
            return field_selector is None or field_selector.matches(obj)

        filtering = label_selector is not None and not label_selector.empty
        filtering = filtering or (field_selector is not None and not field_selector.empty)
        if not limit and not continue_token and namespace is None:
            return self._list_all(kind, keep if filtering else None, raw_filter)

        prefix = f"{namespace}/" if namespace else ""
        start, list_rv = "", 0
        if continue_token:
            list_rv, start = _decode_continue(continue_token)
            if prefix and not start.startswith(prefix):
                raise errors.bad_request("continue key is not valid: it is for another namespace")
        lo = f"({start}" if start else (f"[{prefix}" if prefix else "-")
        hi: str | bytes = f"({prefix}".encode() + b"\xff" if prefix else "+"  # 0xff sorts after any UTF-8 byte
        items: list[dict[str, Any]] = []
        objects, order = self.objects_key(kind), f"{self.config.prefix}i:{kind.resource}"
        # Unfiltered pages read exactly one more than they return (to know whether more follow);
        # filtered ones read in chunks, since most of what they read may be dropped.
        chunk = max(self.config.list_chunk, limit + 1) if filtering or not limit else limit + 1
        last_key = items_last_key = ""
        while True:
            rv_raw, keys, values = self._range([self._rv_key, objects, order], [lo, hi, chunk])
            if not list_rv:
                list_rv = int(rv_raw)
            for k, v in zip(keys, values, strict=True):
                if v is None:  # deleted between ZRANGE and HMGET cannot happen inside one script; kept defensive
                    continue
                if raw_filter is not None and not raw_filter(v):
                    last_key = k.decode()
                    continue
                obj = codec.decode(v)
                if filtering and not keep(obj):
                    last_key = k.decode()
                    continue
                if limit and len(items) == limit:
                    # A full page and at least one more match: hand out a continue token.
                    return ListResult(items, list_rv, _encode_continue(list_rv, items_last_key))
                items.append(obj)
                items_last_key = last_key = k.decode()
            if len(keys) < chunk:
                return ListResult(items, list_rv, None)
            lo = f"({last_key}"

    def list_many(self, requests: list[tuple[Kind, str | None]]) -> list[list[dict[str, Any]]]:
        """Several small unfiltered lists (kind, namespace or None) in one round trip.

        For reads that must not cost a round trip each, such as admission's PriorityClasses and
        LimitRanges for a create. Each result is in key order; no paging, so keep these small.
        """
        order = f"{self.config.prefix}i:"
        for attempt in range(2):
            pipe = self.redis.pipeline(transaction=False)
            for kind, namespace in requests:
                if namespace and kind.namespaced:
                    # EVALSHA straight on the pipeline: through the Script object redis-py would send a
                    # SCRIPT EXISTS round trip first on every execute (Pipeline.load_scripts).
                    pipe.evalsha(self._range.sha, 3, self._rv_key, self.objects_key(kind), order + kind.resource,
                                 f"[{namespace}/", f"({namespace}/".encode() + b"\xff", -1)
                else:
                    pipe.hgetall(self.objects_key(kind))
            try:
                replies = pipe.execute()
                break
            except redis.exceptions.NoScriptError:  # a restarted or flushed Redis: load it, once
                if attempt:
                    raise
                self.redis.script_load(_RANGE_LUA)
        out: list[list[dict[str, Any]]] = []
        for reply in replies:
            if isinstance(reply, dict):
                out.append([codec.decode(reply[k]) for k in sorted(reply)])
            else:
                out.append([codec.decode(v) for v in reply[2] if v is not None])
        return out

    def _list_all(self, kind: Kind, keep: Callable[[dict[str, Any]], bool] | None,
                  raw_filter: Callable[[bytes], bool] | None = None) -> ListResult:
        pipe = self.redis.pipeline(transaction=True)
        pipe.get(self._rv_key)
        pipe.hgetall(self.objects_key(kind))
        rv_raw, raw = pipe.execute()
        decode = codec.decode
        if raw_filter is None:
            items = [decode(raw[k]) for k in sorted(raw)]
        else:
            items = [decode(raw[k]) for k in sorted(raw) if raw_filter(raw[k])]
        if keep is not None:
            items = [o for o in items if keep(o)]
        return ListResult(items, int(rv_raw or 0), None)

    # ---------------------------------------------------------------- watch
    @property
    def trim_key(self) -> str:
        """The hash of trim watermarks (stream -> first retained entry id), for :func:`check_window`."""
        return self._trim_key

    def read_streams(self, positions: Mapping[str, int], *, count: int = 1000,
                     block_ms: int | None = None) -> StreamRead:
        """One ``XREAD`` of the entries after ``positions[stream]`` on every stream, plus their trim watermarks.

        Both commands go in one round trip; the watermarks are read *after* the ``XREAD`` on the
        server, so if :func:`check_window` passes for a position, no entry after it was trimmed
        before the read either (trims only move forward). The caller must run that check for
        each position before trusting the entries: this is the read :class:`Watch` and the
        informers' watch multiplexer share. ``block_ms`` None returns at once.
        """
        streams = list(positions)
        if self._fast_reads:
            found, marks = wire.read_streams(self.redis, positions, self._trim_key, count=count, block_ms=block_ms)
            return StreamRead(found, dict(zip(streams, marks, strict=True)))
        pipe = self.redis.pipeline(transaction=False)
        pipe.xread({s: f"{positions[s]}-0" for s in streams}, count=count, block=block_ms)
        pipe.hmget(self._trim_key, streams)
        reply, first_retained = pipe.execute()
        entries: dict[str, list[tuple[bytes, dict[bytes, bytes]]]] = {}
        for name, items in reply or ():
            entries[name.decode() if isinstance(name, bytes) else name] = items
        return StreamRead(entries, dict(zip(streams, first_retained, strict=True)))

    def watch(self, kind: Kind, since_rv: int, *, namespace: str | None = None,
              label_selector: LabelSelector | None = None, field_selector: FieldSelector | None = None,
              shard: int | None = None) -> Watch:
        """Events of ``kind`` after ``since_rv``, in order; 410 Gone if the window no longer holds them."""
        return Watch(self, self.stream_key(kind, shard), since_rv, event_filter(namespace, label_selector,
                                                                                field_selector))


def event_filter(namespace: str | None, label_selector: LabelSelector | None,
                 field_selector: FieldSelector | None) -> Callable[[dict[str, Any]], bool] | None:
    checks: list[Callable[[dict[str, Any]], bool]] = []
    if namespace:
        checks.append(lambda o: (o.get("metadata") or {}).get("namespace") == namespace)
    if label_selector is not None and not label_selector.empty:
        checks.append(lambda o: label_selector.matches((o.get("metadata") or {}).get("labels")))
    if field_selector is not None and not field_selector.empty:
        checks.append(field_selector.matches)
    if not checks:
        return None
    return lambda o: all(c(o) for c in checks)


def check_window(since_rv: int, first_retained: bytes | str | None) -> None:
    """Raise 410 if events after ``since_rv`` may have been trimmed from a stream.

    Trimming removes the oldest entries; after a trim the first retained entry has id F, so
    every removed event has rv < F. Events after ``since_rv`` are all present iff
    ``since_rv >= F - 1``. (Conservative: ids between the last trimmed one and F may belong to
    other kinds, so a few watches that could be served get 410 and relist: harmless.)
    """
    if first_retained is None:
        return
    raw = first_retained.decode() if isinstance(first_retained, bytes) else first_retained
    first = int(raw.split("-", 1)[0])
    if since_rv < first - 1:
        raise errors.gone(f"too old resource version: {since_rv} ({first - 1})")


def decode_entries(entries: list[tuple[bytes, dict[bytes, bytes]]],
                   keep: Callable[[dict[str, Any]], bool] | None) -> tuple[list[WatchEvent], int]:
    """Turn stream entries into events; returns (kept events, rv of the last entry read)."""
    out: list[WatchEvent] = []
    last = 0
    for entry_id, fields in entries:
        last = int(entry_id.split(b"-", 1)[0])
        obj = codec.decode(fields[b"o"])
        if keep is None or keep(obj):
            out.append(WatchEvent(fields[b"t"].decode(), obj, last))
    return out, last


class Watch:
    """A watch on one stream: ``next_batch()`` for batched consumers, iteration for simple ones.

    ``last_rv`` is the resourceVersion up to which the stream has been read (filtered-out
    events included), which is what a BOOKMARK reports.
    """

    def __init__(self, store: Store, stream: str, since_rv: int,
                 keep: Callable[[dict[str, Any]], bool] | None, batch: int = 1000) -> None:
        self._store = store
        self._stream = stream
        self._keep = keep
        self._batch = batch
        self.last_rv = since_rv
        self.closed = False
        check_window(since_rv, store.redis.hget(store.trim_key, stream))

    def next_batch(self, timeout: float = 1.0) -> list[WatchEvent]:
        """Block up to ``timeout`` seconds for events; [] on timeout. Raises 410 if the window moved past us."""
        if self.closed:
            return []
        block_ms = max(int(timeout * 1000), 1) if timeout > 0 else None
        read = self._store.read_streams({self._stream: self.last_rv}, count=self._batch, block_ms=block_ms)
        check_window(self.last_rv, read.first_retained[self._stream])
        entries = read.entries.get(self._stream)
        if not entries:
            return []
        events, last = decode_entries(entries, self._keep)
        self.last_rv = last
        return events

    def __iter__(self) -> Iterator[WatchEvent]:
        while not self.closed:
            yield from self.next_batch()

    def close(self) -> None:
        self.closed = True


def _encode_continue(rv: int, key: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"rv": rv, "start": key})).decode()


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), str(data["start"])
    except (binascii.Error, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        raise errors.bad_request("continue key is not valid: could not decode the token") from None
