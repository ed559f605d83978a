"""The store's write channel: commit scripts sent as pre-packed RESP, many per round trip.

Every write to the cluster state is one ``EVALSHA`` of the commit script
(:mod:`emulator.store.store`): 10 keys and 16 arguments. Through redis-py each
costs ~25-30 µs of the writer's CPU before Redis sees it: ``Script.__call__``,
``execute_command`` / the pipeline's command stack, the command packer walking
the 28 arguments in Python, per-command hooks on the way back, and, for a
pipeline holding a script, one extra ``SCRIPT EXISTS`` round trip per
``execute``. A kubelet shard, a scheduler and a load driver send ~12 such
writes per pod lifecycle.

:class:`CommitClient` is a ``redis.Redis`` (every other command goes through
redis-py as usual) with one extra method, :meth:`CommitClient.evalsha_many`:
it packs each call with hiredis's C packer (one call per command), sends them
in one ``sendall`` on a pooled connection and reads the replies with the
connection's parser (~13 µs a commit). The contract is redis-py's: a broken
connection is dropped and the error raised (the store then resolves the
outcome by reading back, never by running the script blindly again); a
``NOSCRIPT`` reply (Redis restarted from its AOF without its script cache)
means the call did not run, so the script is loaded and those calls sent
again.

:func:`read_streams` is the watch readers' read (every informer multiplexer's
and the API server's): one ``XREAD`` of many streams and one ``HMGET`` of
their trim watermarks, packed the same way and sent in one ``sendall``, the
replies parsed into what redis-py's pipeline would return. Through a redis-py
pipeline that read cost ~190 µs of the reader's CPU on the 2-core VM (pipeline
set-up, its Python packer, the response callbacks); packed here, ~90 µs
(``docs/performance.md``, "The readers' read").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError, ResponseError

try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # redis[hiredis] is a dependency; without it, redis-py's own packer
    _hiredis_pack = None

Call = tuple[Sequence[Any], Sequence[Any]]  # (keys, args) of one EVALSHA


class CommitClient(redis.Redis):
    """A redis-py client whose script calls can skip redis-py's per-command machinery (module docstring)."""

    def evalsha_many(self, script: Script, calls: Sequence[Call]) -> list[Any]:
        """Run ``script`` once per (keys, args) in one round trip; each call's reply, in order.

        A call whose script failed raises its ``ResponseError`` after every reply is read (as a
        redis-py pipeline's ``execute`` does); a connection error propagates with the connection
        dropped, so the outcome of the calls is unknown to the caller.
        """
        replies = self._send(script, calls)
        missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
        if missing:
            script.sha = self.script_load(script.script)
            for i, reply in zip(missing, self._send(script, [calls[i] for i in missing]), strict=True):
                replies[i] = reply
        for reply in replies:
            if isinstance(reply, ResponseError):
                raise reply
        return replies

    def _send(self, script: Script, calls: Sequence[Call]) -> list[Any]:
        sha = script.sha
        pool = self.connection_pool
        conn = pool.get_connection()
        try:
            if _hiredis_pack is not None:
                packed = [b"".join([_hiredis_pack(("EVALSHA", sha, len(keys), *keys, *args))
                                    for keys, args in calls])]
            else:
                packed = conn.pack_commands([("EVALSHA", sha, len(keys), *keys, *args) for keys, args in calls])
            conn.send_packed_command(packed)
            out: list[Any] = []
            for _ in calls:
                try:
                    out.append(conn.read_response())
                except ResponseError as e:  # an error reply: the connection is still in step
                    out.append(e)
            return out
        except BaseException:
            conn.disconnect()  # replies may be left unread: never hand this socket out again as it is
            raise
        finally:
            pool.release(conn)


# redis-py clients read_streams may bypass: exactly these classes (a test's wrapper or subclass that
# intercepts pipelines keeps redis-py's path, and with it whatever it injects).
FAST_READ_CLIENTS: tuple[type, ...] = (redis.Redis, CommitClient)

StreamEntries = dict[str, list[tuple[bytes, dict[bytes, bytes]]]]


def can_read_fast(client: Any) -> bool:
    """Whether :func:`read_streams` may read through ``client`` (a plain redis-py client, hiredis present)."""
    return _hiredis_pack is not None and type(client) in FAST_READ_CLIENTS


def _entries(items: Any) -> list[tuple[bytes, dict[bytes, bytes]]]:
    # redis-py's parse_stream_list: (id, {field: value}) per entry; an entry without fields reads (None, None).
    out: list[tuple[Any, Any]] = []
    for item in items or ():
        if item is None:
            out.append((None, None))
            continue
        flat = item[1]
        out.append((item[0], dict(zip(flat[::2], flat[1::2], strict=False)) if flat is not None else {}))
    return out


def read_streams(client: redis.Redis, positions: Mapping[str, int], trim_key: str, *, count: int,
                 block_ms: int | None) -> tuple[StreamEntries, list[Any]]:
    """``XREAD [COUNT count] [BLOCK block_ms] STREAMS <streams> <position>-0 ...`` then ``HMGET trim_key <streams>``.

    One round trip on a pooled connection, as ``Store.read_streams`` does through a pipeline: the
    entries of each stream that has any (stream name -> [(id, fields)]) and the watermarks in
    ``positions``' order. Connection errors are retried with the client's ``Retry`` (a read is
    idempotent; the connection is dropped first), as redis-py's pipeline does; an error reply is
    raised once both replies are read, so the connection stays in step.
    """
    assert _hiredis_pack is not None
    streams = list(positions)
    xread: list[Any] = ["XREAD", "COUNT", count]
    if block_ms is not None:
        xread += ["BLOCK", block_ms]
    xread += ["STREAMS", *streams, *(f"{positions[s]}-0" for s in streams)]
    packed = [_hiredis_pack(tuple(xread)) + _hiredis_pack(("HMGET", trim_key, *streams))]
    pool = client.connection_pool
    conn = pool.get_connection()

    def once() -> tuple[Any, Any]:
        conn.send_packed_command(packed)
        replies: list[Any] = []
        error: ResponseError | None = None
        for _ in range(2):
            try:
                replies.append(conn.read_response())
            except ResponseError as e:  # an error reply: the connection is still in step
                error = error or e
                replies.append(None)
        if error is not None:
            raise error
        return replies[0], replies[1]

    try:
        reply, marks = conn.retry.call_with_retry(once, lambda _error: conn.disconnect())
    except ResponseError:
        raise  # both replies were read: the connection is in step and goes back to the pool as it is
    except BaseException:
        conn.disconnect()  # a reply may be left unread: never hand this socket out again as it is
        raise
    finally:
        pool.release(conn)
    entries: StreamEntries = {}
    if reply:
        pairs = reply.items() if isinstance(reply, dict) else reply  # RESP3 answers a map, RESP2 a list of pairs
        for name, items in pairs:
            entries[name.decode() if isinstance(name, bytes) else name] = _entries(items)
    return entries, list(marks)
