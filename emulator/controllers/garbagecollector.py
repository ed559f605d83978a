"""The garbage collector: deletes dependents whose owners are gone, and finishes foreground deletions.

Upstream (``pkg/controller/garbagecollector/garbagecollector.go``, ``graph_builder.go``)
keeps an in-memory graph of every ownerReference fed by informers on every
resource. kemu needs no graph: the store keeps the exact reverse index
(``store.dependents(owner_uid)``, maintained by the commit script), so the
collector only learns *which owners changed*, from the stream
``store.gc_queue_key`` (read with a consumer group: an entry is acknowledged when
its work is done). Entries come from a deleted owner that had dependents
(:meth:`GarbageCollector.attempt_to_delete` on each, upstream
``attemptToDeleteItem``) and from a foreground deletion (delete the dependents,
then drop the ``foregroundDeletion`` finalizer once no blocking dependent is left,
upstream ``processDeletingDependentsItem``). A bounded periodic sweep catches what
no entry announces. ``attempt_to_delete`` classifies owner references as
*solid*, *dangling* or *waiting*, as upstream does; every step re-reads the
objects, so handling an entry twice is harmless. The design is described in
``docs/architecture.md`` ("Controllers").
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import redis

from emulator.api import errors
from emulator.api.kinds import Kind, all_kinds, by_resource
from emulator.api.meta import without_owner_references
from emulator.api.types import Obj
from emulator.clock import Clock
from emulator.server.core import FINALIZER_FOREGROUND, FINALIZER_ORPHAN, ServerCore
from emulator.store import codec

log = logging.getLogger(__name__)

DEFAULT_GROUP = "kemu-garbage-collector"
_ABSENT_CACHE_SIZE = 10_000  # upstream's absentOwnerCache holds 500 entries; ours are only tuples


class _Unresolvable(Exception):
    """An owner reference the collector cannot check (unknown kind, namespaced owner of a cluster-scoped object)."""


@dataclass
class GCStats:
    """What the collector did since it was created (for tests, logs and, later, metrics)."""

    entries_done: int = 0
    deleted: int = 0
    references_removed: int = 0
    finalizers_removed: int = 0
    swept_objects: int = 0
    sweeps_completed: int = 0
    errors: int = 0


@dataclass
class _Sweep:
    kinds: list[Kind]
    began: float  # cluster time: the next sweep is due ``sweep_interval`` after it, however long this one takes
    index: int = 0
    cursor: int = 0


def _split_key(key: str) -> tuple[str | None, str]:
    ns, _, name = key.rpartition("/")
    return ns or None, name


def _deleting_dependents(meta: Obj) -> bool:
    return bool(meta.get("deletionTimestamp")) and FINALIZER_FOREGROUND in (meta.get("finalizers") or [])


class GarbageCollector:
    """Drive with :meth:`sync_once` (tests) or run it in a :class:`~emulator.controllers.loop.ControllerLoop`."""

    def __init__(self, core: ServerCore, *, consumer: str = "gc-0", group: str = DEFAULT_GROUP,
                 clock: Clock | None = None, batch: int = 100, max_entries_per_pass: int = 10_000,
                 claim_idle_ms: int = 60_000, sweep_interval: float | None = 3600.0, sweep_at_start: bool = True,
                 sweep_budget: int = 1000) -> None:
        self.core = core
        self.store = core.store
        self.redis: redis.Redis = core.store.redis
        self.queue = core.store.gc_queue_key
        self.group = group
        self.consumer = consumer
        self.clock = clock or core.clock
        self.batch = batch
        self.max_entries_per_pass = max_entries_per_pass
        self.claim_idle_ms = claim_idle_ms
        self.sweep_interval = sweep_interval
        self.sweep_budget = sweep_budget
        self.stats = GCStats()
        self._group_ready = False
        self._absent: OrderedDict[tuple[str, str | None, str, str], None] = OrderedDict()
        self._kinds_by_group_kind: dict[tuple[str, str], Kind] = {}
        self._sweep: _Sweep | None = None
        now = self.clock.now()
        if sweep_interval is None:
            self._next_sweep: float | None = None
        else:
            self._next_sweep = now if sweep_at_start else now + sweep_interval

    # ------------------------------------------------------------------ queue
    def ensure_group(self) -> None:
        """Create the consumer group from the stream's start, so entries queued before any collector ran count."""
        try:
            self.redis.xgroup_create(self.queue, self.group, id="0", mkstream=True)
        except redis.ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise
        self._group_ready = True

    def sync_once(self, block_ms: int | None = None) -> int:
        """One pass: pending entries (ours and abandoned ones), then new ones, then a bounded sweep step.

        Returns how many queue entries were completed. ``block_ms`` makes the read of new
        entries wait that long for one (None: do not wait).
        """
        if not self._group_ready:
            self.ensure_group()
        try:
            done = self._process_queue(block_ms)
        except redis.ResponseError as e:
            if "NOGROUP" not in str(e):
                raise
            self._group_ready = False  # the stream was removed under us (e.g. a flushed store): start over
            return 0
        self._sweep_step()
        return done

    def _process_queue(self, block_ms: int | None) -> int:
        done = 0
        if self.claim_idle_ms >= 0:
            # Entries another (dead) consumer read but never acknowledged become ours.
            start = "0-0"
            while True:
                reply = self.redis.xautoclaim(self.queue, self.group, self.consumer, self.claim_idle_ms,
                                              start_id=start, count=self.batch)
                start = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
                if start in ("0-0", "0"):
                    break
        # Our own pending entries: work interrupted by a crash, failures to retry, waiting owners.
        last = "0"
        handled = 0
        while handled < self.max_entries_per_pass:
            entries = self._read(last, None)
            if not entries:
                break
            for entry_id, fields in entries:
                done += self._handle_entry(entry_id, fields)
                last = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
            handled += len(entries)
            if len(entries) < self.batch:
                break
        # New entries (including those this pass itself caused: nested foreground owners).
        first = True
        while handled < self.max_entries_per_pass:
            entries = self._read(">", block_ms if first else None)
            first = False
            if not entries:
                break
            for entry_id, fields in entries:
                done += self._handle_entry(entry_id, fields)
            handled += len(entries)
        return done

    def _read(self, start: str, block_ms: int | None) -> list[tuple[bytes, dict[bytes, bytes]]]:
        reply = self.redis.xreadgroup(self.group, self.consumer, {self.queue: start}, count=self.batch,
                                      block=block_ms)
        return reply[0][1] if reply else []

    def _handle_entry(self, entry_id: bytes, fields: dict[bytes, bytes] | None) -> int:
        try:
            complete = self._handle(fields or {})
        except errors.StatusError as e:
            self.stats.errors += 1
            log.warning("garbage collector: entry %s failed, will retry: %s", entry_id, e)
            complete = False
        if not complete:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        pipe.xack(self.queue, self.group, entry_id)
        pipe.xdel(self.queue, entry_id)  # one group reads this stream: an acknowledged entry is garbage
        pipe.execute()
        self.stats.entries_done += 1
        return 1

    def _handle(self, fields: dict[bytes, bytes]) -> bool:
        uid = fields.get(b"uid", b"").decode()
        if not uid:
            return True
        resource = fields.get(b"resource")
        if resource:
            ns, name = _split_key(fields.get(b"key", b"").decode())
            return self.process_deleting_dependents(by_resource(resource.decode()), ns, name, uid)
        # The owner is gone: each dependent may now be garbage.
        complete = True
        for kind, key in self.store.dependents(uid):
            complete = self._attempt(kind, key) and complete
        return complete

    # ------------------------------------------------------------- decisions
    def _attempt(self, kind: Kind, key: str) -> bool:
        """attempt_to_delete with upstream's retry on conflict; False leaves the work for a later pass."""
        ns, name = _split_key(key)
        for _ in range(3):
            try:
                return self.attempt_to_delete(kind, ns, name)
            except errors.StatusError as e:
                if e.code == 404:
                    return True
                if e.reason == "Conflict":
                    continue  # the object changed (or was re-created) under us: decide again
                self.stats.errors += 1
                log.warning("garbage collector: %s %s: %s", kind.resource, key, e)
                return False
        return False

    def attempt_to_delete(self, kind: Kind, namespace: str | None, name: str) -> bool:
        """Upstream ``attemptToDeleteItem`` for one object; True when nothing is left to do for it now."""
        obj = errors.get_or_none(self.store, kind, namespace, name)
        if obj is None:
            return True
        meta = obj["metadata"]
        uid, rv = meta.get("uid") or "", meta.get("resourceVersion") or ""
        finalizers = meta.get("finalizers") or []
        if meta.get("deletionTimestamp"):
            # Being deleted is a one-way trip: wait for the final deletion. An owner left with the
            # orphan finalizer (its deleter died mid-way) is finished here.
            if FINALIZER_ORPHAN in finalizers:
                self.core.orphan_dependents(uid)
                self.core.remove_finalizer(kind, namespace, name, FINALIZER_ORPHAN, uid=uid)
                self.stats.finalizers_removed += 1
            return True
        refs = meta.get("ownerReferences") or []
        if not refs:
            return True
        try:
            solid, dangling, waiting = self._classify(meta, refs)
        except _Unresolvable as e:
            log.info("garbage collector: %s %s/%s: %s; leaving it alone", kind.resource, namespace, name, e)
            return True
        if solid:
            stale = {r.get("uid") for r in dangling + waiting}
            if stale:
                self.core.update_metadata(kind, namespace, name, lambda m: without_owner_references(m, stale), uid=uid)
                self.stats.references_removed += len(stale)
            return True
        if waiting and self.store.dependents(uid):
            # Upstream's cycle guard: if one of our own dependents also waits for its dependents,
            # stop blocking our owners before joining the foreground deletion.
            if self._any_dependent_deleting_dependents(uid):
                self.core.update_metadata(kind, namespace, name, _unblocked, uid=uid)
                rv = ""
            self._delete(kind, namespace, name, uid=uid, rv=rv, policy="Foreground")
            return True
        policy = ("Orphan" if FINALIZER_ORPHAN in finalizers
                  else "Foreground" if FINALIZER_FOREGROUND in finalizers else "Background")
        self._delete(kind, namespace, name, uid=uid, rv=rv, policy=policy)
        return True

    def _delete(self, kind: Kind, namespace: str | None, name: str, *, uid: str, rv: str, policy: str) -> None:
        pre = {"uid": uid, "resourceVersion": rv} if rv else {"uid": uid}
        self.core.delete(kind, namespace, name, preconditions=pre, propagation_policy=policy)
        self.stats.deleted += 1

    def _any_dependent_deleting_dependents(self, uid: str) -> bool:
        for dep_kind, dep_key in self.store.dependents(uid):
            ns, name = _split_key(dep_key)
            try:
                dep = self.store.get(dep_kind, ns, name)
            except errors.StatusError:
                continue
            if _deleting_dependents(dep["metadata"]):
                return True
        return False

    def _classify(self, meta: Obj, refs: list[Obj]) -> tuple[list[Obj], list[Obj], list[Obj]]:
        """Upstream ``classifyReferences``: (solid, dangling, waitingForDependentsDeletion)."""
        solid: list[Obj] = []
        dangling: list[Obj] = []
        waiting: list[Obj] = []
        for ref in refs:
            owner_kind = self._owner_kind(ref)
            if owner_kind.namespaced:
                if not meta.get("namespace"):
                    raise _Unresolvable(f"cluster-scoped object refers to a namespaced owner {ref.get('kind')}")
                ns: str | None = meta["namespace"]
            else:
                ns = None
            owner = self._owner(owner_kind, ns, ref)
            if owner is None:
                dangling.append(ref)
            elif _deleting_dependents(owner["metadata"]):
                waiting.append(ref)
            else:
                solid.append(ref)
        return solid, dangling, waiting

    def _owner_kind(self, ref: Obj) -> Kind:
        """The served kind an ownerReference names: by group and kind, any version (upstream's RESTMapper)."""
        group = str(ref.get("apiVersion") or "").rpartition("/")[0]
        key = (group, str(ref.get("kind") or ""))
        kind = self._kinds_by_group_kind.get(key)
        if kind is None:
            self._kinds_by_group_kind = {(k.group, k.kind): k for k in all_kinds()}
            kind = self._kinds_by_group_kind.get(key)
            if kind is None:
                raise _Unresolvable(f'no kind "{key[1]}" is served in group "{group}"')
        return kind

    def _owner(self, kind: Kind, namespace: str | None, ref: Obj) -> Obj | None:
        """The owner object if it exists with the referenced uid, else None (remembered as absent)."""
        uid = str(ref.get("uid") or "")
        key = (kind.resource, namespace, str(ref.get("name") or ""), uid)
        if key in self._absent:
            self._absent.move_to_end(key)
            return None
        try:
            owner = self.store.get(kind, namespace, key[2])
        except errors.StatusError as e:
            if e.code != 404:
                raise
            owner = None
        if owner is None or owner["metadata"].get("uid") != uid:
            self._absent[key] = None
            if len(self._absent) > _ABSENT_CACHE_SIZE:
                self._absent.popitem(last=False)
            return None
        return owner

    def process_deleting_dependents(self, kind: Kind, namespace: str | None, name: str, uid: str) -> bool:
        """Upstream ``processDeletingDependentsItem`` for an owner in foreground deletion.

        Deletes its dependents (those not themselves deleting theirs: each such has its own
        entry) and removes the ``foregroundDeletion`` finalizer when no dependent with
        ``blockOwnerDeletion`` is left. True when the owner needs nothing more from us.
        """
        owner = errors.get_or_none(self.store, kind, namespace, name)
        if owner is None:
            return True
        meta = owner["metadata"]
        if meta.get("uid") != uid or not _deleting_dependents(meta):
            return True  # another object now, or its deletion policy changed since
        deps = self.store.dependents(uid)
        for dep_kind, dep_key in deps:
            dep = self._get(dep_kind, dep_key)
            if dep is not None and not _deleting_dependents(dep["metadata"]):
                self._attempt(dep_kind, dep_key)
        # Re-read: the attempts above may have removed some blockers for good.
        for dep_kind, dep_key in self.store.dependents(uid):
            dep = self._get(dep_kind, dep_key)
            if dep is not None and any(r.get("uid") == uid and r.get("blockOwnerDeletion")
                                       for r in dep["metadata"].get("ownerReferences") or []):
                return False
        self.core.remove_finalizer(kind, namespace, name, FINALIZER_FOREGROUND, uid=uid)
        self.stats.finalizers_removed += 1
        return True

    def _get(self, kind: Kind, key: str) -> Obj | None:
        ns, name = _split_key(key)
        return errors.get_or_none(self.store, kind, ns, name)

    # ------------------------------------------------------------------ sweep
    def start_sweep(self, now: float | None = None) -> None:
        """Begin a full sweep now (it then proceeds ``sweep_budget`` objects per :meth:`sync_once`).

        ``now`` is the cluster time the caller found the sweep due at (default: the clock's now).
        """
        self._sweep = _Sweep(sorted(all_kinds(), key=lambda k: k.resource), self.clock.now() if now is None else now)

    def sweep(self, budget: int | None = None) -> bool:
        """Run the sweep in progress (starting one if none is) for up to ``budget`` objects; True when it finished."""
        if self._sweep is None:
            self.start_sweep()
        return self._sweep_run(budget if budget is not None else self.sweep_budget)

    def _sweep_step(self) -> None:
        if self._sweep is None:
            now = self.clock.now()  # one read: a clock stepped from another thread cannot shift the period
            if self._next_sweep is None or now < self._next_sweep:
                return
            self.start_sweep(now)
        self._sweep_run(self.sweep_budget)

    def _sweep_run(self, budget: int) -> bool:
        sweep = self._sweep
        assert sweep is not None
        while budget > 0 and sweep.index < len(sweep.kinds):
            kind = sweep.kinds[sweep.index]
            cursor, chunk = self.redis.hscan(self.store.objects_key(kind), sweep.cursor, count=min(budget, 500))
            for raw_key, raw in chunk.items():
                budget -= 1
                self.stats.swept_objects += 1
                self._sweep_object(kind, raw_key.decode(), codec.decode(raw), sweep)
            sweep.cursor = int(cursor)
            if sweep.cursor == 0:
                sweep.index += 1
        if sweep.index < len(sweep.kinds):
            return False
        self._sweep = None
        self.stats.sweeps_completed += 1
        if self.sweep_interval is not None:
            # From the sweep's start, not its end: a sweep spread over many passes (while cluster time
            # moves on) must not push the next one later each time (WorkQueue.add_after's since=).
            self._next_sweep = sweep.began + self.sweep_interval
        return True

    def _sweep_object(self, kind: Kind, key: str, obj: Obj, sweep: _Sweep) -> None:
        meta = obj.get("metadata") or {}
        if _deleting_dependents(meta):
            ns, name = _split_key(key)
            try:
                self.process_deleting_dependents(kind, ns, name, meta.get("uid") or "")
            except errors.StatusError as e:
                self.stats.errors += 1
                log.warning("garbage collector sweep: %s %s: %s", kind.resource, key, e)
        elif meta.get("ownerReferences") or (meta.get("deletionTimestamp")
                                             and FINALIZER_ORPHAN in (meta.get("finalizers") or [])):
            self._attempt(kind, key)


def _unblocked(meta: Obj) -> Obj | None:
    refs = meta.get("ownerReferences") or []
    if not any(r.get("blockOwnerDeletion") for r in refs):
        return None
    meta["ownerReferences"] = [{**r, "blockOwnerDeletion": False} if r.get("blockOwnerDeletion") else r
                               for r in refs]
    return meta


def new_controller(ctx: Any) -> Any:
    """The controller manager's constructor: the collector in a loop thread (a ``ControllerLoop``).

    The collector is driven by its Redis stream, not by informers, so it runs as a periodic
    ``sync_once`` whose read blocks up to 100 ms for new entries. Every manager uses the same
    consumer name: leader election makes sure only one reads at a time, and a new leader then
    re-reads the entries its crashed predecessor left pending at once, with no claim timeout.
    ``ctx`` is a :class:`~emulator.controllers.runtime.ControllerContext`.
    """
    from emulator.controllers.loop import ControllerLoop

    gc = GarbageCollector(ctx.core, consumer=str(ctx.option("gc_consumer", "kube-controller-manager")),
                          clock=ctx.clock)
    return ControllerLoop("garbagecollector", lambda: gc.sync_once(block_ms=100),
                          float(ctx.option("gc_period", 0.05)))
