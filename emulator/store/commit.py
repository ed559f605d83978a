"""The store's commit path: every write of an object is one call of ``lua/commit.lua``.

In Kubernetes terms this is etcd3's transaction in the apiserver's storage layer
(``k8s.io/apiserver/pkg/storage/etcd3/store.go``: a compare on the key's mod revision, then the put
or delete): :class:`Commits` builds the script's keys and arguments (the object packed once, its
owners for the garbage collector's index, the node-room accounting of a pod or node), sends one
commit or a pipelined batch through the write client (a batch of creates of a kind without node room
is one ``lua/create_many.lua`` call), turns the script's reply into the stored object or the
Kubernetes error (409/404/403), and - when the connection breaks before a reply - reads the key back
to learn whether the write landed instead of running it blindly again.

:class:`Commits` is a mixin of :class:`~emulator.store.store.Store`, which provides the keys and
the clients; callers keep calling ``store.create(...)``, ``store.update_many(...)`` and so on.
"""

from __future__ import annotations

import importlib.resources
import time
from typing import TYPE_CHECKING, Any

import redis
from redis.backoff import EqualJitterBackoff
from redis.commands.core import Script
from redis.exceptions import NoScriptError

from emulator.api import errors
from emulator.api.kinds import NAMESPACE, NODE, POD, Kind
from emulator.api.pods import host_ports, pod_requests
from emulator.api.quantity import QuantityError, cpu_millis, to_int
from emulator.store import codec
from emulator.store.wire import CommitClient

if TYPE_CHECKING:
    from emulator.store.store import StoreConfig

_COMMIT_LUA = importlib.resources.files("emulator.store").joinpath("lua/commit.lua").read_text()
_CREATE_MANY_LUA = importlib.resources.files("emulator.store").joinpath("lua/create_many.lua").read_text()
_CREATE_CHUNK = 128  # objects per create_many.lua call

# What a store call raises while Redis cannot be reached, once its retries are spent (redis-py's
# BusyLoadingError, "Redis is loading its AOF", is a ConnectionError). The API server answers 503.
UNAVAILABLE: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)


def object_key(kind: Kind, namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if kind.namespaced else name


def key_of(kind: Kind, obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return object_key(kind, meta.get("namespace"), meta.get("name", ""))


def _with_rv(obj: dict[str, Any], rv: int) -> dict[str, Any]:
    return {**obj, "metadata": {**obj.get("metadata", {}), "resourceVersion": str(rv)}}


class Commits:
    """Commits of :class:`~emulator.store.store.Store` (which sets these attributes and provides the keys)."""

    redis: redis.Redis
    config: StoreConfig
    _writer: redis.Redis
    _commit: Script
    _create_many: Script
    _key_cache: dict[tuple[str, int | None], list[str]]
    _rv_key: str
    _trim_key: str
    gc_queue_key: str

    if TYPE_CHECKING:
        def objects_key(self, kind: Kind) -> str: ...

        def stream_key(self, kind: Kind, shard: int | None = None) -> str: ...

        def shard_of(self, node_name: str) -> int: ...

        def current_rv(self) -> int: ...

    # ------------------------------------------------- writes whose reply was lost
    def _commit_resolved(self, kind: Kind, keys: list[str], args: list[Any]) -> list[Any]:
        """Run the commit script; if the connection fails before its reply, find out what happened
        (:meth:`_landed`) instead of running it blindly again. Returns the script's reply (or the one
        it would have given)."""
        backoff = EqualJitterBackoff(cap=self.config.retry_cap, base=self.config.retry_base)
        for attempt in range(self.config.retries + 1):
            try:
                if isinstance(self._writer, CommitClient):
                    return self._writer.evalsha_many(self._commit, [(keys, args)])[0]
                return self._commit(keys, args)
            except UNAVAILABLE:
                if attempt == self.config.retries:
                    raise
            # The read client retries until Redis answers (or gives up, raising UNAVAILABLE).
            outcome = self._landed(kind, args)
            if outcome is not None:
                return outcome
            time.sleep(backoff.compute(attempt + 1))  # not landed: commit again once Redis is back
        raise AssertionError("unreachable")

    def _landed(self, kind: Kind, args: list[Any]) -> list[Any] | None:
        """Whether the commit with ``args`` (op, field, expected rv, head, tail ...) is in the store: the reply
        it gave (``[1, rv]``; ``[2, stored bytes]`` for a create that landed and was changed since), the error
        reply a lost race gives, or None when it did not run."""
        op, field, expected, head, tail = args[:5]
        stored = self.redis.hget(self.objects_key(kind), field)
        if op == "d":
            if stored is None:
                return [1, self.current_rv()]  # gone: ours (or a concurrent delete - gone either way)
            current = str((codec.decode(stored).get("metadata") or {}).get("resourceVersion") or "")
            return None if current == expected else [0, "conflict"]
        if stored is None:
            return None if op == "c" else [0, "notfound"]
        mine = _stored_rv(stored, head, tail)
        if mine is not None and (op == "c" or mine != expected):
            return [1, int(mine)]  # our bytes, at a resourceVersion of their own
        if op == "c":
            uid = args[10]
            found = codec.decode(stored)
            if uid and (found.get("metadata") or {}).get("uid") == uid:
                return [2, stored]  # ours, changed since by someone else: the caller gets it as it is now
            return [0, "exists"]
        current = str((codec.decode(stored).get("metadata") or {}).get("resourceVersion") or "")
        return None if current == expected else [0, "conflict"]

    def _keys(self, kind: Kind, obj: dict[str, Any]) -> tuple[list[str], bool]:
        node = (obj.get("spec") or {}).get("nodeName") if kind is POD else None
        shard = self.shard_of(node) if node else None
        keys = self._key_cache.get((kind.resource, shard))
        if keys is None:  # the same 10 keys for every write of a kind (and node shard): built once
            p, r = self.config.prefix, kind.resource
            shard_stream = self.stream_key(kind, shard) if shard is not None else self._rv_key
            keys = self._key_cache[(r, shard)] = [
                self._rv_key, f"{p}o:{r}", f"{p}v:{r}", f"{p}i:{r}", f"{p}s:{r}", self._trim_key,
                shard_stream, self.objects_key(NAMESPACE), f"{p}ow:{r}", self.gc_queue_key]
        return keys, bool(node)

    def _commit_args(self, kind: Kind, op: str, obj: dict[str, Any], expected: str, *, uid: str = "",
                     check_namespace: bool = False, bind: bool = False) -> tuple[list[str], list[Any]]:
        keys, sharded = self._keys(kind, obj)
        head, tail = codec.encode_split(obj)
        ns = (obj["metadata"].get("namespace") or "") if (check_namespace and kind.namespaced) else ""
        meta = obj.get("metadata") or {}
        owners = "" if op == "d" else ",".join(sorted({str(r.get("uid", "")) for r in meta.get("ownerReferences") or []
                                                      if r.get("uid")}))
        args = [op, key_of(kind, obj), expected, head, tail, self.config.stream_cap, "1" if sharded else "0", ns, uid,
                owners, meta.get("uid") or "", f"{self.config.prefix}dep:", kind.resource,
                *_accounting(kind, op, obj), "1" if bind else "0"]
        return keys, args

    def _result(self, kind: Kind, obj: dict[str, Any], reply: list[Any]) -> dict[str, Any]:
        if reply[0] == 1:
            return _with_rv(obj, int(reply[1]))
        if reply[0] == 2:  # from _landed: the write landed and the object changed since; this is it now
            return codec.decode(reply[1])
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        reason = reply[1].decode() if isinstance(reply[1], bytes) else reply[1]
        if reason == "exists":
            raise errors.already_exists(kind.plural, name, kind.group)
        if reason == "notfound":
            raise errors.not_found(kind.plural, name, kind.group)
        if reason == "conflict":
            raise errors.stale_resource_version(kind.plural, name, kind.group)
        if reason == "nonamespace":
            raise errors.not_found("namespaces", meta.get("namespace", ""))
        if reason == "terminating":
            ns = meta.get("namespace", "")
            err = errors.forbidden(kind.plural, name, f"unable to create new content in namespace {ns} "
                                   "because it is being terminated", kind.group)
            err.causes.append(errors.Cause("metadata.namespace", f"namespace {ns} is terminating",
                                           "NamespaceTerminating"))
            raise err
        if reason in ("noroom", "noport"):
            what = reply[2].decode() if isinstance(reply[2], bytes) else reply[2]
            node = (obj.get("spec") or {}).get("nodeName", "")
            why = f"Insufficient {what}" if reason == "noroom" else f"host port {what} is in use"
            raise errors.conflict("pods/binding", name, f"node {node} has no room for the pod: {why}")
        if reason == "uid":
            found = reply[2].decode() if isinstance(reply[2], bytes) else reply[2]
            raise errors.conflict(kind.plural, name, f"Precondition failed: UID in precondition: "
                                  f"{meta.get('uid', '')}, UID in object meta: {found}", kind.group)
        raise errors.internal(f"unexpected store reply {reply!r}")

    def _create_lean(self, kind: Kind, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """Creates of a kind without node accounting in one ``lua/create_many.lua`` call (the commit script's
        replies, one per object); if the connection fails before the reply, each is resolved on its own."""
        p, r = self.config.prefix, kind.resource
        keys, _ = self._keys(kind, {})
        keys = keys[:6] + keys[7:9]
        scripts = []
        # A script call holds Redis for its whole run: at most _CREATE_CHUNK objects each (a few ms), all
        # the calls in one round trip.
        for start in range(0, len(calls), _CREATE_CHUNK):
            args: list[Any] = [self.config.stream_cap, f"{p}dep:", r]
            for _keys, a in calls[start:start + _CREATE_CHUNK]:
                args += (a[1], a[3], a[4], a[7], a[9])  # field, head, tail, namespace, owners (see _commit_args)
            scripts.append((keys, args))
        try:
            replies = self._writer.evalsha_many(self._create_many, scripts)
        except UNAVAILABLE:
            return self._resolve_each(kind, calls)
        return [[1, x] if isinstance(x, int) else [0, x] for chunk in replies for x in chunk]

    def _commit_pipelined(self, kind: Kind, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """Independent commits in one round trip; if the connection fails before the replies, each is
        resolved on its own (:meth:`_commit_resolved`: read back, commit again only what did not land)."""
        if isinstance(self._writer, CommitClient):
            try:
                return self._writer.evalsha_many(self._commit, calls)
            except UNAVAILABLE:
                return self._resolve_each(kind, calls)
        for attempt in range(2):
            # EVALSHA itself: a Script on a pipeline costs a SCRIPT EXISTS round trip on every execute. A Redis
            # that lost the script (restarted without it) answers NOSCRIPT to each call, running none of them.
            pipe = self._writer.pipeline(transaction=False)
            for keys, args in calls:
                pipe.evalsha(self._commit.sha, len(keys), *keys, *args)
            try:
                return pipe.execute()
            except NoScriptError:
                if attempt:
                    raise
                self._writer.script_load(_COMMIT_LUA)
            except UNAVAILABLE:
                break
        return self._resolve_each(kind, calls)

    def _resolve_each(self, kind: Kind, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """Commits whose replies were lost: what each one did (:meth:`_landed`), committing again what did not land."""
        out = []
        for keys, args in calls:
            landed = self._landed(kind, args)
            out.append(landed if landed is not None else self._commit_resolved(kind, keys, args))
        return out

    def _pipelined_results(self, kind: Kind, objs: list[dict[str, Any]],
                           calls: list[tuple[list[str], list[Any]]]) -> list[dict[str, Any] | errors.StatusError]:
        """Commit ``calls`` (one per object) in one pipelined round trip: each object's result, or its error."""
        out: list[dict[str, Any] | errors.StatusError] = []
        for obj, reply in zip(objs, self._commit_pipelined(kind, calls) if objs else [], strict=True):
            try:
                out.append(self._result(kind, obj, reply))
            except errors.StatusError as e:
                out.append(e)
        return out


def _stored_rv(stored: bytes, head: bytes, tail: bytes) -> str | None:
    """The resourceVersion in ``stored`` if it is exactly the commit of ``head`` + rv + ``tail``
    (:func:`codec.join`), else None."""
    middle = len(stored) - len(head) - len(tail)
    if 2 <= middle <= 32 and stored[len(head):len(head) + 1] == bytes([0xA0 + middle - 1]) \
            and stored.startswith(head) and stored.endswith(tail):
        return stored[len(head) + 1:len(head) + middle].decode()
    return None


def _accounting(kind: Kind, op: str, obj: dict[str, Any]) -> tuple[str, str]:
    """The commit script's node-room accounting arguments (role, value) for a write of ``obj``.

    A pod holds its requests (plus one ``pods`` slot) and host ports on its node from binding
    until it finishes or is deleted; a node's allocatable is its room.
    """
    if kind is POD:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        node = spec.get("nodeName")
        if op == "d" or not node or status.get("phase") in ("Succeeded", "Failed"):
            return "pod", ""
        requests = {**pod_requests(obj), "pods": 1}
        res = ",".join(f"{k}={v}" for k, v in sorted(requests.items()))
        ports = ";".join(f"{proto}/{port}@{ip}" for ip, proto, port in host_ports(obj))
        return "pod", f"{node}|{res}|{ports}"
    if kind is NODE:
        if op == "d":
            return "node", ""
        room = []
        for name, value in sorted(((obj.get("status") or {}).get("allocatable") or {}).items()):
            try:
                room.append(f"{name}={cpu_millis(value) if name == 'cpu' else to_int(value)}")
            except QuantityError:
                continue  # validation rejects these; never let accounting break a write
        return "node", ",".join(room)
    return "", ""
