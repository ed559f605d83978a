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
"""

from __future__ import annotations

from collections.abc import Sequence
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
